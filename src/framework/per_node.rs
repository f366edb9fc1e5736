//! The loop of Deschedule plugins that judge each pod on its own: each node's candidates are found
//! on several threads, then evicted node by node in the plugin's node order.
//!
//! Finding candidates ahead is exact: a pod's verdict (and the PreEvictionFilter) reads the
//! snapshot, the Filter and the pods moved before this plugin ran, none of which an eviction from
//! another node changes.

use super::Handle;
use super::handle::FilterView;
use super::parallel;
use crate::snapshot::{NodeId, PodId, Snapshot};

/// Finds each node's candidates with `candidates(snapshot, filter, node, state)` (in eviction
/// order; `state` is scratch state of one thread, e.g. a memo) and evicts them node by node, as
/// upstream: a node's limit moves on to the next node, the total limit ends the plugin.
pub fn evict_per_node<'s, S, F>(h: &mut Handle<'s>, nodes: &[NodeId], candidates: F)
where
    S: Default,
    F: Fn(&'s Snapshot, &FilterView<'_>, NodeId, &mut S) -> Vec<PodId> + Sync,
{
    let view = h.filter_view();
    let snapshot = h.snapshot;
    let per_node: Vec<Vec<PodId>> = parallel::map_chunks(
        nodes,
        |&n| snapshot.pods_on_node_upper_bound(n),
        parallel::MIN_PARALLEL_WEIGHT,
        |chunk| {
            let mut state = S::default();
            chunk
                .iter()
                .map(|&n| {
                    let mut pods = candidates(snapshot, &view, n, &mut state);
                    // A pod the PreEvictionFilter rejects would be skipped by `evict`.
                    pods.retain(|&p| view.pre_eviction_filter(p));
                    pods
                })
                .collect::<Vec<Vec<PodId>>>()
        },
    )
    .into_iter()
    .flatten()
    .collect();
    for pods in per_node {
        for p in pods {
            match h.evict_prefiltered(p, None) {
                Err(e) if e.is_node_limit() => break,
                Err(e) if e.is_total_limit() => return,
                _ => {}
            }
        }
    }
}
