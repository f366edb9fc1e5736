//! The Score phase of one prediction: each Score plugin of the profile over the feasible nodes,
//! normalised as kube-scheduler normalises it. The per-node work reads dense numbers only — the
//! resources are resolved to [`ResKey`]s once per prediction, the node-only facts (PreferNoSchedule
//! taints a pod shape does not tolerate, its preferred node affinity) come from the pod shape's
//! [`StaticFit`], computed once per cycle — and the score vectors are reused across predictions.

use std::borrow::Cow;

use super::cache::{Caches, StaticFit};
use super::profile::SchedulerProfile;
use super::score::{self, ResourceUse};
use super::state::{ClusterState, ResKey, nonzero};
use super::terms::domain_counts;
use super::terms::{self, AffinityTerms, HOSTNAME, Spread, ZONE};
use crate::snapshot::{NodeId, Pod, Snapshot};

/// One Score plugin's result: its name, its weight and its normalised score per feasible node.
pub type PluginScores = (&'static str, i64, Vec<i64>);

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

/// A resource a score reads: its key, its weight, the pod's amount, and whether the node's
/// requests are summed with the non-zero defaults (cpu and memory for NodeResourcesFit).
type ScoredResource<'a> = (ResKey<'a>, i64, i64, bool);

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
    let mut take = || {
        let mut v = pool.pop().unwrap_or_default();
        v.clear();
        v
    };
    let w = &profile.weights;
    let mut buf: Vec<ResourceUse> = Vec::with_capacity(4);
    if w.node_resources_fit > 0 {
        let (pod_cpu, pod_mem) = nonzero(p);
        let resources: Vec<ScoredResource<'_>> = profile
            .fit_resources
            .iter()
            .map(|(name, weight)| {
                let key = ResKey::of(name);
                match key {
                    ResKey::Cpu => (key, *weight, pod_cpu, true),
                    ResKey::Memory => (key, *weight, pod_mem, true),
                    _ => (key, *weight, key.get(&p.requests), false),
                }
            })
            .collect();
        let mut s = take();
        s.extend(feasible.iter().map(|&n| {
            uses(snapshot, state, n, &resources, &mut buf);
            score::fit_score(&profile.strategy, &buf)
        }));
        plugins.push(("NodeResourcesFit", w.node_resources_fit, s));
    }
    if w.balanced_allocation > 0 {
        let resources: Vec<ScoredResource<'_>> = profile
            .balanced_resources
            .iter()
            .map(|(name, weight)| {
                let key = ResKey::of(name);
                (key, *weight, key.get(&p.requests), false)
            })
            .collect();
        let mut s = take();
        s.extend(feasible.iter().map(|&n| {
            uses(snapshot, state, n, &resources, &mut buf);
            score::balanced_score(&buf)
        }));
        plugins.push(("NodeResourcesBalancedAllocation", w.balanced_allocation, s));
    }
    if w.taint_toleration > 0 {
        let mut s = take();
        s.extend(feasible.iter().map(|&n| statics.prefer_taints[n]));
        score::default_normalize(&mut s, true);
        plugins.push(("TaintToleration", w.taint_toleration, s));
    }
    if w.node_affinity > 0 {
        let mut s = take();
        match &statics.preferred_affinity {
            Some(per_node) => s.extend(feasible.iter().map(|&n| per_node[n])),
            None => s.resize(feasible.len(), 0),
        }
        score::default_normalize(&mut s, false);
        plugins.push(("NodeAffinity", w.node_affinity, s));
    }
    if w.pod_topology_spread > 0 {
        let mut s = take();
        score_spread(input, state, caches, &mut s);
        plugins.push(("PodTopologySpread", w.pod_topology_spread, s));
    }
    if w.inter_pod_affinity > 0 {
        let mut s = take();
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
        plugins.push(("InterPodAffinity", w.inter_pod_affinity, s));
    }
}

/// Requested (the pod included; with the non-zero defaults where asked) and allocatable of
/// `resources` on node `n`, into `buf`.
#[inline]
fn uses(
    snapshot: &Snapshot,
    state: &ClusterState,
    n: usize,
    resources: &[ScoredResource<'_>],
    buf: &mut Vec<ResourceUse>,
) {
    buf.clear();
    let Some(load) = state.loads.get(n) else {
        return;
    };
    let allocatable = &snapshot.node(n as NodeId).allocatable;
    for &(key, weight, pod_amount, with_nonzero) in resources {
        let on_node = match (key, with_nonzero) {
            (ResKey::Cpu, true) => load.nonzero_cpu,
            (ResKey::Memory, true) => load.nonzero_memory,
            _ => key.get(&load.requested),
        };
        buf.push(ResourceUse {
            requested: on_node + pod_amount,
            allocatable: key.get(allocatable),
            weight,
        });
    }
}

/// PodTopologySpread's score (`scoring.go`) over the feasible nodes, into `out`: the pod's
/// ScheduleAnyway constraints, or — without constraints of its own, for a pod of a ReplicaSet,
/// StatefulSet or ReplicationController — the system defaults (hostname maxSkew 3, zone maxSkew
/// 5) counting the controller's pods (kube-scheduler uses the selectors of the Services and
/// controllers selecting the pod; the controller's own pods are what they select).
fn score_spread(
    input: &ScoreInput<'_>,
    state: &mut ClusterState,
    caches: &mut Caches,
    out: &mut Vec<i64>,
) {
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
        out.resize(feasible.len(), 0);
        return;
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
    let mut raw = vec![0f64; feasible.len()];
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
        if *key == HOSTNAME {
            for (i, &n) in feasible.iter().enumerate() {
                let c = i64::from(per_node.get(n).copied().unwrap_or(0));
                raw[i] += c as f64 * w + skew_part;
            }
            continue;
        }
        // Counts over every eligible node of each domain.
        let counts = domain_counts(per_node, domains, |n| {
            (!*honor_affinity || statics.affinity_ok[n]) && (!require_all || has_all(n))
        });
        for (i, &n) in feasible.iter().enumerate() {
            if let Some(d) = domains.of[n] {
                raw[i] += counts[d as usize] as f64 * w + skew_part;
            }
        }
    }
    let raw: Vec<Option<i64>> = raw
        .iter()
        .enumerate()
        .map(|(i, s)| (!is_ignored(i)).then(|| s.round() as i64))
        .collect();
    out.extend(score::spread_normalize(&raw));
}
