//! Rule A's single-replica deflection: which Deployments, strategies, revisions, claims and
//! ownership chains are deflected into a rolling restart.

use super::*;

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
