//! Pod orderings shared by plugins (upstream `podutil` sort helpers).

use std::cmp::Ordering;

use crate::snapshot::{PodId, Snapshot};

/// Eviction preference between two pods (upstream `SortPodsBasedOnPriorityLowToHigh`): lower
/// priority first (no priority before any priority); equal priority → QoS BestEffort, Burstable,
/// Guaranteed; equal priority and QoS → pods annotated `prefer-no-eviction` last.
pub fn priority_low_to_high(snapshot: &Snapshot, a: PodId, b: PodId) -> Ordering {
    let (pa, pb) = (snapshot.pod(a), snapshot.pod(b));
    match (pa.priority, pb.priority) {
        // A pod without a priority sorts first, as upstream.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::ANNOTATION_PREFER_NO_EVICTION;
    use crate::testing::{node, pod, snapshot};

    #[test]
    fn priority_then_qos_then_prefer_no_eviction() {
        let snap = snapshot(
            vec![node("n1").build()],
            vec![
                pod("ns", "high", "n1").priority(10).build(),
                pod("ns", "low-pne", "n1")
                    .priority(1)
                    .annotation(ANNOTATION_PREFER_NO_EVICTION, "")
                    .build(),
                pod("ns", "low-burstable", "n1").priority(1).build(),
                pod("ns", "low-besteffort", "n1")
                    .priority(1)
                    .best_effort()
                    .build(),
                pod("ns", "none", "n1").build(),
            ],
        );
        let mut ids: Vec<PodId> = (0..5).collect();
        sort_by_priority_low_to_high(&snap, &mut ids);
        let names: Vec<&str> = ids.iter().map(|&p| snap.pod(p).name.as_str()).collect();
        assert_eq!(
            names,
            ["none", "low-besteffort", "low-burstable", "low-pne", "high"]
        );
    }
}
