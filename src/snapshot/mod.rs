//! The cluster snapshot: the engine's indexed, read-mostly view of a cluster.
//!
//! Built by [`SnapshotBuilder`] from Kubernetes objects — from a `List` file ([`load`]) for `plan`
//! or from watch caches in live mode. The engine never assumes where it came from.
//!
//! The file loader is layered: [`load`] (file or bytes) → [`stream`] (a JSON `List` item by item)
//! → `decode` (one object by its `kind`) → [`workloads`], [`autoscalers`] and `json` (field-path errors, `kind`
//! peeking).

pub mod autoscalers;
pub mod builder;
pub mod consistency;
mod decode;
mod json;
pub mod load;
pub mod model;
pub mod resources;
pub mod stream;
pub mod view;
pub mod workloads;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::apps::v1::StatefulSet;

use crate::workload::{DeploymentFacts, ReplicaSetFacts};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

pub use builder::{ConvertError, Parts, SnapshotBuilder};
pub use model::{Node, NodeId, Pod, PodId};
pub use resources::Resources;

/// `namespace/name` of a namespaced object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A key from namespace and name.
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// What the engine and guard need of a PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PvcInfo {
    /// `spec.storageClassName`.
    pub storage_class: Option<String>,
    /// `spec.accessModes`.
    pub access_modes: Vec<String>,
}

/// What the non-terminal pods on a node use (upstream `ListPodsOnANode`: Succeeded and Failed pods
/// are left out because they hold no resources).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// Sum of their requests.
    pub requested: Resources,
    /// How many there are (pod slots taken).
    pub pods: i64,
}

/// An indexed cluster snapshot.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// All nodes, indexed by [`NodeId`].
    pub nodes: Vec<Node>,
    /// All pods, indexed by [`PodId`] (evicted ones stay, flagged).
    pub pods: Vec<Arc<Pod>>,
    /// Namespace labels by namespace name.
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    /// The guard's rule B opt-in annotation of each namespace that carries a recognised value
    /// ([`crate::workload::annotations::pdb_surge_opt_in`]); no other annotation is kept.
    pub namespace_pdb_surge: HashMap<String, bool>,
    /// HorizontalPodAutoscalers that scale a Deployment (only the scale target is kept).
    pub hpas: Vec<model::HpaTarget>,
    /// PriorityClass values by name.
    pub priority_classes: HashMap<String, i32>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// ReplicaSets, as the facts the eviction guard reads.
    pub replica_sets: Vec<ReplicaSetFacts>,
    /// Deployments, as the facts the eviction guard reads.
    pub deployments: Vec<DeploymentFacts>,
    /// StatefulSets (template specs dropped).
    pub stateful_sets: Vec<StatefulSet>,
    /// Jobs (template specs dropped).
    pub jobs: Vec<Job>,
    /// PVCs by namespace/name.
    pub pvcs: HashMap<ObjectKey, PvcInfo>,
    /// Problems found while building (unknown kinds, pods on unknown nodes, ...).
    pub warnings: Vec<String>,
    /// Inconsistencies found and resolved while building (see [`consistency`]).
    pub inconsistencies: Vec<consistency::Inconsistency>,
    /// Usage measured by the metrics sources for this cycle (`None`: nothing was measured); the
    /// utilization plugins with `metricsUtilization` read it.
    pub measured: Option<Arc<crate::usage::Measured>>,
    node_by_name: HashMap<String, NodeId>,
    pods_by_node: Vec<Vec<PodId>>,
    pods_by_namespace: HashMap<Arc<str>, Vec<PodId>>,
    pods_by_owner: HashMap<String, Vec<PodId>>,
    evicted: Vec<bool>,
    /// Per-node usage, computed on first use and dropped when a pod on the node is evicted.
    usage: Vec<OnceLock<NodeUsage>>,
}

impl Snapshot {
    fn from_parts(b: SnapshotBuilder) -> Self {
        Self::assemble(b.into_parts())
    }

    /// Builds the indexed snapshot from already converted parts: resolves inconsistencies (see
    /// [`consistency`]), pod → node references and the indexes. Object order is kept.
    pub fn assemble(mut parts: builder::Parts) -> Self {
        let inconsistencies = consistency::resolve(&mut parts.nodes, &mut parts.pods);
        // The lists grew by doubling while loading; Kubernetes objects are large inline (a
        // StatefulSet or Job struct is over a kilobyte even with its template dropped), so the
        // unused capacity is worth returning.
        parts.nodes.shrink_to_fit();
        parts.pods.shrink_to_fit();
        parts.pdbs.shrink_to_fit();
        parts.replica_sets.shrink_to_fit();
        parts.deployments.shrink_to_fit();
        parts.stateful_sets.shrink_to_fit();
        parts.jobs.shrink_to_fit();
        parts.hpas.shrink_to_fit();
        let mut s = Snapshot {
            nodes: parts.nodes,
            pods: parts.pods,
            namespaces: parts.namespaces,
            namespace_pdb_surge: parts.namespace_pdb_surge,
            hpas: parts.hpas,
            priority_classes: parts.priority_classes,
            pdbs: parts.pdbs,
            replica_sets: parts.replica_sets,
            deployments: parts.deployments,
            stateful_sets: parts.stateful_sets,
            jobs: parts.jobs,
            pvcs: parts.pvcs,
            warnings: parts.warnings,
            inconsistencies,
            ..Default::default()
        };
        let mut seen_nodes = HashMap::with_capacity(s.nodes.len());
        let mut duplicate_nodes = Vec::new();
        for (i, n) in s.nodes.iter().enumerate() {
            if seen_nodes.insert(n.name.clone(), i as NodeId).is_some() {
                duplicate_nodes.push(n.name.clone());
            }
        }
        for name in duplicate_nodes {
            s.warnings.push(format!(
                "node {name} appears more than once; the last one is used"
            ));
        }
        s.node_by_name = seen_nodes;
        s.pods_by_node = vec![Vec::new(); s.nodes.len()];
        s.evicted = vec![false; s.pods.len()];
        s.usage = (0..s.nodes.len()).map(|_| OnceLock::new()).collect();
        // The per-pod lookups go through maps with a fast hasher and borrowed keys (no key copied
        // per pod); the indexes are filled from them afterwards.
        let node_ids: builder::FastMap<&str, NodeId> = s
            .node_by_name
            .iter()
            .map(|(name, &id)| (name.as_str(), id))
            .collect();
        let mut by_namespace: builder::FastMap<&str, (Arc<str>, Vec<PodId>)> = Default::default();
        let mut nodes_of_pods = Vec::with_capacity(s.pods.len());
        // The owner index is built on another thread meanwhile (it only reads the pods).
        let pods = &s.pods;
        let owners = std::thread::scope(|scope| {
            let owners = scope.spawn(|| owner_index(pods));
            for (i, pod) in pods.iter().enumerate() {
                let id = i as PodId;
                let mut node = None;
                // A pod on an unknown node stays on none (reported by `consistency`).
                if let Some(&n) = pod
                    .node_name
                    .as_ref()
                    .and_then(|name| node_ids.get(name.as_str()))
                {
                    node = Some(n);
                    s.pods_by_node[n as usize].push(id);
                }
                nodes_of_pods.push(node);
                by_namespace
                    .entry(&pod.namespace[..])
                    .or_insert_with(|| (pod.namespace.clone(), Vec::new()))
                    .1
                    .push(id);
            }
            owners
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        });
        s.pods_by_namespace = by_namespace.into_values().collect();
        s.pods_by_owner = owners;
        for (pod, node) in s.pods.iter_mut().zip(nodes_of_pods) {
            // Pods shared with a long-lived cluster state usually carry the right id already (see
            // `live::state`); only a pod whose id differs is copied.
            if node.is_some() && pod.node != node {
                Arc::make_mut(pod).node = node;
            }
        }
        s
    }

    /// The node named `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(name).copied()
    }

    /// The node with id `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The pod with id `id`.
    pub fn pod(&self, id: PodId) -> &Pod {
        &self.pods[id as usize]
    }

    /// How many pods the snapshot places on `node`, evicted ones included (a work estimate).
    pub fn pods_on_node_upper_bound(&self, node: NodeId) -> usize {
        self.pods_by_node.get(node as usize).map_or(0, Vec::len)
    }

    /// Ids of the pods on `node` that have not been evicted in this cycle.
    pub fn pods_on_node(&self, node: NodeId) -> impl Iterator<Item = PodId> + '_ {
        self.pods_by_node[node as usize]
            .iter()
            .copied()
            .filter(|&p| !self.evicted[p as usize])
    }

    /// Ids of the pods in `namespace` that have not been evicted in this cycle.
    pub fn pods_in_namespace(&self, namespace: &str) -> impl Iterator<Item = PodId> + '_ {
        self.pods_by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&p| !self.evicted[p as usize])
    }

    /// Ids of the pods with an owner reference to `owner_uid` (not evicted in this cycle).
    pub fn pods_owned_by(&self, owner_uid: &str) -> impl Iterator<Item = PodId> + '_ {
        self.pods_by_owner
            .get(owner_uid)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&p| !self.evicted[p as usize])
    }

    /// Ids of all pods not evicted in this cycle.
    pub fn live_pods(&self) -> impl Iterator<Item = PodId> + '_ {
        (0..self.pods.len() as PodId).filter(|&p| !self.evicted[p as usize])
    }

    /// Whether `pod` has been evicted (or deflected) in this cycle.
    pub fn is_evicted(&self, pod: PodId) -> bool {
        self.evicted[pod as usize]
    }

    /// Records that `pod` left its node (evicted or deflected): later plugins no longer see it.
    pub fn mark_evicted(&mut self, pod: PodId) {
        if let Some(e) = self.evicted.get_mut(pod as usize) {
            *e = true;
        }
        if let Some(n) = self.pods.get(pod as usize).and_then(|p| p.node)
            && let Some(u) = self.usage.get_mut(n as usize)
        {
            u.take();
        }
    }

    /// Forgets all evictions (a new cycle on the same snapshot).
    pub fn reset_evictions(&mut self) {
        self.evicted.iter_mut().for_each(|e| *e = false);
        self.usage.iter_mut().for_each(|u| {
            u.take();
        });
    }

    /// Labels of `namespace` (empty when unknown).
    pub fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)
    }

    /// The rule B opt-in annotation of `namespace` (`None`: absent, unrecognised or unknown
    /// namespace).
    pub fn namespace_pdb_surge(&self, namespace: &str) -> Option<bool> {
        self.namespace_pdb_surge.get(namespace).copied()
    }

    /// Sum of requests of non-terminal pods on `node` (Succeeded/Failed pods free their resources).
    pub fn node_requested(&self, node: NodeId) -> Resources {
        self.node_usage(node).requested.clone()
    }

    /// Requests and pod count of the non-terminal pods on `node`, cached until a pod on the node
    /// is marked evicted.
    pub fn node_usage(&self, node: NodeId) -> std::borrow::Cow<'_, NodeUsage> {
        match self.usage.get(node as usize) {
            Some(cell) => std::borrow::Cow::Borrowed(cell.get_or_init(|| self.compute_usage(node))),
            // Nodes added after the snapshot was built are not cached.
            None => std::borrow::Cow::Owned(self.compute_usage(node)),
        }
    }

    /// Ids of the non-terminal (not Succeeded/Failed) pods on `node`, not evicted in this cycle.
    pub fn active_pods_on_node(&self, node: NodeId) -> impl Iterator<Item = PodId> + '_ {
        self.pods_on_node(node).filter(|&p| {
            !matches!(
                self.pod(p).phase,
                model::PodPhase::Succeeded | model::PodPhase::Failed
            )
        })
    }

    fn compute_usage(&self, node: NodeId) -> NodeUsage {
        let mut usage = NodeUsage::default();
        for p in self.active_pods_on_node(node) {
            usage.requested.add(&self.pod(p).requests);
            usage.pods += 1;
        }
        usage
    }
}

/// Pod ids by owner uid, in pod order.
fn owner_index(pods: &[Arc<Pod>]) -> HashMap<String, Vec<PodId>> {
    let mut by_owner: builder::FastMap<&str, Vec<PodId>> = Default::default();
    for (i, pod) in pods.iter().enumerate() {
        for o in pod.owners.iter() {
            by_owner.entry(o.uid.as_str()).or_default().push(i as PodId);
        }
    }
    by_owner
        .into_iter()
        .map(|(uid, pods)| (uid.to_string(), pods))
        .collect()
}
