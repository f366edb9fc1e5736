//! The Score phase of one prediction: each Score plugin of the profile over the feasible nodes,
//! normalised as kube-scheduler normalises it. The per-node work reads dense numbers only — the
//! resources are resolved to [`ResKey`]s once per prediction, the node-only facts (PreferNoSchedule
//! taints a pod shape does not tolerate, its preferred node affinity) come from the pod shape's
//! [`StaticFit`], computed once per cycle — and the score vectors are reused across predictions.

use std::borrow::Cow;

use super::cache::{Caches, StaticFit};
use super::plugin_scores::{PluginScores, Scores};
use super::profile::SchedulerProfile;
use super::score;
use super::state::ClusterState;
use super::terms::domain_counts;
use super::terms::{self, AffinityTerms, HOSTNAME, Spread, ZONE};
use crate::snapshot::{Pod, Snapshot};

/// What one prediction scores: the pod, its parsed constraints and the feasible nodes.
pub struct ScoreInput<'a> {
    /// The snapshot.
    pub snapshot: &'a Snapshot,
    /// The incoming pod.
    pub pod: &'a Pod,
    /// The profile scoring it.
    pub profile: &'a SchedulerProfile,
    /// The pod shape's static per-node facts.
    pub statics: &'a StaticFit,
    /// The pod's topology spread constraints.
    pub spreads: &'a [Spread],
    /// The pod's inter-pod affinity terms.
    pub aff: &'a AffinityTerms<'a>,
    /// The feasible nodes, in node order.
    pub feasible: &'a [usize],
}

/// An emptied vector from `pool`.
fn take(pool: &mut Vec<Vec<i64>>) -> Vec<i64> {
    let mut v = pool.pop().unwrap_or_default();
    v.clear();
    v
}

/// Scores the feasible nodes with every Score plugin of the profile (weight > 0), in
/// kube-scheduler's plugin order; the vectors come from and go back to `pool`.
pub fn score_plugins(
    input: &ScoreInput<'_>,
    state: &mut ClusterState,
    caches: &mut Caches,
    pool: &mut Vec<Vec<i64>>,
    plugins: &mut Vec<PluginScores>,
) {
    let ScoreInput {
        snapshot,
        pod: p,
        profile,
        statics,
        feasible,
        ..
    } = *input;
    let w = &profile.weights;
    let mut push = |name, weight, scores| {
        plugins.push(PluginScores {
            name,
            weight,
            scores,
        })
    };
    if w.node_resources_fit > 0 {
        push("NodeResourcesFit", w.node_resources_fit, Scores::Fit);
    }
    if w.balanced_allocation > 0 {
        push(
            "NodeResourcesBalancedAllocation",
            w.balanced_allocation,
            Scores::Balanced,
        );
    }
    if w.taint_toleration > 0 {
        let scores = match &statics.prefer_taints {
            Some(per_node) => {
                let mut s = take(pool);
                s.extend(feasible.iter().map(|&n| per_node[n]));
                score::default_normalize(&mut s, true);
                Scores::PerNode(s)
            }
            // All 0: DefaultNormalizeScore reversed makes every node 100.
            None => Scores::Uniform(score::MAX_NODE_SCORE),
        };
        push("TaintToleration", w.taint_toleration, scores);
    }
    if w.node_affinity > 0 {
        let scores = match &statics.preferred_affinity {
            Some(per_node) => {
                let mut s = take(pool);
                s.extend(feasible.iter().map(|&n| per_node[n]));
                score::default_normalize(&mut s, false);
                Scores::PerNode(s)
            }
            None => Scores::Uniform(0),
        };
        push("NodeAffinity", w.node_affinity, scores);
    }
    if w.pod_topology_spread > 0 {
        let mut s = take(pool);
        let scores = if score_spread(input, state, caches, &mut s) {
            Scores::PerNode(s)
        } else {
            pool.push(s);
            Scores::Uniform(0)
        };
        push("PodTopologySpread", w.pod_topology_spread, scores);
    }
    if w.inter_pod_affinity > 0 {
        let scores = if input.aff.preferred.is_empty() {
            // All 0: min-max scaling of equal scores gives 0.
            Scores::Uniform(0)
        } else {
            let mut s = take(pool);
            s.resize(feasible.len(), 0);
            for (term, weight) in &input.aff.preferred {
                let m = terms::term_matcher(term, p);
                let per_node = state.counts(snapshot, &m);
                let domains = caches.domains.get(snapshot, &term.topology_key);
                let counts = domain_counts(per_node, domains, |_| true);
                for (i, &n) in feasible.iter().enumerate() {
                    if let Some(d) = domains.of[n] {
                        s[i] += weight * counts[d as usize];
                    }
                }
            }
            score::min_max_normalize(&mut s);
            Scores::PerNode(s)
        };
        push("InterPodAffinity", w.inter_pod_affinity, scores);
    }
}

/// PodTopologySpread's score (`scoring.go`) over the feasible nodes, into `out` (`false`: no
/// constraint applies, every node scores 0 and `out` is left empty): the pod's
/// ScheduleAnyway constraints, or — without constraints of its own, for a pod of a ReplicaSet,
/// StatefulSet or ReplicationController — the system defaults (hostname maxSkew 3, zone maxSkew
/// 5) counting the controller's pods (kube-scheduler uses the selectors of the Services and
/// controllers selecting the pod; the controller's own pods are what they select).
fn score_spread(
    input: &ScoreInput<'_>,
    state: &mut ClusterState,
    caches: &mut Caches,
    out: &mut Vec<i64>,
) -> bool {
    let ScoreInput {
        snapshot,
        pod: p,
        profile,
        statics,
        spreads,
        feasible,
        ..
    } = *input;
    // (key, maxSkew, per-node counts, honor affinity).
    let mut constraints: Vec<(&str, i64, Cow<'_, [u32]>, bool)> = Vec::new();
    let system = p.topology_spread_constraints.is_empty();
    if system {
        let owner = p.controller().filter(|o| {
            matches!(
                o.kind.as_str(),
                "ReplicaSet" | "StatefulSet" | "ReplicationController"
            )
        });
        if let Some(o) = owner
            && profile.system_default_spread
        {
            let counts = state.owner_counts(snapshot, &o.uid);
            constraints.push((HOSTNAME, 3, Cow::Borrowed(counts), true));
            constraints.push((ZONE, 5, Cow::Borrowed(counts), true));
        }
    } else {
        for s in spreads.iter().filter(|s| !s.hard) {
            let counts = state.counts(snapshot, &s.matcher).to_vec();
            constraints.push((&s.key, s.max_skew, Cow::Owned(counts), s.honor_affinity));
        }
    }
    if constraints.is_empty() {
        // Nothing to spread: every node scores 0.
        return false;
    }
    // Pods with constraints of their own ignore nodes lacking any of the keys (a node has a key
    // exactly when it has a domain of it).
    let require_all = !system;
    for (key, ..) in &constraints {
        caches.domains.get(snapshot, key);
    }
    let domains: Vec<&terms::Domains> = constraints
        .iter()
        .filter_map(|(key, ..)| caches.domains.built(key))
        .collect();
    let has_all = |n: usize| domains.iter().all(|d| d.of[n].is_some());
    let ignored: Vec<bool> = if require_all {
        feasible.iter().map(|&n| !has_all(n)).collect()
    } else {
        Vec::new()
    };
    let is_ignored = |i: usize| ignored.get(i).copied().unwrap_or(false);
    // Per constraint: its weight ln(domains in play + 2), its skew part, and the count a node
    // reads (its own for hostname, else its domain's over every eligible node of the domain).
    let mut prepared: Vec<(f64, f64, Count<'_>)> = Vec::with_capacity(constraints.len());
    for ((key, max_skew, per_node, honor_affinity), domains) in constraints.iter().zip(&domains) {
        let size = if *key == HOSTNAME {
            feasible.len() - ignored.iter().filter(|i| **i).count()
        } else {
            // Domains of the feasible, not ignored nodes.
            let mut in_play = vec![false; domains.count];
            for (i, &n) in feasible.iter().enumerate() {
                if let Some(d) = domains.of[n]
                    && !is_ignored(i)
                {
                    in_play[d as usize] = true;
                }
            }
            in_play.iter().filter(|b| **b).count()
        };
        // `score::spread_score_for_count` with its weight computed once per constraint (the same
        // arithmetic, in the same order).
        let w = ((size + 2) as f64).ln();
        let skew_part = (max_skew - 1) as f64 * w;
        let count = if *key == HOSTNAME {
            Count::Node(per_node)
        } else {
            let counts = domain_counts(per_node, domains, |n| {
                (!*honor_affinity || statics.affinity_ok[n]) && (!require_all || has_all(n))
            });
            Count::Domain(domains, counts)
        };
        prepared.push((w, skew_part, count));
    }
    // One pass: each node's raw score (constraints added in order, as one vector per constraint
    // would), rounded, and the highest and lowest of the counted ones; then kube-scheduler's
    // normalisation (`score::spread_normalize`).
    let mut rounded: Vec<i64> = Vec::with_capacity(feasible.len());
    let (mut max, mut min): (Option<i64>, Option<i64>) = (None, None);
    // Neighbouring nodes often sum to the same raw score: its rounding is kept.
    let mut last: Option<(u64, i64)> = None;
    for (i, &n) in feasible.iter().enumerate() {
        let mut raw = 0f64;
        for (w, skew_part, count) in &prepared {
            match count {
                Count::Node(per_node) => {
                    let c = i64::from(per_node.get(n).copied().unwrap_or(0));
                    raw += c as f64 * w + skew_part;
                }
                Count::Domain(domains, counts) => {
                    if let Some(d) = domains.of[n] {
                        raw += counts[d as usize] as f64 * w + skew_part;
                    }
                }
            }
        }
        let r = match last {
            Some((bits, r)) if bits == raw.to_bits() => r,
            _ => score::round_score(raw),
        };
        last = Some((raw.to_bits(), r));
        rounded.push(r);
        if !is_ignored(i) {
            max = Some(max.map_or(r, |m| m.max(r)));
            min = Some(min.map_or(r, |m| m.min(r)));
        }
    }
    let (max, min) = (max.unwrap_or(0), min.unwrap_or(0));
    out.extend(
        rounded
            .iter()
            .enumerate()
            .map(|(i, &r)| score::spread_normalized((!is_ignored(i)).then_some(r), max, min)),
    );
    true
}

/// What a spread constraint counts for a node.
enum Count<'a> {
    /// Hostname: the node's own matching pods.
    Node(&'a [u32]),
    /// Another key: the matching pods of the node's domain.
    Domain(&'a terms::Domains, Vec<i64>),
}
