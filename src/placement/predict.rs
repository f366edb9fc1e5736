//! One prediction: the Filter plugins over every node, then the Score plugins over the feasible
//! ones, weighted and summed as kube-scheduler's default profile does (`schedule_one.go`), on the
//! [`ClusterState`] of the cycle so far.

pub use super::cache::{Caches, Rejection, StaticFit};
use super::profile::SchedulerProfile;
use super::scoring::{PluginScores, ScoreInput, score_plugins};
use super::state::{ClusterState, ResKey};
use super::terms::{self, Spread, domain_counts};
use crate::snapshot::resources::PODS;
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

/// A node's total score and each plugin's weighted part of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeScore {
    /// The sum kube-scheduler ranks by.
    pub total: i64,
    /// Per Score plugin: its normalised score times its weight.
    pub plugins: Vec<(&'static str, i64)>,
}

impl NodeScore {
    /// The weighted score of `plugin` (0 when it did not score).
    pub fn plugin(&self, plugin: &str) -> i64 {
        self.plugins
            .iter()
            .find(|(p, _)| *p == plugin)
            .map_or(0, |(_, s)| *s)
    }
}

/// Where the replacement of a pod is predicted to land.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prediction {
    /// The best node (`None`: no node passes the filters).
    pub best: Option<NodeId>,
    /// Every node with the best score, `best` included (kube-scheduler picks one at random).
    pub ties: Vec<NodeId>,
    /// The best node's score.
    pub best_score: Option<NodeScore>,
    /// The pod's current node's score (`None`: it does not pass the filters, see
    /// `current_filtered`, or the pod has no node).
    pub current_score: Option<NodeScore>,
    /// The Filter plugin that rejects the current node, if one does.
    pub current_filtered: Option<&'static str>,
    /// The best node other than the current one, and its score (what the current node is
    /// compared with when it wins).
    pub runner_up: Option<(NodeId, NodeScore)>,
    /// How many nodes pass the filters.
    pub feasible: usize,
    /// The scoring strategy in force (for explanations).
    pub strategy: &'static str,
}

impl Prediction {
    /// Whether the replacement may land on `node`: it is the best node or tied with it.
    pub fn may_land_on(&self, node: NodeId) -> bool {
        self.ties.contains(&node)
    }
}

/// Predicts where kube-scheduler would place `pod`'s replacement (same spec, no nodeName) with
/// `profile`, on `state` (the pod itself must already be removed from it).
pub fn predict(
    snapshot: &Snapshot,
    state: &mut ClusterState,
    caches: &mut Caches,
    profile: &SchedulerProfile,
    pod: PodId,
) -> Prediction {
    let p = snapshot.pod(pod);
    let f = &profile.filters;
    let statics = caches.statics(snapshot, p);
    let n_nodes = snapshot.nodes.len();
    let mut scratch = std::mem::take(&mut caches.scratch);
    // Filter: cheapest first; remember why the current node fails.
    let rejected = &mut scratch.rejected;
    rejected.clear();
    let ports_taken = if f.node_ports {
        caches.ports.taken(snapshot, state, pod)
    } else {
        None
    };
    // The pod's requests NodeResourcesFit checks, resolved once.
    let wants: Vec<(ResKey<'_>, i64)> = p
        .requests
        .names()
        .filter(|&name| name != PODS)
        .map(|name| (ResKey::of(name), p.requests.get(name)))
        .filter(|&(_, want)| want > 0)
        .collect();
    rejected.extend((0..n_nodes).map(|n| {
        if f.node_unschedulable && !statics.schedulable_ok[n] {
            Some("NodeUnschedulable")
        } else if f.node_affinity && !statics.affinity_ok[n] {
            Some("NodeAffinity")
        } else if f.taint_toleration && !statics.taints_ok[n] {
            Some("TaintToleration")
        } else if ports_taken
            .as_ref()
            .is_some_and(|t| t.get(n).copied().unwrap_or(false))
        {
            Some("NodePorts")
        } else if f.node_resources_fit && !fits(snapshot, state, &wants, n) {
            Some("NodeResourcesFit")
        } else {
            None
        }
    }));
    let spreads = terms::spreads(p);
    if f.pod_topology_spread && spreads.iter().any(|s| s.hard) {
        filter_spread(snapshot, state, caches, &statics, &spreads, rejected);
    }
    let aff = terms::affinity_terms(p);
    if f.inter_pod_affinity {
        filter_inter_pod(snapshot, state, caches, p, &aff, rejected);
    }
    let feasible = &mut scratch.feasible;
    feasible.clear();
    feasible.extend((0..n_nodes).filter(|&n| rejected[n].is_none()));
    let mut prediction = Prediction {
        feasible: feasible.len(),
        strategy: profile.strategy.name(),
        current_filtered: p
            .node
            .and_then(|n| rejected.get(n as usize).copied().flatten()),
        ..Default::default()
    };
    if !feasible.is_empty() {
        let input = ScoreInput {
            snapshot,
            pod: p,
            profile,
            statics: &statics,
            spreads: &spreads,
            aff: &aff,
            feasible,
        };
        let plugins = &mut scratch.plugins;
        score_plugins(&input, state, caches, &mut scratch.pool, plugins);
        choose(p, feasible, plugins, &mut scratch.totals, &mut prediction);
        scratch
            .pool
            .extend(plugins.drain(..).map(|(_, _, scores)| scores));
    }
    caches.scratch = scratch;
    prediction
}

/// The best node (the first of the ties by node order), the ties, the current node's score and
/// the runner-up, from the plugins' scores of the feasible nodes.
fn choose(
    p: &Pod,
    feasible: &[usize],
    plugins: &[PluginScores],
    totals: &mut Vec<i64>,
    prediction: &mut Prediction,
) {
    totals.clear();
    totals.resize(feasible.len(), 0);
    for (_, w, s) in plugins {
        for (t, s) in totals.iter_mut().zip(s) {
            *t += w * s;
        }
    }
    let totals = &totals[..];
    let best = totals.iter().copied().max().unwrap_or(0);
    let node_score = |i: usize| NodeScore {
        total: totals[i],
        plugins: plugins
            .iter()
            .map(|(name, w, s)| (*name, w * s[i]))
            .collect(),
    };
    prediction.ties = feasible
        .iter()
        .zip(totals)
        .filter(|(_, t)| **t == best)
        .map(|(&n, _)| n as NodeId)
        .collect();
    // Of the ties, the first by node order is named; the others are listed.
    if let Some(i) = totals.iter().position(|&t| t == best) {
        prediction.best = Some(feasible[i] as NodeId);
        prediction.best_score = Some(node_score(i));
    }
    if let Some(cur) = p.node
        && let Ok(i) = feasible.binary_search(&(cur as usize))
    {
        prediction.current_score = Some(node_score(i));
    }
    let other = (0..feasible.len())
        .filter(|&i| Some(feasible[i] as NodeId) != p.node)
        .max_by_key(|&i| (totals[i], std::cmp::Reverse(i)));
    prediction.runner_up = other.map(|i| (feasible[i] as NodeId, node_score(i)));
}

/// NodeResourcesFit's filter: a free pod slot and room for every resource in `wants` (the pod's
/// positive requests other than pods).
#[inline]
fn fits(snapshot: &Snapshot, state: &ClusterState, wants: &[(ResKey<'_>, i64)], n: usize) -> bool {
    let allocatable = &snapshot.node(n as NodeId).allocatable;
    let Some(load) = state.loads.get(n) else {
        return false;
    };
    if allocatable.pods - load.pods <= 0 {
        return false;
    }
    wants
        .iter()
        .all(|&(key, want)| want <= key.get(allocatable) - key.get(&load.requested))
}

/// PodTopologySpread's filter (`filtering.go`): on a node with every hard constraint's key,
/// matching pods in its domain + the pod itself − the smallest domain count ≤ maxSkew.
fn filter_spread(
    snapshot: &Snapshot,
    state: &mut ClusterState,
    caches: &mut Caches,
    statics: &StaticFit,
    spreads: &[Spread],
    rejected: &mut [Option<Rejection>],
) {
    let hard: Vec<&Spread> = spreads.iter().filter(|s| s.hard).collect();
    // A node has a key exactly when it has a domain of it.
    for s in &hard {
        caches.domains.get(snapshot, &s.key);
    }
    let key_domains: Vec<&terms::Domains> = hard
        .iter()
        .filter_map(|s| caches.domains.built(&s.key))
        .collect();
    let has_keys = |n: usize| key_domains.iter().all(|d| d.of[n].is_some());
    for (s, domains) in hard.iter().zip(&key_domains) {
        let per_node = state.counts(snapshot, &s.matcher);
        let eligible = |n: usize| {
            has_keys(n)
                && (!s.honor_affinity || statics.affinity_ok[n])
                && (!s.honor_taints || statics.taints_ok[n])
        };
        let counts = domain_counts(per_node, domains, eligible);
        let mut seen = vec![false; domains.count];
        for (n, d) in domains.of.iter().enumerate() {
            if let Some(d) = d
                && eligible(n)
            {
                seen[*d as usize] = true;
            }
        }
        let present: Vec<i64> = counts
            .iter()
            .zip(&seen)
            .filter(|(_, s)| **s)
            .map(|(c, _)| *c)
            .collect();
        let min = if (present.len() as i64) < s.min_domains {
            0
        } else {
            present.iter().copied().min().unwrap_or(0)
        };
        for (n, r) in rejected.iter_mut().enumerate() {
            if r.is_some() {
                continue;
            }
            let Some(d) = domains.of[n].filter(|_| has_keys(n)) else {
                *r = Some("PodTopologySpread");
                continue;
            };
            let skew = counts[d as usize] + i64::from(s.self_match) - min;
            if skew > s.max_skew {
                *r = Some("PodTopologySpread");
            }
        }
    }
}

/// InterPodAffinity's filter (`filtering.go`): existing pods' required anti-affinity, then the
/// pod's required affinity and anti-affinity, per topology domain.
fn filter_inter_pod(
    snapshot: &Snapshot,
    state: &mut ClusterState,
    caches: &mut Caches,
    p: &Pod,
    aff: &terms::AffinityTerms<'_>,
    rejected: &mut [Option<Rejection>],
) {
    // Existing pods whose required anti-affinity selects the incoming pod forbid their domain
    // (the holder's node's value of the term's key).
    let mut forbidden: Vec<(String, NodeId)> = Vec::new();
    {
        let index = caches.existing_anti(snapshot, state);
        for (m, holders) in &index.groups {
            if !m.picks(snapshot, p) {
                continue;
            }
            for (pod, node, key) in holders {
                let live = *pod > PodId::MAX / 2 || state.present(snapshot, *pod);
                if live {
                    forbidden.push((key.clone(), *node));
                }
            }
        }
    }
    if !forbidden.is_empty() {
        // Per key, the forbidden domains: a node is in one exactly when its value of the key is
        // the holder's node's.
        let mut by_key: Vec<(&str, Vec<bool>)> = Vec::new();
        for (key, holder) in &forbidden {
            let domains = caches.domains.get(snapshot, key);
            let Some(d) = domains.of.get(*holder as usize).copied().flatten() else {
                continue;
            };
            let at = match by_key.iter().position(|(k, _)| k == key) {
                Some(i) => i,
                None => {
                    by_key.push((key, vec![false; domains.count]));
                    by_key.len() - 1
                }
            };
            if let Some(f) = by_key[at].1.get_mut(d as usize) {
                *f = true;
            }
        }
        let by_key: Vec<(&terms::Domains, Vec<bool>)> = by_key
            .into_iter()
            .filter_map(|(k, f)| caches.domains.built(k).map(|d| (d, f)))
            .collect();
        for (n, r) in rejected.iter_mut().enumerate() {
            if r.is_none()
                && by_key
                    .iter()
                    .any(|(d, f)| d.of[n].is_some_and(|d| f[d as usize]))
            {
                *r = Some("InterPodAffinity");
            }
        }
    }
    for t in &aff.required_anti {
        let m = terms::term_matcher(t, p);
        let per_node = state.counts(snapshot, &m).to_vec();
        let domains = caches.domains.get(snapshot, &t.topology_key);
        let counts = domain_counts(&per_node, domains, |_| true);
        for (n, r) in rejected.iter_mut().enumerate() {
            if r.is_none() && domains.of[n].is_some_and(|d| counts[d as usize] > 0) {
                *r = Some("InterPodAffinity");
            }
        }
    }
    if aff.required_affinity.is_empty() {
        return;
    }
    let mut per_term = Vec::new();
    let mut any = false;
    let mut self_matches_all = true;
    for t in &aff.required_affinity {
        let m = terms::term_matcher(t, p);
        self_matches_all &= m.picks(snapshot, p);
        let per_node = state.counts(snapshot, &m).to_vec();
        let domains = caches.domains.get(snapshot, &t.topology_key).clone();
        let counts = domain_counts(&per_node, &domains, |_| true);
        any |= counts.iter().any(|&c| c > 0);
        per_term.push((domains, counts));
    }
    for (n, r) in rejected.iter_mut().enumerate() {
        if r.is_some() {
            continue;
        }
        let mut keys = true;
        let mut pods_exist = true;
        for (domains, counts) in &per_term {
            match domains.of[n] {
                Some(d) => pods_exist &= counts[d as usize] > 0,
                None => keys = false,
            }
        }
        // The first pod of a group that selects itself may go anywhere with the keys.
        if !keys || (!pods_exist && (any || !self_matches_all)) {
            *r = Some("InterPodAffinity");
        }
    }
}
