//! The cluster as the scheduler will see it during a cycle: per node, the requests of the pods on it
//! (actual, and with kube-scheduler's non-zero defaults for scoring) and its pod count; which pods
//! were evicted this cycle; where their replacements were predicted to land; and per-node counts
//! of the pods a label selector picks, kept up to date incrementally (built once per selector,
//! then adjusted on every eviction and placement — never by rescanning every pod per prediction).
//!
//! An evicted pod terminates on its node while its replacement is scheduled: the ReplicaSet
//! controller creates the replacement as soon as the pod has a `deletionTimestamp`, and the pod is
//! gone only once the kubelet has stopped its containers (up to its grace period, 30 s by
//! default). kube-scheduler keeps such a pod in its node's `NodeInfo` until then, so its requests,
//! its pod slot and its host ports still count on its node — for its own replacement and for those
//! of the pods evicted after it in the cycle; only PodTopologySpread skips terminating pods
//! (`podtopologyspread/common.go`, 1.34 and 1.37 alike), so the evicted pod leaves the selector
//! counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube_core::Selector;
use rustc_hash::{FxHashMap, FxHashSet};

use super::matcher::{Matcher, MatcherIndex, Namespaces, PodIndex};
use crate::snapshot::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

/// A resource name resolved once (per profile or per prediction), so reading it from a node's or
/// a pod's [`Resources`] is a field access, not a comparison of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResKey<'a> {
    /// `cpu` (millicores).
    Cpu,
    /// `memory`.
    Memory,
    /// `ephemeral-storage`.
    Ephemeral,
    /// `pods`.
    Pods,
    /// Any other (extended) resource, by name.
    Scalar(&'a str),
}

impl<'a> ResKey<'a> {
    /// The key of `name`.
    pub fn of(name: &'a str) -> Self {
        match name {
            CPU => ResKey::Cpu,
            MEMORY => ResKey::Memory,
            EPHEMERAL_STORAGE => ResKey::Ephemeral,
            PODS => ResKey::Pods,
            other => ResKey::Scalar(other),
        }
    }

    /// The amount in `r` (as [`Resources::get`] of the name).
    #[inline]
    pub fn get(self, r: &Resources) -> i64 {
        match self {
            ResKey::Cpu => r.cpu_milli,
            ResKey::Memory => r.memory,
            ResKey::Ephemeral => r.ephemeral_storage,
            ResKey::Pods => r.pods,
            ResKey::Scalar(name) => r.get(name),
        }
    }
}

/// What one node carries.
#[derive(Debug, Clone, Default)]
pub struct NodeLoad {
    /// Sum of the pods' requests.
    pub requested: Resources,
    /// Sum of the pods' CPU requests with the non-zero default (millicores).
    pub nonzero_cpu: i64,
    /// Sum of the pods' memory requests with the non-zero default.
    pub nonzero_memory: i64,
    /// Pods on the node.
    pub pods: i64,
}

/// A pod's (CPU, memory) with kube-scheduler's non-zero defaults.
pub fn nonzero(p: &Pod) -> (i64, i64) {
    p.requests.nonzero_cpu_memory()
}

impl NodeLoad {
    /// A pod with `requests` comes: the pod on its node counts at [`Pod::fit_requests`] (as
    /// kube-scheduler, resize-aware), a replacement at [`Pod::requests`] (a new pod from the spec).
    fn add(&mut self, requests: &Resources) {
        self.requested.add(requests);
        let (c, m) = requests.nonzero_cpu_memory();
        self.nonzero_cpu += c;
        self.nonzero_memory += m;
        self.pods += 1;
    }
}

/// One label map and the pods sharing it.
type LabelGroup = (Arc<BTreeMap<String, String>>, Vec<PodId>);

/// A namespace's pods (at the cycle's start) grouped by their shared label map: a selector is
/// matched once per group, not once per pod; and per label `key=value`, the groups carrying it.
#[derive(Default)]
struct LabelGroups {
    groups: Vec<LabelGroup>,
    /// Per label `key=value`, by its hash (no strings copied), the groups carrying it (or, on a
    /// hash collision, another label: [`LabelGroups::candidates`] checks).
    by_label: FxHashMap<u64, Vec<usize>>,
}

/// The filing hash of a label `key=value`.
fn label_hash(key: &str, value: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    (key, value).hash(&mut h);
    h.finish()
}

impl LabelGroups {
    /// Groups `namespace`'s pods by label map (pods of one owner share theirs; equal maps that are
    /// not shared land in separate groups, which only costs a match more).
    fn new(snapshot: &Snapshot, namespace: &str) -> Self {
        let mut at: FxHashMap<*const BTreeMap<String, String>, usize> = FxHashMap::default();
        let mut g = LabelGroups::default();
        for pod in snapshot.prefetched(snapshot.pods_in_namespace_at_start(namespace)) {
            let labels = &snapshot.pod(pod).labels;
            let i = *at.entry(Arc::as_ptr(labels)).or_insert_with(|| {
                g.groups.push((labels.clone(), Vec::new()));
                g.groups.len() - 1
            });
            if let Some((_, pods)) = g.groups.get_mut(i) {
                pods.push(pod);
            }
        }
        for (i, (labels, _)) in g.groups.iter().enumerate() {
            for (k, v) in labels.iter() {
                g.by_label.entry(label_hash(k, v)).or_default().push(i);
            }
        }
        g
    }

    /// The groups `selector` may pick: with an `Equal` or `In` requirement, only the groups
    /// carrying one of its values (every group it picks does); otherwise all.
    fn candidates(&self, selector: Option<&Selector>) -> Vec<usize> {
        match selector.and_then(super::matcher::pin) {
            // A label map has one value per key: the values' groups are disjoint.
            Some((k, vs)) => {
                let k = k.as_str();
                vs.iter()
                    .flat_map(|v| {
                        self.by_label
                            .get(&label_hash(k, v))
                            .into_iter()
                            .flatten()
                            .copied()
                            .filter(move |&i| {
                                self.groups
                                    .get(i)
                                    .is_some_and(|(labels, _)| labels.get(k) == Some(v))
                            })
                    })
                    .collect()
            }
            None => (0..self.groups.len()).collect(),
        }
    }
}

/// A change of a pod in the selector counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shift {
    /// A replacement comes to the node.
    Comes,
    /// An evicted pod starts terminating on its node.
    Terminates,
    /// An eviction that did not happen: the pod stays as it was.
    Stays,
}

/// The per-cycle state the predictions read and update.
pub struct ClusterState {
    /// Per node, what it carries.
    pub loads: Vec<NodeLoad>,
    /// Pods that left this cycle.
    removed: FxHashSet<PodId>,
    /// Per node, the pods whose replacements were predicted there (the pod stands for its
    /// replacement: same spec).
    pub placed: Vec<Vec<PodId>>,
    /// Every predicted replacement (the pod standing for it) and its node, filed by label.
    placements: PodIndex<(PodId, NodeId)>,
    /// Per controller uid, the nodes its predicted replacements landed on.
    placed_by_owner: FxHashMap<String, Vec<NodeId>>,
    /// Per selector: the matcher and its per-node counts.
    counts: Vec<(Matcher, Vec<u32>)>,
    /// Selector key → index in `counts`.
    count_at: FxHashMap<String, usize>,
    /// The selectors filed by what they may pick (a moving pod changes only their counts).
    count_index: MatcherIndex,
    /// Per controller uid: its pods per node (system default spreading).
    owners: FxHashMap<Arc<str>, Vec<u32>>,
    /// Per namespace, its pods grouped by label map (built on first use).
    groups: FxHashMap<String, LabelGroups>,
    /// Every node whose load changed, in order (what per-shape memories catch up with).
    changed: Vec<NodeId>,
}

impl ClusterState {
    /// The state of `snapshot` as it is (pods it marks evicted are gone), minus `moved`.
    pub fn new(snapshot: &Snapshot, moved: &FxHashSet<PodId>) -> Self {
        let n = snapshot.nodes.len();
        // The snapshot's node usage (kept across the plugins of a cycle), plus the moved pods it
        // no longer counts: they terminate on their nodes.
        let mut loads: Vec<NodeLoad> = (0..n as NodeId)
            .map(|node| {
                let u = snapshot.node_fit_usage(node);
                NodeLoad {
                    requested: u.requested.clone(),
                    nonzero_cpu: u.nonzero_cpu,
                    nonzero_memory: u.nonzero_memory,
                    pods: u.pods,
                }
            })
            .collect();
        for &pod in moved {
            let p = snapshot.pod(pod);
            if !p.is_terminal()
                && snapshot.is_evicted(pod)
                && let Some(load) = p.node.and_then(|n| loads.get_mut(n as usize))
            {
                load.add(p.fit_requests());
            }
        }
        ClusterState {
            loads,
            removed: moved.clone(),
            placed: vec![Vec::new(); n],
            placements: PodIndex::default(),
            placed_by_owner: FxHashMap::default(),
            counts: Vec::new(),
            count_at: FxHashMap::default(),
            count_index: MatcherIndex::default(),
            owners: FxHashMap::default(),
            groups: FxHashMap::default(),
            changed: Vec::new(),
        }
    }

    /// The nodes whose load changed since the state was made, in order (with repeats).
    pub fn changed(&self) -> &[NodeId] {
        &self.changed
    }

    /// Whether `pod` counts as on its node for the selector counts (not terminal, not evicted
    /// this cycle).
    pub fn present(&self, snapshot: &Snapshot, pod: PodId) -> bool {
        let p = snapshot.pod(pod);
        p.node.is_some()
            && !p.is_terminal()
            && !snapshot.is_evicted(pod)
            && !self.removed.contains(&pod)
    }

    /// Whether `pod` is in its node's `NodeInfo` for kube-scheduler: present, or evicted this
    /// cycle and still terminating there (its requests and host ports still count).
    pub fn holds_node(&self, snapshot: &Snapshot, pod: PodId) -> bool {
        let p = snapshot.pod(pod);
        p.node.is_some()
            && !p.is_terminal()
            && (!snapshot.is_evicted(pod) || self.removed.contains(&pod))
    }

    /// Every pod on `node` now: the snapshot's still there, then the predicted replacements.
    pub fn pods_on<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        node: NodeId,
    ) -> impl Iterator<Item = PodId> + 'a {
        snapshot
            .active_pods_on_node(node)
            .filter(move |p| !self.removed.contains(p))
            .chain(
                self.placed
                    .get(node as usize)
                    .into_iter()
                    .flatten()
                    .copied(),
            )
    }

    /// `pod` is evicted (or tentatively, while its replacement is predicted): it terminates on its
    /// node, whose load keeps it, and leaves the counts that skip terminating pods.
    pub fn remove(&mut self, snapshot: &Snapshot, pod: PodId) {
        let p = snapshot.pod(pod);
        let Some(node) = p.node else { return };
        if p.is_terminal() || !self.removed.insert(pod) {
            return;
        }
        self.shift_counts(snapshot, pod, node, Shift::Terminates);
    }

    /// Undoes [`ClusterState::remove`] (the eviction did not happen).
    pub fn restore(&mut self, snapshot: &Snapshot, pod: PodId) {
        let p = snapshot.pod(pod);
        let Some(node) = p.node else { return };
        if !self.removed.remove(&pod) {
            return;
        }
        self.shift_counts(snapshot, pod, node, Shift::Stays);
    }

    /// `pod`'s replacement lands on `node`.
    pub fn place(&mut self, snapshot: &Snapshot, pod: PodId, node: NodeId) {
        if let Some(list) = self.placed.get_mut(node as usize) {
            list.push(pod);
            let p = snapshot.pod(pod);
            self.placements.add(&p.namespace, &p.labels, (pod, node));
            if let Some(owner) = snapshot.pod(pod).controller() {
                self.placed_by_owner
                    .entry(owner.uid.to_string())
                    .or_default()
                    .push(node);
            }
            if let Some(load) = self.loads.get_mut(node as usize) {
                load.add(&p.requests);
                self.changed.push(node);
            }
            self.shift_counts(snapshot, pod, node, Shift::Comes);
        }
    }

    /// `pod` (or its replacement) comes to `node`, or starts or stops terminating there, in the
    /// selector counts: a terminating pod still counts for the matchers that count terminating
    /// pods (InterPodAffinity's), not for the others (spreading).
    fn shift_counts(&mut self, snapshot: &Snapshot, pod: PodId, node: NodeId, shift: Shift) {
        let p = snapshot.pod(pod);
        let i = node as usize;
        let add = shift != Shift::Terminates;
        let step = |c: &mut u32| {
            *c = if add {
                c.saturating_add(1)
            } else {
                c.saturating_sub(1)
            }
        };
        for at in self.count_index.candidates(&p.namespace, &p.labels) {
            if let Some((m, counts)) = self.counts.get_mut(at)
                && (shift == Shift::Comes || !m.terminating)
                && m.picks(snapshot, p)
                && let Some(c) = counts.get_mut(i)
            {
                step(c);
            }
        }
        if let Some(owner) = p.controller()
            && let Some(counts) = self.owners.get_mut(owner.uid.as_str())
            && let Some(c) = counts.get_mut(i)
        {
            step(c);
        }
    }

    /// Per node, how many pods `m` picks (built on first use from the namespaces it looks at).
    pub fn counts(&mut self, snapshot: &Snapshot, m: &Matcher) -> &[u32] {
        let at = self.count_slot(snapshot, m);
        self.counts_at(at)
    }

    /// The per-node counts [`ClusterState::count_slot`] built.
    pub fn counts_at(&self, at: usize) -> &[u32] {
        self.counts
            .get(at)
            .map(|(_, c)| c.as_slice())
            .unwrap_or(&[])
    }

    /// Where the per-node counts of `m` are kept (built on first use), for reading several
    /// matchers' counts at once with [`ClusterState::counts_at`].
    pub fn count_slot(&mut self, snapshot: &Snapshot, m: &Matcher) -> usize {
        let key = m.key();
        if let Some(&at) = self.count_at.get(&key) {
            at
        } else {
            let mut counts = vec![0u32; snapshot.nodes.len()];
            let namespaces: Vec<String> = match &m.namespaces {
                Namespaces::Listed(l) => l.clone(),
                Namespaces::Selected(..) => snapshot
                    .pod_namespaces()
                    .filter(|ns| m.namespace_ok(snapshot, ns))
                    .map(str::to_string)
                    .collect(),
            };
            for ns in &namespaces {
                if !self.groups.contains_key(ns) {
                    self.groups
                        .insert(ns.clone(), LabelGroups::new(snapshot, ns));
                }
                let Some(groups) = self.groups.get(ns) else {
                    continue;
                };
                let candidates = groups.candidates(m.selector.as_ref());
                for (labels, pods) in candidates.iter().filter_map(|&i| groups.groups.get(i)) {
                    if !m.picks_labels(snapshot, ns, labels) {
                        continue;
                    }
                    for &pod in pods {
                        let p = snapshot.pod(pod);
                        let counted = if m.terminating {
                            self.holds_node(snapshot, pod)
                        } else {
                            !p.is_terminating() && self.present(snapshot, pod)
                        };
                        if counted
                            && let Some(n) = p.node
                            && let Some(c) = counts.get_mut(n as usize)
                        {
                            *c += 1;
                        }
                    }
                }
            }
            for (pod, node) in self.placements.candidates(m) {
                if m.picks(snapshot, snapshot.pod(pod))
                    && let Some(c) = counts.get_mut(node as usize)
                {
                    *c += 1;
                }
            }
            let at = self.counts.len();
            self.count_index.add(at, m);
            self.counts.push((m.clone(), counts));
            self.count_at.insert(key, at);
            at
        }
    }

    /// Per node, how many pods of the controller `uid` there are (built on first use).
    pub fn owner_counts(&mut self, snapshot: &Snapshot, uid: &str) -> &[u32] {
        if !self.owners.contains_key(uid) {
            let mut counts = vec![0u32; snapshot.nodes.len()];
            for pod in snapshot.pods_owned_by(uid) {
                if self.present(snapshot, pod)
                    && !snapshot.pod(pod).is_terminating()
                    && let Some(n) = snapshot.pod(pod).node
                    && let Some(c) = counts.get_mut(n as usize)
                {
                    *c += 1;
                }
            }
            for &node in self.placed_by_owner.get(uid).into_iter().flatten() {
                if let Some(c) = counts.get_mut(node as usize) {
                    *c += 1;
                }
            }
            self.owners.insert(Arc::from(uid), counts);
        }
        self.owners.get(uid).map(Vec::as_slice).unwrap_or(&[])
    }
}
