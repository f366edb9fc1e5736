//! RemovePodsViolatingTopologySpreadConstraint (Balance): evicts the fewest pods that bring every
//! topology spread constraint back within its `maxSkew` (upstream semantics).
//!
//! Per namespace, the constraints of the listed pods (whenUnsatisfiable in `constraints`) are
//! de-duplicated; for each one, domains are the values of its topology key on the nodes that pass
//! its node inclusion policies (nodeAffinityPolicy default Honor, nodeTaintsPolicy default
//! Ignore), and the pods counted are the listed, non-terminating pods its selector (plus
//! `matchLabelKeys`) matches. Listed pods are the pods on the nodes that pass `namespaces`,
//! `labelSelector` and the DefaultEvictor's Filter. Unbalanced constraints are balanced pairwise
//! (smallest and largest domain): min(ceil((skew − maxSkew) / 2), largest's surplus over the
//! average, smallest's room under it) pods move. Pods with a nodeSelector or node affinity go
//! last; with `topologyBalanceNodeFit` a pod is only evicted if it fits a node of a domain below
//! the average. `minDomains` is not used (as upstream).

use super::{PodQuestion, extension_point};
use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::hash::{Hash, Hasher};

use crate::framework::podfilter::PodFilter;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::{Expression, Selector, SelectorExt};

use std::sync::Arc;

use crate::evictor::EvictionReason;
use crate::framework::Handle;
use crate::framework::parallel;
use crate::scheduling::{affinity, fit, selector, taints};
use crate::snapshot::{Node, NodeId, Pod, PodId, Snapshot};

mod args;
mod explain;
pub use args::Args;

/// The plugin name.
pub const NAME: &str = "RemovePodsViolatingTopologySpreadConstraint";

/// The plugin.
#[derive(Debug, Clone)]
pub struct RemovePodsViolatingTopologySpreadConstraint {
    filter: PodFilter,
    constraints: Vec<String>,
    node_fit: bool,
}

/// A pod's nodeSelector and required node affinity terms.
type NodeAffinityRef<'s> = (&'s BTreeMap<String, String>, Option<&'s [NodeSelectorTerm]>);

/// A pod's constraint as the plugin evaluates it (upstream `topologySpreadConstraint`). Equality
/// is upstream's deep equality; the hash covers a subset of the compared fields.
struct Constraint<'s> {
    max_skew: i32,
    topology_key: &'s str,
    label_selector: Option<&'s LabelSelector>,
    /// `matchLabelKeys` resolved against the declaring pod's labels.
    match_labels: Vec<(&'s str, &'s str)>,
    /// Honored: the declaring pod's nodeSelector and required node affinity.
    node_affinity: Option<NodeAffinityRef<'s>>,
    /// Honored: the declaring pod's tolerations.
    tolerations: Option<&'s [Toleration]>,
    /// The effective selector (`None`: a nil selector, which selects nothing).
    selector: Option<Selector>,
    /// The declaring pod (for node inclusion checks).
    source: &'s Pod,
}

impl PartialEq for Constraint<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.max_skew == o.max_skew
            && self.topology_key == o.topology_key
            && self.label_selector == o.label_selector
            && self.match_labels == o.match_labels
            && self.node_affinity == o.node_affinity
            && self.tolerations == o.tolerations
    }
}
impl Eq for Constraint<'_> {}

impl Hash for Constraint<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.max_skew.hash(h);
        self.topology_key.hash(h);
        self.label_selector.map(|s| &s.match_labels).hash(h);
        self.match_labels.hash(h);
        self.node_affinity.map(|(sel, _)| sel).hash(h);
        self.tolerations.is_some().hash(h);
    }
}

impl<'s> Constraint<'s> {
    /// Upstream `newTopologySpreadConstraint`; `None` when the selector is invalid.
    fn new(c: &'s TopologySpreadConstraint, pod: &'s Pod) -> Option<Self> {
        Self::unselected(c, pod).selected(c)
    }

    /// The constraint without its selector compiled: enough for equality (the selector follows
    /// from the compared `label_selector` and `match_labels`), so that a duplicate costs no
    /// selector compilation.
    fn unselected(c: &'s TopologySpreadConstraint, pod: &'s Pod) -> Self {
        let match_labels = match &c.label_selector {
            // A nil selector selects nothing, and matchLabelKeys are not merged into it.
            None => Vec::new(),
            Some(_) => {
                let mut extra: Vec<(&str, &str)> = c
                    .match_label_keys
                    .iter()
                    .flatten()
                    .filter_map(|k| pod.labels.get(k).map(|v| (k.as_str(), v.as_str())))
                    .collect();
                extra.sort_unstable();
                extra.dedup();
                extra
            }
        };
        let honor_affinity = c.node_affinity_policy.as_deref().unwrap_or("Honor") == "Honor";
        let honor_taints = c.node_taints_policy.as_deref().unwrap_or("Ignore") == "Honor";
        Constraint {
            max_skew: c.max_skew,
            topology_key: &c.topology_key,
            label_selector: c.label_selector.as_ref(),
            match_labels,
            node_affinity: honor_affinity
                .then(|| (&*pod.node_selector, affinity::required_node_terms(pod))),
            tolerations: honor_taints.then_some(&pod.tolerations[..]),
            selector: None,
            source: pod,
        }
    }

    /// Compiles the selector of [`Self::unselected`] (`c` is the constraint it was made from);
    /// `None` when the selector is invalid.
    fn selected(mut self, c: &TopologySpreadConstraint) -> Option<Self> {
        if let Some(ls) = &c.label_selector {
            let mut sel = selector::compile_strict(ls).ok()?;
            sel.extend(
                self.match_labels
                    .iter()
                    .map(|(k, v)| Expression::Equal(k.to_string(), v.to_string())),
            );
            self.selector = Some(sel);
        }
        Some(self)
    }

    /// Whether `pod` is counted by this constraint (a nil selector counts none).
    fn counts(&self, pod: &Pod) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|sel| sel.matches(&pod.labels))
    }

    /// Upstream `matchNodeInclusionPolicies`.
    fn includes(&self, node: &Node) -> bool {
        if self.node_affinity.is_some()
            && !affinity::matches_node_selector_and_affinity(self.source, node)
        {
            return false;
        }
        match self.tolerations {
            Some(t) => taints::tolerates_all(t, &node.taints, taints::is_scheduling_taint),
            None => true,
        }
    }

    /// Whether the inclusion policies can exclude a node at all.
    fn filters_nodes(&self) -> bool {
        self.tolerations.is_some()
            || self
                .node_affinity
                .is_some_and(|(sel, terms)| !sel.is_empty() || terms.is_some())
    }
}

/// Nodes given to the plugin grouped by the value of a topology key, in first-seen order.
type KeyIndex<'s> = Vec<(&'s str, Vec<NodeId>)>;

/// A domain: its value and the pods counted in it.
struct Domain<'s> {
    value: &'s str,
    pods: Vec<PodId>,
}

/// The addresses of the shared parts of a pod that [`Constraint::unselected`] reads: pods with
/// equal addresses get equal constraints.
type ConstraintParts = [usize; 5];

fn constraint_parts(p: &Pod) -> ConstraintParts {
    [
        Arc::as_ptr(&p.topology_spread_constraints) as *const () as usize,
        Arc::as_ptr(&p.labels) as usize,
        Arc::as_ptr(&p.node_selector) as usize,
        p.affinity.as_ref().map_or(0, |a| Arc::as_ptr(a) as usize),
        Arc::as_ptr(&p.tolerations) as *const () as usize,
    ]
}

fn has_selector_or_affinity(p: &Pod) -> bool {
    !p.node_selector.is_empty()
        || p.affinity
            .as_ref()
            .is_some_and(|a| a.node_affinity.is_some())
}

struct Run<'s, 'h> {
    s: &'s Snapshot,
    nodes: &'h [NodeId],
    node_fit: bool,
    /// Per topology key: the node groups and each value's position among them.
    key_index: HashMap<&'s str, (KeyIndex<'s>, HashMap<&'s str, usize>)>,
    /// Pods to evict, in the order they were chosen, with the skew that chose them.
    chosen: Vec<(PodId, Arc<EvictionReason>)>,
    chosen_set: HashSet<PodId>,
}

impl<'s> Run<'s, '_> {
    fn key_index(&mut self, key: &'s str) -> &KeyIndex<'s> {
        &self.key_groups(key).0
    }

    fn key_groups(&mut self, key: &'s str) -> &(KeyIndex<'s>, HashMap<&'s str, usize>) {
        let (s, nodes) = (self.s, self.nodes);
        self.key_index.entry(key).or_insert_with(|| {
            let mut pos: HashMap<&'s str, usize> = HashMap::default();
            let mut idx: KeyIndex<'s> = Vec::new();
            for &n in nodes {
                if let Some(v) = s.node(n).labels.get(key) {
                    let i = *pos.entry(v.as_str()).or_insert_with(|| {
                        idx.push((v.as_str(), Vec::new()));
                        idx.len() - 1
                    });
                    idx[i].1.push(n);
                }
            }
            (idx, pos)
        })
    }

    /// Counts `pods` into the constraint's domains and balances them if needed.
    fn process(&mut self, c: &Constraint<'s>, pods: &[PodId]) {
        let s = self.s;
        let mut domains: Vec<Domain<'s>> = Vec::new();
        let mut by_value: HashMap<&'s str, usize> = HashMap::default();
        let filters = c.filters_nodes();
        for (value, nodes) in self.key_index(c.topology_key) {
            if !filters || nodes.iter().any(|&n| c.includes(s.node(n))) {
                by_value.insert(value, domains.len());
                domains.push(Domain {
                    value,
                    pods: Vec::new(),
                });
            }
        }
        let mut sum = 0usize;
        for p in s.prefetched(pods) {
            let pod = s.pod(p);
            if pod.is_terminating() || !c.counts(pod) {
                continue;
            }
            let Some(value) = pod.node.and_then(|n| s.node(n).labels.get(c.topology_key)) else {
                continue;
            };
            // A pod on a node the policies exclude still creates its domain, as upstream.
            let i = *by_value.entry(value.as_str()).or_insert_with(|| {
                domains.push(Domain {
                    value: value.as_str(),
                    pods: Vec::new(),
                });
                domains.len() - 1
            });
            domains[i].pods.push(p);
            sum += 1;
        }
        let (min, max) = domains.iter().fold((usize::MAX, 0), |(lo, hi), d| {
            (lo.min(d.pods.len()), hi.max(d.pods.len()))
        });
        if domains.is_empty() || (max - min) as i64 <= c.max_skew as i64 {
            return;
        }
        self.balance(c, domains, sum);
    }

    /// Upstream `balanceDomains`.
    fn balance(&mut self, c: &Constraint<'s>, mut domains: Vec<Domain<'s>>, sum: usize) {
        let s = self.s;
        let ideal = sum as f64 / domains.len() as f64;
        sort_for_balance(s, &mut domains);
        // The nodes of the domains below the average, one slice per domain, read lazily: a pod's
        // fit check usually stops at one of the first nodes, so they are not copied into one list.
        let included = c
            .filters_nodes()
            .then(|| included_by_value(s, self.nodes, c));
        if included.is_none() {
            self.key_groups(c.topology_key);
        }
        let below: Vec<&[NodeId]> = match &included {
            Some(by_value) => below_average(&domains, ideal)
                .filter_map(|d| by_value.get(d.value).map(Vec::as_slice))
                .collect(),
            None => match self.key_index.get(c.topology_key) {
                Some((index, pos)) => below_average(&domains, ideal)
                    .filter_map(|d| pos.get(d.value).map(|&i| index[i].1.as_slice()))
                    .collect(),
                None => Vec::new(),
            },
        };
        let mut fits_cache: HashMap<PodId, bool> = HashMap::default();
        let mut fits = |p: PodId| {
            *fits_cache.entry(p).or_insert_with(|| {
                let f = fit::PodFit::new(s, p);
                let own = s.pod(p).node;
                below
                    .iter()
                    .flat_map(|g| g.iter().copied())
                    .any(|n| Some(n) != own && f.fits(n))
            })
        };
        let (mut i, mut j) = (0usize, domains.len() - 1);
        while i < j {
            if domains[j].pods.len() as f64 <= ideal {
                j -= 1;
            }
            let (hi, lo) = (domains[j].pods.len() as f64, domains[i].pods.len() as f64);
            let skew = hi - lo;
            if skew as i64 <= c.max_skew as i64 {
                i += 1;
                continue;
            }
            let above = (hi - ideal).ceil();
            let room = (ideal - lo).ceil();
            let half = ((skew - c.max_skew as f64) / 2.0).ceil();
            let moves = above.min(room).min(half);
            if moves <= 0.0 {
                i += 1;
                continue;
            }
            let moves = (moves as usize).min(domains[j].pods.len());
            let reason = Arc::new(skew_reason(c, &domains[j], &domains[i], skew, moves));
            // Prefer evicting pods that fit a node below the average (stable: others first).
            let keyed: Vec<(bool, PodId)> = domains[j].pods.iter().map(|&p| (fits(p), p)).collect();
            let mut reordered: Vec<PodId> =
                keyed.iter().filter(|(f, _)| !f).map(|&(_, p)| p).collect();
            reordered.extend(keyed.iter().filter(|(f, _)| *f).map(|&(_, p)| p));
            let cut = reordered.len() - moves;
            let moving = reordered.split_off(cut);
            domains[j].pods = reordered;
            for &p in &moving {
                if self.node_fit && !fits(p) {
                    continue;
                }
                if self.chosen_set.insert(p) {
                    self.chosen.push((p, reason.clone()));
                }
            }
            domains[i].pods.extend(moving);
        }
    }
}

/// The domains with fewer pods than the average (`ideal`), in balancing order.
fn below_average<'d, 's>(
    domains: &'d [Domain<'s>],
    ideal: f64,
) -> impl Iterator<Item = &'d Domain<'s>> {
    domains
        .iter()
        .filter(move |d| (d.pods.len() as f64) < ideal)
}

/// The plugin's nodes (in its node order) that pass the constraint's inclusion policies, by
/// their value of its topology key.
fn included_by_value<'s>(
    s: &'s Snapshot,
    nodes: &[NodeId],
    c: &Constraint<'_>,
) -> HashMap<&'s str, Vec<NodeId>> {
    let mut by_value: HashMap<&str, Vec<NodeId>> = HashMap::default();
    for &n in nodes {
        let node = s.node(n);
        if c.includes(node)
            && let Some(v) = node.labels.get(c.topology_key)
        {
            by_value.entry(v.as_str()).or_default().push(n);
        }
    }
    by_value
}

/// Orders `domains` for balancing: by pod count (then value), and within a domain the pods
/// evicted first last: pods with a nodeSelector or node affinity first, then by priority
/// ascending (no priority first), as upstream sorts.
fn sort_for_balance(s: &Snapshot, domains: &mut [Domain<'_>]) {
    for d in domains.iter_mut() {
        d.pods.sort_by(|&a, &b| {
            let (pa, pb) = (s.pod(a), s.pod(b));
            has_selector_or_affinity(pb)
                .cmp(&has_selector_or_affinity(pa))
                .then_with(|| pa.priority.cmp(&pb.priority))
        });
    }
    domains.sort_by(|a, b| a.pods.len().cmp(&b.pods.len()).then(a.value.cmp(b.value)));
}

/// Why pods leave domain `hi` for domain `lo`: the skew before and after `moves` pods move.
fn skew_reason(
    c: &Constraint<'_>,
    hi: &Domain<'_>,
    lo: &Domain<'_>,
    skew: f64,
    moves: usize,
) -> EvictionReason {
    let (h, l) = (hi.pods.len(), lo.pods.len());
    let after = (h as i64 - moves as i64) - (l as i64 + moves as i64);
    EvictionReason::new(
        "TopologySpreadSkew",
        format!(
            "{} {} has {h} matching pods, {} has {l}: skew {skew} > maxSkew {}; moving {moves} leaves skew {after}",
            c.topology_key, hi.value, lo.value, c.max_skew
        ),
    )
    .with("topologyKey", c.topology_key)
    .with("fromDomain", hi.value)
    .with("toDomain", lo.value)
    .with("skew", skew as i64)
    .with("maxSkew", c.max_skew)
    .with("moves", moves)
    .with("skewAfter", after)
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// Whether a non-terminal pod on one of the plugin's nodes is considered: the plugin's
    /// namespaces / labelSelector and the evictor's filter pass it.
    fn listed(
        &self,
        s: &Snapshot,
        view: &crate::framework::handle::FilterView<'_>,
        p: PodId,
    ) -> bool {
        self.filter.matches(s.pod(p)) && view.filter(p)
    }

    /// The plugin's run when the total limit is already reached: namespaces in name order, each
    /// listed (as the full run lists it: its pods on `nodes`, in node order, that pass the
    /// filters) and balanced only until the first eviction attempt, which the limit refuses.
    fn balance_up_to_first_attempt(
        &self,
        h: &mut Handle<'_>,
        nodes: &[NodeId],
        node_limited: &mut HashSet<NodeId>,
    ) {
        let s = h.snapshot;
        // Each node's position in `nodes` (MAX: not one of them).
        let mut position = vec![u32::MAX; s.nodes.len()];
        for (i, &n) in nodes.iter().enumerate() {
            if let Some(slot) = position.get_mut(n as usize) {
                *slot = (*slot).min(i as u32);
            }
        }
        let mut namespaces: Vec<&str> = s.pod_namespaces().collect();
        namespaces.sort_unstable();
        for ns in namespaces {
            let view = h.filter_view();
            let mut listed: Vec<(u32, PodId)> = s
                .pods_in_namespace(ns)
                .filter_map(|p| {
                    let pod = s.pod(p);
                    let at = *position.get(pod.node? as usize)?;
                    (at != u32::MAX && !pod.is_terminal() && self.listed(s, &view, p))
                        .then_some((at, p))
                })
                .collect();
            if listed.is_empty() {
                continue;
            }
            listed.sort_unstable();
            let pods: Vec<PodId> = listed.into_iter().map(|(_, p)| p).collect();
            let chosen = self.choose(s, nodes, &[(ns, pods)]);
            if let Stop::Plugin = self.evict_chosen(h, chosen, node_limited) {
                return;
            }
        }
    }

    /// The pods to evict (in choice order) to balance the constraints of `namespaces`' pods.
    fn choose<'s>(
        &self,
        s: &'s Snapshot,
        nodes: &[NodeId],
        namespaces: &[(&'s str, Vec<PodId>)],
    ) -> Vec<(PodId, Arc<EvictionReason>)> {
        let mut run = Run {
            s,
            nodes,
            node_fit: self.node_fit,
            key_index: HashMap::default(),
            chosen: Vec::new(),
            chosen_set: HashSet::default(),
        };
        for (_, pods) in namespaces {
            let constraints = self.distinct_constraints(s, pods);
            // Pods by label pair, so a constraint with matchLabels only scans pods that can match.
            let indexed = constraints.len() > 1;
            let by_label = if indexed {
                pods_by_label(s, pods, &constraints)
            } else {
                HashMap::default()
            };
            for c in &constraints {
                let narrowed = c
                    .label_selector
                    .and_then(|ls| ls.match_labels.as_ref())
                    .filter(|_| indexed)
                    .and_then(|ml| {
                        ml.iter()
                            .map(|(k, v)| by_label.get(&(k.as_str(), v.as_str())))
                            .min_by_key(|l| l.map_or(0, Vec::len))
                    });
                match narrowed {
                    Some(Some(candidates)) => run.process(c, candidates),
                    Some(None) => run.process(c, &[]),
                    None => run.process(c, pods),
                }
            }
        }
        run.chosen
    }
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// The constraints of `pods` that the plugin balances (whenUnsatisfiable in `constraints`,
    /// a valid selector), de-duplicated by deep equality, in first-seen order.
    fn distinct_constraints<'s>(&self, s: &'s Snapshot, pods: &[PodId]) -> Vec<Constraint<'s>> {
        // Hash buckets, then `==`.
        let mut buckets: HashMap<u64, Vec<usize>> = HashMap::default();
        let mut constraints: Vec<Constraint<'_>> = Vec::new();
        // Pods that share every part a constraint is made from (pods of one owner) declare
        // equal constraints: only the first of them is looked at.
        let mut seen: HashSet<ConstraintParts> = HashSet::default();
        for p in s.prefetched(pods) {
            let pod = s.pod(p);
            if pod.topology_spread_constraints.is_empty() || !seen.insert(constraint_parts(pod)) {
                continue;
            }
            for c in pod.topology_spread_constraints.iter() {
                if !self.constraints.contains(&c.when_unsatisfiable) {
                    continue;
                }
                // Equal constraints have equal selectors, which are compiled (and found valid or
                // not) once, for the first.
                let tsc = Constraint::unselected(c, pod);
                let mut hasher = rustc_hash::FxHasher::default();
                tsc.hash(&mut hasher);
                let bucket = buckets.entry(hasher.finish()).or_default();
                if bucket.iter().any(|&i| constraints[i] == tsc) {
                    continue;
                }
                let Some(tsc) = tsc.selected(c) else {
                    continue;
                };
                bucket.push(constraints.len());
                constraints.push(tsc);
            }
        }
        constraints
    }
}

/// `pods` by label pair, for the label keys some constraint's matchLabels names. (A pair no pod
/// has narrows to no pod, as a scan would find: the selector requires the pair.)
fn pods_by_label<'s>(
    s: &'s Snapshot,
    pods: &[PodId],
    constraints: &[Constraint<'_>],
) -> HashMap<(&'s str, &'s str), Vec<PodId>> {
    let mut keys: Vec<&str> = constraints
        .iter()
        .filter_map(|c| c.label_selector.and_then(|ls| ls.match_labels.as_ref()))
        .flat_map(|ml| ml.keys().map(String::as_str))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let mut by_label: HashMap<(&str, &str), Vec<PodId>> = HashMap::default();
    for p in s.prefetched(pods) {
        let labels = &s.pod(p).labels;
        for &key in &keys {
            if let Some((k, v)) = labels.get_key_value(key) {
                by_label
                    .entry((k.as_str(), v.as_str()))
                    .or_default()
                    .push(p);
            }
        }
    }
    by_label
}

extension_point!(Balance for RemovePodsViolatingTopologySpreadConstraint, NAME);

impl RemovePodsViolatingTopologySpreadConstraint {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, nodes) = (q.snapshot, q.pod, q.nodes);
        Some(explain::explain(self, s, pod, nodes))
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let s = h.snapshot;
        let mut node_limited: HashSet<NodeId> = HashSet::default();
        if h.total_limit_reached() {
            // Every attempt is refused by the total limit: only the first is recorded, so the
            // namespaces are listed and balanced one by one up to it instead of all of them
            // ahead.
            self.balance_up_to_first_attempt(h, nodes, &mut node_limited);
            return;
        }
        // The listed pods by namespace, in node order (chunks of nodes on several threads,
        // appended in node order).
        let view = h.filter_view();
        let mut by_namespace: BTreeMap<&str, Vec<PodId>> = BTreeMap::new();
        for part in parallel::map_chunks(
            nodes,
            |&n| s.pods_on_node_upper_bound(n),
            parallel::min_parallel_weight(),
            |chunk| {
                let mut part: BTreeMap<&str, Vec<PodId>> = BTreeMap::new();
                for &n in chunk {
                    for p in s.active_pods_on_node(n) {
                        if self.listed(s, &view, p) {
                            part.entry(&s.pod(p).namespace).or_default().push(p);
                        }
                    }
                }
                part
            },
        ) {
            for (ns, pods) in part {
                by_namespace.entry(ns).or_default().extend(pods);
            }
        }
        // Namespaces are independent (constraints only count pods of their own namespace), so
        // they are analysed in parallel; the chosen pods are concatenated in namespace order,
        // exactly as one thread would have chosen them.
        let by_namespace: Vec<(&str, Vec<PodId>)> = by_namespace.into_iter().collect();
        let chosen: Vec<(PodId, Arc<EvictionReason>)> = parallel::map_chunks(
            &by_namespace,
            |(_, pods)| pods.len(),
            parallel::min_parallel_weight(),
            |namespaces| self.choose(s, nodes, namespaces),
        )
        .into_iter()
        .flatten()
        .collect();
        self.evict_chosen(h, chosen, &mut node_limited);
    }
}

/// Where evicting the chosen pods stopped.
enum Stop {
    /// Every chosen pod was tried.
    Done,
    /// The total limit was reached: the plugin ends.
    Plugin,
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// Evicts the `chosen` pods in order that are still listed; a node whose limit was reached
    /// (`node_limited`) is skipped from then on.
    fn evict_chosen(
        &self,
        h: &mut Handle<'_>,
        chosen: Vec<(PodId, Arc<EvictionReason>)>,
        node_limited: &mut HashSet<NodeId>,
    ) -> Stop {
        let s = h.snapshot;
        for (p, reason) in chosen {
            let node = s.pod(p).node;
            if node.is_some_and(|n| node_limited.contains(&n))
                || !(self.filter.matches(s.pod(p)) && h.filter(p))
            {
                continue;
            }
            match h.evict_because(p, reason) {
                Ok(_) => {}
                Err(e) if e.is_node_limit() => {
                    if let Some(n) = node {
                        node_limited.insert(n);
                    }
                }
                Err(e) if e.is_total_limit() => return Stop::Plugin,
                Err(_) => {}
            }
        }
        Stop::Done
    }
}

#[cfg(test)]
mod tests;
