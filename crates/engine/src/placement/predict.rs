//! One prediction: the Filter plugins over every node, then the Score plugins over the feasible
//! ones, weighted and summed as kube-scheduler's default profile does (`schedule_one.go`), on the
//! [`ClusterState`] of the cycle so far.

pub use super::cache::{Caches, Rejection, StaticFit};
use super::plugin_scores::{PluginScores, Scores, SpreadTable};
use super::profile::SchedulerProfile;
use super::resources::ResourceView;
use super::scoring::{ScoreInput, score_plugins};
use super::state::ClusterState;
use super::terms::{self, Spread, domain_counts};
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};
use k8s_openapi::api::core::v1::PodAffinityTerm;

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
    let ports_taken = if f.node_ports {
        caches.ports.taken(snapshot, state, pod)
    } else {
        None
    };
    // NodeResourcesFit's verdicts and the resource scores of the pod's shape, brought up to date.
    let mut memo = std::mem::take(&mut caches.resources);
    let resources = memo.view(snapshot, state, profile, p);
    // Filter: the node-only and resource plugins in one pass, then the plugins reading other
    // pods over the nodes left; only the current node's rejecting plugin is named.
    let basic = BasicFilters {
        filters: f,
        statics: &statics,
        ports_taken: ports_taken.as_deref(),
        fits: &resources.fits,
    };
    let feasible = &mut scratch.feasible;
    basic.pass(n_nodes, feasible);
    let current = p.node.map(|n| n as usize).filter(|&n| n < n_nodes);
    let mut current_filtered = current.and_then(|n| basic.rejection(n));
    let spreads = terms::spreads(p);
    if f.pod_topology_spread
        && spreads.iter().any(|s| s.hard)
        && removes_current(current, feasible, |feasible| {
            filter_spread(snapshot, state, caches, &statics, &spreads, feasible)
        })
    {
        current_filtered = Some("PodTopologySpread");
    }
    let aff = terms::affinity_terms(p);
    if f.inter_pod_affinity
        && removes_current(current, feasible, |feasible| {
            filter_inter_pod(snapshot, state, caches, p, &aff, feasible)
        })
    {
        current_filtered = Some("InterPodAffinity");
    }
    let mut prediction = Prediction {
        feasible: feasible.len(),
        strategy: profile.strategy.name(),
        current_filtered,
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
        score_and_choose(
            &input,
            state,
            caches,
            &mut scratch.pool,
            &mut scratch.plugins,
            resources,
            &mut prediction,
        );
    }
    caches.scratch = scratch;
    caches.resources = memo;
    prediction
}

/// Applies `filter` to `feasible`; whether it removes the `current` node.
fn removes_current(
    current: Option<usize>,
    feasible: &mut Vec<usize>,
    filter: impl FnOnce(&mut Vec<usize>),
) -> bool {
    let holds_current =
        |feasible: &[usize]| current.is_some_and(|c| feasible.binary_search(&c).is_ok());
    let before = holds_current(feasible);
    filter(feasible);
    before && !holds_current(feasible)
}

/// The Score plugins over the feasible nodes of `input`, then the choice among them; the
/// per-node score vectors go back to `pool`.
fn score_and_choose(
    input: &ScoreInput<'_>,
    state: &mut ClusterState,
    caches: &mut Caches,
    pool: &mut Vec<Vec<i64>>,
    plugins: &mut Vec<PluginScores>,
    resources: &ResourceView,
    prediction: &mut Prediction,
) {
    score_plugins(input, state, caches, pool, plugins);
    choose(input.pod, input.feasible, plugins, resources, prediction);
    pool.extend(plugins.drain(..).filter_map(|p| match p.scores {
        Scores::PerNode(v) => Some(v),
        _ => None,
    }));
}

/// The Filter plugins that read only the node and its load: NodeUnschedulable, NodeAffinity,
/// TaintToleration, NodePorts and NodeResourcesFit, in that order.
struct BasicFilters<'a> {
    filters: &'a super::profile::Filters,
    statics: &'a StaticFit,
    /// Per node, whether a host port the pod binds is taken (`None`: none is).
    ports_taken: Option<&'a [bool]>,
    fits: &'a [bool],
}

impl BasicFilters<'_> {
    /// Fills `feasible` with every node passing them, in node order.
    fn pass(&self, n_nodes: usize, feasible: &mut Vec<usize>) {
        feasible.clear();
        let f = self.filters;
        let s = self.statics;
        let default_static = f.node_unschedulable && f.node_affinity && f.taint_toleration;
        match self.ports_taken {
            // The default profile and no host port: one combined static verdict and the fit.
            None if default_static && f.node_resources_fit => {
                // 64 nodes at a time: a mask of both verdicts, then its set bits.
                let (ok, fits) = (&s.static_ok, self.fits);
                let n_nodes = n_nodes.min(ok.len()).min(fits.len());
                feasible.reserve(n_nodes);
                for (c, (ok, fits)) in ok[..n_nodes].chunks(64).zip(fits.chunks(64)).enumerate() {
                    let mut mask = 0u64;
                    for (j, (a, b)) in ok.iter().zip(fits).enumerate() {
                        mask |= u64::from(*a & *b) << j;
                    }
                    while mask != 0 {
                        feasible.push(c * 64 + mask.trailing_zeros() as usize);
                        mask &= mask - 1;
                    }
                }
            }
            _ => feasible.extend((0..n_nodes).filter(|&n| self.rejection(n).is_none())),
        }
    }

    /// The first of them rejecting node `n`.
    fn rejection(&self, n: usize) -> Option<Rejection> {
        let f = self.filters;
        let s = self.statics;
        let no = |v: &[bool]| !v.get(n).copied().unwrap_or(false);
        if f.node_unschedulable && no(&s.schedulable_ok) {
            Some("NodeUnschedulable")
        } else if f.node_affinity && no(&s.affinity_ok) {
            Some("NodeAffinity")
        } else if f.taint_toleration && no(&s.taints_ok) {
            Some("TaintToleration")
        } else if self
            .ports_taken
            .is_some_and(|t| t.get(n).copied().unwrap_or(false))
        {
            Some("NodePorts")
        } else if f.node_resources_fit && no(self.fits) {
            Some("NodeResourcesFit")
        } else {
            None
        }
    }
}

/// The best node (the first of the ties by node order), the ties, the current node's score and
/// the runner-up, from the plugins' scores of the feasible nodes.
fn choose(
    p: &Pod,
    feasible: &[usize],
    plugins: &[PluginScores],
    resources: &ResourceView,
    prediction: &mut Prediction,
) {
    let totals = Totals::new(plugins, resources);
    let first = totals.best(feasible, &mut prediction.ties);
    let current = p.node.map(|c| c as usize);
    let other = totals.runner_up(feasible, first, current, &prediction.ties);
    let node_score = |i: usize| {
        let plugins: Vec<(&'static str, i64)> = plugins
            .iter()
            .map(|p| (p.name, p.weight * p.at(i, feasible[i], resources)))
            .collect();
        NodeScore {
            total: plugins.iter().map(|(_, s)| s).sum(),
            plugins,
        }
    };
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

/// The plugins' weighted scores summed per feasible node: the uniform scores (the same for every
/// node) summed once, the resource scores read from the shape's view, the per-node vectors, and
/// the spread table by slot.
struct Totals<'a> {
    uniform: i64,
    fit_w: i64,
    balanced_w: i64,
    fit: &'a [i16],
    balanced: &'a [i16],
    per_node: Vec<(i64, &'a [i64])>,
    spread: Option<(i64, &'a SpreadTable)>,
    spread_w: i64,
    /// The feasible nodes scoring on their own in the spread table, in order.
    exceptions: &'a [(usize, i64)],
}

impl<'a> Totals<'a> {
    fn new(plugins: &'a [PluginScores], resources: &'a ResourceView) -> Self {
        let (mut uniform, mut fit_w, mut balanced_w) = (0, 0, 0);
        let mut per_node: Vec<(i64, &[i64])> = Vec::new();
        let mut spread: Option<(i64, &SpreadTable)> = None;
        for p in plugins {
            match &p.scores {
                Scores::Uniform(s) => uniform += p.weight * s,
                Scores::Fit => fit_w += p.weight,
                Scores::Balanced => balanced_w += p.weight,
                Scores::PerNode(v) => per_node.push((p.weight, v)),
                Scores::Spread(t) => spread = Some((p.weight, t)),
            }
        }
        let no_exceptions: &[(usize, i64)] = &[];
        let (spread_w, exceptions) =
            spread.map_or((0, no_exceptions), |(w, t)| (w, &t.exceptions[..]));
        Totals {
            uniform,
            fit_w,
            balanced_w,
            fit: &resources.fit,
            balanced: &resources.balanced,
            per_node,
            spread,
            spread_w,
            exceptions,
        }
    }

    /// The total of the `i`-th feasible node, `n`, whose spread exception is `exception`.
    #[inline]
    fn of(&self, i: usize, n: usize, exception: Option<&(usize, i64)>) -> i64 {
        let mut t = self.uniform
            + self.fit_w * self.fit.get(n).map_or(0, |&s| i64::from(s))
            + self.balanced_w * self.balanced.get(n).map_or(0, |&s| i64::from(s));
        for (w, v) in &self.per_node {
            t += w * v.get(i).copied().unwrap_or(0);
        }
        t + match (exception, self.spread) {
            (Some(&(_, s)), _) => self.spread_w * s,
            (None, Some((_, table))) => self.spread_w * table.of_slot(n),
            (None, None) => 0,
        }
    }

    /// One pass: each total, the best total and the index of its first node (named; the other
    /// ties are listed in `ties`, which holds every tie).
    fn best(&self, feasible: &[usize], ties: &mut Vec<NodeId>) -> Option<usize> {
        let mut best = i64::MIN;
        let mut first = None;
        ties.clear();
        let mut next_exception = self.exceptions.iter().peekable();
        for (i, &n) in feasible.iter().enumerate() {
            let t = self.of(i, n, next_exception.next_if(|e| e.0 == i));
            if t > best {
                best = t;
                first = Some(i);
                ties.clear();
            }
            if t == best {
                ties.push(n as NodeId);
            }
        }
        first
    }

    /// The index of the runner-up: the best node other than the current one, first by node
    /// order — the best node or the next tie, unless the current node is the only best one; then
    /// a second pass.
    fn runner_up(
        &self,
        feasible: &[usize],
        first: Option<usize>,
        current: Option<usize>,
        ties: &[NodeId],
    ) -> Option<usize> {
        match first {
            Some(i) if Some(feasible[i]) != current => Some(i),
            Some(_) if ties.len() > 1 => ties
                .get(1)
                .and_then(|&n| feasible.binary_search(&(n as usize)).ok()),
            Some(_) => {
                let mut other: Option<(usize, i64)> = None;
                let mut next_exception = self.exceptions.iter().peekable();
                for (i, &n) in feasible.iter().enumerate() {
                    let t = self.of(i, n, next_exception.next_if(|e| e.0 == i));
                    if Some(n) != current && other.is_none_or(|(_, o)| t > o) {
                        other = Some((i, t));
                    }
                }
                other.map(|(i, _)| i)
            }
            None => None,
        }
    }
}

/// PodTopologySpread's filter (`filtering.go`): on a node with every hard constraint's key,
/// matching pods in its domain + the pod itself − the smallest domain count ≤ maxSkew.
fn filter_spread(
    snapshot: &Snapshot,
    state: &mut ClusterState,
    caches: &mut Caches,
    statics: &StaticFit,
    spreads: &[Spread],
    feasible: &mut Vec<usize>,
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
        feasible.retain(|&n| {
            domains.of[n]
                .filter(|_| has_keys(n))
                .is_some_and(|d| counts[d as usize] + i64::from(s.self_match) - min <= s.max_skew)
        });
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
    feasible: &mut Vec<usize>,
) {
    filter_existing_anti(snapshot, state, caches, p, feasible);
    for t in &aff.required_anti {
        let m = terms::term_matcher(t, p);
        let per_node = state.counts(snapshot, &m);
        let domains = caches.domains.get(snapshot, &t.topology_key);
        let counts = domain_counts(per_node, domains, |_| true);
        feasible.retain(|&n| domains.of[n].is_none_or(|d| counts[d as usize] == 0));
    }
    filter_required_affinity(snapshot, state, caches, p, &aff.required_affinity, feasible);
}

/// Existing pods whose required anti-affinity selects the incoming pod forbid their domain (the
/// holder's node's value of the term's key): the nodes in one leave `feasible`.
fn filter_existing_anti(
    snapshot: &Snapshot,
    state: &mut ClusterState,
    caches: &mut Caches,
    p: &Pod,
    feasible: &mut Vec<usize>,
) {
    let mut forbidden: Vec<(String, NodeId)> = Vec::new();
    {
        let index = caches.existing_anti(snapshot, state);
        for g in index.picking(snapshot, p) {
            let Some((_, holders)) = index.groups.get(g) else {
                continue;
            };
            for (pod, node, key) in holders {
                let live = *pod > PodId::MAX / 2 || state.holds_node(snapshot, *pod);
                if live {
                    forbidden.push((key.clone(), *node));
                }
            }
        }
    }
    if forbidden.is_empty() {
        return;
    }
    // Per key, the forbidden domains: a node is in one exactly when its value of the key is the
    // holder's node's.
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
    feasible.retain(|&n| {
        !by_key
            .iter()
            .any(|(d, f)| d.of[n].is_some_and(|d| f[d as usize]))
    });
}

/// The pod's required affinity: a node needs every term's key and, per term, a matching pod in
/// its domain — unless no pod matches anywhere and the pod selects itself.
fn filter_required_affinity(
    snapshot: &Snapshot,
    state: &mut ClusterState,
    caches: &mut Caches,
    p: &Pod,
    required: &[&PodAffinityTerm],
    feasible: &mut Vec<usize>,
) {
    if required.is_empty() {
        return;
    }
    let mut per_term = Vec::new();
    let mut any = false;
    let mut self_matches_all = true;
    for t in required {
        let m = terms::term_matcher(t, p);
        self_matches_all &= m.picks(snapshot, p);
        let per_node = state.counts(snapshot, &m);
        let counts = domain_counts(
            per_node,
            caches.domains.get(snapshot, &t.topology_key),
            |_| true,
        );
        any |= counts.iter().any(|&c| c > 0);
        per_term.push((t.topology_key.as_str(), counts));
    }
    let per_term: Vec<(&terms::Domains, Vec<i64>)> = per_term
        .into_iter()
        .filter_map(|(key, counts)| caches.domains.built(key).map(|d| (d, counts)))
        .collect();
    feasible.retain(|&n| {
        let mut keys = true;
        let mut pods_exist = true;
        for (domains, counts) in &per_term {
            match domains.of[n] {
                Some(d) => pods_exist &= counts[d as usize] > 0,
                None => keys = false,
            }
        }
        // The first pod of a group that selects itself may go anywhere with the keys.
        keys && (pods_exist || (!any && self_matches_all))
    });
}
