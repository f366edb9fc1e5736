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
mod index;
mod json;
pub mod load;
pub mod model;
pub mod nodes;
pub mod owners;
pub mod resources;
pub mod shared;
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
pub use model::{DEFAULT_SCHEDULER_NAME, HostPort, Node, NodeId, Pod, PodId};
pub use resources::Resources;
pub use shared::SharedList;

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
    /// Sum of their CPU requests with kube-scheduler's non-zero default (millicores; see
    /// [`Resources::nonzero_cpu_memory`]).
    pub nonzero_cpu: i64,
    /// Sum of their memory requests with kube-scheduler's non-zero default.
    pub nonzero_memory: i64,
}

/// A node's usage as the utilization plugins count it (pods' spec requests) and, when some pod on
/// it was resized in place so that they differ, as kube-scheduler counts it.
#[derive(Debug)]
struct Usages {
    spec: NodeUsage,
    fit: Option<Box<NodeUsage>>,
}

impl NodeUsage {
    fn add(&mut self, requests: &Resources) {
        self.requested.add(requests);
        self.pods += 1;
        let (cpu, memory) = requests.nonzero_cpu_memory();
        self.nonzero_cpu += cpu;
        self.nonzero_memory += memory;
    }
}

/// How many pods ahead [`Snapshot::prefetched`] asks for.
const PREFETCH_AHEAD: usize = 4;
/// How many cache lines of a pod it asks for: the first two hold the fields every plugin reads
/// (see [`Pod`]'s layout).
const PREFETCH_LINES: usize = 2;

/// An indexed cluster snapshot.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// All nodes, indexed by [`NodeId`] (shared with the cluster state in live mode).
    pub nodes: SharedList<Node>,
    /// All pods, indexed by [`PodId`] (evicted ones stay, flagged; shared with the cluster state
    /// in live mode, so a snapshot copies no pod and no pointer per pod).
    pub pods: SharedList<Arc<Pod>>,
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
    pub pdbs: SharedList<Arc<PodDisruptionBudget>>,
    /// ReplicaSets, as the facts the eviction guard reads.
    pub replica_sets: SharedList<Arc<ReplicaSetFacts>>,
    /// Deployments, as the facts the eviction guard reads.
    pub deployments: SharedList<Arc<DeploymentFacts>>,
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
    index: index::PodIndex,
    evicted: Vec<bool>,
    /// Per-node usage, computed on first use and dropped when a pod on the node is evicted.
    usage: Vec<OnceLock<Usages>>,
    /// The owner lookups, built on first use.
    owners: OnceLock<owners::OwnerIndex>,
}

impl Snapshot {
    fn from_parts(b: SnapshotBuilder) -> Self {
        Self::assemble(b.into_parts())
    }

    /// Builds the indexed snapshot from already converted parts: resolves inconsistencies (see
    /// [`consistency`]), pod → node references and the indexes. Object order is kept.
    pub fn assemble(mut parts: builder::Parts) -> Self {
        let mut found = consistency::Found::from(consistency::resolve_nodes(&mut parts.nodes));
        consistency::resolve_duplicate_pods(&mut parts.pods, &mut found);
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
        let shared = SharedParts {
            nodes: parts.nodes.into(),
            pods: parts.pods.into(),
            pdbs: parts.pdbs.into(),
            replica_sets: parts.replica_sets.into(),
            deployments: parts.deployments.into(),
        };
        let rest = builder::Parts {
            nodes: Vec::new(),
            pods: Vec::new(),
            pdbs: Vec::new(),
            replica_sets: Vec::new(),
            deployments: Vec::new(),
            ..parts
        };
        Self::index(shared, rest, found, None)
    }

    /// Builds the snapshot of a live cluster state from parts it shares (no node or pod is
    /// copied). The state guarantees what [`Self::assemble`] would otherwise check: its pods are
    /// in order with unique names, their [`Pod::node`] ids match `shared.nodes`, and the nodes'
    /// inconsistencies are `node_issues` (already resolved). With `unique_uids` false, pods with
    /// a duplicate UID are resolved as [`consistency`] documents.
    pub fn assemble_shared(
        mut shared: SharedParts,
        rest: builder::Parts,
        node_issues: Vec<consistency::Inconsistency>,
        unique_uids: bool,
    ) -> Self {
        let mut found = consistency::Found::from(node_issues);
        if !unique_uids {
            consistency::resolve_duplicate_pods(&mut shared.pods, &mut found);
        }
        let node_by_name = shared
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i as NodeId))
            .collect();
        Self::index(shared, rest, found, Some(node_by_name))
    }

    /// Indexes the parts. Without `node_by_name`, the pods' node ids are looked up (and stored in
    /// the pods when they differ); with it, the pods carry them already.
    fn index(
        shared: SharedParts,
        parts: builder::Parts,
        mut found: consistency::Found,
        node_by_name: Option<HashMap<String, NodeId>>,
    ) -> Self {
        let mut s = Snapshot {
            nodes: shared.nodes,
            pods: shared.pods,
            namespaces: parts.namespaces,
            namespace_pdb_surge: parts.namespace_pdb_surge,
            hpas: parts.hpas,
            priority_classes: parts.priority_classes,
            pdbs: shared.pdbs,
            replica_sets: shared.replica_sets,
            deployments: shared.deployments,
            stateful_sets: parts.stateful_sets,
            jobs: parts.jobs,
            pvcs: parts.pvcs,
            warnings: parts.warnings,
            ..Default::default()
        };
        let stored = node_by_name.is_some();
        s.node_by_name = match node_by_name {
            Some(m) => m,
            None => {
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
                seen_nodes
            }
        };
        s.evicted = vec![false; s.pods.len()];
        s.usage = (0..s.nodes.len()).map(|_| OnceLock::new()).collect();
        let node_ids: builder::FastMap<&str, NodeId> = if stored {
            Default::default()
        } else {
            s.node_by_name
                .iter()
                .map(|(name, &id)| (name.as_str(), id))
                .collect()
        };
        let nodes_of = if stored {
            index::NodesOf::Stored
        } else {
            index::NodesOf::Lookup(&node_ids)
        };
        let (index, nodes_of_pods) = index::build(&s.pods, s.nodes.len(), nodes_of, &mut found);
        drop(node_ids);
        s.index = index;
        s.inconsistencies = found.sorted();
        if let Some(nodes_of_pods) = nodes_of_pods
            && s.pods
                .iter()
                .zip(&nodes_of_pods)
                .any(|(p, n)| n.is_some() && p.node != *n)
        {
            for (pod, node) in s.pods.iter_mut().zip(nodes_of_pods) {
                // Pods shared with another snapshot are copied; fresh ones are written in place.
                if node.is_some() && pod.node != node {
                    Arc::make_mut(pod).node = node;
                }
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
        self.index.on_node(node).len()
    }

    /// Ids of the pods on `node` that have not been evicted in this cycle (prefetched: see
    /// [`Self::prefetched`]).
    pub fn pods_on_node(&self, node: NodeId) -> impl Iterator<Item = PodId> + '_ {
        self.prefetched(self.index.on_node(node))
            .filter(|&p| !self.evicted[p as usize])
    }

    /// `ids`, in order, asking the CPU for the pod [`PREFETCH_AHEAD`] places ahead while the
    /// caller reads the current one. Pods live wherever they were decoded, so the pods of a node
    /// or of a list are far apart in memory and reading each one is a cache miss; prefetched,
    /// several of these misses overlap.
    pub fn prefetched<'a>(&'a self, ids: &'a [PodId]) -> impl Iterator<Item = PodId> + 'a {
        for &p in ids.iter().take(PREFETCH_AHEAD) {
            self.prefetch_pod(p);
        }
        ids.iter().enumerate().map(move |(i, &p)| {
            if let Some(&ahead) = ids.get(i + PREFETCH_AHEAD) {
                self.prefetch_pod(ahead);
            }
            p
        })
    }

    /// Every pod id, in order, prefetched as [`Self::prefetched`] does but whole (every cache
    /// line of the pod, for a scan reading fields past the first lines).
    pub fn all_pods_prefetched_whole(&self) -> impl Iterator<Item = PodId> + '_ {
        const WHOLE: usize = std::mem::size_of::<Pod>().div_ceil(64);
        let n = self.pods.len() as PodId;
        for p in 0..(PREFETCH_AHEAD as PodId).min(n) {
            self.prefetch_pod_lines(p, WHOLE);
        }
        (0..n).inspect(move |&p| {
            self.prefetch_pod_lines(p.saturating_add(PREFETCH_AHEAD as PodId), WHOLE);
        })
    }

    /// Asks the CPU to start loading pod `id` into its caches (a hint: it changes no result).
    #[inline]
    fn prefetch_pod(&self, id: PodId) {
        self.prefetch_pod_lines(id, PREFETCH_LINES);
    }

    /// [`Self::prefetch_pod`] of the pod's first `lines` cache lines.
    #[inline]
    fn prefetch_pod_lines(&self, id: PodId, lines: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(pod) = self.pods.get(id as usize) {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let at = Arc::as_ptr(pod).cast::<i8>();
            for line in 0..lines {
                // SAFETY: SSE is part of every x86_64 CPU, and a prefetch is only a hint: it
                // never faults and reads nothing into the program (the address is in the pod).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(line * 64)) };
            }
        }
    }

    /// Ids of the pods in `namespace` that have not been evicted in this cycle.
    pub fn pods_in_namespace(&self, namespace: &str) -> impl Iterator<Item = PodId> + '_ {
        self.prefetched(self.index.in_namespace(namespace))
            .filter(|&p| !self.evicted[p as usize])
    }

    /// Ids of every pod in `namespace`, those evicted in this cycle included (the namespace's
    /// pods at the cycle's start).
    pub fn pods_in_namespace_at_start(&self, namespace: &str) -> &[PodId] {
        self.index.in_namespace(namespace)
    }

    /// Ids of every pod on `node`, those evicted in this cycle included.
    pub fn pods_on_node_at_start(&self, node: NodeId) -> &[PodId] {
        self.index.on_node(node)
    }

    /// How many pods on `node` at the cycle's start have not ended (are neither Succeeded nor
    /// Failed), those evicted in this cycle included; counted when the indexes are built.
    pub fn unfinished_pods_on_node_at_start(&self, node: NodeId) -> u32 {
        self.index.unfinished_on_node(node)
    }

    /// How many pods in `namespace` at the cycle's start have not ended, those evicted in this
    /// cycle included; counted when the indexes are built.
    pub fn unfinished_pods_in_namespace_at_start(&self, namespace: &str) -> u32 {
        self.index.unfinished_in_namespace(namespace)
    }

    /// The snapshot's ReplicaSets, Deployments, StatefulSets and Jobs found by uid, indexed on
    /// the first call (the guard's verdict and the per-workload limits share it). The owner
    /// lists must not change after that call.
    pub fn owners(&self) -> &owners::OwnerIndex {
        self.owners.get_or_init(|| owners::OwnerIndex::build(self))
    }

    /// Ids of every pod with an owner reference to `owner_uid`, those evicted in this cycle
    /// included.
    pub fn pods_owned_by_at_start(&self, owner_uid: &str) -> &[PodId] {
        self.index.owned_by(owner_uid)
    }

    /// The namespaces that hold pods (evicted or not), in no particular order.
    pub fn pod_namespaces(&self) -> impl Iterator<Item = &str> + '_ {
        self.index.namespaces.keys().map(|ns| &ns[..])
    }

    /// Ids of the pods with an owner reference to `owner_uid` (not evicted in this cycle).
    pub fn pods_owned_by(&self, owner_uid: &str) -> impl Iterator<Item = PodId> + '_ {
        self.index
            .owned_by(owner_uid)
            .iter()
            .copied()
            .filter(|&p| !self.evicted[p as usize])
    }

    /// The pod's parts class: pods with one class have the same owner references, images and
    /// namespace (they share them), so what a plugin derives from those alone can be computed
    /// once per class. Classes are dense, `0..`[`Self::parts_classes`].
    pub fn parts_class(&self, pod: PodId) -> u32 {
        self.index.parts_class[pod as usize]
    }

    /// How many parts classes there are (see [`Self::parts_class`]).
    pub fn parts_classes(&self) -> usize {
        self.index.parts_classes as usize
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
        // Rebuilt on first use, as in a new snapshot: a repeated cycle (the benches) pays for
        // it as each cycle of `run` does.
        self.owners.take();
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

    /// Requests and pod count of the non-terminal pods on `node` from their specs
    /// ([`Pod::requests`], as the utilization plugins count), cached until a pod on the node is
    /// marked evicted.
    pub fn node_usage(&self, node: NodeId) -> std::borrow::Cow<'_, NodeUsage> {
        match self.usage.get(node as usize) {
            Some(cell) => {
                std::borrow::Cow::Borrowed(&cell.get_or_init(|| self.compute_usage(node)).spec)
            }
            // Nodes added after the snapshot was built are not cached.
            None => std::borrow::Cow::Owned(self.compute_usage(node).spec),
        }
    }

    /// [`Self::node_usage`] as kube-scheduler counts it ([`Pod::fit_requests`]: in-place resizes
    /// count at the larger of spec and status), for NodeResourcesFit and capacity checks.
    pub fn node_fit_usage(&self, node: NodeId) -> std::borrow::Cow<'_, NodeUsage> {
        match self.usage.get(node as usize) {
            Some(cell) => {
                let u = cell.get_or_init(|| self.compute_usage(node));
                std::borrow::Cow::Borrowed(u.fit.as_deref().unwrap_or(&u.spec))
            }
            None => {
                let u = self.compute_usage(node);
                std::borrow::Cow::Owned(u.fit.map_or(u.spec, |f| *f))
            }
        }
    }

    /// Ids of the non-terminal (not Succeeded/Failed) pods on `node`, not evicted in this cycle.
    pub fn active_pods_on_node(&self, node: NodeId) -> impl Iterator<Item = PodId> + '_ {
        self.pods_on_node(node)
            .filter(|&p| !self.pod(p).is_terminal())
    }

    fn compute_usage(&self, node: NodeId) -> Usages {
        let mut spec = NodeUsage::default();
        let mut fit: Option<Box<NodeUsage>> = None;
        for p in self.active_pods_on_node(node) {
            let pod = self.pod(p);
            if pod.resized_requests().is_some() && fit.is_none() {
                // The first resized pod: the pods before it count the same in both views.
                fit = Some(Box::new(spec.clone()));
            }
            spec.add(&pod.requests);
            if let Some(f) = fit.as_mut() {
                f.add(pod.fit_requests());
            }
        }
        Usages { spec, fit }
    }
}

/// The big lists of a snapshot, which a live cluster state shares with it.
#[derive(Default)]
pub struct SharedParts {
    /// Nodes, in node id order.
    pub nodes: SharedList<Node>,
    /// Pods, in pod id order.
    pub pods: SharedList<Arc<Pod>>,
    /// PodDisruptionBudgets.
    pub pdbs: SharedList<Arc<PodDisruptionBudget>>,
    /// ReplicaSet facts.
    pub replica_sets: SharedList<Arc<ReplicaSetFacts>>,
    /// Deployment facts.
    pub deployments: SharedList<Arc<DeploymentFacts>>,
}

#[cfg(test)]
mod tests {
    use crate::testing::synthetic_snapshot;

    /// Prefetching is only a hint: the ids come back as given, in order (ids of no pod too), and
    /// a node's pods are its indexed pods less the evicted ones.
    #[test]
    fn prefetched_ids_and_a_nodes_pods_are_unchanged() {
        let mut snap = synthetic_snapshot(20, 600, 3);
        let ids: Vec<u32> = (0..snap.pods.len() as u32)
            .rev()
            .chain([u32::MAX, 7])
            .collect();
        assert_eq!(snap.prefetched(&ids).collect::<Vec<_>>(), ids);
        assert_eq!(snap.prefetched(&[]).count(), 0);
        let node = snap.pod(0).node.expect("the first pod is on a node");
        let all = snap.index.on_node(node).to_vec();
        assert!(all.len() > 5, "{}", all.len());
        assert_eq!(snap.pods_on_node(node).collect::<Vec<_>>(), all);
        snap.mark_evicted(all[1]);
        snap.mark_evicted(all[4]);
        let kept: Vec<u32> = all
            .iter()
            .copied()
            .filter(|&p| p != all[1] && p != all[4])
            .collect();
        assert_eq!(snap.pods_on_node(node).collect::<Vec<_>>(), kept);
    }
}
