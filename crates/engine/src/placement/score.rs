//! kube-scheduler's scoring arithmetic, as pure functions: the `NodeResourcesFit` strategies
//! (`least_allocated.go`, `most_allocated.go`, `requested_to_capacity_ratio.go`),
//! `NodeResourcesBalancedAllocation` (`balanced_allocation.go`), and the normalisations of
//! `TaintToleration`, `NodeAffinity` (`helper.DefaultNormalizeScore`), `PodTopologySpread`
//! (`scoring.go`) and `InterPodAffinity` (`scoring.go`). Integer arithmetic where theirs is.

use super::profile::ScoringStrategy;

/// `framework.MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;
/// `MaxCustomPriorityScore`: the top of a RequestedToCapacityRatio shape's score axis.
pub const MAX_CUSTOM_SCORE: i64 = 10;

/// One resource of a node: what is requested with the pod placed, what is allocatable, its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceUse {
    /// Requested, the incoming pod included.
    pub requested: i64,
    /// Allocatable.
    pub allocatable: i64,
    /// The resource's weight.
    pub weight: i64,
}

/// `leastRequestedScore`: the free share, 0 when over capacity.
pub fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// `mostRequestedScore`: the used share, capped at capacity.
pub fn most_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

/// `helper.BuildBrokenLinearFunction` over a shape already scaled to 0–100 scores, at `x`.
fn broken_linear(shape: &[(i64, i64)], x: i64) -> i64 {
    for (i, &(u, s)) in shape.iter().enumerate() {
        if x <= u {
            if i == 0 {
                return s;
            }
            let (u0, s0) = shape[i - 1];
            return s0 + (s - s0) * (x - u0) / (u - u0).max(1);
        }
    }
    shape.last().map_or(0, |&(_, s)| s)
}

/// `NodeResourcesFit`'s score for one node: the weighted mean over resources with allocatable
/// (those without are skipped, as `resource_allocation.go` does).
pub fn fit_score(strategy: &ScoringStrategy, resources: &[ResourceUse]) -> i64 {
    let (mut sum, mut weights) = (0i64, 0i64);
    match strategy {
        ScoringStrategy::RequestedToCapacityRatio { shape } => {
            let scaled: Vec<(i64, i64)> = shape
                .iter()
                .map(|&(u, s)| (u, s * (MAX_NODE_SCORE / MAX_CUSTOM_SCORE)))
                .collect();
            for r in resources.iter().filter(|r| r.allocatable != 0) {
                let util = if r.requested > r.allocatable {
                    MAX_NODE_SCORE
                } else {
                    r.requested * MAX_NODE_SCORE / r.allocatable
                };
                sum += broken_linear(&scaled, util) * r.weight;
                weights += r.weight;
            }
            if weights == 0 {
                return 0;
            }
            // requested_to_capacity_ratio.go rounds the weighted mean.
            (sum as f64 / weights as f64).round() as i64
        }
        _ => {
            for r in resources.iter().filter(|r| r.allocatable != 0) {
                let s = match strategy {
                    ScoringStrategy::MostAllocated => most_requested(r.requested, r.allocatable),
                    _ => least_requested(r.requested, r.allocatable),
                };
                sum += s * r.weight;
                weights += r.weight;
            }
            if weights == 0 { 0 } else { sum / weights }
        }
    }
}

/// `balancedResourceScorer`: 100 × (1 − the standard deviation of the requested fractions, each
/// capped at 1); with two resources the deviation is half their difference.
pub fn balanced_score(resources: &[ResourceUse]) -> i64 {
    // Read twice rather than collected: no allocation per node.
    let fractions = || {
        resources
            .iter()
            .filter(|r| r.allocatable != 0)
            .map(|r| (r.requested as f64 / r.allocatable as f64).min(1.0))
    };
    let std = match fractions().count() {
        0 | 1 => 0.0,
        2 => {
            let mut f = fractions();
            let (a, b) = (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0));
            ((a - b) / 2.0).abs()
        }
        n => {
            let mean = fractions().sum::<f64>() / n as f64;
            let var = fractions().map(|f| (f - mean) * (f - mean)).sum::<f64>();
            (var / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// kube-scheduler 1.36+'s `balancedResourceScorer`: the change the pod makes to the node's
/// balance, `50 + (50 + with − without) / 2` (75: no change; 100: from fully imbalanced to
/// balanced; 50: the reverse), where `with_pod` and `without_pod` are [`balanced_score`] with and
/// without the pod's requests.
pub fn balanced_change(with_pod: i64, without_pod: i64) -> i64 {
    let half = MAX_NODE_SCORE / 2;
    half + (half + with_pod - without_pod) / 2
}

/// `helper.DefaultNormalizeScore`: scales so the highest is 100 (all 0 stay 0, or become 100 when
/// `reverse`), then flips when `reverse`.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        *s = *s * MAX_NODE_SCORE / max;
        if reverse {
            *s = MAX_NODE_SCORE - *s;
        }
    }
}

/// `PodTopologySpread`'s `scoreForCount`: matching pods in the domain times the constraint's
/// weight `ln(domains + 2)`, plus `maxSkew − 1` (not weighted: `float64(cnt)*tpWeight +
/// float64(maxSkew-1)` in 1.34 – 1.37).
pub fn spread_score_for_count(count: i64, max_skew: i64, domains: usize) -> f64 {
    let w = ((domains + 2) as f64).ln();
    count as f64 * w + (max_skew - 1) as f64
}

/// `x.round() as i64` (half away from zero, as Go's `math.Round`), without the library call for
/// the non-negative scores below 2^52 a spread sums to: the integer part by truncation, and the
/// fraction `x - t` is exact there.
#[inline]
pub fn round_score(x: f64) -> i64 {
    if !(0.0..4_503_599_627_370_496.0).contains(&x) {
        return x.round() as i64;
    }
    let t = x as i64;
    if x - t as f64 >= 0.5 { t + 1 } else { t }
}

/// `PodTopologySpread`'s NormalizeScore: fewer matching pods score higher; ignored nodes (`None`)
/// score 0; when every counted node scores 0 they all get 100.
pub fn spread_normalize(raw: &[Option<i64>]) -> Vec<i64> {
    let mut out = Vec::with_capacity(raw.len());
    spread_normalize_into(raw.iter().copied(), &mut out);
    out
}

/// [`spread_normalize`] of `raw` appended to `out` (no intermediate vectors).
pub fn spread_normalize_into(raw: impl Iterator<Item = Option<i64>> + Clone, out: &mut Vec<i64>) {
    let counted = raw.clone().flatten();
    let max = counted.clone().max().unwrap_or(0);
    let min = counted.min().unwrap_or(0);
    out.extend(raw.map(|s| spread_normalized(s, max, min)));
}

/// One node's [`spread_normalize`]d score, given the highest and lowest of the counted ones.
#[inline]
pub fn spread_normalized(raw: Option<i64>, max: i64, min: i64) -> i64 {
    match raw {
        None => 0,
        Some(_) if max == 0 => MAX_NODE_SCORE,
        Some(s) => MAX_NODE_SCORE * (max + min - s) / max,
    }
}

/// `InterPodAffinity`'s NormalizeScore: min–max scaling to 0–100 (all equal: 0).
pub fn min_max_normalize(scores: &mut [i64]) {
    let max = scores.iter().copied().max().unwrap_or(0);
    let min = scores.iter().copied().min().unwrap_or(0);
    let diff = max - min;
    for s in scores.iter_mut() {
        *s = if diff > 0 {
            (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64
        } else {
            0
        };
    }
}
