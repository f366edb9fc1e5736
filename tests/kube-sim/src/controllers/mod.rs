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
pub mod expectations;
pub mod kubelet;
pub mod pdb;
pub mod quantity;
pub mod replicaset;
pub mod scheduler;
pub mod testing;
pub mod util;

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
    /// Nodes where every container crashes like a `crashing_images` one (a broken runtime or
    /// image registry on that node): pods placed there run but never become Ready.
    pub crashing_nodes: Vec<String>,
    /// The scheduler's `KubeSchedulerConfiguration` (`None`: kube-sim's built-in scoring, "least
    /// allocated" summed over cpu and memory, and only `default-scheduler` pods are served).
    pub scheduler: Option<std::sync::Arc<scheduler::config::SchedulerConfig>>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            pod_start_delay_seconds: 1.0,
            crashing_images: Vec::new(),
            stopped_nodes: Vec::new(),
            crashing_nodes: Vec::new(),
            scheduler: None,
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
    reconcile_all_with(
        state,
        Some(&scheduler::NodeUsage::default()),
        &mut expectations::Expectations::default(),
    )
}

/// [`reconcile_all`] over a state that holds only part of the cluster: `base` is what the
/// pods outside `state` use on each node (see [`scheduler::reconcile_with`]); `None` leaves
/// the scheduler out (the caller schedules pending pods on its own). `rs_expectations` are the
/// ReplicaSet controller's (see [`expectations`]); a ReplicaSet write dropped here lowers them.
pub fn reconcile_all_with(
    state: &ClusterState,
    base: Option<&scheduler::NodeUsage>,
    rs_expectations: &mut expectations::Expectations,
) -> Vec<Action> {
    let batches = [
        kubelet::reconcile(state),
        base.map(|b| scheduler::reconcile_with(state, b))
            .unwrap_or_default(),
        replicaset::reconcile_expecting(state, rs_expectations),
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
                } else if let Some(p) = expectations::pending_of(&action) {
                    // The later write waits for the next tick; it will not be observed.
                    rs_expectations.dropped(&p);
                }
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

    use crate::controllers::testing::{Sim, deployment, node, pdb};
    use crate::controllers::util::{pod_is_ready, pod_is_terminating};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn serving(s: &ClusterState) -> usize {
        s.pods
            .iter()
            .filter(|p| pod_is_ready(p) && !pod_is_terminating(p))
            .count()
    }

    fn node_of(p: &Pod) -> Option<&str> {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref())
    }

    #[test]
    fn one_tick_writes_each_object_once() {
        // A bound Pending pod the kubelet wants to start, owned by a ReplicaSet scaled to 0
        // that wants to delete it: the two writes are merged into one update.
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi")]);
        sim.state.replica_sets.push(ReplicaSet {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("rs-uid".into()),
                ..Default::default()
            },
            spec: k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(0),
                ..Default::default()
            },
            status: None,
        });
        let mut p = Pod::default();
        p.metadata.name = Some("web-abcde".into());
        p.metadata.namespace = Some("default".into());
        p.metadata.owner_references = Some(vec![util::owner_ref(
            "apps/v1",
            "ReplicaSet",
            &sim.state.replica_sets[0].metadata,
        )]);
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        });
        sim.state.pods.push(p);
        let mut sim = Sim::new(sim.state);
        let actions = reconcile_all(&sim.state);
        let pod_writes: Vec<&serde_json::Value> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Update(v) if v["kind"] == "Pod" => Some(v),
                _ => None,
            })
            .collect();
        assert_eq!(pod_writes.len(), 1);
        assert!(pod_writes[0]["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(pod_writes[0]["status"]["phase"], "Running");
        assert_eq!(sim.apply(actions).rejected, 0);
    }

    /// The flow the eviction guard relies on: node cordoned, `kubectl rollout restart` of a
    /// single-replica Deployment with a PDB; the new pod lands elsewhere and the old one goes
    /// only once the new one is Ready. No controller write is ever rejected.
    #[test]
    fn cordon_and_restart_moves_the_pod_without_downtime() {
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
        sim.state.deployments.push(deployment("web", 1, "nginx"));
        sim.state
            .pdbs
            .push(pdb("web", "web", Some(IntOrString::Int(1)), None));
        let mut sim = Sim::new(sim.state);
        assert!(sim.settle(0.05, 2000));
        assert_eq!(sim.state.pods.len(), 1);
        assert_eq!(node_of(&sim.state.pods[0]), Some("n1"));
        let allowed = |s: &ClusterState| {
            s.pdbs[0]
                .status
                .as_ref()
                .and_then(|s| s.disruptions_allowed)
        };
        assert_eq!(allowed(&sim.state), Some(0));

        if let Some(spec) = sim.state.nodes[0].spec.as_mut() {
            spec.unschedulable = Some(true);
        }
        sim.edit_deployment("default", "web", |d| {
            d.spec
                .template
                .metadata
                .get_or_insert_with(Default::default)
                .annotations
                .get_or_insert_with(Default::default)
                .insert(
                    "kubectl.kubernetes.io/restartedAt".into(),
                    "2026-01-01T00:10:00Z".into(),
                );
        });
        let mut max_allowed = 0;
        for _ in 0..2000 {
            assert!(serving(&sim.state) >= 1, "never 0 Ready replicas");
            max_allowed = max_allowed.max(allowed(&sim.state).unwrap_or(0));
            let stats = sim.step(0.05);
            assert_eq!(stats.rejected, 0, "no conflicting writes");
            if sim.state.pods.len() == 1
                && node_of(&sim.state.pods[0]) == Some("n2")
                && serving(&sim.state) == 1
            {
                break;
            }
        }
        assert_eq!(sim.state.pods.len(), 1);
        assert_eq!(node_of(&sim.state.pods[0]), Some("n2"));
        assert_eq!(
            max_allowed, 1,
            "PDB allowed a disruption while both pods were Ready"
        );
        assert!(sim.settle(0.05, 2000));
        assert_eq!(allowed(&sim.state), Some(0));
    }

    /// A plain eviction (graceful delete) of the only pod: the ReplicaSet replaces it on the
    /// other node, with a gap in readiness (what the guard prevents).
    #[test]
    fn plain_eviction_of_single_replica_has_downtime() {
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
        sim.state.deployments.push(deployment("web", 1, "nginx"));
        let mut sim = Sim::new(sim.state);
        assert!(sim.settle(0.05, 2000));
        if let Some(spec) = sim.state.nodes[0].spec.as_mut() {
            spec.unschedulable = Some(true);
        }
        let name = sim.state.pods[0].metadata.name.clone().unwrap_or_default();
        assert!(sim.delete_pod("default", &name, Some(2)));
        let mut saw_zero = false;
        assert!(sim.run_until(0.05, 2000, |s| {
            saw_zero |= serving(s) == 0;
            s.pods.len() == 1 && node_of(&s.pods[0]) == Some("n2") && serving(s) == 1
        }));
        assert!(saw_zero);
    }
}
