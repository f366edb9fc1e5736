//! The Score phase of one prediction: each Score plugin of the profile over the feasible nodes,
//! normalised as kube-scheduler normalises it. The per-node work reads dense numbers only — the
//! resources are resolved to [`ResKey`]s once per prediction, the node-only facts (PreferNoSchedule
//! taints a pod shape does not tolerate, its preferred node affinity) come from the pod shape's
//! [`StaticFit`], computed once per cycle — and the score vectors are reused across predictions.

use super::cache::{Caches, StaticFit};
use super::plugin_scores::{PluginScores, Scores};
use super::profile::SchedulerProfile;
use super::score;
use super::spread_score::{self, Constraint, SpreadInput};
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

/// The feasible nodes' raw scores from `per_node`, through `helper.DefaultNormalizeScore`.
fn default_normalized(
    pool: &mut Vec<Vec<i64>>,
    feasible: &[usize],
    per_node: &[i64],
    reverse: bool,
) -> Scores {
    let mut s = take(pool);
    s.extend(feasible.iter().map(|&n| per_node[n]));
    score::default_normalize(&mut s, reverse);
    Scores::PerNode(s)
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
            Some(per_node) => default_normalized(pool, feasible, per_node, true),
            // All 0: DefaultNormalizeScore reversed makes every node 100.
            None => Scores::Uniform(score::MAX_NODE_SCORE),
        };
        push("TaintToleration", w.taint_toleration, scores);
    }
    if w.node_affinity > 0 {
        let scores = match &statics.preferred_affinity {
            Some(per_node) => default_normalized(pool, feasible, per_node, false),
            None => Scores::Uniform(0),
        };
        push("NodeAffinity", w.node_affinity, scores);
    }
    if w.pod_topology_spread > 0 {
        // Without constraints every node scores 0.
        let scores = score_spread(input, state, caches, pool).unwrap_or(Scores::Uniform(0));
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

/// PodTopologySpread's score (`scoring.go`) over the feasible nodes (`None`: no constraint
/// applies, every node scores 0): the pod's ScheduleAnyway constraints, or — without constraints
/// of its own, for a pod of a ReplicaSet, StatefulSet or ReplicationController — the system
/// defaults (hostname maxSkew 3, zone maxSkew 5) counting the controller's pods (kube-scheduler
/// uses the selectors of the Services and controllers selecting the pod; the controller's own
/// pods are what they select).
fn score_spread(
    input: &ScoreInput<'_>,
    state: &mut ClusterState,
    caches: &mut Caches,
    pool: &mut Vec<Vec<i64>>,
) -> Option<Scores> {
    let ScoreInput {
        snapshot,
        pod: p,
        profile,
        statics,
        spreads,
        feasible,
        ..
    } = *input;
    let mut constraints: Vec<Constraint<'_>> = Vec::new();
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
            for (key, max_skew) in [(HOSTNAME, 3), (ZONE, 5)] {
                constraints.push(Constraint {
                    key,
                    max_skew,
                    per_node: counts,
                    honor_affinity: true,
                });
            }
        }
    } else {
        let soft: Vec<(&Spread, usize)> = spreads
            .iter()
            .filter(|s| !s.hard)
            .map(|s| (s, state.count_slot(snapshot, &s.matcher)))
            .collect();
        for (s, at) in soft {
            constraints.push(Constraint {
                key: &s.key,
                max_skew: s.max_skew,
                per_node: state.counts_at(at),
                honor_affinity: s.honor_affinity,
            });
        }
    }
    if constraints.is_empty() {
        return None;
    }
    let input = SpreadInput {
        snapshot,
        // Pods with constraints of their own ignore nodes lacking any of the keys.
        require_all: !system,
        feasible,
        affinity_ok: &statics.affinity_ok,
    };
    Some(spread_score::score(
        &input,
        &constraints,
        &mut caches.domains,
        &mut caches.spread_slots,
        || take(pool),
    ))
}
