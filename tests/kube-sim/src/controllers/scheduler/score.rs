//! Scoring under a [`Profile`] of a `KubeSchedulerConfiguration`, with kube-scheduler's formulas
//! (`pkg/scheduler/framework/plugins/noderesources/{least_allocated,most_allocated,
//! requested_to_capacity_ratio,resource_allocation,balanced_allocation}.go`,
//! `tainttoleration/taint_toleration.go`, `helper/normalize_score.go`): each plugin scores a
//! feasible node 0–100, TaintToleration's count of intolerable `PreferNoSchedule` taints is
//! normalised (reversed) over the feasible nodes, and a node's total is the sum of plugin score ×
//! plugin weight.
//!
//! Where kube-sim differs: the node side of NodeResourcesFit counts the pods' requests as they
//! are (kube-scheduler counts a pod without a cpu or memory request at 100m / 200Mi there too;
//! kube-sim applies those defaults only to the pod being scheduled, per pod rather than per
//! container), and the default profile's other score plugins (NodeAffinity, PodTopologySpread,
//! InterPodAffinity, ImageLocality) are not modelled: they add nothing to any node.

use k8s_openapi::api::core::v1::{Node, Pod, Taint};

use super::config::{Profile, ResourceWeight, ScoringStrategy, StrategyKind};
use super::filters::tolerates;
use super::{NON_ZERO_CPU_MILLI, NON_ZERO_MEMORY_MILLI, NodeInfo, Resources};

/// kube-scheduler's `framework.MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// `leastRequestedScore`: the free share of `capacity`, 0–100 (0 when over capacity).
pub fn least_requested(requested: i128, capacity: i128) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    ((capacity - requested) * i128::from(MAX_NODE_SCORE) / capacity) as i64
}

/// `mostRequestedScore`: the used share of `capacity`, 0–100 (requests above capacity count as
/// full, as upstream since the MostAllocated fix for overcommitted nodes).
pub fn most_requested(requested: i128, capacity: i128) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    (requested.min(capacity) * i128::from(MAX_NODE_SCORE) / capacity) as i64
}

/// `BuildBrokenLinearFunction`: the score at utilization `p` on the line through `shape`'s
/// points (the first point's score below it, the last one's above it).
pub fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(u, s)) in shape.iter().enumerate() {
        if p <= u {
            if i == 0 {
                return s;
            }
            let (pu, ps) = shape[i - 1];
            return ps + (s - ps) * (p - pu) / (u - pu);
        }
    }
    shape.last().map_or(0, |&(_, s)| s)
}

/// The requested-to-capacity-ratio score of one resource (`resourceScoringFunction`).
fn ratio_score(shape: &[(i64, i64)], requested: i128, capacity: i128) -> i64 {
    if capacity <= 0 || requested > capacity {
        return broken_linear(shape, 100);
    }
    broken_linear(shape, (requested * 100 / capacity) as i64)
}

/// Whether kube-scheduler treats `name` as a scalar (extended) resource, which is left out of
/// the score when the pod does not request it.
fn is_scalar(name: &str) -> bool {
    !matches!(name, "cpu" | "memory" | "ephemeral-storage" | "pods")
}

/// `(requested after placing the pod, allocatable)` per resource of `resources`, `None` for a
/// resource that does not take part (no allocatable, or a scalar the pod does not request).
fn requested_and_allocatable(
    info: &NodeInfo,
    pod_req: &Resources,
    resources: &[ResourceWeight],
    non_zero: bool,
) -> Vec<Option<(i128, i128)>> {
    resources
        .iter()
        .map(|r| {
            let alloc = info.allocatable.get(&r.name).copied().unwrap_or(0);
            let mut want = pod_req.get(&r.name).copied().unwrap_or(0);
            if non_zero && want <= 0 {
                want = match r.name.as_str() {
                    "cpu" => NON_ZERO_CPU_MILLI,
                    "memory" => NON_ZERO_MEMORY_MILLI,
                    _ => want,
                };
            }
            if alloc <= 0 || (want <= 0 && is_scalar(&r.name)) {
                return None;
            }
            let used = info.requested.get(&r.name).copied().unwrap_or(0);
            Some((used.saturating_add(want), alloc))
        })
        .collect()
}

/// NodeResourcesFit's score (0–100) of a node for a pod requesting `pod_req`.
pub(super) fn fit_score(s: &ScoringStrategy, info: &NodeInfo, pod_req: &Resources) -> i64 {
    let pairs = requested_and_allocatable(info, pod_req, &s.resources, true);
    let (mut total, mut weights) = (0i64, 0i64);
    for (r, pair) in s.resources.iter().zip(pairs) {
        let Some((req, alloc)) = pair else {
            continue;
        };
        let score = match &s.kind {
            StrategyKind::LeastAllocated => least_requested(req, alloc),
            StrategyKind::MostAllocated => most_requested(req, alloc),
            StrategyKind::RequestedToCapacityRatio(shape) => {
                // Upstream leaves resources scoring 0 out of the average.
                let v = ratio_score(shape, req, alloc);
                if v <= 0 {
                    continue;
                }
                v
            }
        };
        total += score * r.weight;
        weights += r.weight;
    }
    if weights == 0 {
        return 0;
    }
    match s.kind {
        StrategyKind::RequestedToCapacityRatio(_) => (total as f64 / weights as f64).round() as i64,
        _ => total / weights,
    }
}

/// NodeResourcesBalancedAllocation's score (0–100): 100 × (1 − the standard deviation of the
/// requested shares of `resources`), with the pod's own requests (no non-zero defaults).
pub(super) fn balanced_score(
    resources: &[ResourceWeight],
    info: &NodeInfo,
    pod_req: &Resources,
) -> i64 {
    let fractions: Vec<f64> = requested_and_allocatable(info, pod_req, resources, false)
        .into_iter()
        .flatten()
        .map(|(req, alloc)| (req as f64 / alloc as f64).min(1.0))
        .collect();
    let std = match fractions.len() {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            let var = fractions
                .iter()
                .map(|f| (f - mean) * (f - mean))
                .sum::<f64>()
                / n as f64;
            var.sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// TaintToleration's raw score: the node's `PreferNoSchedule` taints the pod's tolerations
/// (those with effect `PreferNoSchedule` or none) do not tolerate.
pub(super) fn intolerable_prefer_no_schedule(pod: &Pod, node: &Node) -> i64 {
    let tolerations: Vec<_> = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter(|t| {
            t.effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
        })
        .collect();
    let taints: &[Taint] = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[]);
    taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule")
        .filter(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
        .count() as i64
}

/// `DefaultNormalizeScore(MaxNodeScore, reverse = true, …)`: scales counts to 0–100 against
/// the largest and reverses them (all 100 when every count is 0).
pub fn normalize_reverse(counts: &mut [i64]) {
    let max = counts.iter().copied().max().unwrap_or(0);
    for c in counts.iter_mut() {
        *c = if max == 0 {
            MAX_NODE_SCORE
        } else {
            MAX_NODE_SCORE - MAX_NODE_SCORE * *c / max
        };
    }
}

/// Each feasible node's total score under `profile` (plugin scores × weights, normalised as
/// kube-scheduler does), in the order of `nodes`.
pub(super) fn profile_scores(
    profile: &Profile,
    pod: &Pod,
    pod_req: &Resources,
    nodes: &[&NodeInfo],
) -> Vec<i64> {
    let mut totals: Vec<i64> = nodes
        .iter()
        .map(|info| {
            let mut total = 0;
            if let Some((w, s)) = &profile.fit {
                total += w * fit_score(s, info, pod_req);
            }
            if let Some((w, res)) = &profile.balanced {
                total += w * balanced_score(res, info, pod_req);
            }
            total
        })
        .collect();
    if let Some(w) = profile.taint_toleration {
        let mut counts: Vec<i64> = nodes
            .iter()
            .map(|info| intolerable_prefer_no_schedule(pod, info.node))
            .collect();
        normalize_reverse(&mut counts);
        for (t, c) in totals.iter_mut().zip(counts) {
            *t += w * c;
        }
    }
    totals
}
