//! One prediction: the Filter plugins over every node, then the Score plugins over the feasible
//! ones, weighted and summed as kube-scheduler's default profile does (`schedule_one.go`), on the
//! [`ClusterState`] of the cycle so far.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use rustc_hash::FxHashMap;

use super::ports::UsedPorts;
use super::profile::SchedulerProfile;
use super::score::{self, ResourceUse};
use super::state::{ClusterState, Matcher, nonzero};
use super::terms::{self, DomainIndex, HOSTNAME, Spread, ZONE};
use crate::scheduling::{affinity, taints};
use crate::snapshot::resources::{CPU, MEMORY, PODS};
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

/// Why a Filter plugin rejects a node (the plugin's name).
pub type Rejection = &'static str;

/// Per pod spec (tolerations, nodeSelector, affinity shared by an owner's pods): the static
/// filters' verdicts per node, computed once per cycle.
struct StaticFit {
    /// NodeAffinity (nodeSelector + required node affinity).
    affinity_ok: Vec<bool>,
    /// TaintToleration (NoSchedule / NoExecute).
    taints_ok: Vec<bool>,
    /// NodeUnschedulable.
    schedulable_ok: Vec<bool>,
}

/// The `node.kubernetes.io/unschedulable:NoSchedule` taint a cordoned node carries.
fn unschedulable_taint() -> Taint {
    Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

/// A holder of a required anti-affinity term: the pod (`PodId::MAX - pod` for a predicted
/// replacement), its node, the term's topology key.
type AntiHolder = (PodId, NodeId, String);

/// Existing pods' required anti-affinity terms, grouped by matcher (the pods of one owner share
/// theirs): an incoming pod is matched once per group, not once per pod.
#[derive(Default)]
struct AntiIndex {
    /// Per distinct matcher: the matcher and its holders (pod — `PodId::MAX - pod` for a
    /// predicted replacement —, its node, the term's topology key).
    groups: Vec<(Matcher, Vec<AntiHolder>)>,
    /// Matcher key → index in `groups`.
    at: FxHashMap<String, usize>,
}

impl AntiIndex {
    fn push(&mut self, pod: PodId, node: NodeId, key: String, m: Matcher) {
        let k = m.key();
        let i = match self.at.get(&k) {
            Some(&i) => i,
            None => {
                self.groups.push((m, Vec::new()));
                self.at.insert(k, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        if let Some((_, holders)) = self.groups.get_mut(i) {
            holders.push((pod, node, key));
        }
    }
}

/// The simulator's memory across predictions of one cycle.
#[derive(Default)]
pub struct Caches {
    statics: FxHashMap<(usize, usize, usize), Arc<StaticFit>>,
    domains: DomainIndex,
    /// Pods with required anti-affinity on their node, grouped by the term's matcher, built on
    /// first need and extended by placements.
    existing_anti: Option<AntiIndex>,
    /// Pods binding host ports (NodePorts), built on first need and extended by placements.
    ports: UsedPorts,
}

impl Caches {
    fn statics(&mut self, snapshot: &Snapshot, p: &Pod) -> Arc<StaticFit> {
        let key = (
            Arc::as_ptr(&p.tolerations) as *const u8 as usize,
            Arc::as_ptr(&p.node_selector) as *const u8 as usize,
            p.affinity
                .as_ref()
                .map_or(0, |a| Arc::as_ptr(a) as *const u8 as usize),
        );
        self.statics
            .entry(key)
            .or_insert_with(|| {
                let unsched = unschedulable_taint();
                let tolerates_unsched = taints::tolerated(&p.tolerations, &unsched);
                let nodes = 0..snapshot.nodes.len() as NodeId;
                Arc::new(StaticFit {
                    affinity_ok: nodes
                        .clone()
                        .map(|n| affinity::matches_node_selector_and_affinity(p, snapshot.node(n)))
                        .collect(),
                    taints_ok: nodes
                        .clone()
                        .map(|n| {
                            taints::tolerates_all(
                                &p.tolerations,
                                &snapshot.node(n).taints,
                                taints::is_scheduling_taint,
                            )
                        })
                        .collect(),
                    schedulable_ok: nodes
                        .map(|n| !snapshot.node(n).unschedulable || tolerates_unsched)
                        .collect(),
                })
            })
            .clone()
    }

    /// Records a replacement placed on `node` for the existing anti-affinity list.
    pub fn placed(&mut self, snapshot: &Snapshot, pod: PodId, node: NodeId) {
        self.ports.placed(snapshot, pod, node);
        if let Some(list) = &mut self.existing_anti {
            let p = snapshot.pod(pod);
            for t in affinity::required_anti_affinity_terms(p) {
                list.push(
                    PodId::MAX - pod,
                    node,
                    t.topology_key.clone(),
                    terms::term_matcher(t, p),
                );
            }
        }
    }

    fn existing_anti(&mut self, snapshot: &Snapshot, state: &ClusterState) -> &AntiIndex {
        self.existing_anti.get_or_insert_with(|| {
            let mut list = AntiIndex::default();
            for pod in 0..snapshot.pods.len() as PodId {
                let p = snapshot.pod(pod);
                let terms = affinity::required_anti_affinity_terms(p);
                if terms.is_empty() || !state.present(snapshot, pod) {
                    continue;
                }
                if let Some(n) = p.node {
                    for t in terms {
                        list.push(pod, n, t.topology_key.clone(), terms::term_matcher(t, p));
                    }
                }
            }
            for (n, placed) in state.placed.iter().enumerate() {
                for &pod in placed {
                    let p = snapshot.pod(pod);
                    for t in affinity::required_anti_affinity_terms(p) {
                        list.push(
                            PodId::MAX - pod,
                            n as NodeId,
                            t.topology_key.clone(),
                            terms::term_matcher(t, p),
                        );
                    }
                }
            }
            list
        })
    }
}

/// Counts of a matcher per domain of `key` over the nodes `eligible` admits.
fn domain_counts(
    per_node: &[u32],
    domains: &terms::Domains,
    eligible: impl Fn(usize) -> bool,
) -> Vec<i64> {
    let mut counts = vec![0i64; domains.count];
    for (n, d) in domains.of.iter().enumerate() {
        if let Some(d) = d
            && eligible(n)
        {
            counts[*d as usize] += i64::from(per_node.get(n).copied().unwrap_or(0));
        }
    }
    counts
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
    // Filter: cheapest first; remember why the current node fails.
    let mut rejected: Vec<Option<Rejection>> = vec![None; n_nodes];
    let (pod_cpu, pod_mem) = nonzero(p);
    let ports_taken = if f.node_ports {
        caches.ports.taken(snapshot, state, pod)
    } else {
        None
    };
    for (n, r) in rejected.iter_mut().enumerate() {
        *r = if f.node_unschedulable && !statics.schedulable_ok[n] {
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
        } else if f.node_resources_fit && !fits(snapshot, state, p, n) {
            Some("NodeResourcesFit")
        } else {
            None
        };
    }
    let spreads = terms::spreads(p);
    if f.pod_topology_spread && spreads.iter().any(|s| s.hard) {
        filter_spread(snapshot, state, caches, &statics, &spreads, &mut rejected);
    }
    let aff = terms::affinity_terms(p);
    if f.inter_pod_affinity {
        filter_inter_pod(snapshot, state, caches, p, &aff, &mut rejected);
    }
    let feasible: Vec<usize> = (0..n_nodes).filter(|&n| rejected[n].is_none()).collect();
    let mut prediction = Prediction {
        feasible: feasible.len(),
        strategy: profile.strategy.name(),
        current_filtered: p
            .node
            .and_then(|n| rejected.get(n as usize).copied().flatten()),
        ..Default::default()
    };
    if feasible.is_empty() {
        return prediction;
    }
    // Score.
    let w = &profile.weights;
    let mut plugins: Vec<(&'static str, i64, Vec<i64>)> = Vec::new();
    let mut buf: Vec<ResourceUse> = Vec::with_capacity(4);
    if w.node_resources_fit > 0 {
        let s = feasible
            .iter()
            .map(|&n| {
                resource_uses(
                    snapshot,
                    state,
                    p,
                    n,
                    &profile.fit_resources,
                    (pod_cpu, pod_mem),
                    &mut buf,
                );
                score::fit_score(&profile.strategy, &buf)
            })
            .collect();
        plugins.push(("NodeResourcesFit", w.node_resources_fit, s));
    }
    if w.balanced_allocation > 0 {
        let s = feasible
            .iter()
            .map(|&n| {
                actual_uses(snapshot, state, p, n, &profile.balanced_resources, &mut buf);
                score::balanced_score(&buf)
            })
            .collect();
        plugins.push(("NodeResourcesBalancedAllocation", w.balanced_allocation, s));
    }
    if w.taint_toleration > 0 {
        let prefer: Vec<&Toleration> = p
            .tolerations
            .iter()
            .filter(|t| {
                t.effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
            })
            .collect();
        let mut s: Vec<i64> = feasible
            .iter()
            .map(|&n| {
                snapshot
                    .node(n as NodeId)
                    .taints
                    .iter()
                    .filter(|t| t.effect == "PreferNoSchedule")
                    .filter(|t| !prefer.iter().any(|tol| taints::tolerates(tol, t)))
                    .count() as i64
            })
            .collect();
        score::default_normalize(&mut s, true);
        plugins.push(("TaintToleration", w.taint_toleration, s));
    }
    if w.node_affinity > 0 {
        let mut s: Vec<i64> = if affinity::has_preferred_node_affinity(p) {
            feasible
                .iter()
                .map(|&n| affinity::preferred_node_affinity_score(p, snapshot.node(n as NodeId)))
                .collect()
        } else {
            vec![0; feasible.len()]
        };
        score::default_normalize(&mut s, false);
        plugins.push(("NodeAffinity", w.node_affinity, s));
    }
    if w.pod_topology_spread > 0 {
        let s = score_spread(
            snapshot, state, caches, &statics, p, profile, &spreads, &feasible,
        );
        plugins.push(("PodTopologySpread", w.pod_topology_spread, s));
    }
    if w.inter_pod_affinity > 0 {
        let mut s = vec![0i64; feasible.len()];
        for (term, weight) in &aff.preferred {
            let m = terms::term_matcher(term, p);
            let per_node = state.counts(snapshot, &m).to_vec();
            let domains = caches.domains.get(snapshot, &term.topology_key);
            let counts = domain_counts(&per_node, domains, |_| true);
            for (i, &n) in feasible.iter().enumerate() {
                if let Some(d) = domains.of[n] {
                    s[i] += weight * counts[d as usize];
                }
            }
        }
        score::min_max_normalize(&mut s);
        plugins.push(("InterPodAffinity", w.inter_pod_affinity, s));
    }
    let total = |i: usize| plugins.iter().map(|(_, w, s)| w * s[i]).sum::<i64>();
    let totals: Vec<i64> = (0..feasible.len()).map(total).collect();
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
        .zip(&totals)
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
    prediction
}

/// NodeResourcesFit's filter: a free pod slot and room for every requested resource.
fn fits(snapshot: &Snapshot, state: &ClusterState, p: &Pod, n: usize) -> bool {
    let node = snapshot.node(n as NodeId);
    let Some(load) = state.loads.get(n) else {
        return false;
    };
    if node.allocatable.pods - load.pods <= 0 {
        return false;
    }
    p.requests.names().all(|name| {
        let want = p.requests.get(name);
        name == PODS || want <= 0 || want <= node.allocatable.get(name) - load.requested.get(name)
    })
}

/// Requested (the pod included, with the non-zero defaults for cpu and memory) and allocatable of
/// `resources` on node `n`, into `buf`.
fn resource_uses(
    snapshot: &Snapshot,
    state: &ClusterState,
    p: &Pod,
    n: usize,
    resources: &[(String, i64)],
    (pod_cpu, pod_mem): (i64, i64),
    buf: &mut Vec<ResourceUse>,
) {
    buf.clear();
    let node = snapshot.node(n as NodeId);
    let Some(load) = state.loads.get(n) else {
        return;
    };
    for (name, weight) in resources {
        let requested = match name.as_str() {
            CPU => load.nonzero_cpu + pod_cpu,
            MEMORY => load.nonzero_memory + pod_mem,
            other => load.requested.get(other) + p.requests.get(other),
        };
        buf.push(ResourceUse {
            requested,
            allocatable: node.allocatable.get(name),
            weight: *weight,
        });
    }
}

/// As [`resource_uses`] with the actual requests (BalancedAllocation's `useRequested`).
fn actual_uses(
    snapshot: &Snapshot,
    state: &ClusterState,
    p: &Pod,
    n: usize,
    resources: &[(String, i64)],
    buf: &mut Vec<ResourceUse>,
) {
    buf.clear();
    let node = snapshot.node(n as NodeId);
    let Some(load) = state.loads.get(n) else {
        return;
    };
    for (name, weight) in resources {
        buf.push(ResourceUse {
            requested: load.requested.get(name) + p.requests.get(name),
            allocatable: node.allocatable.get(name),
            weight: *weight,
        });
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
    rejected: &mut [Option<Rejection>],
) {
    let hard: Vec<&Spread> = spreads.iter().filter(|s| s.hard).collect();
    let keys: Vec<&str> = hard.iter().map(|s| s.key.as_str()).collect();
    let has_keys = |n: usize| {
        let labels = &snapshot.node(n as NodeId).labels;
        keys.iter().all(|k| labels.contains_key(*k))
    };
    for s in hard {
        let per_node = state.counts(snapshot, &s.matcher).to_vec();
        let domains = caches.domains.get(snapshot, &s.key);
        let eligible = |n: usize| {
            has_keys(n)
                && (!s.honor_affinity || statics.affinity_ok[n])
                && (!s.honor_taints || statics.taints_ok[n])
        };
        let counts = domain_counts(&per_node, domains, eligible);
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
    // Existing pods whose required anti-affinity selects the incoming pod forbid their domain.
    let mut forbidden: Vec<(String, String)> = Vec::new();
    {
        let index = caches.existing_anti(snapshot, state);
        for (m, holders) in &index.groups {
            if !m.picks(snapshot, p) {
                continue;
            }
            for (pod, node, key) in holders {
                let live = *pod > PodId::MAX / 2 || state.present(snapshot, *pod);
                if live && let Some(v) = snapshot.node(*node).labels.get(key) {
                    forbidden.push((key.clone(), v.clone()));
                }
            }
        }
    }
    if !forbidden.is_empty() {
        for (n, r) in rejected.iter_mut().enumerate() {
            let labels = &snapshot.node(n as NodeId).labels;
            if r.is_none() && forbidden.iter().any(|(k, v)| labels.get(k) == Some(v)) {
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

/// PodTopologySpread's score (`scoring.go`) over the feasible nodes: the pod's ScheduleAnyway
/// constraints, or — without constraints of its own, for a pod of a ReplicaSet, StatefulSet or
/// ReplicationController — the system defaults (hostname maxSkew 3, zone maxSkew 5) counting the
/// controller's pods (kube-scheduler uses the selectors of the Services and controllers selecting
/// the pod; the controller's own pods are what they select).
#[allow(clippy::too_many_arguments)]
fn score_spread(
    snapshot: &Snapshot,
    state: &mut ClusterState,
    caches: &mut Caches,
    statics: &StaticFit,
    p: &Pod,
    profile: &SchedulerProfile,
    spreads: &[Spread],
    feasible: &[usize],
) -> Vec<i64> {
    // (key, maxSkew, per-node counts, honor affinity).
    let mut constraints: Vec<(String, i64, Vec<u32>, bool)> = Vec::new();
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
            let counts = state.owner_counts(snapshot, &o.uid).to_vec();
            constraints.push((HOSTNAME.to_string(), 3, counts.clone(), true));
            constraints.push((ZONE.to_string(), 5, counts, true));
        }
    } else {
        for s in spreads.iter().filter(|s| !s.hard) {
            let counts = state.counts(snapshot, &s.matcher).to_vec();
            constraints.push((s.key.clone(), s.max_skew, counts, s.honor_affinity));
        }
    }
    if constraints.is_empty() {
        return vec![0; feasible.len()];
    }
    let require_all = !system;
    let has_all = |n: usize| {
        let labels = &snapshot.node(n as NodeId).labels;
        constraints.iter().all(|(k, ..)| labels.contains_key(k))
    };
    let ignored: Vec<bool> = feasible
        .iter()
        .map(|&n| require_all && !has_all(n))
        .collect();
    let mut raw = vec![0f64; feasible.len()];
    for (key, max_skew, per_node, honor_affinity) in &constraints {
        if key == HOSTNAME {
            let size = ignored.iter().filter(|i| !**i).count();
            for (i, &n) in feasible.iter().enumerate() {
                let c = i64::from(per_node.get(n).copied().unwrap_or(0));
                raw[i] += score::spread_score_for_count(c, *max_skew, size);
            }
            continue;
        }
        let domains = caches.domains.get(snapshot, key);
        // Domains of the feasible, not ignored nodes; counts over every eligible node in them.
        let mut in_play = vec![false; domains.count];
        for (i, &n) in feasible.iter().enumerate() {
            if let Some(d) = domains.of[n]
                && !ignored[i]
            {
                in_play[d as usize] = true;
            }
        }
        let size = in_play.iter().filter(|b| **b).count();
        let counts = domain_counts(per_node, domains, |n| {
            (!*honor_affinity || statics.affinity_ok[n]) && (!require_all || has_all(n))
        });
        for (i, &n) in feasible.iter().enumerate() {
            if let Some(d) = domains.of[n] {
                raw[i] += score::spread_score_for_count(counts[d as usize], *max_skew, size);
            }
        }
    }
    let raw: Vec<Option<i64>> = raw
        .iter()
        .zip(&ignored)
        .map(|(s, ig)| (!ig).then(|| s.round() as i64))
        .collect();
    score::spread_normalize(&raw)
}
