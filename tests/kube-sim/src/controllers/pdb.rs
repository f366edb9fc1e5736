//! PodDisruptionBudget status controller (after pkg/controller/disruption).
//!
//! * Pods: those in the PDB's namespace matching `spec.selector` (a null selector matches no
//!   pod, an empty one every pod).
//! * `maxUnavailable` (int or percent, rounded up) and percentage `minAvailable` (rounded up)
//!   use `expectedPods` = the sum of the scales of the pods' controllers: a ReplicaSet's
//!   `spec.replicas`, or its Deployment's when the ReplicaSet is Deployment-controlled. Pods
//!   without a controller are ignored (upstream only records an event). StatefulSets and
//!   ReplicationControllers are not in the snapshot: their scale is approximated by the number
//!   of selected pods they control. Any other controller, or a missing ReplicaSet/Deployment,
//!   fails the sync like upstream's `failSafe` (disruptionsAllowed 0, condition reason
//!   `SyncFailed`).
//! * Integer `minAvailable`: `desiredHealthy = minAvailable`, `expectedPods` = selected pods.
//! * `currentHealthy`: selected pods that are Ready, not terminating and not listed in
//!   `disruptedPods`; entries of `disruptedPods` are dropped when the pod is gone or terminating,
//!   or after `DeletionTimeout` (2 minutes).
//! * `disruptionsAllowed = max(0, currentHealthy − desiredHealthy)`, and 0 when `expectedPods`
//!   is 0; condition `DisruptionAllowed` True/`SufficientPods` or False/`InsufficientPods`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::util::{
    add_secs, controller_ref, is_controlled_by, name, ns, pod_is_ready, same_json, scaled_value,
    selector_matches, update_action,
};
use super::{Action, ClusterState};

/// How long a pod stays in `disruptedPods` waiting for its deletion (upstream `DeletionTimeout`).
pub const DELETION_TIMEOUT_SECONDS: f64 = 120.0;

/// PDB status updates for one tick.
pub fn reconcile(state: &ClusterState) -> Vec<Action> {
    state
        .pdbs
        .iter()
        .filter_map(|pdb| {
            let status = compute_status(state, pdb);
            (!same_json(&pdb.status, &Some(status.clone()))).then(|| {
                let mut p = pdb.clone();
                p.status = Some(status);
                update_action(&p)
            })?
        })
        .collect()
}

/// Pods selected by a PDB.
pub fn selected_pods<'a>(state: &'a ClusterState, pdb: &PodDisruptionBudget) -> Vec<&'a Pod> {
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return Vec::new();
    };
    state
        .pods
        .iter()
        .filter(|p| {
            ns(&p.metadata) == ns(&pdb.metadata)
                && selector_matches(sel, p.metadata.labels.as_ref())
        })
        .collect()
}

/// Sum of the scales of the selected pods' controllers.
fn expected_scale(state: &ClusterState, pods: &[&Pod]) -> Result<i32, String> {
    // controller uid (or kind/name) → scale
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    let mut counted: BTreeMap<String, i32> = BTreeMap::new();
    for pod in pods {
        let Some(r) = controller_ref(&pod.metadata) else {
            continue;
        };
        let pod_ns = ns(&pod.metadata);
        match r.kind.as_str() {
            "ReplicaSet" => {
                let rs = state.replica_sets.iter().find(|rs| {
                    ns(&rs.metadata) == pod_ns
                        && is_controlled_by(&pod.metadata, "ReplicaSet", &rs.metadata)
                });
                let Some(rs) = rs else {
                    return Err(format!(
                        "found no controllers for pod \"{}\"",
                        name(&pod.metadata)
                    ));
                };
                match controller_ref(&rs.metadata).filter(|r| r.kind == "Deployment") {
                    Some(_) => {
                        let d = state.deployments.iter().find(|d| {
                            ns(&d.metadata) == pod_ns
                                && is_controlled_by(&rs.metadata, "Deployment", &d.metadata)
                        });
                        let Some(d) = d else {
                            return Err(format!(
                                "found no controllers for pod \"{}\"",
                                name(&pod.metadata)
                            ));
                        };
                        let key = format!(
                            "Deployment/{}",
                            d.metadata.uid.as_deref().unwrap_or(name(&d.metadata))
                        );
                        scales.insert(key, d.spec.replicas.unwrap_or(1).max(0));
                    }
                    None => {
                        let key = format!(
                            "ReplicaSet/{}",
                            rs.metadata.uid.as_deref().unwrap_or(name(&rs.metadata))
                        );
                        scales.insert(key, rs.spec.replicas.unwrap_or(1).max(0));
                    }
                }
            }
            "StatefulSet" | "ReplicationController" => {
                let key = format!("{}/{}/{}", r.kind, r.name, r.uid);
                *counted.entry(key).or_default() += 1;
            }
            other => {
                return Err(format!(
                    "found no controllers for pod \"{}\" (controller kind {other} has no scale here)",
                    name(&pod.metadata)
                ));
            }
        }
    }
    let total: i64 = scales
        .values()
        .chain(counted.values())
        .map(|v| i64::from(*v))
        .sum();
    Ok(i32::try_from(total).unwrap_or(i32::MAX))
}

/// `(expectedPods, desiredHealthy)` (upstream `getExpectedPodCount`).
fn expected_and_desired(
    state: &ClusterState,
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
) -> Result<(i32, i32), String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let bad = |v: &IntOrString| format!("invalid value {v:?}");
    if let Some(mu) = &spec.max_unavailable {
        let expected = expected_scale(state, pods)?;
        let max_unavailable = scaled_value(mu, expected, true).ok_or_else(|| bad(mu))?;
        return Ok((expected, expected.saturating_sub(max_unavailable).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((i32::try_from(pods.len()).unwrap_or(i32::MAX), *n)),
        Some(v @ IntOrString::String(_)) => {
            let expected = expected_scale(state, pods)?;
            Ok((
                expected,
                scaled_value(v, expected, true).ok_or_else(|| bad(v))?,
            ))
        }
        None => Ok((0, 0)),
    }
}

fn set_condition(
    conds: &mut Vec<Condition>,
    now: jiff::Timestamp,
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
) {
    match conds.iter_mut().find(|c| c.type_ == "DisruptionAllowed") {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Time(now);
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message;
            c.observed_generation = generation;
        }
        None => conds.push(Condition {
            type_: "DisruptionAllowed".to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message,
            observed_generation: generation,
            last_transition_time: Time(now),
        }),
    }
}

/// The status the disruption controller would write for `pdb`.
pub fn compute_status(
    state: &ClusterState,
    pdb: &PodDisruptionBudget,
) -> PodDisruptionBudgetStatus {
    let now = state.now;
    let pods = selected_pods(state, pdb);
    let old = pdb.status.clone().unwrap_or_default();
    let (expected, desired) = match expected_and_desired(state, pdb, &pods) {
        Ok(v) => v,
        Err(msg) => {
            let mut st = old;
            st.disruptions_allowed = Some(0);
            let generation = st.observed_generation;
            set_condition(
                st.conditions.get_or_insert_with(Vec::new),
                now,
                "False",
                "SyncFailed",
                msg,
                generation,
            );
            return st;
        }
    };
    let old_disrupted = old.disrupted_pods.clone().unwrap_or_default();
    let mut disrupted: BTreeMap<String, Time> = BTreeMap::new();
    for pod in &pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(t) = old_disrupted.get(name(&pod.metadata))
            && add_secs(t.0, DELETION_TIMEOUT_SECONDS) >= now
        {
            disrupted.insert(name(&pod.metadata).to_string(), t.clone());
        }
    }
    let current = pods
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && !disrupted.contains_key(name(&p.metadata))
                && pod_is_ready(p)
        })
        .count() as i32;
    let mut allowed = current.saturating_sub(desired);
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let generation = pdb.metadata.generation;
    let mut conds = old.conditions.clone().unwrap_or_default();
    if allowed > 0 {
        set_condition(
            &mut conds,
            now,
            "True",
            "SufficientPods",
            String::new(),
            generation,
        );
    } else {
        set_condition(
            &mut conds,
            now,
            "False",
            "InsufficientPods",
            String::new(),
            generation,
        );
    }
    PodDisruptionBudgetStatus {
        current_healthy: Some(current),
        desired_healthy: Some(desired),
        expected_pods: Some(expected),
        disruptions_allowed: Some(allowed),
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: generation,
        conditions: Some(conds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testing::{self, Sim, deployment, node};
    use IntOrString::{Int, String as S};
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    /// A pod labelled `app: web` owned by `owner` (`kind/name`), Ready or not.
    fn pod(name: &str, owner: Option<(&str, &str)>, ready: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                owner_references: owner.map(|(kind, n)| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: kind.into(),
                        name: n.into(),
                        uid: String::new(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]
                }),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// Deployment `web` (replicas `scale`) → ReplicaSet `web-rs` → `ready` Ready and
    /// `unready` unready pods.
    fn cluster(scale: i32, ready: usize, unready: usize, budget: PodDisruptionBudget) -> Sim {
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi")]);
        sim.state
            .deployments
            .push(deployment("web", scale, "nginx"));
        let mut rs = k8s_openapi::api::apps::v1::ReplicaSet::default();
        rs.metadata.name = Some("web-rs".into());
        rs.metadata.namespace = Some("default".into());
        rs.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "web".into(),
            uid: String::new(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        rs.spec.replicas = Some(99); // the Deployment's scale wins
        sim.state.replica_sets.push(rs);
        for i in 0..ready {
            sim.state
                .pods
                .push(pod(&format!("r{i}"), Some(("ReplicaSet", "web-rs")), true));
        }
        for i in 0..unready {
            sim.state
                .pods
                .push(pod(&format!("u{i}"), Some(("ReplicaSet", "web-rs")), false));
        }
        let mut b = budget;
        b.metadata.generation = Some(4);
        sim.state.pdbs.push(b);
        sim
    }

    fn numbers(st: &PodDisruptionBudgetStatus) -> (i32, i32, i32, i32) {
        (
            st.expected_pods.unwrap_or(-1),
            st.desired_healthy.unwrap_or(-1),
            st.current_healthy.unwrap_or(-1),
            st.disruptions_allowed.unwrap_or(-1),
        )
    }

    #[test]
    fn status_numbers() {
        type Case = (
            &'static str,
            i32,
            usize,
            usize,
            Option<IntOrString>,
            Option<IntOrString>,
            (i32, i32, i32, i32),
        );
        let cases: Vec<Case> = vec![
            // (desc, deployment replicas, ready, unready, minAvailable, maxUnavailable, (expected, desired, current, allowed))
            (
                "minAvailable int counts pods",
                5,
                3,
                1,
                Some(Int(2)),
                None,
                (4, 2, 3, 1),
            ),
            (
                "minAvailable 1 of 1",
                1,
                1,
                0,
                Some(Int(1)),
                None,
                (1, 1, 1, 0),
            ),
            (
                "minAvailable 1 during surge",
                1,
                2,
                0,
                Some(Int(1)),
                None,
                (2, 1, 2, 1),
            ),
            (
                "minAvailable percent uses scale, rounds up",
                3,
                3,
                0,
                Some(S("50%".into())),
                None,
                (3, 2, 3, 1),
            ),
            (
                "maxUnavailable int",
                4,
                4,
                0,
                None,
                Some(Int(1)),
                (4, 3, 4, 1),
            ),
            (
                "maxUnavailable percent rounds up",
                3,
                2,
                1,
                None,
                Some(S("34%".into())),
                (3, 1, 2, 1),
            ),
            (
                "maxUnavailable larger than scale",
                1,
                1,
                0,
                None,
                Some(Int(5)),
                (1, 0, 1, 1),
            ),
            (
                "maxUnavailable 0",
                2,
                2,
                0,
                None,
                Some(Int(0)),
                (2, 2, 2, 0),
            ),
            ("no pods", 0, 0, 0, Some(Int(0)), None, (0, 0, 0, 0)),
            ("neither field", 2, 2, 0, None, None, (0, 0, 2, 0)),
        ];
        for (desc, scale, ready, unready, min, max, want) in cases {
            let sim = cluster(
                scale,
                ready,
                unready,
                testing::pdb("budget", "web", min, max),
            );
            let st = compute_status(&sim.state, &sim.state.pdbs[0]);
            assert_eq!(numbers(&st), want, "{desc}");
            assert_eq!(st.observed_generation, Some(4), "{desc}");
            let cond = st
                .conditions
                .as_ref()
                .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionAllowed"));
            let (status, reason) = if want.3 > 0 {
                ("True", "SufficientPods")
            } else {
                ("False", "InsufficientPods")
            };
            assert_eq!(
                cond.map(|c| (c.status.as_str(), c.reason.as_str())),
                Some((status, reason)),
                "{desc}"
            );
        }
    }

    #[test]
    fn terminating_and_disrupted_pods_are_not_healthy_and_entries_expire() {
        let mut sim = cluster(3, 3, 0, testing::pdb("budget", "web", Some(Int(1)), None));
        let now = sim.state.now;
        sim.state.pods[0].metadata.deletion_timestamp = Some(Time(now));
        sim.state.pdbs[0].status = Some(PodDisruptionBudgetStatus {
            disrupted_pods: Some(
                [
                    ("r0".to_string(), Time(now)),                   // terminating: dropped
                    ("r1".to_string(), Time(add_secs(now, -60.0))),  // fresh: kept
                    ("r2".to_string(), Time(add_secs(now, -121.0))), // expired: dropped
                    ("gone".to_string(), Time(now)),                 // no such pod: dropped
                ]
                .into(),
            ),
            ..Default::default()
        });
        let st = compute_status(&sim.state, &sim.state.pdbs[0]);
        assert_eq!(
            st.disrupted_pods
                .as_ref()
                .map(|m| m.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["r1".to_string()])
        );
        assert_eq!(numbers(&st), (3, 1, 1, 0));
        // 61 s later r1's entry expires and it counts again.
        sim.advance(61.0);
        let st = compute_status(&sim.state, &sim.state.pdbs[0]);
        assert_eq!(st.disrupted_pods, None);
        assert_eq!(numbers(&st), (3, 1, 2, 1));
    }

    #[test]
    fn controllers_without_scale_fail_safe() {
        let mut sim = cluster(1, 1, 0, testing::pdb("budget", "web", None, Some(Int(1))));
        sim.state
            .pods
            .push(pod("ds", Some(("DaemonSet", "agent")), true));
        sim.state.pdbs[0].status = Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(3),
            current_healthy: Some(7),
            ..Default::default()
        });
        let st = compute_status(&sim.state, &sim.state.pdbs[0]);
        assert_eq!(st.disruptions_allowed, Some(0));
        assert_eq!(
            st.current_healthy,
            Some(7),
            "failSafe leaves the rest alone"
        );
        let cond = st.conditions.unwrap_or_default();
        assert_eq!(cond[0].reason, "SyncFailed");
        // Integer minAvailable does not need scales.
        let mut sim = cluster(1, 1, 0, testing::pdb("budget", "web", Some(Int(1)), None));
        sim.state
            .pods
            .push(pod("ds", Some(("DaemonSet", "agent")), true));
        sim.state.pods.push(pod("bare", None, true));
        let st = compute_status(&sim.state, &sim.state.pdbs[0]);
        assert_eq!(numbers(&st), (3, 1, 3, 2));
        // StatefulSet pods: scale approximated by their pod count; unmanaged pods ignored.
        let mut sim = cluster(2, 2, 0, testing::pdb("budget", "web", None, Some(Int(1))));
        sim.state
            .pods
            .push(pod("sts-0", Some(("StatefulSet", "db")), true));
        sim.state.pods.push(pod("bare", None, true));
        let st = compute_status(&sim.state, &sim.state.pdbs[0]);
        assert_eq!(numbers(&st), (3, 2, 4, 2));
    }

    #[test]
    fn null_selector_selects_nothing_and_update_is_idempotent() {
        let mut b = testing::pdb("budget", "web", Some(Int(1)), None);
        if let Some(s) = b.spec.as_mut() {
            s.selector = None;
        }
        let sim = cluster(1, 1, 0, b);
        assert_eq!(
            numbers(&compute_status(&sim.state, &sim.state.pdbs[0])),
            (0, 1, 0, 0)
        );
        let mut sim = cluster(2, 2, 0, testing::pdb("budget", "web", Some(Int(1)), None));
        let first = reconcile(&sim.state);
        assert_eq!(first.len(), 1);
        sim.apply(first);
        assert!(reconcile(&sim.state).is_empty());
    }
}
