//! Attempts allowed at once: no pod, another pod's UID, pods not running and Ready, and opt-outs.

use super::*;

#[test]
fn missing_pod_is_allowed() {
    let v = decide(&req(), &Facts::default(), now(), &cfg());
    assert_eq!(allow_reason(&v), AllowReason::PodNotFound);
}

#[test]
fn uid_mismatch_is_allowed_and_match_is_not_short_circuited() {
    let (p, r, d) = (pod(), rs(), dep());
    let facts = chain(&p, &r, &d, Facts::default());
    let mismatch = EvictionRequest {
        uid_precondition: Some("another".into()),
        ..req()
    };
    assert_eq!(
        allow_reason(&decide(&mismatch, &facts, now(), &cfg())),
        AllowReason::UidMismatch
    );
    let matching = EvictionRequest {
        uid_precondition: Some("pod-uid".into()),
        ..req()
    };
    assert!(matches!(
        decide(&matching, &facts, now(), &cfg()),
        Verdict::Deflect { .. }
    ));
}

#[test]
fn terminating_terminal_pending_and_unready_pods_are_allowed() {
    let cases = [
        (
            PodFacts {
                terminating: true,
                ..pod()
            },
            AllowReason::Terminating,
        ),
        (
            PodFacts {
                phase: PodPhase::Succeeded,
                ..pod()
            },
            AllowReason::Terminal,
        ),
        (
            PodFacts {
                phase: PodPhase::Failed,
                ..pod()
            },
            AllowReason::Terminal,
        ),
        (
            PodFacts {
                phase: PodPhase::Pending,
                ..pod()
            },
            AllowReason::Pending,
        ),
        (
            PodFacts {
                ready: false,
                ..pod()
            },
            AllowReason::NotReady,
        ),
    ];
    for (p, want) in cases {
        assert_eq!(allow_reason(&run(&p, &rs(), &dep())), want, "{p:?}");
    }
}

#[test]
fn opt_out_on_pod_or_deployment_allows() {
    let p = PodFacts {
        opt_out: true,
        ..pod()
    };
    assert_eq!(allow_reason(&run(&p, &rs(), &dep())), AllowReason::OptOut);
    let d = DeploymentFacts {
        opt_out: true,
        ..dep()
    };
    assert_eq!(allow_reason(&run(&pod(), &rs(), &d)), AllowReason::OptOut);
}
