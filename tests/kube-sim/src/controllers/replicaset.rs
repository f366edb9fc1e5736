//! ReplicaSet controller (after pkg/controller/replicaset and the "ReplicaSet" concept doc).
//!
//! Pods belong to a ReplicaSet through their controller ownerReference (no adoption or release
//! by selector). Terminal and terminating pods are not active. Missing pods are created from the
//! template with `generateName: <rs>-` and a controller ownerReference (`blockOwnerDeletion`);
//! surplus pods are deleted in upstream's `ActivePodsWithRanks` order: unassigned, then Pending <
//! Unknown < Running, not ready < ready, more pods of the same ReplicaSet on the node first,
//! ready more recently first, more restarts first, newer first. Deletion is graceful for pods on
//! a node (`deletionTimestamp = now + terminationGracePeriodSeconds`, default 30, written with an
//! `Update`) and immediate for unassigned ones, as the API server's pod strategy does.
//!
//! Creates and deletes are gated by [`Expectations`] (kube-controller-manager's
//! `ControllerExpectations`): after a sync issues them, the ReplicaSet creates or deletes nothing
//! more until the index has observed them (or they expire), so a sync that runs before its own
//! writes are indexed does not replace a pod twice and then delete a sibling as surplus.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::expectations::Expectations;
use super::util::{
    add_secs, create_action, delete_action, is_controlled_by, name, ns, owner_ref, pod_is_active,
    pod_is_available, pod_is_ready, pod_is_terminal, pod_is_terminating, pod_phase,
    pod_ready_since, same_json, update_action,
};
use super::{Action, ClusterState};

/// Upstream's per-sync creation/deletion cap (`BurstReplicas`).
const BURST_REPLICAS: usize = 500;

/// ReplicaSet actions for one tick over a consistent snapshot of the whole cluster (nothing is
/// in flight, so no expectations are kept).
pub fn reconcile(state: &ClusterState) -> Vec<Action> {
    reconcile_expecting(state, &mut Expectations::default())
}

/// ReplicaSet actions for a state read through an index that may not have observed the
/// controller's latest writes: syncs wait for `exp` and record what they issue there.
pub fn reconcile_expecting(state: &ClusterState, exp: &mut Expectations) -> Vec<Action> {
    state
        .replica_sets
        .iter()
        .flat_map(|rs| reconcile_one(state, rs, exp))
        .collect()
}

/// Pods controlled by `rs`.
pub fn owned_pods<'a>(state: &'a ClusterState, rs: &ReplicaSet) -> Vec<&'a Pod> {
    state
        .pods
        .iter()
        .filter(|p| {
            ns(&p.metadata) == ns(&rs.metadata)
                && is_controlled_by(&p.metadata, "ReplicaSet", &rs.metadata)
        })
        .collect()
}

fn reconcile_one(state: &ClusterState, rs: &ReplicaSet, exp: &mut Expectations) -> Vec<Action> {
    let mut out = Vec::new();
    if !exp.index_has_seen(&rs.metadata) {
        // Read from the store ahead of the index: its pods may not all be indexed yet. Its own
        // event brings it back once they are.
        return out;
    }
    let key = (ns(&rs.metadata).to_string(), name(&rs.metadata).to_string());
    let owned = owned_pods(state, rs);
    let active: Vec<&Pod> = owned.iter().copied().filter(|p| pod_is_active(p)).collect();
    let spec = rs.spec.clone();
    let want = usize::try_from(spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);

    if rs.metadata.deletion_timestamp.is_none() && exp.satisfied(&key, state.now) {
        if active.len() < want {
            if let Some(template) = &spec.template {
                let n = (want - active.len()).min(BURST_REPLICAS);
                let pod = Pod {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{}-", name(&rs.metadata))),
                        namespace: Some(ns(&rs.metadata).to_string()),
                        labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                        annotations: template
                            .metadata
                            .as_ref()
                            .and_then(|m| m.annotations.clone()),
                        finalizers: template
                            .metadata
                            .as_ref()
                            .and_then(|m| m.finalizers.clone()),
                        owner_references: Some(vec![owner_ref(
                            "apps/v1",
                            "ReplicaSet",
                            &rs.metadata,
                        )]),
                        ..Default::default()
                    },
                    spec: template.spec.clone(),
                    status: None,
                };
                if let Some(a) = create_action(&pod) {
                    out.extend(std::iter::repeat_n(a, n));
                    exp.expect(&key, n, Vec::new(), state.now);
                }
            }
        } else if active.len() > want {
            let n = (active.len() - want).min(BURST_REPLICAS);
            let mut deleting = Vec::new();
            for pod in pods_to_delete(state, &active, n) {
                if let Some(a) = delete_pod(state, pod) {
                    out.push(a);
                    deleting.push((
                        ns(&pod.metadata).to_string(),
                        name(&pod.metadata).to_string(),
                    ));
                }
            }
            exp.expect(&key, 0, deleting, state.now);
        }
    }

    let status = calculate_status(state, rs, &owned);
    if !same_json(&rs.status, &Some(status.clone())) {
        let mut updated = rs.clone();
        updated.status = Some(status);
        out.extend(update_action(&updated));
    }
    out
}

/// Graceful deletion of a pod the way the API server does it for `DELETE` without options.
pub fn delete_pod(state: &ClusterState, pod: &Pod) -> Option<Action> {
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !bound || pod_is_terminal(pod) {
        return Some(delete_action("v1", "Pod", &pod.metadata, true));
    }
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0);
    let mut p = pod.clone();
    p.metadata.deletion_timestamp = Some(Time(add_secs(state.now, grace as f64)));
    p.metadata.deletion_grace_period_seconds = Some(grace);
    update_action(&p)
}

fn calculate_status(state: &ClusterState, rs: &ReplicaSet, owned: &[&Pod]) -> ReplicaSetStatus {
    let spec = rs.spec.clone();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let active: Vec<&&Pod> = owned.iter().filter(|p| pod_is_active(p)).collect();
    let count = |f: &dyn Fn(&Pod) -> bool| active.iter().filter(|p| f(p)).count() as i32;
    let fully_labeled = count(&|p| {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    });
    let terminating = owned
        .iter()
        .filter(|p| pod_is_terminating(p) && !pod_is_terminal(p))
        .count() as i32;
    ReplicaSetStatus {
        replicas: active.len() as i32,
        fully_labeled_replicas: Some(fully_labeled),
        ready_replicas: Some(count(&pod_is_ready)),
        available_replicas: Some(count(&|p| pod_is_available(p, min_ready, state.now))),
        observed_generation: rs.metadata.generation,
        terminating_replicas: Some(terminating),
        conditions: rs.status.as_ref().and_then(|s| s.conditions.clone()),
    }
}

/// The `n` pods to delete first, in upstream's ranking.
fn pods_to_delete<'a>(state: &ClusterState, active: &[&'a Pod], n: usize) -> Vec<&'a Pod> {
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for p in active {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *per_node.entry(node).or_default() += 1;
        }
    }
    let rank = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| per_node.get(n).copied())
            .unwrap_or(0)
    };
    let mut sorted: Vec<&'a Pod> = active.to_vec();
    sorted.sort_by(|a, b| delete_order(state, a, b, rank(a), rank(b)));
    sorted.truncate(n);
    sorted
}

/// `Less` when `a` should be deleted before `b`.
fn delete_order(_state: &ClusterState, a: &Pod, b: &Pod, rank_a: usize, rank_b: usize) -> Ordering {
    let assigned = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    let phase_rank = |p: &Pod| match pod_phase(p) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    };
    let restarts = |p: &Pod| -> i32 {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|cs| cs.iter().map(|c| c.restart_count).sum())
            .unwrap_or(0)
    };
    assigned(a)
        .cmp(&assigned(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| pod_is_ready(a).cmp(&pod_is_ready(b)))
        .then_with(|| rank_b.cmp(&rank_a))
        .then_with(|| {
            if pod_is_ready(a) && pod_is_ready(b) {
                // Ready more recently first (an unknown time counts as most recent).
                let t = |p: &Pod| pod_ready_since(p).flatten();
                match (t(a), t(b)) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => y.cmp(&x),
                }
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| restarts(b).cmp(&restarts(a)))
        .then_with(|| {
            let c = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            match (c(a), c(b)) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(x), Some(y)) => y.cmp(&x),
            }
        })
        .then_with(|| name(&b.metadata).cmp(name(&a.metadata)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testing::{Sim, node, template};
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn rs(name: &str, replicas: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("rs-{name}")),
                generation: Some(3),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: None,
                selector: LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                },
                template: Some(template("web", "nginx", None)),
            },
            status: None,
        }
    }

    /// A pod of `rs-web` in a given state.
    #[derive(Clone, Copy)]
    struct P {
        node: Option<&'static str>,
        phase: &'static str,
        ready_at: Option<i64>,
        restarts: i32,
        created: i64,
    }

    const BASE: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn ts(offset: i64) -> Time {
        Time(jiff::Timestamp::from_second(BASE + offset).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
    }

    fn pod(name: &str, p: P) -> Pod {
        let owner = rs("web", 0);
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("pod-{name}")),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                owner_references: Some(vec![owner_ref("apps/v1", "ReplicaSet", &owner.metadata)]),
                creation_timestamp: Some(ts(p.created)),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: p.node.map(str::to_string),
                ..template("web", "nginx", None).spec.unwrap_or_default()
            }),
            status: Some(PodStatus {
                phase: Some(p.phase.into()),
                conditions: p.ready_at.map(|t| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(ts(t)),
                        ..Default::default()
                    }]
                }),
                container_statuses: Some(vec![ContainerStatus {
                    name: "main".into(),
                    restart_count: p.restarts,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn state(pods: Vec<Pod>, rs: ReplicaSet) -> ClusterState {
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
        sim.state.now = ts(1000).0;
        sim.state.pods = pods;
        sim.state.replica_sets = vec![rs];
        sim.state
    }

    fn deleted_names(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Delete { kind, name, .. } if kind == "Pod" => Some(name.clone()),
                Action::Update(v)
                    if v["kind"] == "Pod" && v["metadata"]["deletionTimestamp"].is_string() =>
                {
                    v["metadata"]["name"].as_str().map(str::to_string)
                }
                _ => None,
            })
            .collect()
    }

    const RUNNING_READY: P = P {
        node: Some("n1"),
        phase: "Running",
        ready_at: Some(100),
        restarts: 0,
        created: 50,
    };

    #[test]
    fn scale_down_prefers_upstream_ranking() {
        let cases: Vec<(&str, P, P)> = vec![
            // (description, pod "a" (expected victim), pod "b")
            (
                "unassigned before assigned",
                P {
                    node: None,
                    phase: "Pending",
                    ready_at: None,
                    ..RUNNING_READY
                },
                RUNNING_READY,
            ),
            (
                "pending before running",
                P {
                    phase: "Pending",
                    ready_at: None,
                    ..RUNNING_READY
                },
                RUNNING_READY,
            ),
            (
                "not ready before ready",
                P {
                    ready_at: None,
                    ..RUNNING_READY
                },
                RUNNING_READY,
            ),
            (
                "doubled-up node first",
                RUNNING_READY,
                P {
                    node: Some("n2"),
                    ..RUNNING_READY
                },
            ),
            (
                "ready more recently first",
                P {
                    node: Some("n2"),
                    ready_at: Some(200),
                    ..RUNNING_READY
                },
                P {
                    node: Some("n1"),
                    ..RUNNING_READY
                },
            ),
            (
                "more restarts first",
                P {
                    node: Some("n2"),
                    restarts: 3,
                    ..RUNNING_READY
                },
                P {
                    node: Some("n1"),
                    ..RUNNING_READY
                },
            ),
            (
                "newer first",
                P {
                    node: Some("n2"),
                    created: 60,
                    ..RUNNING_READY
                },
                P {
                    node: Some("n1"),
                    ..RUNNING_READY
                },
            ),
        ];
        for (desc, a, b) in cases {
            let mut pods = vec![pod("b", b), pod("a", a)];
            if desc == "doubled-up node first" {
                // A third pod shares a's node n1; b alone on n2. Keep 2 → one of n1's goes.
                pods.push(pod(
                    "c",
                    P {
                        created: 40,
                        ..RUNNING_READY
                    },
                ));
                let st = state(pods, rs("web", 2));
                assert_eq!(
                    deleted_names(&reconcile(&st)),
                    vec!["a".to_string()],
                    "{desc}"
                );
                continue;
            }
            let st = state(pods, rs("web", 1));
            assert_eq!(
                deleted_names(&reconcile(&st)),
                vec!["a".to_string()],
                "{desc}"
            );
        }
    }

    #[test]
    fn deletion_is_graceful_for_bound_pods_and_immediate_for_unbound() {
        let st = state(vec![pod("a", RUNNING_READY)], rs("web", 0));
        let actions = reconcile(&st);
        let upd = actions.iter().find_map(|a| match a {
            Action::Update(v) if v["kind"] == "Pod" => Some(v.clone()),
            _ => None,
        });
        let upd = upd.unwrap_or_default();
        assert_eq!(upd["metadata"]["deletionTimestamp"], "2026-01-01T00:17:10Z");
        assert_eq!(upd["metadata"]["deletionGracePeriodSeconds"], 30);
        let unbound = P {
            node: None,
            phase: "Pending",
            ready_at: None,
            ..RUNNING_READY
        };
        let st = state(vec![pod("u", unbound)], rs("web", 0));
        assert!(reconcile(&st).iter().any(
            |a| matches!(a, Action::Delete { name, uid, .. } if name == "u" && uid == "pod-u")
        ));
    }

    #[test]
    fn creates_missing_pods_and_ignores_terminating_ones() {
        let mut terminating = pod("t", RUNNING_READY);
        terminating.metadata.deletion_timestamp = Some(ts(1010));
        let st = state(vec![terminating], rs("web", 2));
        let actions = reconcile(&st);
        let creates: Vec<&serde_json::Value> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Create(v) => Some(v),
                _ => None,
            })
            .collect();
        assert_eq!(creates.len(), 2, "terminating pod is not active");
        let c = creates[0];
        assert_eq!(c["kind"], "Pod");
        assert_eq!(c["apiVersion"], "v1");
        assert_eq!(c["metadata"]["generateName"], "web-");
        assert_eq!(c["metadata"]["namespace"], "default");
        assert_eq!(c["metadata"]["labels"]["app"], "web");
        let owner = &c["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                &owner["kind"],
                &owner["name"],
                &owner["uid"],
                &owner["controller"],
                &owner["blockOwnerDeletion"]
            ),
            (
                &"ReplicaSet".into(),
                &"web".into(),
                &"rs-web".into(),
                &true.into(),
                &true.into()
            )
        );
        assert_eq!(c["spec"]["containers"][0]["image"], "nginx");
        // Status counts the terminating pod only as terminating.
        let status = actions
            .iter()
            .find_map(|a| match a {
                Action::Update(v) if v["kind"] == "ReplicaSet" => Some(v["status"].clone()),
                _ => None,
            })
            .unwrap_or_default();
        assert_eq!(status["replicas"], 0);
        assert_eq!(status["terminatingReplicas"], 1);
        assert_eq!(status["observedGeneration"], 3);
    }

    #[test]
    fn status_counts_ready_available_and_fully_labeled() {
        let mut mislabeled = pod("m", RUNNING_READY);
        mislabeled.metadata.labels = Some([("other".to_string(), "x".to_string())].into());
        let mut r = rs("web", 4);
        r.spec.min_ready_seconds = Some(950);
        // ready at 100 → available after 1050; now is 1000.
        let recent = P {
            ready_at: Some(10),
            ..RUNNING_READY
        };
        let pods = vec![
            pod("a", RUNNING_READY),
            pod("b", recent),
            pod(
                "c",
                P {
                    ready_at: None,
                    ..RUNNING_READY
                },
            ),
            mislabeled,
        ];
        let st = state(pods, r);
        let status = calculate_status(
            &st,
            &st.replica_sets[0],
            &st.pods.iter().collect::<Vec<_>>(),
        );
        assert_eq!(status.replicas, 4);
        assert_eq!(status.ready_replicas, Some(3));
        assert_eq!(
            status.available_replicas,
            Some(1),
            "only b has been ready > 950 s"
        );
        assert_eq!(status.fully_labeled_replicas, Some(3));
    }

    #[test]
    fn converges_in_the_apply_loop() {
        let mut sim = Sim::new(state(vec![], rs("web", 3)));
        assert!(sim.settle(0.1, 500));
        assert_eq!(sim.state.pods.len(), 3);
        let st = sim.state.replica_sets[0].status.clone().unwrap_or_default();
        assert_eq!(
            (st.replicas, st.ready_replicas, st.available_replicas),
            (3, Some(3), Some(3))
        );
        sim.state.replica_sets[0].spec.replicas = Some(1);
        assert!(sim.run_until(0.5, 500, |s| s.pods.len() == 1));
    }
}
