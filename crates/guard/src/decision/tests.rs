//! Tests of the guard's decision, by subject in the sub-modules; the fixtures here are shared with
//! them and with `rules_tests`.

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

/// `rest` with the pod, its ReplicaSet and Deployment `d` filled in.
pub(super) fn chain<'a>(
    p: &'a PodFacts,
    r: &'a ReplicaSetFacts,
    d: &'a DeploymentFacts,
    rest: Facts<'a>,
) -> Facts<'a> {
    Facts {
        pod: Some(p),
        replica_set: Some(r),
        deployment: Some(d),
        ..rest
    }
}

/// The verdict on the default request for the pod whose chain ends in `d`, under `pdbs`, with
/// `census` and the first denial's time.
pub(super) fn decide_on(
    d: &DeploymentFacts,
    pdbs: &[&PdbFacts],
    census: Option<ReplicaCensus>,
    first_denied_at: Option<Timestamp>,
    config: &GuardConfig,
) -> Verdict {
    let (p, r) = (pod(), rs());
    let rest = Facts {
        pdbs,
        census,
        first_denied_at,
        ..Facts::default()
    };
    decide(&req(), &chain(&p, &r, d, rest), now(), config)
}

/// Decides with pod + rs + deployment (+ extra pdbs / pvcs / first denial).
fn run(p: &PodFacts, r: &ReplicaSetFacts, d: &DeploymentFacts) -> Verdict {
    decide(&req(), &chain(p, r, d, Facts::default()), now(), &cfg())
}

pub(super) fn allow_reason(v: &Verdict) -> AllowReason {
    match v {
        Verdict::Allow { reason, .. } => *reason,
        other => panic!("expected Allow, got {other:?}"),
    }
}

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
fn durations_format_as_go_prints_them() {
    assert_eq!(fmt_duration(Duration::from_secs(600)), "10m");
    assert_eq!(fmt_duration(Duration::from_secs(5430)), "1h30m30s");
}

mod deflection;
mod dry_run;
mod health;
mod immediate_allows;
mod in_flight;
