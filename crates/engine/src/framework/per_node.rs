//! The loop of Deschedule plugins that judge each pod on its own: each node's candidates are found
//! on several threads, then evicted node by node in the plugin's node order.
//!
//! Finding candidates ahead is exact: a pod's verdict (and the PreEvictionFilter) reads the
//! snapshot, the Filter and the pods moved before this plugin ran, none of which an eviction from
//! another node changes.

use super::Handle;
use super::handle::FilterView;
use super::parallel;
use crate::evictor::EvictionReason;
use crate::snapshot::{NodeId, PodId, Snapshot};

/// A candidate a per-pod plugin found: the pod, with the reason it was chosen when the plugin
/// gives one (a bare [`PodId`]: the plugin name is the reason).
pub trait Candidate: Send {
    /// The pod.
    fn pod(&self) -> PodId;
    /// The reason, built when the plugin decided.
    fn into_reason(self) -> Option<EvictionReason>;
}

impl Candidate for PodId {
    fn pod(&self) -> PodId {
        *self
    }
    fn into_reason(self) -> Option<EvictionReason> {
        None
    }
}

impl Candidate for (PodId, EvictionReason) {
    fn pod(&self) -> PodId {
        self.0
    }
    fn into_reason(self) -> Option<EvictionReason> {
        Some(self.1)
    }
}

/// Finds each node's candidates with `candidates(snapshot, filter, node, state)` (in eviction
/// order; `state` is scratch state of one thread, e.g. a memo) and evicts them node by node, as
/// upstream: a node's limit moves on to the next node, the total limit ends the plugin.
pub fn evict_per_node<'s, S, C, F>(h: &mut Handle<'s>, nodes: &[NodeId], candidates: F)
where
    S: Default,
    C: Candidate,
    F: Fn(&'s Snapshot, &FilterView<'_>, NodeId, &mut S) -> Vec<C> + Sync,
{
    let snapshot = h.snapshot;
    if h.total_limit_reached() {
        // Every attempt will be refused by the total limit: only the first one is recorded (a
        // limit hit) and the plugin stops, so nodes are analysed one by one, up to the first
        // node with a candidate, instead of all of them ahead.
        let mut state = S::default();
        for &n in nodes {
            let pods = {
                let view = h.filter_view();
                let mut pods = candidates(snapshot, &view, n, &mut state);
                pods.retain(|c| view.pre_eviction_filter(c.pod()));
                pods
            };
            if evict_node(h, pods) == Stop::Plugin {
                return;
            }
        }
        return;
    }
    // With a total limit the nodes are analysed a window at a time, so that little analysis is
    // wasted on nodes after the limit is reached (exact: a window's candidates do not depend on
    // the evictions from earlier windows' nodes).
    let windows = match h.total_remaining() {
        Some(_) => windows(nodes, |n| snapshot.pods_on_node_upper_bound(n)),
        None => vec![nodes],
    };
    for window in windows {
        let view = h.filter_view();
        let per_node: Vec<Vec<C>> = parallel::map_node_chunks(snapshot, window, |chunk| {
            let mut state = S::default();
            chunk
                .iter()
                .map(|&n| {
                    let mut pods = candidates(snapshot, &view, n, &mut state);
                    // A pod the PreEvictionFilter rejects would be skipped by `evict`.
                    pods.retain(|c| view.pre_eviction_filter(c.pod()));
                    pods
                })
                .collect::<Vec<Vec<C>>>()
        })
        .into_iter()
        .flatten()
        .collect();
        for pods in per_node {
            if evict_node(h, pods) == Stop::Plugin {
                return;
            }
        }
    }
}

/// Consecutive windows of `nodes` of about twice [`parallel::min_parallel_weight`] pods each
/// (enough to be worth both cores).
fn windows(nodes: &[NodeId], weight: impl Fn(NodeId) -> usize) -> Vec<&[NodeId]> {
    let target = 2 * parallel::min_parallel_weight();
    let mut out = Vec::new();
    let (mut start, mut acc) = (0usize, 0usize);
    for (i, &n) in nodes.iter().enumerate() {
        acc += weight(n);
        if acc >= target {
            out.push(&nodes[start..=i]);
            start = i + 1;
            acc = 0;
        }
    }
    if start < nodes.len() || out.is_empty() {
        out.push(&nodes[start..]);
    }
    out
}

/// Where evicting a node's candidates stopped.
#[derive(PartialEq, Eq)]
enum Stop {
    /// The node is done (all attempted, or its limit was reached): go on with the next node.
    Node,
    /// The total limit was reached: the plugin ends.
    Plugin,
}

/// Evicts one node's prefiltered candidates in order, as upstream: a node limit ends the node,
/// the total limit ends the plugin.
fn evict_node<C: Candidate>(h: &mut Handle<'_>, pods: Vec<C>) -> Stop {
    for c in pods {
        let p = c.pod();
        let attempt = match c.into_reason() {
            Some(reason) => h.evict_prefiltered_because(p, reason),
            None => h.evict_prefiltered(p, None),
        };
        match attempt {
            Err(e) if e.is_node_limit() => break,
            Err(e) if e.is_total_limit() => return Stop::Plugin,
            _ => {}
        }
    }
    Stop::Node
}
