use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::core::Selector;

use super::*;
use crate::testing::{web_deployment, web_pod, web_replica_set};
use kube_descheduler_engine::workload::facts::{IntOrPercent, OwnerFacts, RecordedRestart};

pub(super) fn now() -> Timestamp {
    "2026-11-22T12:00:00Z".parse().unwrap()
}

pub(super) fn ago(secs: i64) -> Timestamp {
    now().checked_sub(SignedDuration::from_secs(secs)).unwrap()
}

pub(super) fn pod() -> PodFacts {
    PodFacts {
        labels: std::sync::Arc::new(BTreeMap::from([
            ("app".into(), "web".into()),
            ("pod-template-hash".into(), "7d9f".into()),
        ])),
        ..web_pod()
    }
}

pub(super) fn rs() -> ReplicaSetFacts {
    web_replica_set(1)
}

pub(super) fn dep() -> DeploymentFacts {
    DeploymentFacts {
        generation: 4,
        observed_generation: 4,
        ..web_deployment(1)
    }
}

pub(super) fn pdb(name: &str, allowed: i32) -> PdbFacts {
    PdbFacts {
        namespace: "shop".into(),
        name: name.into(),
        selector: Some(Selector::from_iter([("app", "web")])),
        disruptions_allowed: allowed,
    }
}

pub(super) fn req() -> EvictionRequest {
    EvictionRequest {
        namespace: "shop".into(),
        name: "web-7d9f-abcde".into(),
        uid_precondition: None,
        dry_run: false,
    }
}

pub(super) fn cfg() -> GuardConfig {
    GuardConfig::default()
}

/// Decides with pod + rs + deployment (+ extra pdbs / pvcs / first denial).
fn run(p: &PodFacts, r: &ReplicaSetFacts, d: &DeploymentFacts) -> Verdict {
    decide(
        &req(),
        &Facts {
            pod: Some(p),
            replica_set: Some(r),
            deployment: Some(d),
            ..Facts::default()
        },
        now(),
        &cfg(),
    )
}

pub(super) fn allow_reason(v: &Verdict) -> AllowReason {
    match v {
        Verdict::Allow { reason, .. } => *reason,
        other => panic!("expected Allow, got {other:?}"),
    }
}

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

// ---- deflection ------------------------------------------------------------------------------

#[test]
fn single_replica_default_strategy_is_deflected_with_the_phrase() {
    let v = run(&pod(), &rs(), &dep());
    let Verdict::Deflect {
        deployment,
        message,
    } = &v
    else {
        panic!("expected Deflect, got {v:?}")
    };
    assert_eq!(deployment, "shop/web");
    crate::testing::assert_restart_deflection(message, "shop/web");
    assert!(is_deflection_message(message));
    assert_eq!(v.outcome(), "deflected");
}

#[test]
fn two_replicas_are_not_deflected() {
    let d = DeploymentFacts {
        replicas: 2,
        ready_replicas: 2,
        ..dep()
    };
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
}

#[test]
fn recreate_strategy_is_not_deflected() {
    let d = DeploymentFacts {
        strategy: Strategy::Recreate,
        ..dep()
    };
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
}

fn with_bounds(surge: IntOrPercent, unavailable: IntOrPercent) -> DeploymentFacts {
    DeploymentFacts {
        strategy: Strategy::RollingUpdate {
            max_surge: surge,
            max_unavailable: unavailable,
        },
        ..dep()
    }
}

#[test]
fn surge_zero_unavailable_one_is_not_deflected() {
    let d = with_bounds(IntOrPercent::Int(0), IntOrPercent::Int(1));
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
}

#[test]
fn both_zero_means_unavailable_one_so_not_deflected() {
    let d = with_bounds(IntOrPercent::Int(0), IntOrPercent::Int(0));
    assert_eq!(
        Strategy::RollingUpdate {
            max_surge: IntOrPercent::Int(0),
            max_unavailable: IntOrPercent::Int(0)
        }
        .resolve(1),
        Some((0, 1))
    );
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
}

#[test]
fn percent_surge_rounds_up_and_unavailable_rounds_down() {
    // 1% of 1 replica: surge rounds up to 1, unavailable 99% rounds down to 0 → deflect.
    let d = with_bounds(IntOrPercent::Percent(1), IntOrPercent::Percent(99));
    assert!(matches!(run(&pod(), &rs(), &d), Verdict::Deflect { .. }));
    // 100% unavailable resolves to 1 → not deflected.
    let d = with_bounds(IntOrPercent::Percent(25), IntOrPercent::Percent(100));
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
    // Defaults 25%/25% of 1 → (1, 0); of 10 → (3, 2).
    let s = Strategy::RollingUpdate {
        max_surge: IntOrPercent::Percent(25),
        max_unavailable: IntOrPercent::Percent(25),
    };
    assert_eq!(s.resolve(1), Some((1, 0)));
    assert_eq!(s.resolve(10), Some((3, 2)));
    // 0% surge of 1 with 0 unavailable → both 0 → unavailable 1.
    let s = Strategy::RollingUpdate {
        max_surge: IntOrPercent::Percent(0),
        max_unavailable: IntOrPercent::Percent(10),
    };
    assert_eq!(s.resolve(1), Some((0, 1)));
}

#[test]
fn int_or_string_parsing() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    assert_eq!(
        IntOrPercent::from_int_or_string(&IntOrString::String("30%".into())),
        Some(IntOrPercent::Percent(30))
    );
    assert_eq!(
        IntOrPercent::from_int_or_string(&IntOrString::String("2".into())),
        Some(IntOrPercent::Int(2))
    );
    assert_eq!(
        IntOrPercent::from_int_or_string(&IntOrString::Int(0)),
        Some(IntOrPercent::Int(0))
    );
    assert_eq!(
        IntOrPercent::from_int_or_string(&IntOrString::String("x%".into())),
        None
    );
}

#[test]
fn paused_deployment_is_not_deflected() {
    let d = DeploymentFacts {
        paused: true,
        ..dep()
    };
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
}

#[test]
fn progress_deadline_exceeded_is_not_deflected() {
    let d = DeploymentFacts {
        progress_deadline_exceeded: true,
        ..dep()
    };
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
}

#[test]
fn pod_on_old_replica_set_by_revision_is_not_deflected() {
    let r = ReplicaSetFacts {
        revision: Some(2),
        ..rs()
    };
    assert_eq!(
        allow_reason(&run(&pod(), &r, &dep())),
        AllowReason::NotGuarded
    );
}

#[test]
fn pod_with_other_template_hash_is_not_deflected() {
    let p = PodFacts {
        pod_template_hash: Some("0ld".into()),
        ..pod()
    };
    assert_eq!(
        allow_reason(&run(&p, &rs(), &dep())),
        AllowReason::NotGuarded
    );
}

#[test]
fn unknown_revisions_do_not_disqualify() {
    let r = ReplicaSetFacts {
        revision: None,
        ..rs()
    };
    let d = DeploymentFacts {
        revision: None,
        ..dep()
    };
    assert!(matches!(run(&pod(), &r, &d), Verdict::Deflect { .. }));
}

fn with_claim(mode: &str) -> Verdict {
    let p = PodFacts {
        claims: vec!["data".into()],
        ..pod()
    };
    let pvcs = [PvcFacts {
        name: "data".into(),
        access_modes: vec![mode.into()],
    }];
    let (r, d) = (rs(), dep());
    decide(
        &req(),
        &Facts {
            pod: Some(&p),
            replica_set: Some(&r),
            deployment: Some(&d),
            pvcs: &pvcs,
            ..Facts::default()
        },
        now(),
        &cfg(),
    )
}

#[test]
fn rwo_and_rwop_claims_are_not_deflected_rwx_is() {
    assert_eq!(
        allow_reason(&with_claim("ReadWriteOnce")),
        AllowReason::NotGuarded
    );
    assert_eq!(
        allow_reason(&with_claim("ReadWriteOncePod")),
        AllowReason::NotGuarded
    );
    assert!(matches!(
        with_claim("ReadWriteMany"),
        Verdict::Deflect { .. }
    ));
    assert!(matches!(
        with_claim("ReadOnlyMany"),
        Verdict::Deflect { .. }
    ));
}

#[test]
fn unknown_claim_counts_as_single_node() {
    let p = PodFacts {
        claims: vec!["missing".into()],
        ..pod()
    };
    assert_eq!(
        allow_reason(&run(&p, &rs(), &dep())),
        AllowReason::NotGuarded
    );
}

#[test]
fn ephemeral_rwo_volume_is_not_deflected() {
    let p = PodFacts {
        ephemeral_single_node_volume: true,
        ..pod()
    };
    assert_eq!(
        allow_reason(&run(&p, &rs(), &dep())),
        AllowReason::NotGuarded
    );
}

#[test]
fn ownership_chain_must_match() {
    // RS owned by something else.
    let r = ReplicaSetFacts {
        owner: Some(OwnerFacts {
            kind: "Rollout".into(),
            name: "web".into(),
            uid: "x".into(),
        }),
        ..rs()
    };
    assert_eq!(
        allow_reason(&run(&pod(), &r, &dep())),
        AllowReason::NotGuarded
    );
    // Pod owned by a StatefulSet.
    let p = PodFacts {
        owner: Some(OwnerFacts {
            kind: "StatefulSet".into(),
            name: "db".into(),
            uid: "s".into(),
        }),
        ..pod()
    };
    assert_eq!(
        allow_reason(&run(&p, &rs(), &dep())),
        AllowReason::NotGuarded
    );
    // Deployment with a different uid (recreated under the same name).
    let d = DeploymentFacts {
        uid: "other".into(),
        ..dep()
    };
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
    // Bare pod.
    let p = PodFacts {
        owner: None,
        ..pod()
    };
    assert_eq!(
        allow_reason(&decide(
            &req(),
            &Facts {
                pod: Some(&p),
                ..Facts::default()
            },
            now(),
            &cfg()
        )),
        AllowReason::NotGuarded
    );
}

// ---- immediate allows ------------------------------------------------------------------------

#[test]
fn missing_pod_is_allowed() {
    let v = decide(&req(), &Facts::default(), now(), &cfg());
    assert_eq!(allow_reason(&v), AllowReason::PodNotFound);
}

#[test]
fn uid_mismatch_is_allowed_and_match_is_not_short_circuited() {
    let (p, r, d) = (pod(), rs(), dep());
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        ..Facts::default()
    };
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

// ---- in flight and deadlines -----------------------------------------------------------------

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
    let mut facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        ..Facts::default()
    };
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

// ---- dry run ---------------------------------------------------------------------------------

#[test]
fn dry_run_allows_with_a_warning_about_the_deflection() {
    let (p, r, d) = (pod(), rs(), dep());
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        ..Facts::default()
    };
    let v = decide(
        &EvictionRequest {
            dry_run: true,
            ..req()
        },
        &facts,
        now(),
        &cfg(),
    );
    let Verdict::Allow { reason, warnings } = v else {
        panic!("expected Allow")
    };
    assert_eq!(reason, AllowReason::DryRun);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("would refuse")
            && warnings[0].contains("rolling restart of Deployment shop/web"),
        "{warnings:?}"
    );
}

#[test]
fn dry_run_of_a_pdb_denial_names_the_budget() {
    let (p, r) = (pod(), rs());
    let d = DeploymentFacts {
        replicas: 3,
        ready_replicas: 3,
        ..dep()
    };
    let b = pdb("web-pdb", 0);
    let pdbs = [&b];
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        pdbs: &pdbs,
        ..Facts::default()
    };
    let Verdict::Allow { reason, warnings } = decide(
        &EvictionRequest {
            dry_run: true,
            ..req()
        },
        &facts,
        now(),
        &cfg(),
    ) else {
        panic!("expected Allow")
    };
    assert_eq!(reason, AllowReason::DryRun);
    assert!(warnings[0].contains("shop/web-pdb"), "{warnings:?}");
}

#[test]
fn dry_run_of_an_allow_says_so() {
    let Verdict::Allow { reason, warnings } = decide(
        &EvictionRequest {
            dry_run: true,
            ..req()
        },
        &Facts::default(),
        now(),
        &cfg(),
    ) else {
        panic!("expected Allow")
    };
    assert_eq!(reason, AllowReason::DryRun);
    assert!(
        warnings[0].contains("would allow") && warnings[0].contains("pod_not_found"),
        "{warnings:?}"
    );
}

// ---- health guard ----------------------------------------------------------------------------

pub(super) fn three() -> DeploymentFacts {
    DeploymentFacts {
        replicas: 3,
        ready_replicas: 3,
        status_replicas: 3,
        updated_replicas: 3,
        available_replicas: 3,
        ..dep()
    }
}

fn with_pdbs(
    d: &DeploymentFacts,
    pdbs: &[&PdbFacts],
    c: &GuardConfig,
    first: Option<Timestamp>,
) -> Verdict {
    let (p, r) = (pod(), rs());
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(d),
        pdbs,
        first_denied_at: first,
        ..Facts::default()
    };
    decide(&req(), &facts, now(), c)
}

#[test]
fn pdb_with_no_disruptions_denies_naming_the_budget() {
    let b = pdb("web-pdb", 0);
    let v = with_pdbs(&three(), &[&b], &cfg(), None);
    let Verdict::DenyPdb { budget, message } = &v else {
        panic!("expected DenyPdb, got {v:?}")
    };
    assert_eq!(budget, "shop/web-pdb");
    assert!(
        message.contains("PodDisruptionBudget shop/web-pdb"),
        "{message}"
    );
    assert!(!is_deflection_message(message));
}

#[test]
fn pdb_allowing_disruptions_allows() {
    let b = pdb("web-pdb", 1);
    assert_eq!(
        allow_reason(&with_pdbs(&three(), &[&b], &cfg(), None)),
        AllowReason::NotGuarded
    );
}

#[test]
fn pdb_in_other_namespace_or_not_selecting_is_ignored() {
    let other_ns = PdbFacts {
        namespace: "other".into(),
        ..pdb("a", 0)
    };
    let other_sel = PdbFacts {
        selector: Some(Selector::from_iter([("app", "db")])),
        ..pdb("b", 0)
    };
    let no_sel = PdbFacts {
        selector: None,
        ..pdb("c", 0)
    };
    let v = with_pdbs(&three(), &[&other_ns, &other_sel, &no_sel], &cfg(), None);
    assert_eq!(allow_reason(&v), AllowReason::NotGuarded);
}

#[test]
fn pdb_denial_is_bounded_and_switchable() {
    let b = pdb("web-pdb", 0);
    assert_eq!(
        allow_reason(&with_pdbs(&three(), &[&b], &cfg(), Some(ago(700)))),
        AllowReason::DeadlineExpired
    );
    let off = GuardConfig {
        health_guard: false,
        ..cfg()
    };
    assert_eq!(
        allow_reason(&with_pdbs(&three(), &[&b], &off, None)),
        AllowReason::NotGuarded
    );
}

#[test]
fn short_controller_without_pdb_denies() {
    let d = DeploymentFacts {
        ready_replicas: 2,
        ..three()
    };
    let v = with_pdbs(&d, &[], &cfg(), None);
    let Verdict::DenyUnhealthy {
        controller,
        ready,
        desired,
        message,
    } = &v
    else {
        panic!("expected DenyUnhealthy, got {v:?}")
    };
    assert_eq!(
        (controller.as_str(), *ready, *desired),
        ("Deployment shop/web", 2, 3)
    );
    assert!(message.contains("only 2 of 3"), "{message}");
}

#[test]
fn short_controller_covered_by_pdb_is_left_to_the_pdb() {
    let d = DeploymentFacts {
        ready_replicas: 2,
        ..three()
    };
    let b = pdb("web-pdb", 1);
    assert_eq!(
        allow_reason(&with_pdbs(&d, &[&b], &cfg(), None)),
        AllowReason::NotGuarded
    );
}

#[test]
fn unhealthy_denial_is_bounded_and_switchable() {
    let d = DeploymentFacts {
        ready_replicas: 2,
        ..three()
    };
    assert!(matches!(
        with_pdbs(&d, &[], &cfg(), Some(ago(10))),
        Verdict::DenyUnhealthy { .. }
    ));
    assert_eq!(
        allow_reason(&with_pdbs(&d, &[], &cfg(), Some(ago(600)))),
        AllowReason::DeadlineExpired
    );
    let off = GuardConfig {
        health_guard: false,
        ..cfg()
    };
    assert_eq!(
        allow_reason(&with_pdbs(&d, &[], &off, None)),
        AllowReason::NotGuarded
    );
}

#[test]
fn bare_replica_set_short_of_ready_denies() {
    let p = pod();
    let r = ReplicaSetFacts {
        owner: None,
        desired: 2,
        ready: 1,
        ..rs()
    };
    let v = decide(
        &req(),
        &Facts {
            pod: Some(&p),
            replica_set: Some(&r),
            ..Facts::default()
        },
        now(),
        &cfg(),
    );
    assert!(
        matches!(v, Verdict::DenyUnhealthy { ref controller, .. } if controller == "ReplicaSet shop/web-7d9f"),
        "{v:?}"
    );
}

#[test]
fn single_replica_not_deflectable_but_healthy_is_allowed() {
    // maxSurge 0: no deflection; 1 of 1 ready → health guard has nothing to protect.
    let d = with_bounds(IntOrPercent::Int(0), IntOrPercent::Int(1));
    assert_eq!(
        allow_reason(&run(&pod(), &rs(), &d)),
        AllowReason::NotGuarded
    );
}

// ---- helpers ---------------------------------------------------------------------------------

#[test]
fn durations_format_as_go_prints_them() {
    assert_eq!(fmt_duration(Duration::from_secs(600)), "10m");
    assert_eq!(fmt_duration(Duration::from_secs(5430)), "1h30m30s");
}
