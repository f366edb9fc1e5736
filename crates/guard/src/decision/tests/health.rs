//! The health guard: PodDisruptionBudgets that allow no disruption, and controllers short of
//! Ready replicas.

use super::*;

fn with_pdbs(
    d: &DeploymentFacts,
    pdbs: &[&PdbFacts],
    c: &GuardConfig,
    first: Option<Timestamp>,
) -> Verdict {
    decide_on(d, pdbs, None, first, c)
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
