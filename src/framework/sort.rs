//! Pod orderings shared by plugins (upstream `podutil` sort helpers).

use std::cmp::Ordering;

use crate::snapshot::{PodId, Snapshot};

/// Eviction preference between two pods (upstream `SortPodsBasedOnPriorityLowToHigh`): lower
/// priority first (a pod without a priority sorts first); equal priority → QoS BestEffort,
/// Burstable, Guaranteed; equal QoS → pods annotated `prefer-no-eviction` last.
pub fn priority_low_to_high(snapshot: &Snapshot, a: PodId, b: PodId) -> Ordering {
    let (pa, pb) = (snapshot.pod(a), snapshot.pod(b));
    match (pa.priority, pb.priority) {
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (x, y) => x.cmp(&y),
    }
    .then_with(|| pa.qos.cmp(&pb.qos))
    .then_with(|| pa.prefers_no_eviction().cmp(&pb.prefers_no_eviction()))
}

/// Sorts `pods` for eviction by [`priority_low_to_high`] (stable).
pub fn sort_by_priority_low_to_high(snapshot: &Snapshot, pods: &mut [PodId]) {
    pods.sort_by(|&a, &b| priority_low_to_high(snapshot, a, b));
}
