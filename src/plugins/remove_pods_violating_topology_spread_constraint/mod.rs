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

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::hash::{Hash, Hasher};

use crate::framework::podfilter::PodFilter;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Expression, Selector, SelectorExt};
use serde::Deserialize;

use crate::framework::args::{self, ArgsError, Namespaces};
use crate::framework::parallel;
use crate::framework::registry::ExtensionPoint;
use crate::framework::{BalancePlugin, Handle, Plugin, PluginFactory};
use crate::scheduling::{affinity, fit, selector, taints};
use crate::snapshot::{Node, NodeId, Pod, PodId, Snapshot};

/// The plugin name.
pub const NAME: &str = "RemovePodsViolatingTopologySpreadConstraint";

const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

/// Args (upstream `RemovePodsViolatingTopologySpreadConstraintArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// Only (or all but) these namespaces.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Only pods matching this selector.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// whenUnsatisfiable values to balance (default `[DoNotSchedule]`).
    #[serde(default)]
    pub constraints: Vec<String>,
    /// Only evict pods that fit a node of an under-populated domain (default true).
    #[serde(default)]
    pub topology_balance_node_fit: Option<bool>,
}

/// The plugin.
#[derive(Debug, Clone)]
pub struct RemovePodsViolatingTopologySpreadConstraint {
    filter: PodFilter,
    constraints: Vec<String>,
    node_fit: bool,
}

/// The registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory {
        name: NAME,
        point: ExtensionPoint::Balance,
        build,
    }
}

fn build(raw: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let a: Args = args::decode(raw)?;
    Ok(Plugin::Balance(Box::new(
        RemovePodsViolatingTopologySpreadConstraint::new(a)?,
    )))
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// Validates `args` and applies the defaults.
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces.clone(), a.label_selector.as_ref())?;
        for (i, c) in a.constraints.iter().enumerate() {
            if c != DO_NOT_SCHEDULE && c != SCHEDULE_ANYWAY {
                return Err(ArgsError::new(
                    format!("constraints[{i}]"),
                    format!("constraint {c} is not one of [{DO_NOT_SCHEDULE} {SCHEDULE_ANYWAY}]"),
                ));
            }
        }
        let constraints = if a.constraints.is_empty() {
            vec![DO_NOT_SCHEDULE.to_string()]
        } else {
            a.constraints
        };
        Ok(RemovePodsViolatingTopologySpreadConstraint {
            filter,
            constraints,
            node_fit: a.topology_balance_node_fit.unwrap_or(true),
        })
    }
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
        let (selector, match_labels) = match &c.label_selector {
            // A nil selector selects nothing, and matchLabelKeys are not merged into it.
            None => (None, Vec::new()),
            Some(ls) => {
                let mut sel = selector::compile_strict(ls).ok()?;
                let mut extra: Vec<(&str, &str)> = c
                    .match_label_keys
                    .iter()
                    .flatten()
                    .filter_map(|k| pod.labels.get(k).map(|v| (k.as_str(), v.as_str())))
                    .collect();
                extra.sort_unstable();
                extra.dedup();
                sel.extend(
                    extra
                        .iter()
                        .map(|(k, v)| Expression::Equal(k.to_string(), v.to_string())),
                );
                (Some(sel), extra)
            }
        };
        let honor_affinity = c.node_affinity_policy.as_deref().unwrap_or("Honor") == "Honor";
        let honor_taints = c.node_taints_policy.as_deref().unwrap_or("Ignore") == "Honor";
        Some(Constraint {
            max_skew: c.max_skew,
            topology_key: &c.topology_key,
            label_selector: c.label_selector.as_ref(),
            match_labels,
            node_affinity: honor_affinity
                .then(|| (&*pod.node_selector, affinity::required_node_terms(pod))),
            tolerations: honor_taints.then_some(&pod.tolerations[..]),
            selector,
            source: pod,
        })
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
    /// Pods to evict, in the order they were chosen.
    chosen: Vec<PodId>,
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
        for &p in pods {
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
        // Within a domain the pods evicted first go last: pods with a nodeSelector or node
        // affinity first, then by priority ascending (no priority first), as upstream sorts.
        for d in &mut domains {
            d.pods.sort_by(|&a, &b| {
                let (pa, pb) = (s.pod(a), s.pod(b));
                has_selector_or_affinity(pb)
                    .cmp(&has_selector_or_affinity(pa))
                    .then_with(|| pa.priority.cmp(&pb.priority))
            });
        }
        domains.sort_by(|a, b| a.pods.len().cmp(&b.pods.len()).then(a.value.cmp(b.value)));
        // Nodes (in the plugin's node order) of the domains below the average that pass the
        // constraint's inclusion policies. Without policies that can exclude a node, these are the
        // topology key's cached node groups: no scan of every node per constraint.
        let below: Vec<NodeId> = if c.filters_nodes() {
            let mut by_value: HashMap<&str, Vec<NodeId>> = HashMap::default();
            for &n in self.nodes {
                let node = s.node(n);
                if c.includes(node)
                    && let Some(v) = node.labels.get(c.topology_key)
                {
                    by_value.entry(v.as_str()).or_default().push(n);
                }
            }
            domains
                .iter()
                .filter(|d| (d.pods.len() as f64) < ideal)
                .flat_map(|d| by_value.get(d.value).into_iter().flatten().copied())
                .collect()
        } else {
            let (index, pos) = self.key_groups(c.topology_key);
            domains
                .iter()
                .filter(|d| (d.pods.len() as f64) < ideal)
                .flat_map(|d| {
                    pos.get(d.value)
                        .into_iter()
                        .flat_map(|&i| index[i].1.iter().copied())
                })
                .collect()
        };
        let mut fits_cache: HashMap<PodId, bool> = HashMap::default();
        let mut fits = |p: PodId| {
            *fits_cache
                .entry(p)
                .or_insert_with(|| fit::fits_any_other_node(s, p, &below))
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
                    self.chosen.push(p);
                }
            }
            domains[i].pods.extend(moving);
        }
    }
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// The pods to evict (in choice order) to balance the constraints of `namespaces`' pods.
    fn choose<'s>(
        &self,
        s: &'s Snapshot,
        nodes: &[NodeId],
        namespaces: &[(&'s str, Vec<PodId>)],
    ) -> Vec<PodId> {
        let mut run = Run {
            s,
            nodes,
            node_fit: self.node_fit,
            key_index: HashMap::default(),
            chosen: Vec::new(),
            chosen_set: HashSet::default(),
        };
        for (_, pods) in namespaces {
            // De-duplicated by deep equality, in first-seen order (hash buckets, then `==`).
            let mut buckets: HashMap<u64, Vec<usize>> = HashMap::default();
            let mut constraints: Vec<Constraint<'_>> = Vec::new();
            for &p in pods {
                let pod = s.pod(p);
                for c in pod.topology_spread_constraints.iter() {
                    if !self.constraints.contains(&c.when_unsatisfiable) {
                        continue;
                    }
                    let Some(tsc) = Constraint::new(c, pod) else {
                        continue;
                    };
                    let mut hasher = rustc_hash::FxHasher::default();
                    tsc.hash(&mut hasher);
                    let bucket = buckets.entry(hasher.finish()).or_default();
                    if !bucket.iter().any(|&i| constraints[i] == tsc) {
                        bucket.push(constraints.len());
                        constraints.push(tsc);
                    }
                }
            }
            // Pods by label pair, so a constraint with matchLabels only scans pods that can match.
            let mut by_label: HashMap<(&str, &str), Vec<PodId>> = HashMap::default();
            if constraints.len() > 1 {
                for &p in pods {
                    for (k, v) in s.pod(p).labels.iter() {
                        by_label.entry((k, v)).or_default().push(p);
                    }
                }
            }
            for c in &constraints {
                let narrowed = c
                    .label_selector
                    .and_then(|ls| ls.match_labels.as_ref())
                    .filter(|_| !by_label.is_empty())
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

impl BalancePlugin for RemovePodsViolatingTopologySpreadConstraint {
    fn name(&self) -> &'static str {
        NAME
    }

    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let s = h.snapshot;
        let listed = |h: &Handle<'_>, p: PodId| {
            let pod = s.pod(p);
            self.filter.matches(pod) && h.filter(p)
        };
        // The listed pods by namespace, in node order (chunks of nodes on several threads,
        // appended in node order).
        let view = h.filter_view();
        let mut by_namespace: BTreeMap<&str, Vec<PodId>> = BTreeMap::new();
        for part in parallel::map_chunks(
            nodes,
            |&n| s.pods_on_node_upper_bound(n),
            parallel::MIN_PARALLEL_WEIGHT,
            |chunk| {
                let mut part: BTreeMap<&str, Vec<PodId>> = BTreeMap::new();
                for &n in chunk {
                    for p in s.active_pods_on_node(n) {
                        if self.filter.matches(s.pod(p)) && view.filter(p) {
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
        let chosen: Vec<PodId> = parallel::map_chunks(
            &by_namespace,
            |(_, pods)| pods.len(),
            parallel::MIN_PARALLEL_WEIGHT,
            |namespaces| self.choose(s, nodes, namespaces),
        )
        .into_iter()
        .flatten()
        .collect();
        let mut node_limited: HashSet<NodeId> = HashSet::default();
        for p in chosen {
            let node = s.pod(p).node;
            if node.is_some_and(|n| node_limited.contains(&n)) || !listed(h, p) {
                continue;
            }
            match h.evict(p, None) {
                Ok(_) => {}
                Err(e) if e.is_node_limit() => {
                    if let Some(n) = node {
                        node_limited.insert(n);
                    }
                }
                Err(e) if e.is_total_limit() => return,
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::cycle::{CycleConfig, Profile};

    /// Namespaces are analysed in parallel chunks: choosing over every namespace at once must
    /// equal concatenating the choices over any split, on a cluster with many constraints.
    #[test]
    fn namespace_chunks_choose_exactly_what_one_pass_chooses() {
        let s = crate::testing::synthetic_snapshot(60, 2_000, 11);
        let plugin = RemovePodsViolatingTopologySpreadConstraint::new(
            args::decode(&json!({"constraints": ["DoNotSchedule", "ScheduleAnyway"]}))
                .expect("args"),
        )
        .expect("plugin");
        let nodes: Vec<NodeId> = (0..s.nodes.len() as NodeId).collect();
        let mut by_namespace: BTreeMap<&str, Vec<PodId>> = BTreeMap::new();
        for &n in &nodes {
            for p in s.active_pods_on_node(n) {
                by_namespace.entry(&s.pod(p).namespace).or_default().push(p);
            }
        }
        let namespaces: Vec<(&str, Vec<PodId>)> = by_namespace.into_iter().collect();
        assert!(namespaces.len() >= 3, "several namespaces");
        let whole = plugin.choose(&s, &nodes, &namespaces);
        assert!(
            !whole.is_empty(),
            "the synthetic cluster has skewed spreads"
        );
        for cut in 1..namespaces.len() {
            let mut split = plugin.choose(&s, &nodes, &namespaces[..cut]);
            split.extend(plugin.choose(&s, &nodes, &namespaces[cut..]));
            assert_eq!(split, whole, "split after {cut} namespaces");
        }
    }
    use crate::plugins::default_evictor::DefaultEvictor;
    use crate::testing::{
        PodBuilder, evicted_names, node, pod, run_balance, run_profile, snapshot,
    };
    use k8s_openapi::api::core::v1 as core;
    use serde_json::json;

    /// `maxSkew`/`zone`/DoNotSchedule over `foo=bar`, edited by `f`.
    fn tsc(
        max_skew: i32,
        f: impl FnOnce(&mut TopologySpreadConstraint),
    ) -> TopologySpreadConstraint {
        let mut c = TopologySpreadConstraint {
            max_skew,
            topology_key: "zone".into(),
            when_unsatisfiable: DO_NOT_SCHEDULE.into(),
            label_selector: Some(LabelSelector {
                match_labels: Some([("foo".to_string(), "bar".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        f(&mut c);
        c
    }

    fn with_tsc(b: PodBuilder, c: TopologySpreadConstraint) -> PodBuilder {
        b.with(move |p| {
            if let Some(spec) = p.spec.as_mut() {
                spec.topology_spread_constraints
                    .get_or_insert_with(Vec::new)
                    .push(c);
            }
        })
    }

    /// `count` pods `p<k>…` on `node`, labelled `foo=bar`, each with constraint `c`.
    fn pods(
        first: usize,
        count: usize,
        node_name: &str,
        c: &TopologySpreadConstraint,
        f: impl Fn(PodBuilder) -> PodBuilder,
    ) -> Vec<core::Pod> {
        (first..first + count)
            .map(|i| {
                f(with_tsc(
                    pod("ns1", &format!("p{i}"), node_name).label("foo", "bar"),
                    c.clone(),
                ))
                .build()
            })
            .collect()
    }

    fn zones(z: &[&str]) -> Vec<core::Node> {
        z.iter()
            .enumerate()
            .map(|(i, z)| node(&format!("n{}", i + 1)).label("zone", z).build())
            .collect()
    }

    fn run_with(
        args: serde_json::Value,
        evictor: serde_json::Value,
        nodes: Vec<core::Node>,
        pods: Vec<core::Pod>,
    ) -> Vec<String> {
        let Plugin::Balance(plugin) = build(&args).expect("args") else {
            panic!("not a Balance plugin");
        };
        let ev = DefaultEvictor::from_args(&evictor).expect("evictor args");
        let mut s = snapshot(nodes, pods);
        evicted_names(&run_balance(plugin, ev, &mut s))
    }

    fn run(args: serde_json::Value, nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Vec<String> {
        run_with(args, json!({}), nodes, pods)
    }

    fn cat(parts: Vec<Vec<core::Pod>>) -> Vec<core::Pod> {
        parts.into_iter().flatten().collect()
    }

    fn id(b: PodBuilder) -> PodBuilder {
        b
    }

    fn affinity_zone_in(values: &[&str]) -> core::Affinity {
        core::Affinity {
            node_affinity: Some(core::NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(core::NodeSelector {
                    node_selector_terms: vec![core::NodeSelectorTerm {
                        match_expressions: Some(vec![core::NodeSelectorRequirement {
                            key: "zone".into(),
                            operator: "In".into(),
                            values: Some(values.iter().map(|v| v.to_string()).collect()),
                        }]),
                        match_fields: None,
                    }],
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn balancing_table() {
        let c1 = tsc(1, |_| {});
        let none = json!({});
        type Case = (
            &'static str,
            serde_json::Value,
            Vec<core::Node>,
            Vec<core::Pod>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "[2,1] maxSkew 1: balanced",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![pods(0, 2, "n1", &c1, id), pods(2, 1, "n2", &c1, id)]),
                vec![],
            ),
            (
                "[3,1]: move 1 (the last pod of the big domain)",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![pods(0, 3, "n1", &c1, id), pods(3, 1, "n2", &c1, id)]),
                vec!["ns1/p2"],
            ),
            (
                "[3,1] maxSkew 2: within skew",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![
                    pods(0, 3, "n1", &tsc(2, |_| {}), id),
                    pods(3, 1, "n2", &tsc(2, |_| {}), id),
                ]),
                vec![],
            ),
            (
                "[4,0]: move 2",
                none.clone(),
                zones(&["a", "b"]),
                pods(0, 4, "n1", &c1, id),
                vec!["ns1/p2", "ns1/p3"],
            ),
            (
                "[5,2]: move 1",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![pods(0, 5, "n1", &c1, id), pods(5, 2, "n2", &c1, id)]),
                vec!["ns1/p4"],
            ),
            (
                "[0,1,3,5]: move 3",
                none.clone(),
                zones(&["a", "b", "c", "d"]),
                cat(vec![
                    pods(0, 1, "n2", &c1, id),
                    pods(1, 3, "n3", &c1, id),
                    pods(4, 5, "n4", &c1, id),
                ]),
                vec!["ns1/p7", "ns1/p8", "ns1/p6"],
            ),
            (
                "[2,6] maxSkew 2: move 1",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![
                    pods(0, 2, "n1", &tsc(2, |_| {}), id),
                    pods(2, 6, "n2", &tsc(2, |_| {}), id),
                ]),
                vec!["ns1/p7"],
            ),
            (
                "soft constraint ignored by default",
                none.clone(),
                zones(&["a", "b"]),
                pods(
                    0,
                    4,
                    "n1",
                    &tsc(1, |c| c.when_unsatisfiable = SCHEDULE_ANYWAY.into()),
                    id,
                ),
                vec![],
            ),
            (
                "soft constraint balanced when enabled",
                json!({"constraints": ["ScheduleAnyway"]}),
                zones(&["a", "b"]),
                pods(
                    0,
                    4,
                    "n1",
                    &tsc(1, |c| c.when_unsatisfiable = SCHEDULE_ANYWAY.into()),
                    id,
                ),
                vec!["ns1/p2", "ns1/p3"],
            ),
            (
                "hard constraint ignored when only ScheduleAnyway is enabled",
                json!({"constraints": ["ScheduleAnyway"]}),
                zones(&["a", "b"]),
                pods(0, 4, "n1", &c1, id),
                vec![],
            ),
            (
                "pods with nodeSelector/affinity go last and must fit elsewhere",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![
                    pods(0, 2, "n1", &c1, |b| b.node_selector("zone", "a")),
                    pods(2, 1, "n1", &c1, |b| b.affinity(affinity_zone_in(&["a"]))),
                    pods(3, 1, "n1", &c1, id),
                ]),
                vec!["ns1/p3"],
            ),
            (
                "highest priority of the plain pods goes first (upstream order)",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![
                    pods(0, 1, "n1", &c1, |b| b.priority(100)),
                    pods(1, 1, "n1", &c1, |b| b.priority(5)),
                    pods(2, 1, "n1", &c1, |b| b.priority(50)),
                    pods(3, 1, "n2", &c1, id),
                ]),
                vec!["ns1/p0"],
            ),
            (
                "matchLabelKeys: same hash counted together",
                none.clone(),
                zones(&["a", "b"]),
                pods(
                    0,
                    2,
                    "n1",
                    &tsc(1, |c| {
                        c.match_label_keys = Some(vec!["pod-template-hash".into()])
                    }),
                    |b| b.label("pod-template-hash", "h1"),
                ),
                vec!["ns1/p1"],
            ),
            (
                "matchLabelKeys: different hashes are separate constraints",
                none.clone(),
                zones(&["a", "b"]),
                cat(vec![
                    pods(
                        0,
                        1,
                        "n1",
                        &tsc(1, |c| {
                            c.match_label_keys = Some(vec!["pod-template-hash".into()])
                        }),
                        |b| b.label("pod-template-hash", "h1"),
                    ),
                    pods(
                        1,
                        1,
                        "n1",
                        &tsc(1, |c| {
                            c.match_label_keys = Some(vec!["pod-template-hash".into()])
                        }),
                        |b| b.label("pod-template-hash", "h2"),
                    ),
                ]),
                vec![],
            ),
            (
                "nodeAffinityPolicy Honor: excluded zone is no domain",
                json!({"topologyBalanceNodeFit": false}),
                zones(&["a", "b", "c"]),
                cat(vec![
                    pods(0, 2, "n1", &c1, |b| {
                        b.affinity(affinity_zone_in(&["a", "b"]))
                    }),
                    pods(2, 1, "n2", &c1, |b| {
                        b.affinity(affinity_zone_in(&["a", "b"]))
                    }),
                ]),
                vec![],
            ),
            (
                "nodeAffinityPolicy Ignore: every zone is a domain",
                json!({"topologyBalanceNodeFit": false}),
                zones(&["a", "b", "c"]),
                cat(vec![
                    pods(
                        0,
                        2,
                        "n1",
                        &tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
                        |b| b.affinity(affinity_zone_in(&["a", "b"])),
                    ),
                    pods(
                        2,
                        1,
                        "n2",
                        &tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
                        |b| b.affinity(affinity_zone_in(&["a", "b"])),
                    ),
                ]),
                vec!["ns1/p1"],
            ),
            (
                "nodeAffinityPolicy Ignore, topologyBalanceNodeFit: the pod fits no node of zone c",
                none.clone(),
                zones(&["a", "b", "c"]),
                cat(vec![
                    pods(
                        0,
                        2,
                        "n1",
                        &tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
                        |b| b.affinity(affinity_zone_in(&["a", "b"])),
                    ),
                    pods(
                        2,
                        1,
                        "n2",
                        &tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
                        |b| b.affinity(affinity_zone_in(&["a", "b"])),
                    ),
                ]),
                vec![],
            ),
        ];
        for (name, args, nodes, pods, want) in cases {
            assert_eq!(run(args, nodes, pods), want, "{name}");
        }
    }

    fn tainted_zones() -> Vec<core::Node> {
        vec![
            node("n1").label("zone", "a").build(),
            node("n2")
                .label("zone", "b")
                .taint("dedicated", Some("x"), "NoSchedule")
                .build(),
        ]
    }

    #[test]
    fn node_taints_policy() {
        let honor = tsc(1, |c| c.node_taints_policy = Some("Honor".into()));
        let cases: Vec<(&str, serde_json::Value, Vec<core::Pod>, Vec<&str>)> = vec![
            (
                "Ignore (default): tainted zone counts, pod must tolerate to move",
                json!({}),
                pods(0, 2, "n1", &tsc(1, |_| {}), id),
                vec![],
            ),
            (
                "Ignore without topologyBalanceNodeFit: evicts anyway",
                json!({"topologyBalanceNodeFit": false}),
                pods(0, 2, "n1", &tsc(1, |_| {}), id),
                vec!["ns1/p1"],
            ),
            (
                "Ignore, pod tolerates the taint",
                json!({}),
                pods(0, 2, "n1", &tsc(1, |_| {}), |b| {
                    b.toleration("dedicated", "Exists", None, None)
                }),
                vec!["ns1/p1"],
            ),
            (
                "Honor: untolerated zone is no domain",
                json!({"topologyBalanceNodeFit": false}),
                pods(0, 2, "n1", &honor, id),
                vec![],
            ),
            (
                "Honor: tolerated zone is a domain",
                json!({}),
                pods(0, 2, "n1", &honor, |b| {
                    b.toleration("dedicated", "Equal", Some("x"), Some("NoSchedule"))
                }),
                vec!["ns1/p1"],
            ),
        ];
        for (name, args, pods, want) in cases {
            assert_eq!(run(args, tainted_zones(), pods), want, "{name}");
        }
        // PreferNoSchedule never excludes a node.
        let soft = vec![
            node("n1").label("zone", "a").build(),
            node("n2")
                .label("zone", "b")
                .taint("soft", None, "PreferNoSchedule")
                .build(),
        ];
        assert_eq!(
            run(json!({}), soft, pods(0, 2, "n1", &honor, id)),
            vec!["ns1/p1"]
        );
    }

    #[test]
    fn topology_balance_node_fit() {
        // [2,3,4]: zone a has no cpu left, so the pod that should move fits nowhere below average.
        let nodes = || {
            vec![
                node("n1")
                    .label("zone", "a")
                    .allocatable("250m", "16Gi", "110")
                    .build(),
                node("n2").label("zone", "b").build(),
                node("n3").label("zone", "c").build(),
            ]
        };
        let c = tsc(1, |_| {});
        let ps = || {
            cat(vec![
                pods(0, 2, "n1", &c, id),
                pods(2, 3, "n2", &c, id),
                pods(5, 4, "n3", &c, id),
            ])
        };
        assert_eq!(run(json!({}), nodes(), ps()), Vec::<String>::new());
        assert_eq!(
            run(json!({"topologyBalanceNodeFit": false}), nodes(), ps()),
            vec!["ns1/p8"]
        );
        // [[1,4],[2,1]] over two nodes per zone: one pod moves to zone b.
        let nodes = vec![
            node("a1").label("zone", "a").build(),
            node("a2").label("zone", "a").build(),
            node("b1").label("zone", "b").build(),
            node("b2").label("zone", "b").build(),
        ];
        let ps = cat(vec![
            pods(0, 1, "a1", &c, id),
            pods(1, 4, "a2", &c, id),
            pods(5, 2, "b1", &c, id),
            pods(7, 1, "b2", &c, id),
        ]);
        assert_eq!(
            run_with(json!({}), json!({"nodeFit": true}), nodes, ps),
            vec!["ns1/p4"]
        );
    }

    #[test]
    fn counting_rules() {
        let c = tsc(1, |_| {});
        // Unevictable (bare) pods are not counted: [1,1] after filtering.
        let ps = cat(vec![
            pods(0, 2, "n1", &c, |b| b.bare()),
            pods(2, 1, "n1", &c, id),
            pods(3, 1, "n2", &c, id),
        ]);
        assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
        // Terminating pods are skipped: [2 (+2 terminating), 2].
        let ps = cat(vec![
            pods(0, 2, "n1", &c, id),
            pods(2, 2, "n1", &c, |b| b.terminating()),
            pods(4, 2, "n2", &c, id),
        ]);
        assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
        // Terminating pods that the evict annotation makes evictable are still skipped.
        let ps = cat(vec![
            pods(0, 1, "n1", &c, id),
            pods(1, 2, "n1", &c, |b| {
                b.terminating()
                    .annotation("descheduler.alpha.kubernetes.io/evict", "true")
            }),
            pods(3, 1, "n2", &c, id),
        ]);
        assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
        // Pods the constraint's selector does not match are not counted.
        let ps = cat(vec![
            pods(0, 1, "n1", &c, id),
            pods(1, 3, "n1", &c, |b| b.label("foo", "other")),
            pods(4, 1, "n2", &c, id),
        ]);
        assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
        // Pods without the constraint but matching its selector are counted and may move.
        let ps = cat(vec![
            pods(0, 1, "n1", &c, id),
            (1..4)
                .map(|i| {
                    pod("ns1", &format!("q{i}"), "n1")
                        .label("foo", "bar")
                        .build()
                })
                .collect(),
        ]);
        assert_eq!(
            run(json!({}), zones(&["a", "b"]), ps),
            vec!["ns1/q2", "ns1/q3"]
        );
        // Nodes without the topology key are not domains and their pods are not counted.
        let mut nodes = zones(&["a", "b"]);
        nodes.push(node("n3").build());
        let ps = cat(vec![
            pods(0, 2, "n1", &c, id),
            pods(2, 1, "n2", &c, id),
            pods(3, 5, "n3", &c, id),
        ]);
        assert!(run(json!({}), nodes, ps).is_empty());
        // A nil label selector counts nothing.
        let ps = pods(0, 4, "n1", &tsc(1, |c| c.label_selector = None), id);
        assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
        // minDomains is ignored (as upstream): [1] over one domain stays.
        let ps = pods(0, 3, "n1", &tsc(1, |c| c.min_domains = Some(3)), id);
        assert!(run(json!({}), zones(&["a", "a"]), ps).is_empty());
    }

    #[test]
    fn filters_and_multiple_constraints() {
        let c = tsc(1, |_| {});
        let ps = |ns: &str| -> Vec<core::Pod> {
            (0..4)
                .map(|i| {
                    with_tsc(
                        pod(ns, &format!("p{i}"), "n1").label("foo", "bar"),
                        c.clone(),
                    )
                    .build()
                })
                .collect()
        };
        let both = || cat(vec![ps("ns1"), ps("ns2")]);
        assert_eq!(
            run(json!({}), zones(&["a", "b"]), both()),
            vec!["ns1/p2", "ns1/p3", "ns2/p2", "ns2/p3"]
        );
        assert_eq!(
            run(
                json!({"namespaces": {"exclude": ["ns1"]}}),
                zones(&["a", "b"]),
                both()
            ),
            vec!["ns2/p2", "ns2/p3"]
        );
        assert_eq!(
            run(
                json!({"namespaces": {"include": ["ns1"]}}),
                zones(&["a", "b"]),
                both()
            ),
            vec!["ns1/p2", "ns1/p3"]
        );
        // labelSelector: unselected pods are neither counted nor evicted.
        let ps = cat(vec![
            pods(0, 2, "n1", &c, |b| b.label("team", "x")),
            pods(2, 2, "n1", &c, id),
        ]);
        assert_eq!(
            run(
                json!({"labelSelector": {"matchLabels": {"team": "x"}}}),
                zones(&["a", "b"]),
                ps
            ),
            vec!["ns1/p1"]
        );
        // Two constraints (zone soft, host hard) over 6 nodes in 2 zones: one eviction.
        let nodes: Vec<core::Node> = (1..=6)
            .map(|i| {
                node(&format!("n{i}"))
                    .label("zone", if i <= 3 { "a" } else { "b" })
                    .build()
            })
            .collect();
        let zone = tsc(1, |c| c.when_unsatisfiable = SCHEDULE_ANYWAY.into());
        let host = tsc(1, |c| c.topology_key = "kubernetes.io/hostname".into());
        let ps: Vec<core::Pod> = (1..=4)
            .map(|i| {
                with_tsc(
                    with_tsc(
                        pod("ns1", &format!("p{i}"), &format!("n{i}")).label("foo", "bar"),
                        zone.clone(),
                    ),
                    host.clone(),
                )
                .build()
            })
            .collect();
        let got = run(
            json!({"constraints": ["DoNotSchedule", "ScheduleAnyway"]}),
            nodes,
            ps,
        );
        assert_eq!(got.len(), 1, "{got:?}");
    }

    #[test]
    fn big_skew_and_limits() {
        let c = tsc(1, |_| {});
        let ps = || cat(vec![pods(0, 1, "n2", &c, id), pods(1, 100, "n3", &c, id)]);
        assert_eq!(run(json!({}), zones(&["a", "b", "c"]), ps()).len(), 66);
        let plugin =
            RemovePodsViolatingTopologySpreadConstraint::new(Args::default()).expect("args");
        let mut s = snapshot(zones(&["a", "b", "c"]), ps());
        let r = run_profile(
            Profile {
                name: "p".into(),
                evictor: Box::new(DefaultEvictor::default()),
                deschedule: vec![],
                balance: vec![Box::new(plugin)],
            },
            &CycleConfig {
                max_per_node: Some(5),
                ..Default::default()
            },
            &mut s,
        );
        assert_eq!(evicted_names(&r).len(), 5);
    }

    #[test]
    fn constraint_deduplication() {
        let s = snapshot(
            zones(&["a", "b"]),
            vec![
                with_tsc(pod("ns1", "a", "n1").label("foo", "bar"), tsc(1, |_| {})).build(),
                with_tsc(pod("ns1", "b", "n1").label("foo", "bar"), tsc(1, |_| {})).build(),
                with_tsc(pod("ns1", "c", "n1").label("foo", "bar"), tsc(2, |_| {})).build(),
                with_tsc(
                    pod("ns1", "d", "n1")
                        .label("foo", "bar")
                        .node_selector("zone", "a"),
                    tsc(1, |_| {}),
                )
                .build(),
                with_tsc(
                    pod("ns1", "e", "n1")
                        .label("foo", "bar")
                        .node_selector("zone", "a"),
                    tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
                )
                .build(),
                with_tsc(
                    pod("ns1", "f", "n1").label("foo", "bar"),
                    tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
                )
                .build(),
            ],
        );
        let cs: Vec<Constraint<'_>> = (0..6)
            .map(|i| {
                Constraint::new(&s.pod(i).topology_spread_constraints[0], s.pod(i)).expect("valid")
            })
            .collect();
        assert!(cs[0] == cs[1], "identical constraints");
        assert!(cs[0] != cs[2], "different maxSkew");
        assert!(cs[0] != cs[3], "Honor: node selectors differ");
        assert!(cs[4] == cs[5], "Ignore: node selectors do not matter");
    }

    #[test]
    fn args_are_strict_validated_and_defaulted() {
        let p =
            RemovePodsViolatingTopologySpreadConstraint::new(Args::default()).expect("defaults");
        assert_eq!(p.constraints, vec![DO_NOT_SCHEDULE.to_string()]);
        assert!(p.node_fit);
        let p = RemovePodsViolatingTopologySpreadConstraint::new(
            args::decode(
                &json!({"constraints": ["ScheduleAnyway"], "topologyBalanceNodeFit": false}),
            )
            .expect("decode"),
        )
        .expect("valid");
        assert_eq!(p.constraints, vec![SCHEDULE_ANYWAY.to_string()]);
        assert!(!p.node_fit);
        let cases = [
            (json!({"bogus": 1}), "bogus"),
            (
                json!({"constraints": ["DoNotSchedule", "Sometimes"]}),
                "constraints[1]",
            ),
            (json!({"constraints": "DoNotSchedule"}), "constraints"),
            (
                json!({"topologyBalanceNodeFit": "yes"}),
                "topologyBalanceNodeFit",
            ),
            (
                json!({"namespaces": {"include": ["a"], "exclude": ["b"]}}),
                "namespaces",
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}),
                "labelSelector",
            ),
        ];
        for (a, field) in cases {
            match build(&a) {
                Err(e) => assert_eq!(e.field, field, "{a}: {e}"),
                Ok(_) => panic!("{a} should fail"),
            }
        }
    }
}
