//! Controllers of the Kubernetes stand-in, written as pure functions over a cluster snapshot.
//!
//! The server calls [`reconcile_all`] every ~50 ms with a fresh [`ClusterState`] and applies the
//! returned [`Action`]s between ticks. Every controller is idempotent for a given state: it only
//! emits an action when the object differs from what it wants, and time comes only from
//! [`ClusterState::now`].

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::{Node, Pod},
    policy::v1::PodDisruptionBudget,
};

pub mod deployment;
pub mod kubelet;
pub mod pdb;
pub mod quantity;
pub mod replicaset;
pub mod scheduler;
pub mod testing;
mod util;

/// A consistent snapshot of the objects the controllers read.
#[derive(Clone, Debug)]
pub struct ClusterState {
    /// Simulation clock (may run faster than real time).
    pub now: jiff::Timestamp,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub replica_sets: Vec<ReplicaSet>,
    pub deployments: Vec<Deployment>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub config: SimConfig,
}

/// Knobs of the simulated kubelets.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seconds between a pod starting to run and becoming Ready (default 1.0).
    pub pod_start_delay_seconds: f64,
    /// Pods using any of these images run but never become Ready (CrashLoopBackOff).
    pub crashing_images: Vec<String>,
    /// Nodes whose kubelet does nothing; they are reported NotReady (Ready=Unknown).
    pub stopped_nodes: Vec<String>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            pod_start_delay_seconds: 1.0,
            crashing_images: Vec::new(),
            stopped_nodes: Vec::new(),
        }
    }
}

/// A write the server applies after a tick.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Full object with apiVersion/kind; the server assigns uid/resourceVersion/creationTimestamp
    /// and honours `metadata.generateName`.
    Create(serde_json::Value),
    /// Full object including status; compare-and-set on `metadata.resourceVersion`.
    ///
    /// Pods are marked terminating (graceful deletion) by an `Update` that sets
    /// `metadata.deletionTimestamp` and `metadata.deletionGracePeriodSeconds`; the server must
    /// keep those fields when it applies controller updates.
    Update(serde_json::Value),
    /// Immediate removal with a uid precondition.
    Delete {
        api_version: String,
        kind: String,
        namespace: Option<String>,
        name: String,
        uid: String,
    },
}

/// Runs every controller over `state` and returns their actions.
///
/// Order: kubelet (node and pod status, removal of terminated pods), scheduler (bindings),
/// ReplicaSet, Deployment, PDB. When two controllers write the same object in one tick, the
/// earlier one wins, except that an update touching only `status` and one touching only the rest
/// of the object are merged; a dropped write is naturally retried next tick.
pub fn reconcile_all(state: &ClusterState) -> Vec<Action> {
    let batches = [
        kubelet::reconcile(state),
        scheduler::reconcile(state),
        replicaset::reconcile(state),
        deployment::reconcile(state),
        pdb::reconcile(state),
    ];
    let mut out: Vec<Action> = Vec::new();
    let mut index: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for action in batches.into_iter().flatten() {
        let Some(key) = action_key(&action) else {
            out.push(action);
            continue;
        };
        match index.get(&key) {
            None => {
                index.insert(key, out.len());
                out.push(action);
            }
            Some(&i) => {
                if let (Action::Update(first), Action::Update(second)) = (&out[i], &action)
                    && let Some(orig) = original_json(state, &key)
                    && let Some(merged) = merge_updates(&orig, first, second)
                {
                    out[i] = Action::Update(merged);
                }
                // Otherwise the later write waits for the next tick.
            }
        }
    }
    out
}

/// `(kind, namespace, name)` of the object an update or delete targets.
fn action_key(a: &Action) -> Option<(String, String, String)> {
    match a {
        Action::Create(_) => None,
        Action::Update(v) => {
            let kind = v.get("kind")?.as_str()?.to_string();
            let meta = v.get("metadata")?;
            let ns = meta
                .get("namespace")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_string();
            let name = meta.get("name")?.as_str()?.to_string();
            Some((kind, ns, name))
        }
        Action::Delete {
            kind,
            namespace,
            name,
            ..
        } => Some((
            kind.clone(),
            namespace.clone().unwrap_or_default(),
            name.clone(),
        )),
    }
}

/// The JSON form of the object `key` names in `state`.
fn original_json(
    state: &ClusterState,
    key: &(String, String, String),
) -> Option<serde_json::Value> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    fn find<T: serde::Serialize>(
        items: &[T],
        meta: impl Fn(&T) -> &ObjectMeta,
        ns: &str,
        name: &str,
        namespaced: bool,
    ) -> Option<serde_json::Value> {
        items
            .iter()
            .find(|o| {
                let m = meta(o);
                m.name.as_deref() == Some(name)
                    && (!namespaced || m.namespace.as_deref().unwrap_or("") == ns)
            })
            .and_then(|o| serde_json::to_value(o).ok())
    }
    let (kind, ns, name) = key;
    match kind.as_str() {
        "Pod" => find(&state.pods, |o| &o.metadata, ns, name, true),
        "Node" => find(&state.nodes, |o| &o.metadata, ns, name, false),
        "ReplicaSet" => find(&state.replica_sets, |o| &o.metadata, ns, name, true),
        "Deployment" => find(&state.deployments, |o| &o.metadata, ns, name, true),
        "PodDisruptionBudget" => find(&state.pdbs, |o| &o.metadata, ns, name, true),
        _ => None,
    }
}

/// Combines two updates of the same object when one changes only `status` and the other only
/// the rest of the object; `None` when they overlap.
fn merge_updates(
    orig: &serde_json::Value,
    a: &serde_json::Value,
    b: &serde_json::Value,
) -> Option<serde_json::Value> {
    fn split(v: &serde_json::Value) -> (serde_json::Value, serde_json::Value) {
        let mut rest = v.clone();
        let status = rest
            .as_object_mut()
            .and_then(|m| m.remove("status"))
            .unwrap_or(serde_json::Value::Null);
        (status, rest)
    }
    let (o_status, o_rest) = split(orig);
    let (a_status, a_rest) = split(a);
    let (b_status, b_rest) = split(b);
    let with_status = |rest: serde_json::Value, status: serde_json::Value| {
        let mut v = rest;
        if let Some(m) = v.as_object_mut()
            && !status.is_null()
        {
            m.insert("status".to_string(), status);
        }
        v
    };
    if a_rest == o_rest && b_status == o_status {
        Some(with_status(b_rest, a_status))
    } else if a_status == o_status && b_rest == o_rest {
        Some(with_status(a_rest, b_status))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merges_status_only_with_spec_only_updates() {
        let orig = json!({"kind": "ReplicaSet", "metadata": {"name": "a"}, "spec": {"replicas": 1}, "status": {"replicas": 0}});
        let status_only = json!({"kind": "ReplicaSet", "metadata": {"name": "a"}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let spec_only = json!({"kind": "ReplicaSet", "metadata": {"name": "a"}, "spec": {"replicas": 2}, "status": {"replicas": 0}});
        let want = json!({"kind": "ReplicaSet", "metadata": {"name": "a"}, "spec": {"replicas": 2}, "status": {"replicas": 1}});
        assert_eq!(
            merge_updates(&orig, &status_only, &spec_only),
            Some(want.clone())
        );
        assert_eq!(merge_updates(&orig, &spec_only, &status_only), Some(want));
        // Both touching status: no merge.
        assert_eq!(merge_updates(&orig, &status_only, &status_only), None);
    }
}
