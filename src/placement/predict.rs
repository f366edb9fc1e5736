//! One prediction: the Filter plugins over every node, then the Score plugins over the feasible
//! ones, weighted and summed as kube-scheduler's default profile does (`schedule_one.go`), on the
//! [`ClusterState`] of the cycle so far.

pub use super::cache::{Caches, Rejection, StaticFit};
use super::plugin_scores::{PluginScores, Scores};
use super::profile::SchedulerProfile;
use super::resources::ResourceView;
use super::scoring::{ScoreInput, score_plugins};
use super::state::ClusterState;
use super::terms::{self, Spread, domain_counts};
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
    // NodeResourcesFit's verdicts and the resource scores of the pod's shape, brought up to date.
    let mut memo = std::mem::take(&mut caches.resources);
    let resources = memo.view(snapshot, state, profile, p);
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
        } else if f.node_resources_fit && !resources.fits[n] {
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
        choose(
            p,
            feasible,
            plugins,
            resources,
            &mut scratch.totals,
            &mut prediction,
        );
        scratch
            .pool
            .extend(plugins.drain(..).filter_map(|p| match p.scores {
                Scores::PerNode(v) => Some(v),
                _ => None,
            }));
    }
    caches.scratch = scratch;
    caches.resources = memo;
    prediction
}

/// The best node (the first of the ties by node order), the ties, the current node's score and
/// the runner-up, from the plugins' scores of the feasible nodes.
fn choose(
    p: &Pod,
    feasible: &[usize],
    plugins: &[PluginScores],
    resources: &ResourceView,
    totals: &mut Vec<i64>,
    prediction: &mut Prediction,
) {
    // One pass for the uniform scores (the same for every node) and the resource scores (read
    // from the shape's view), then the per-node vectors.
    let (mut uniform, mut fit_w, mut balanced_w) = (0, 0, 0);
    for p in plugins {
        match p.scores {
            Scores::Uniform(s) => uniform += p.weight * s,
            Scores::Fit => fit_w += p.weight,
            Scores::Balanced => balanced_w += p.weight,
            Scores::PerNode(_) => {}
        }
    }
    totals.clear();
    totals.extend(feasible.iter().map(|&n| {
        uniform
            + fit_w * i64::from(resources.fit[n])
            + balanced_w * i64::from(resources.balanced[n])
    }));
    for p in plugins {
        if let Scores::PerNode(s) = &p.scores {
            for (t, s) in totals.iter_mut().zip(s) {
                *t += p.weight * s;
            }
        }
    }
    let totals = &totals[..];
    let node_score = |i: usize| NodeScore {
        total: totals[i],
        plugins: plugins
            .iter()
            .map(|p| (p.name, p.weight * p.at(i, feasible[i], resources)))
            .collect(),
    };
    // One pass: the best total, its first node (named; the other ties are listed), every tie,
    // and the runner-up (the best node other than the current one, first by node order).
    let current = p.node.map(|c| c as usize);
    let mut best = i64::MIN;
    let mut first = None;
    let mut other: Option<usize> = None;
    prediction.ties.clear();
    for (i, (&n, &t)) in feasible.iter().zip(totals).enumerate() {
        if t > best {
            best = t;
            first = Some(i);
            prediction.ties.clear();
        }
        if t == best {
            prediction.ties.push(n as NodeId);
        }
        if Some(n) != current && other.is_none_or(|o| t > totals[o]) {
            other = Some(i);
        }
    }
    if let Some(i) = first {
        prediction.best = Some(feasible[i] as NodeId);
        prediction.best_score = Some(node_score(i));
    }
    if let Some(cur) = current
        && let Ok(i) = feasible.binary_search(&cur)
    {
        prediction.current_score = Some(node_score(i));
    }
    prediction.runner_up = other.map(|i| (feasible[i] as NodeId, node_score(i)));
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
        for g in index.picking(snapshot, p) {
            let Some((_, holders)) = index.groups.get(g) else {
                continue;
            };
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
