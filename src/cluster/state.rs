//! The one cluster state `run` keeps: every watched object in the engine's compact form (the
//! snapshot's node, pod and workload parts, with labels, owners and statuses shared between the
//! pods of one owner), kept current by list+watch ([`super::watch`]), and turned into the
//! engine's [`Snapshot`] for a cycle.
//!
//! Objects are kept in key order (`namespace/name`, the order kube-apiserver lists them in, so a
//! cycle sees objects in the same order as `plan` on a `kubectl get -o json` of the same
//! cluster). The big lists — pods ([`super::pod_store`]), nodes, ReplicaSets, Deployments and
//! PodDisruptionBudgets — are kept ready in the snapshot's own form and shared with it
//! ([`SharedList`]): taking a snapshot copies no pod and no pointer per pod, only merges the
//! watch events since the last one. A pod changed by a watch event while a cycle runs gets a new
//! `Arc`; the cycle keeps the old one. What a snapshot still builds per cycle are its pod
//! indexes (one scan over the pods, in parts on several threads, see `snapshot::index`).
//!
//! Pods converted off the lock (a list's batches, each with a builder of its own) are given the
//! state's namespace `Arc`s as they are put in, so every pod of a namespace shares one — the
//! pods that watch events bring later get the state's, and the snapshot's parts classes and
//! the plugins' per-owner work depend on pods of one owner sharing their parts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use tokio::sync::{mpsc, watch};

use super::kinds::{self, Kind};
use super::pod_store::PodStore;
use kube_descheduler_engine::snapshot::consistency::{self, Inconsistency};
use kube_descheduler_engine::snapshot::model::HpaTarget;
use kube_descheduler_engine::snapshot::shared::SharedList;
use kube_descheduler_engine::snapshot::{
    Node, NodeId, ObjectKey, Parts, PvcInfo, SharedParts, Snapshot, SnapshotBuilder,
};
use kube_descheduler_engine::workload::{DeploymentFacts, ReplicaSetFacts};
use put::put;

/// Objects of one kind by key, with their list in key order kept for snapshots to share
/// (rebuilt on the first snapshot after a change: a list of pointers, no object is copied).
struct Kept<T> {
    map: BTreeMap<String, Arc<T>>,
    list: Option<SharedList<Arc<T>>>,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept {
            map: BTreeMap::new(),
            list: None,
        }
    }
}

impl<T> Kept<T> {
    fn insert(&mut self, key: String, value: Arc<T>) {
        self.map.insert(key, value);
        self.list = None;
    }

    fn remove(&mut self, key: &str) {
        if self.map.remove(key).is_some() {
            self.list = None;
        }
    }

    fn retain(&mut self, keep: impl Fn(&String) -> bool) {
        let before = self.map.len();
        self.map.retain(|k, _| keep(k));
        if self.map.len() != before {
            self.list = None;
        }
    }

    fn shared(&mut self) -> SharedList<Arc<T>> {
        self.list
            .get_or_insert_with(|| self.map.values().cloned().collect())
            .clone()
    }
}

/// The nodes as a snapshot sees them: in name order (a node's id is its position), with their
/// inconsistencies resolved once.
struct NodeView {
    list: SharedList<Node>,
    ids: rustc_hash::FxHashMap<String, NodeId>,
    issues: Vec<Inconsistency>,
}

#[derive(Default)]
struct Inner {
    /// The converter: keeps interned namespaces and the parts shared between pods of an owner.
    conv: SnapshotBuilder,
    nodes: BTreeMap<String, Node>,
    /// Built from `nodes` on the first use after a node changed.
    node_view: Option<NodeView>,
    /// Nodes were added or removed, or pods appended without their node id, since the pods'
    /// node ids were last set.
    renumber: bool,
    pods: PodStore,
    /// Namespace labels and the rule B opt-in annotation.
    namespaces: BTreeMap<String, (BTreeMap<String, String>, Option<bool>)>,
    priority_classes: BTreeMap<String, i32>,
    pdbs: Kept<PodDisruptionBudget>,
    pvcs: BTreeMap<String, (ObjectKey, PvcInfo)>,
    replica_sets: Kept<ReplicaSetFacts>,
    deployments: Kept<DeploymentFacts>,
    stateful_sets: BTreeMap<String, StatefulSet>,
    jobs: BTreeMap<String, Job>,
    /// Autoscalers of Deployments (others are not kept).
    hpas: BTreeMap<String, HpaTarget>,
    /// Objects that could not be converted, by kind and key (dropped when fixed or deleted).
    rejected: BTreeMap<(usize, String), String>,
    /// Keys seen by a list in progress, per kind (the others are removed when it ends); `None`
    /// when the kind held nothing as the list began (nothing to remove, so keys are not kept).
    relisting: HashMap<Kind, Option<HashSet<String>>>,
    synced: [bool; Kind::ALL.len()],
    lists: [u64; Kind::ALL.len()],
    last_error: [Option<String>; Kind::ALL.len()],
    /// Kinds whose list or watch failed or expired and has not been re-established.
    broken: [bool; Kind::ALL.len()],
}

fn in_sync(g: &Inner) -> bool {
    g.synced.iter().all(|s| *s) && !g.broken.iter().any(|b| *b)
}

impl Inner {
    /// The nodes as the next snapshot numbers them.
    fn node_view(&mut self) -> &NodeView {
        self.node_view.get_or_insert_with(|| {
            let mut nodes: Vec<Node> = self.nodes.values().cloned().collect();
            let issues = consistency::resolve_nodes(&mut nodes);
            let ids = nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.clone(), i as NodeId))
                .collect();
            NodeView {
                list: nodes.into(),
                ids,
                issues,
            }
        })
    }

    /// Merges the pod changes, with every pod's node id current.
    fn settle_pods(&mut self) {
        let renumber = std::mem::take(&mut self.renumber);
        self.node_view();
        let Inner {
            node_view, pods, ..
        } = self;
        let Some(view) = node_view.as_ref() else {
            return;
        };
        let node_id = |name: &str| view.ids.get(name).copied();
        if renumber {
            pods.renumber_nodes(node_id);
        } else {
            pods.merge(node_id);
        }
    }

    /// Whether any object of `kind` is held or was rejected.
    fn holds_any(&self, kind: Kind) -> bool {
        let held = match kind {
            Kind::Node => !self.nodes.is_empty(),
            Kind::Pod => !self.pods.is_empty(),
            Kind::Namespace => !self.namespaces.is_empty(),
            Kind::PodDisruptionBudget => !self.pdbs.map.is_empty(),
            Kind::PriorityClass => !self.priority_classes.is_empty(),
            Kind::PersistentVolumeClaim => !self.pvcs.is_empty(),
            Kind::ReplicaSet => !self.replica_sets.map.is_empty(),
            Kind::Deployment => !self.deployments.map.is_empty(),
            Kind::StatefulSet => !self.stateful_sets.is_empty(),
            Kind::Job => !self.jobs.is_empty(),
            Kind::HorizontalPodAutoscaler => !self.hpas.is_empty(),
        };
        held || self.rejects_any(kind)
    }

    /// Whether an object of `kind` is held as rejected.
    fn rejects_any(&self, kind: Kind) -> bool {
        let i = kind.index();
        self.rejected
            .range((i, String::new())..(i + 1, String::new()))
            .next()
            .is_some()
    }

    /// Whether the keys of converted objects of `kind` are needed: to record them for a relist
    /// in progress, or to clear their earlier rejection.
    fn wants_keys(&self, kind: Kind) -> bool {
        self.relisting.get(&kind).is_some_and(Option::is_some) || self.rejects_any(kind)
    }

    fn insert_node(&mut self, node: Node) {
        match self.nodes.get(&node.name) {
            Some(old) if *old == node => return,
            Some(_) => {}
            None => self.renumber = true,
        }
        self.node_view = None;
        self.nodes.insert(node.name.clone(), node);
    }

    fn remove_node(&mut self, name: &str) {
        if self.nodes.remove(name).is_some() {
            self.node_view = None;
            self.renumber = true;
        }
    }
}

/// Why a node change may make a rebalance worthwhile (`--cycle-on-events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeChange {
    /// A Ready node appeared.
    Joined,
    /// A node's Ready condition became True.
    BecameReady,
    /// `spec.unschedulable` was cleared.
    Uncordoned,
    /// A NoSchedule or NoExecute taint was removed.
    TaintRemoved,
}

impl NodeChange {
    /// A short name, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeChange::Joined => "node-joined",
            NodeChange::BecameReady => "node-ready",
            NodeChange::Uncordoned => "node-uncordoned",
            NodeChange::TaintRemoved => "node-taint-removed",
        }
    }

    /// What changed between `old` (absent: a new node) and `new`, if it is one of the moments a
    /// cycle is worth running.
    pub fn between(old: Option<&Node>, new: &Node) -> Option<NodeChange> {
        let Some(old) = old else {
            return new.ready.then_some(NodeChange::Joined);
        };
        let repelling = |n: &Node| -> Vec<(String, String)> {
            n.taints
                .iter()
                .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                .map(|t| (t.key.clone(), t.effect.clone()))
                .collect()
        };
        if !old.ready && new.ready {
            Some(NodeChange::BecameReady)
        } else if old.unschedulable && !new.unschedulable {
            Some(NodeChange::Uncordoned)
        } else if repelling(old).iter().any(|t| !repelling(new).contains(t)) {
            Some(NodeChange::TaintRemoved)
        } else {
            None
        }
    }
}

/// Something shown every pod the watches add or change (`run`'s return detector).
pub trait PodObserver: Send + Sync {
    /// `pod` was added or changed.
    fn pod_seen(&self, pod: &kube_descheduler_engine::snapshot::Pod);
}

/// The watched cluster, in compact form. Shared between the watch tasks and the cycles.
pub struct ClusterState {
    inner: Mutex<Inner>,
    synced_tx: watch::Sender<usize>,
    /// Whether every kind is synced and none is broken (what `/readyz` reports).
    in_sync_tx: watch::Sender<bool>,
    node_changes: Option<mpsc::Sender<NodeChange>>,
    /// Shown every pod added or changed ([`Self::watch_pods`]).
    pod_observer: std::sync::OnceLock<Arc<dyn PodObserver>>,
}

impl ClusterState {
    /// An empty state. With `node_changes`, the interesting node transitions seen after a kind's
    /// first list are sent there (never blocking: when one is already queued, the next is
    /// dropped — the cycle it asks for is already coming).
    pub fn new(node_changes: Option<mpsc::Sender<NodeChange>>) -> Self {
        ClusterState {
            inner: Mutex::new(Inner::default()),
            synced_tx: watch::channel(0).0,
            in_sync_tx: watch::channel(false).0,
            node_changes,
            pod_observer: std::sync::OnceLock::new(),
        }
    }

    /// Shows every pod added or changed from now on to `observer` (at most one).
    pub fn watch_pods(&self, observer: Arc<dyn PodObserver>) {
        let _ = self.pod_observer.set(observer);
    }

    fn observe_pods(&self, pods: &[Arc<kube_descheduler_engine::snapshot::Pod>]) {
        if let Some(r) = self.pod_observer.get() {
            for p in pods {
                r.pod_seen(p);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A list of `kind` begins: objects it does not return are removed when it ends.
    pub fn begin_list(&self, kind: Kind) {
        let mut g = self.lock();
        if kind == Kind::Pod {
            // Owners that are gone must not keep their shared parts. Forgotten before the list
            // (not after it): the listed pods then share their parts with each other and with
            // the pods that watch events bring later.
            g.conv.forget_shared();
        }
        let held = g.holds_any(kind);
        g.relisting.insert(kind, held.then(HashSet::new));
    }

    /// A list of `kind` completed: drops objects it did not return and marks the kind synced.
    pub fn end_list(&self, kind: Kind) {
        let mut guard = self.lock();
        let g = &mut *guard;
        // None: the kind held nothing when the list began, so every object is the list's.
        let seen = g.relisting.remove(&kind).flatten();
        let keep = |k: &String| seen.as_ref().is_none_or(|s| s.contains(k));
        match kind {
            _ if seen.is_none() => {}
            Kind::Node => {
                let before = g.nodes.len();
                g.nodes.retain(|k, _| keep(k));
                if g.nodes.len() != before {
                    g.node_view = None;
                    g.renumber = true;
                }
            }
            Kind::Pod => {
                g.settle_pods();
                g.pods
                    .retain(|k| seen.as_ref().is_none_or(|s| s.contains(k)));
            }
            Kind::Namespace => g.namespaces.retain(|k, _| keep(k)),
            Kind::PodDisruptionBudget => g.pdbs.retain(keep),
            Kind::PriorityClass => g.priority_classes.retain(|k, _| keep(k)),
            Kind::PersistentVolumeClaim => g.pvcs.retain(|k, _| keep(k)),
            Kind::ReplicaSet => g.replica_sets.retain(keep),
            Kind::Deployment => g.deployments.retain(keep),
            Kind::StatefulSet => g.stateful_sets.retain(|k, _| keep(k)),
            Kind::Job => g.jobs.retain(|k, _| keep(k)),
            Kind::HorizontalPodAutoscaler => g.hpas.retain(|k, _| keep(k)),
        }
        let i = kind.index();
        if let Some(seen) = &seen {
            g.rejected
                .retain(|(k, key), _| *k != i || seen.contains(key));
        }
        g.last_error[i] = None;
        g.broken[i] = false;
        g.lists[i] += 1;
        if kind == Kind::Node {
            // Numbers the nodes now, so that pods listed from here on take their node ids as
            // they are appended.
            g.settle_pods();
        }
        let first = !g.synced[i];
        g.synced[i] = true;
        let n = g.synced.iter().filter(|s| **s).count();
        let in_sync = in_sync(g);
        // Sent under the lock: two kinds finishing at once must not publish their values in
        // the opposite order (a stale `false` after the last kind's `true` kept `/readyz` false).
        if first {
            self.synced_tx.send_replace(n);
        }
        self.in_sync_tx
            .send_if_modified(|v| std::mem::replace(v, in_sync) != in_sync);
        drop(guard);
    }

    /// Adds or replaces objects of `kind` given as JSON (list items, ADDED/MODIFIED events).
    /// Objects that cannot be converted are left out with a warning naming the field.
    pub fn upsert<'a>(&self, kind: Kind, raws: impl IntoIterator<Item = &'a str>) {
        let mut changes = Vec::new();
        let mut guard = self.lock();
        let g = &mut *guard;
        let notify = g.synced[Kind::Node.index()] && self.node_changes.is_some();
        let c = kinds::convert_all(kind, raws, &mut g.conv);
        self.observe_pods(&c.parts.pods);
        put(g, c, notify.then_some(&mut changes));
        drop(guard);
        self.send_changes(changes);
    }

    /// Adds or replaces objects converted off the lock ([`kinds::ConvertedBatch`], e.g. a
    /// list's batches converted in parallel), as [`Self::upsert`] would have; what their
    /// builder shares between objects (per-owner parts, namespaces) is taken over, so later
    /// events share it too.
    pub fn upsert_converted(&self, batch: kinds::ConvertedBatch) {
        let mut changes = Vec::new();
        let mut guard = self.lock();
        let g = &mut *guard;
        let notify = g.synced[Kind::Node.index()] && self.node_changes.is_some();
        g.conv.adopt_shared(batch.conv);
        let mut converted = batch.converted;
        // The batch interned its own namespace `Arc`s; pods that watch events bring later get
        // the state's, and the pods of one namespace must share one.
        for pod in &mut converted.parts.pods {
            g.conv.share_namespace(pod);
        }
        self.observe_pods(&converted.parts.pods);
        put(g, converted, notify.then_some(&mut changes));
        drop(guard);
        self.send_changes(changes);
    }

    fn send_changes(&self, changes: Vec<NodeChange>) {
        if let Some(tx) = &self.node_changes {
            for c in changes {
                tracing::debug!(change = c.as_str(), "node change");
                let _ = tx.try_send(c);
            }
        }
    }

    /// Removes the object of `kind` with state key `key` (a DELETED event).
    pub fn remove(&self, kind: Kind, key: &str) {
        let mut g = self.lock();
        g.rejected.remove(&(kind.index(), key.to_string()));
        match kind {
            Kind::Node => g.remove_node(key),
            Kind::Pod => {
                g.pods.remove(key);
                if g.pods.many_pending() {
                    g.settle_pods();
                }
            }
            Kind::Namespace => drop(g.namespaces.remove(key)),
            Kind::PodDisruptionBudget => g.pdbs.remove(key),
            Kind::PriorityClass => drop(g.priority_classes.remove(key)),
            Kind::PersistentVolumeClaim => drop(g.pvcs.remove(key)),
            Kind::ReplicaSet => g.replica_sets.remove(key),
            Kind::Deployment => g.deployments.remove(key),
            Kind::StatefulSet => drop(g.stateful_sets.remove(key)),
            Kind::Job => drop(g.jobs.remove(key)),
            Kind::HorizontalPodAutoscaler => drop(g.hpas.remove(key)),
        }
    }

    /// Records the last list/watch error of `kind` (named when the caches do not sync in time)
    /// and marks the kind broken until its watch or list is re-established.
    pub fn set_error(&self, kind: Kind, error: String) {
        self.lock().last_error[kind.index()] = Some(error);
        self.set_broken(kind, true);
    }

    /// `kind`'s resourceVersion expired (410 Gone): broken until the relist completes.
    pub fn expired(&self, kind: Kind) {
        self.set_broken(kind, true);
    }

    /// A watch of `kind` was accepted by the server: no longer broken.
    pub fn watch_established(&self, kind: Kind) {
        self.set_broken(kind, false);
    }

    fn set_broken(&self, kind: Kind, broken: bool) {
        let mut g = self.lock();
        if !broken {
            g.last_error[kind.index()] = None;
        }
        g.broken[kind.index()] = broken;
        let in_sync = in_sync(&g);
        // Under the lock, as in `end_list`.
        self.in_sync_tx
            .send_if_modified(|v| std::mem::replace(v, in_sync) != in_sync);
        drop(g);
    }

    /// Whether every kind has listed and no list or watch is broken: the state follows the API
    /// server. False from a failed or expired list/watch until it is re-established.
    pub fn in_sync(&self) -> bool {
        in_sync(&self.lock())
    }

    /// Notified whenever [`Self::in_sync`] changes.
    pub fn in_sync_rx(&self) -> watch::Receiver<bool> {
        self.in_sync_tx.subscribe()
    }

    /// Kinds whose first list has not completed, with their last error.
    pub fn unsynced(&self) -> Vec<(Kind, Option<String>)> {
        let g = self.lock();
        Kind::ALL
            .iter()
            .filter(|k| !g.synced[k.index()])
            .map(|k| (*k, g.last_error[k.index()].clone()))
            .collect()
    }

    /// Waits until every kind has completed its first list.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced_tx.subscribe();
        let _ = rx.wait_for(|n| *n >= Kind::ALL.len()).await;
    }

    /// How many lists of `kind` have completed (the first one, plus one per relist).
    pub fn lists_completed(&self, kind: Kind) -> u64 {
        self.lock().lists[kind.index()]
    }

    /// Numbers of nodes and pods held.
    pub fn counts(&self) -> (usize, usize) {
        let mut guard = self.lock();
        let g = &mut *guard;
        g.settle_pods();
        (g.nodes.len(), g.pods.len())
    }

    /// `Some(true)` when the pod sets its own termination grace period, `None` when unknown.
    pub fn pod_sets_grace(&self, namespace: &str, name: &str) -> Option<bool> {
        self.lock().pods.own_grace(&kinds::key(namespace, name))
    }

    /// The engine's snapshot of the current state (one consistent view, taken under the lock).
    /// The pods, nodes, ReplicaSets, Deployments and PDBs are shared with the state, not copied.
    pub fn snapshot(&self) -> Snapshot {
        let (shared, parts, node_issues, unique_uids) = {
            let mut guard = self.lock();
            let g = &mut *guard;
            g.settle_pods();
            let (nodes, node_issues) = match g.node_view.as_ref() {
                Some(v) => (v.list.clone(), v.issues.clone()),
                None => Default::default(),
            };
            // Owners whose pods are all gone do not keep their shared parts.
            g.conv.forget_unused_shared();
            let shared = SharedParts {
                nodes,
                pods: g.pods.shared(),
                pdbs: g.pdbs.shared(),
                replica_sets: g.replica_sets.shared(),
                deployments: g.deployments.shared(),
            };
            let parts = Parts {
                namespaces: g
                    .namespaces
                    .iter()
                    .map(|(k, (labels, _))| (k.clone(), labels.clone()))
                    .collect(),
                namespace_pdb_surge: g
                    .namespaces
                    .iter()
                    .filter_map(|(k, (_, on))| on.map(|on| (k.clone(), on)))
                    .collect(),
                hpas: g.hpas.values().cloned().collect(),
                priority_classes: g
                    .priority_classes
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
                stateful_sets: g.stateful_sets.values().cloned().collect(),
                jobs: g.jobs.values().cloned().collect(),
                pvcs: g.pvcs.values().cloned().collect(),
                warnings: g.rejected.values().cloned().collect(),
                ..Default::default()
            };
            (shared, parts, node_issues, g.pods.unique_uids())
        };
        Snapshot::assemble_shared(shared, parts, node_issues, unique_uids)
    }
}

/// The one line `run` (and `plan --kubeconfig`) exits with when the cluster state did not sync in
/// time: the server, the timeout and the `flag` that set it, the kinds still missing, and the last
/// error seen (on one line even when the error spans several).
pub fn sync_failure(
    server: &str,
    timeout: std::time::Duration,
    flag: &str,
    state: &ClusterState,
) -> String {
    let missing = state.unsynced();
    let kinds: Vec<&str> = missing.iter().map(|(k, _)| k.resource()).collect();
    let error = missing
        .iter()
        .find_map(|(_, e)| e.clone())
        .map(|e| format!("; last error: {}", e.replace(['\r', '\n'], " ")))
        .unwrap_or_default();
    format!(
        "cannot list the cluster from the API server {server} within {}s ({flag}): {} not listed{error}",
        timeout.as_secs_f64(),
        kinds.join(", ")
    )
}

mod put;

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
