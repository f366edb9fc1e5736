//! Table-driven tests of the drain rules: rule A (every Ready replica leaving → deflect; the
//! single-replica case is N = 1) and rule B (a blocking budget → surge).

use super::tests::{ago, cfg, decide_on, dep, now, pdb, pod, req, rs, three};
use super::*;
use crate::facts::{IntOrPercent, RecordedSurge};

fn census(other_ready: u32, staying: u32, on_unschedulable: u32) -> Option<ReplicaCensus> {
    Some(ReplicaCensus {
        other_ready,
        other_ready_staying: staying,
        on_unschedulable,
    })
}

fn replicas(n: i32) -> DeploymentFacts {
    DeploymentFacts {
        replicas: n,
        ready_replicas: n,
        status_replicas: n,
        updated_replicas: n,
        available_replicas: n,
        ..dep()
    }
}

fn decide_with(
    d: &DeploymentFacts,
    census: Option<ReplicaCensus>,
    pdbs: &[&PdbFacts],
    config: &GuardConfig,
) -> Verdict {
    decide_on(d, pdbs, census, None, config)
}

#[test]
fn rule_a_table() {
    let four_no_unavailable = DeploymentFacts {
        strategy: Strategy::RollingUpdate {
            max_surge: IntOrPercent::Int(1),
            max_unavailable: IntOrPercent::Int(0),
        },
        ..replicas(4)
    };
    let cases: Vec<(&str, DeploymentFacts, Option<ReplicaCensus>, &str)> = vec![
        // N = 1: the single-replica rule, with and without a census.
        ("N=1, no census", dep(), None, "deflected"),
        ("N=1, census: alone", dep(), census(0, 0, 1), "deflected"),
        (
            "N=1, node not cordoned (descheduler eviction)",
            dep(),
            census(0, 0, 0),
            "deflected",
        ),
        // N = 3, 25 %/25 % resolves to surge 1, unavailable 0.
        (
            "N=3, all replicas on the cordoned node",
            replicas(3),
            census(2, 0, 3),
            "deflected",
        ),
        (
            "N=3, the others are being evicted elsewhere",
            replicas(3),
            census(2, 0, 0),
            "deflected",
        ),
        (
            "N=3, one other replica stays",
            replicas(3),
            census(2, 1, 2),
            "allowed",
        ),
        (
            "N=3, no census: status stands in, others assumed staying",
            replicas(3),
            None,
            "allowed",
        ),
        (
            "N=3, the others are not Ready: this is the last Ready one",
            replicas(3),
            census(0, 0, 1),
            "deflected",
        ),
        // 25 %/25 % of 4 is surge 1, unavailable 1: a restart could take one down first.
        (
            "N=4 default bounds",
            replicas(4),
            census(3, 0, 4),
            "allowed",
        ),
        (
            "N=4 with maxUnavailable 0",
            four_no_unavailable,
            census(3, 0, 4),
            "deflected",
        ),
        (
            "N=3 Recreate",
            DeploymentFacts {
                strategy: Strategy::Recreate,
                ..replicas(3)
            },
            census(2, 0, 3),
            "allowed",
        ),
        (
            "N=3 paused",
            DeploymentFacts {
                paused: true,
                ..replicas(3)
            },
            census(2, 0, 3),
            "allowed",
        ),
        (
            "N=3 progress deadline exceeded",
            DeploymentFacts {
                progress_deadline_exceeded: true,
                ..replicas(3)
            },
            census(2, 0, 3),
            "allowed",
        ),
    ];
    for (what, d, c, want) in cases {
        let v = decide_with(&d, c, &[], &cfg());
        assert_eq!(v.outcome(), want, "{what}: {v:?}");
        if want == "deflected" {
            assert!(
                is_deflection_message(v.message().unwrap_or_default()),
                "{what}"
            );
        }
    }
}

#[test]
fn rule_a_deflects_before_a_budget_refuses() {
    // All three on a cordoned node and a budget at zero: the restart moves them surge-first,
    // which the budget cannot object to; refusing would only hang the drain.
    let b = pdb("web", 0);
    let v = decide_with(&replicas(3), census(2, 0, 3), &[&b], &cfg());
    assert_eq!(v.outcome(), "deflected", "{v:?}");
}

#[test]
fn rule_a_dry_run_writes_nothing_and_says_so() {
    let (p, r, d) = (pod(), rs(), replicas(3));
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        census: census(2, 0, 3),
        ..Facts::default()
    };
    let dry = EvictionRequest {
        dry_run: true,
        ..req()
    };
    let Verdict::Allow { reason, warnings } = decide(&dry, &facts, now(), &cfg()) else {
        panic!("dry run must allow")
    };
    assert_eq!(reason, AllowReason::DryRun);
    assert!(
        warnings[0].contains("start a rolling restart"),
        "{warnings:?}"
    );
}

fn surge_cfg() -> GuardConfig {
    GuardConfig {
        pdb_surge: true,
        ..cfg()
    }
}

fn opted_in(d: DeploymentFacts) -> DeploymentFacts {
    DeploymentFacts {
        pdb_surge: Some(true),
        ..d
    }
}

fn surged(secs_ago: i64) -> DeploymentFacts {
    DeploymentFacts {
        replicas: 4,
        surge: Some(RecordedSurge {
            original_replicas: 3,
            surged_replicas: 4,
            at: ago(secs_ago),
        }),
        ..opted_in(three())
    }
}

/// One case of `rule_b_table`: what, the Deployment, the namespace's opt-in, the config, the
/// budget, the census, the autoscaler, and the outcome.
type Case = (
    &'static str,
    DeploymentFacts,
    Option<bool>,
    GuardConfig,
    PdbFacts,
    Option<ReplicaCensus>,
    Option<&'static str>,
    &'static str,
);

/// Who opts in: the Deployment, its namespace, the `--pdb-surge` flag.
fn opt_in_cases() -> Vec<Case> {
    let blocking = pdb("web-pdb", 0);
    let one_on_cordoned = census(2, 2, 1);
    vec![
        (
            "opted in, one pod on a cordoned node",
            opted_in(three()),
            None,
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "surged",
        ),
        (
            "namespace opted in",
            three(),
            Some(true),
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "surged",
        ),
        (
            "Deployment opts out of an opted-in namespace",
            DeploymentFacts {
                pdb_surge: Some(false),
                ..three()
            },
            Some(true),
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "denied_pdb",
        ),
        (
            "flag off",
            opted_in(three()),
            None,
            cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "denied_pdb",
        ),
        (
            "not opted in",
            three(),
            None,
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "denied_pdb",
        ),
    ]
}

/// An opted-in Deployment that is not surged: the budget allows, no drain, a replica not Ready,
/// an autoscaler.
fn not_surged_cases() -> Vec<Case> {
    let blocking = pdb("web-pdb", 0);
    let open = pdb("web-pdb", 1);
    let one_on_cordoned = census(2, 2, 1);
    vec![
        (
            "budget allows the disruption",
            opted_in(three()),
            None,
            surge_cfg(),
            open.clone(),
            one_on_cordoned,
            None,
            "allowed",
        ),
        (
            "no pod on a cordoned node (not a drain)",
            opted_in(three()),
            None,
            surge_cfg(),
            blocking.clone(),
            census(2, 2, 0),
            None,
            "denied_pdb",
        ),
        (
            "unhealthy: a replica is not Ready",
            DeploymentFacts {
                ready_replicas: 2,
                ..opted_in(three())
            },
            None,
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "denied_pdb",
        ),
        (
            "scaled by an autoscaler",
            opted_in(three()),
            None,
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            Some("shop/web"),
            "denied_hpa",
        ),
    ]
}

/// A surge already in place: still blocked, allowed now, past its deadline.
fn surge_in_place_cases() -> Vec<Case> {
    let blocking = pdb("web-pdb", 0);
    let open = pdb("web-pdb", 1);
    let one_on_cordoned = census(2, 2, 1);
    vec![
        (
            "surge in place, budget still blocks",
            surged(30),
            None,
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "surging",
        ),
        (
            "surge in place, budget allows now",
            surged(30),
            None,
            surge_cfg(),
            open.clone(),
            one_on_cordoned,
            None,
            "allowed",
        ),
        (
            "surge past the deadline",
            surged(601),
            None,
            surge_cfg(),
            blocking.clone(),
            one_on_cordoned,
            None,
            "allowed",
        ),
    ]
}

#[test]
fn rule_b_table() {
    let cases = [opt_in_cases(), not_surged_cases(), surge_in_place_cases()]
        .into_iter()
        .flatten();
    for (what, d, ns, config, budget, c, hpa, want) in cases {
        let (p, r) = (pod(), rs());
        let facts = Facts {
            pod: Some(&p),
            replica_set: Some(&r),
            deployment: Some(&d),
            pdbs: &[&budget],
            census: c,
            namespace_pdb_surge: ns,
            hpa,
            ..Facts::default()
        };
        let v = decide(&req(), &facts, now(), &config);
        assert_eq!(v.outcome(), want, "{what}: {v:?}");
    }
}

#[test]
fn rule_b_surge_names_the_budget_and_the_counts() {
    let b = pdb("web-pdb", 0);
    let (p, r, d) = (pod(), rs(), opted_in(three()));
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        pdbs: &[&b],
        census: census(2, 2, 2),
        ..Facts::default()
    };
    let v = decide(&req(), &facts, now(), &surge_cfg());
    let Verdict::Surge {
        deployment,
        budget,
        from,
        to,
        message,
    } = &v
    else {
        panic!("expected Surge, got {v:?}")
    };
    assert_eq!(
        (deployment.as_str(), budget.as_str(), *from, *to),
        ("shop/web", "shop/web-pdb", 3, 5)
    );
    assert!(
        message.contains("PodDisruptionBudget shop/web-pdb") && message.contains("from 3 to 5"),
        "{message}"
    );
    // Dry run: nothing written, the warning says what would happen.
    let dry = EvictionRequest {
        dry_run: true,
        ..req()
    };
    let Verdict::Allow { warnings, .. } = decide(&dry, &facts, now(), &surge_cfg()) else {
        panic!("dry run must allow")
    };
    assert!(
        warnings[0].contains("raise Deployment shop/web from 3 to 5 replicas"),
        "{warnings:?}"
    );
    // Opt-out on the pod wins.
    let p2 = PodFacts {
        opt_out: true,
        ..pod()
    };
    let facts = Facts {
        pod: Some(&p2),
        ..facts
    };
    assert_eq!(
        decide(&req(), &facts, now(), &surge_cfg()).outcome(),
        "allowed"
    );
}

#[test]
fn rule_b_hpa_denial_tells_the_user_what_to_do() {
    let b = pdb("web-pdb", 0);
    let (p, r, d) = (pod(), rs(), opted_in(three()));
    let facts = Facts {
        pod: Some(&p),
        replica_set: Some(&r),
        deployment: Some(&d),
        pdbs: &[&b],
        census: census(2, 2, 1),
        hpa: Some("shop/web-hpa"),
        ..Facts::default()
    };
    let v = decide(&req(), &facts, now(), &surge_cfg());
    let msg = v.message().unwrap_or_default();
    assert!(
        msg.contains("HorizontalPodAutoscaler shop/web-hpa")
            && msg.contains("minReplicas by 1 (to at least 4)"),
        "{msg}"
    );
}
