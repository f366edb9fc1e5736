//! The pod table one guest call sees, built only as far as the guest asks.
//!
//! The table's order is part of the ABI: the live pods of the given nodes, node by node, each
//! node's pods in the snapshot's order, then the live pods on no given node (pods evicted earlier
//! in the cycle are absent). The pods of given node `j` are therefore the indexes
//! `offset(j)..offset(j) + count(j)`. A guest that reads only some nodes' pods (`node_pod_*`)
//! makes the host build only the offsets (one pass over the nodes' pod lists, no pod read) and
//! those nodes' pod lists; the whole table (pod ids, node and namespace indexes, namespaces) is
//! built the first time the guest asks for something that needs it (`pod_count`, `pod_column`,
//! a namespace index, a pod on no given node).

use std::cell::OnceCell;
use std::sync::Arc;

use crate::snapshot::{NodeId, PodId, Snapshot};

/// The whole table: every pod with its node and namespace indexes.
#[derive(Default)]
pub struct FullTable {
    /// The table's pods (index = pod index in the ABI).
    pub pods: Vec<PodId>,
    /// Node index of each pod, -1 when on none of the call's nodes.
    pub pod_node: Vec<i32>,
    /// Namespace index of each pod.
    pub pod_namespace: Vec<i32>,
    /// The namespaces (index = namespace index in the ABI).
    pub namespaces: Vec<Arc<str>>,
}

/// The pods and nodes one call sees, built lazily (see the module's documentation).
pub struct CallTable {
    /// The call's nodes (index = node index in the ABI).
    pub nodes: Vec<NodeId>,
    /// Table index of each node's first pod, then the number of pods on given nodes.
    offsets: OnceCell<Vec<u32>>,
    /// Each given node's live pods, built when first asked for.
    node_pods: Vec<OnceCell<Vec<PodId>>>,
    full: OnceCell<FullTable>,
}

static EMPTY: FullTable = FullTable {
    pods: Vec::new(),
    pod_node: Vec::new(),
    pod_namespace: Vec::new(),
    namespaces: Vec::new(),
};

impl CallTable {
    /// A table without nodes or pods (the load-time checks).
    pub fn build_empty() -> Self {
        Self::new(&[])
    }

    /// The table for `nodes`; nothing is read from the snapshot until asked.
    pub fn new(nodes: &[NodeId]) -> Self {
        CallTable {
            nodes: nodes.to_vec(),
            offsets: OnceCell::new(),
            node_pods: (0..nodes.len()).map(|_| OnceCell::new()).collect(),
            full: OnceCell::new(),
        }
    }

    /// The whole table (empty without a snapshot).
    pub fn full(&self, s: Option<&Snapshot>) -> &FullTable {
        match s {
            Some(s) => self.full.get_or_init(|| build_full(s, &self.nodes)),
            None => &EMPTY,
        }
    }

    /// Whether the whole table has been built.
    pub fn is_full_built(&self) -> bool {
        self.full.get().is_some()
    }

    /// Table index of each given node's first pod, then the number of pods on given nodes
    /// (every entry 0 without a snapshot). Counts the live pods of each node's list without
    /// reading any pod.
    pub fn offsets(&self, s: Option<&Snapshot>) -> &[u32] {
        self.offsets.get_or_init(|| {
            let mut out = Vec::with_capacity(self.nodes.len() + 1);
            let mut at = 0u32;
            out.push(0);
            for &n in &self.nodes {
                if let Some(s) = s {
                    let live = s
                        .pods_on_node_at_start(n)
                        .iter()
                        .filter(|&&p| !s.is_evicted(p))
                        .count();
                    at = at.saturating_add(u32::try_from(live).unwrap_or(u32::MAX));
                }
                out.push(at);
            }
            out
        })
    }

    /// The number of pods on the given nodes (the table's first part).
    pub fn on_given_nodes(&self, s: Option<&Snapshot>) -> usize {
        self.offsets(s).last().map_or(0, |&n| n as usize)
    }

    /// The live pods of given node `j` in table order, or None when `j` is not a node index.
    pub fn node_pods(&self, s: Option<&Snapshot>, j: usize) -> Option<&[PodId]> {
        let cell = self.node_pods.get(j)?;
        Some(cell.get_or_init(|| match s {
            Some(s) => s.pods_on_node(self.nodes[j]).collect(),
            None => Vec::new(),
        }))
    }

    /// The node index of table pod `index` when it is on a given node (no whole table needed).
    pub fn given_node_of(&self, s: Option<&Snapshot>, index: usize) -> Option<usize> {
        let offsets = self.offsets(s);
        if index >= self.on_given_nodes(s) {
            return None;
        }
        // The last node whose first index is at or before `index` (nodes without pods share
        // their offset with the next node, which holds the pod).
        Some(offsets.partition_point(|&o| o as usize <= index) - 1)
    }

    /// The pod id of table index `index`, or None when out of range. Builds the whole table only
    /// for a pod on no given node.
    pub fn pod_id(&self, s: Option<&Snapshot>, index: usize) -> Option<PodId> {
        if let Some(full) = self.full.get() {
            return full.pods.get(index).copied();
        }
        match self.given_node_of(s, index) {
            Some(j) => {
                let first = self.offsets(s)[j] as usize;
                self.node_pods(s, j)?.get(index - first).copied()
            }
            None => self.full(s).pods.get(index).copied(),
        }
    }

    /// The table index of `pod` (its first place), without building the whole table: None when
    /// the pod is not in the table (evicted earlier in the cycle); `Some(None)` when it is live
    /// but on none of the given nodes.
    pub fn index_of(&self, s: &Snapshot, pod: PodId) -> Option<Option<usize>> {
        if s.is_evicted(pod) {
            return None;
        }
        for (j, &n) in self.nodes.iter().enumerate() {
            if !s.pods_on_node_at_start(n).contains(&pod) {
                continue;
            }
            let pods = self.node_pods(Some(s), j)?;
            let k = pods.iter().position(|&p| p == pod)?;
            return Some(Some(self.offsets(Some(s))[j] as usize + k));
        }
        Some(None)
    }
}

/// The whole table for `nodes` on `s`. Each pod is read once: the pods of the given nodes with
/// their namespaces in one pass, then the live pods not seen there.
fn build_full(s: &Snapshot, nodes: &[NodeId]) -> FullTable {
    let mut t = FullTable {
        pods: Vec::with_capacity(s.pods.len()),
        pod_node: Vec::with_capacity(s.pods.len()),
        pod_namespace: Vec::with_capacity(s.pods.len()),
        namespaces: Vec::new(),
    };
    let mut namespaces = NamespaceIndex::default();
    let mut seen = vec![false; s.pods.len()];
    let mut push = |t: &mut FullTable, p: PodId, node: i32| {
        t.pods.push(p);
        t.pod_node.push(node);
        t.pod_namespace.push(namespaces.index(&s.pod(p).namespace));
    };
    for (j, &n) in nodes.iter().enumerate() {
        for p in s.pods_on_node(n) {
            if let Some(v) = seen.get_mut(p as usize) {
                *v = true;
            }
            push(&mut t, p, j as i32);
        }
    }
    for p in s.live_pods() {
        if !seen[p as usize] {
            push(&mut t, p, -1);
        }
    }
    t.namespaces = namespaces.names;
    t
}

/// The distinct namespaces of a table, numbered in the order first seen.
#[derive(Default)]
struct NamespaceIndex {
    names: Vec<Arc<str>>,
    /// Pods share their namespace's `Arc` in most snapshots: looked up by pointer first.
    by_ptr: rustc_hash::FxHashMap<*const u8, i32>,
}

impl NamespaceIndex {
    fn index(&mut self, ns: &Arc<str>) -> i32 {
        if let Some(&id) = self.by_ptr.get(&ns.as_ptr()) {
            return id;
        }
        let id = match self.names.iter().position(|n| n == ns) {
            Some(i) => i as i32,
            None => {
                self.names.push(ns.clone());
                (self.names.len() - 1) as i32
            }
        };
        self.by_ptr.insert(ns.as_ptr(), id);
        id
    }
}

#[cfg(test)]
mod tests;
