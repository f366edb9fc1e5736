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

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::util::{
    add_secs, create_action, delete_action, is_controlled_by, name, ns, owner_ref, pod_is_active,
    pod_is_available, pod_is_ready, pod_is_terminal, pod_is_terminating, pod_phase,
    pod_ready_since, same_json, update_action,
};
use super::{Action, ClusterState};

/// Upstream's per-sync creation/deletion cap (`BurstReplicas`).
const BURST_REPLICAS: usize = 500;

/// ReplicaSet actions for one tick.
pub fn reconcile(state: &ClusterState) -> Vec<Action> {
    state
        .replica_sets
        .iter()
        .flat_map(|rs| reconcile_one(state, rs))
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

fn reconcile_one(state: &ClusterState, rs: &ReplicaSet) -> Vec<Action> {
    let mut out = Vec::new();
    let owned = owned_pods(state, rs);
    let active: Vec<&Pod> = owned.iter().copied().filter(|p| pod_is_active(p)).collect();
    let spec = rs.spec.clone();
    let want = usize::try_from(spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);

    if rs.metadata.deletion_timestamp.is_none() {
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
                }
            }
        } else if active.len() > want {
            let n = (active.len() - want).min(BURST_REPLICAS);
            for pod in pods_to_delete(state, &active, n) {
                out.extend(delete_pod(state, pod));
            }
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
