//! A restart in flight: denied again until it completes, allowed once its deadline passes.

use super::*;

fn in_flight_dep(restarted_secs_ago: i64) -> DeploymentFacts {
    DeploymentFacts {
        restart: Some(RecordedRestart {
            at: ago(restarted_secs_ago),
            by: Some("guard-0".into()),
        }),
        generation: 5,
        observed_generation: 5,
        revision: Some(4),
        status_replicas: 2,
        updated_replicas: 1,
        ready_replicas: 1,
        available_replicas: 1,
        ..dep()
    }
}

#[test]
fn in_flight_rollout_denies_again_without_deflecting() {
    // Pod on the old ReplicaSet (revision 3 while the Deployment is at 4), restarted 60 s ago.
    let v = run(&pod(), &rs(), &in_flight_dep(60));
    let Verdict::DenyInFlight {
        deployment,
        restarted_at,
        message,
    } = &v
    else {
        panic!("expected DenyInFlight, got {v:?}")
    };
    assert_eq!(deployment, "shop/web");
    assert_eq!(*restarted_at, ago(60));
    assert!(
        message.contains("Eviction triggered evacuation")
            && message.contains("Deployment shop/web"),
        "{message}"
    );
    assert!(
        message.contains("a rolling restart is in progress for Deployment shop/web"),
        "{message}"
    );
}

#[test]
fn in_flight_when_controller_has_not_observed_the_restart() {
    let d = DeploymentFacts {
        restart: Some(RecordedRestart {
            at: ago(1),
            by: None,
        }),
        generation: 5,
        observed_generation: 4,
        ..dep()
    };
    assert!(matches!(
        run(&pod(), &rs(), &d),
        Verdict::DenyInFlight { .. }
    ));
}

#[test]
fn completed_restart_does_not_block_a_new_deflection() {
    // Restart recorded long ago, rollout complete, pod in the current ReplicaSet → deflect anew.
    let d = DeploymentFacts {
        restart: Some(RecordedRestart {
            at: ago(86_400),
            by: None,
        }),
        ..dep()
    };
    assert!(matches!(run(&pod(), &rs(), &d), Verdict::Deflect { .. }));
}

#[test]
fn in_flight_deadline_expiry_allows() {
    let v = run(&pod(), &rs(), &in_flight_dep(601));
    assert_eq!(allow_reason(&v), AllowReason::DeadlineExpired);
    let Verdict::Allow { warnings, .. } = v else {
        unreachable!()
    };
    assert!(
        warnings[0].contains("has not finished within 10m"),
        "{warnings:?}"
    );
    // Exactly at the deadline counts as expired; just before does not.
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &in_flight_dep(600))),
        AllowReason::DeadlineExpired
    );
    assert!(matches!(
        run(&pod(), &rs(), &in_flight_dep(599)),
        Verdict::DenyInFlight { .. }
    ));
}

#[test]
fn in_flight_with_progress_deadline_exceeded_allows() {
    let d = DeploymentFacts {
        progress_deadline_exceeded: true,
        ..in_flight_dep(30)
    };
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::ProgressDeadlineExceeded
    );
}

#[test]
fn custom_deadline_is_respected() {
    let (p, r, d) = (pod(), rs(), in_flight_dep(120));
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        ..Facts::default()
    };
    let short = GuardConfig {
        deflect_deadline: Duration::from_secs(90),
        ..cfg()
    };
    assert_eq!(
        allow_reason(&decide(&req(), &facts, now(), &short)),
        AllowReason::DeadlineExpired
    );
}

#[test]
fn failed_restarts_are_bounded_by_the_first_denial() {
    let (p, r, d) = (pod(), rs(), dep());
    let mut facts = chain(&p, &r, &d, Facts::default());
    facts.first_denied_at = Some(ago(30));
    assert!(matches!(
        decide(&req(), &facts, now(), &cfg()),
        Verdict::Deflect { .. }
    ));
    facts.first_denied_at = Some(ago(600));
    assert_eq!(
        allow_reason(&decide(&req(), &facts, now(), &cfg())),
        AllowReason::DeadlineExpired
    );
}
