//! The pod-selecting parts of a pod spec, prepared once per prediction: topology spread
//! constraints and inter-pod (anti-)affinity terms as [`Matcher`]s, and per-topology-key domain
//! indexes of the nodes (each label value numbered once per cycle).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PodAffinityTerm, TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube_core::SelectorExt;
use rustc_hash::FxHashMap;

use super::matcher::{Matcher, Namespaces};
use crate::scheduling::selector;
use crate::snapshot::{NodeId, Pod, Snapshot};

/// `kubernetes.io/hostname`: spreading counts a node's own pods for it.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// `topology.kubernetes.io/zone`.
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// `sel` with `In` requirements for `match_keys` and `NotIn` for `mismatch_keys`, valued from the
/// owner's labels (KEP-3243 / KEP-3633); keys the owner lacks are skipped.
fn with_label_keys(
    sel: &LabelSelector,
    owner: &BTreeMap<String, String>,
    match_keys: &[String],
    mismatch_keys: &[String],
) -> LabelSelector {
    let mut sel = sel.clone();
    let extra = match_keys
        .iter()
        .map(|k| (k, "In"))
        .chain(mismatch_keys.iter().map(|k| (k, "NotIn")))
        .filter_map(|(k, op)| owner.get(k).map(|v| (k, v, op)));
    for (k, v, op) in extra {
        sel.match_expressions
            .get_or_insert_with(Vec::new)
            .push(LabelSelectorRequirement {
                key: k.clone(),
                operator: op.to_string(),
                values: Some(vec![v.clone()]),
            });
    }
    sel
}

/// A matcher for an affinity term declared by `owner`.
pub fn term_matcher(term: &PodAffinityTerm, owner: &Pod) -> Matcher {
    let listed = term.namespaces.clone().unwrap_or_default();
    let (namespaces, ns_selector) = match &term.namespace_selector {
        Some(s) => (
            Namespaces::Selected(listed, format!("{s:?}")),
            selector::compile(s).ok(),
        ),
        None if listed.is_empty() => (Namespaces::Listed(vec![owner.namespace.to_string()]), None),
        None => (Namespaces::Listed(listed), None),
    };
    let selector = term.label_selector.as_ref().and_then(|s| {
        let s = with_label_keys(
            s,
            &owner.labels,
            term.match_label_keys.as_deref().unwrap_or(&[]),
            term.mismatch_label_keys.as_deref().unwrap_or(&[]),
        );
        selector::compile_strict(&s).ok()
    });
    Matcher {
        namespaces,
        ns_selector,
        selector,
        terminating: true,
    }
}

/// One topology spread constraint of the incoming pod.
#[derive(Debug, Clone)]
pub struct Spread {
    /// `topologyKey`.
    pub key: String,
    /// `maxSkew`.
    pub max_skew: i64,
    /// `minDomains` (1 when unset).
    pub min_domains: i64,
    /// `whenUnsatisfiable: DoNotSchedule`.
    pub hard: bool,
    /// `nodeTaintsPolicy: Honor` (default Ignore).
    pub honor_taints: bool,
    /// `nodeAffinityPolicy: Honor` (the default).
    pub honor_affinity: bool,
    /// The pods it counts (the pod's namespace).
    pub matcher: Matcher,
    /// Whether the incoming pod itself matches.
    pub self_match: bool,
}

/// The pod's own constraints.
pub fn spreads(pod: &Pod) -> Vec<Spread> {
    pod.topology_spread_constraints
        .iter()
        .map(|c: &TopologySpreadConstraint| {
            let selector = c.label_selector.as_ref().and_then(|s| {
                let s = with_label_keys(
                    s,
                    &pod.labels,
                    c.match_label_keys.as_deref().unwrap_or(&[]),
                    &[],
                );
                selector::compile(&s).ok()
            });
            let self_match = selector.as_ref().is_some_and(|s| s.matches(&pod.labels));
            Spread {
                key: c.topology_key.clone(),
                max_skew: i64::from(c.max_skew),
                min_domains: c.min_domains.map_or(1, i64::from),
                hard: c.when_unsatisfiable == "DoNotSchedule",
                honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
                honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                matcher: Matcher {
                    namespaces: Namespaces::Listed(vec![pod.namespace.to_string()]),
                    ns_selector: None,
                    selector,
                    terminating: false,
                },
                self_match,
            }
        })
        .collect()
}

/// The pod's required or preferred (weighted) affinity / anti-affinity terms.
pub struct AffinityTerms<'a> {
    /// Required affinity.
    pub required_affinity: Vec<&'a PodAffinityTerm>,
    /// Required anti-affinity.
    pub required_anti: Vec<&'a PodAffinityTerm>,
    /// Preferred terms with a signed weight (anti-affinity negative).
    pub preferred: Vec<(&'a PodAffinityTerm, i64)>,
}

/// Reads the terms of `pod`.
pub fn affinity_terms(pod: &Pod) -> AffinityTerms<'_> {
    let mut t = AffinityTerms {
        required_affinity: Vec::new(),
        required_anti: Vec::new(),
        preferred: Vec::new(),
    };
    let Some(a) = pod.affinity.as_deref() else {
        return t;
    };
    if let Some(p) = &a.pod_affinity {
        let required = &p.required_during_scheduling_ignored_during_execution;
        let weighted = &p.preferred_during_scheduling_ignored_during_execution;
        t.add(false, required, weighted);
    }
    if let Some(p) = &a.pod_anti_affinity {
        let required = &p.required_during_scheduling_ignored_during_execution;
        let weighted = &p.preferred_during_scheduling_ignored_during_execution;
        t.add(true, required, weighted);
    }
    t
}

impl<'a> AffinityTerms<'a> {
    /// Adds one kind's terms: the required ones to `required_anti` (`anti`) or
    /// `required_affinity`, the weighted ones to `preferred` (weight negated for `anti`).
    fn add(
        &mut self,
        anti: bool,
        required: &'a Option<Vec<PodAffinityTerm>>,
        weighted: &'a Option<Vec<WeightedPodAffinityTerm>>,
    ) {
        let (list, sign) = if anti {
            (&mut self.required_anti, -1)
        } else {
            (&mut self.required_affinity, 1)
        };
        list.extend(required.iter().flatten());
        let weighted = weighted.iter().flatten();
        self.preferred
            .extend(weighted.map(|w| (&w.pod_affinity_term, sign * i64::from(w.weight))));
    }
}

/// Nodes numbered by their value of one label: `of[node]` is the domain (`None`: no such label).
#[derive(Debug, Clone, Default)]
pub struct Domains {
    /// Per node, its domain.
    pub of: Vec<Option<u32>>,
    /// How many distinct values.
    pub count: usize,
}

/// Per topology key, the nodes' domains (built once per key per cycle).
#[derive(Default)]
pub struct DomainIndex(FxHashMap<String, Domains>);

impl DomainIndex {
    /// The domains of `key`, if [`DomainIndex::get`] built them.
    pub fn built(&self, key: &str) -> Option<&Domains> {
        self.0.get(key)
    }

    /// The domains of `key`.
    pub fn get(&mut self, snapshot: &Snapshot, key: &str) -> &Domains {
        if !self.0.contains_key(key) {
            let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
            let of = (0..snapshot.nodes.len() as NodeId)
                .map(|n| {
                    let v = snapshot.node(n).labels.get(key)?;
                    let next = ids.len() as u32;
                    Some(*ids.entry(v.as_str()).or_insert(next))
                })
                .collect();
            let count = ids.len();
            self.0.insert(key.to_string(), Domains { of, count });
        }
        &self.0[key]
    }
}

/// Counts of a matcher per domain of `key` over the nodes `eligible` admits.
pub fn domain_counts(
    per_node: &[u32],
    domains: &Domains,
    eligible: impl Fn(usize) -> bool,
) -> Vec<i64> {
    let mut counts = vec![0i64; domains.count];
    // Most nodes count 0 (a selector picks a few pods): those are skipped before anything else.
    for (n, (&c, d)) in per_node.iter().zip(&domains.of).enumerate() {
        if c == 0 {
            continue;
        }
        if let Some(d) = d
            && eligible(n)
        {
            counts[*d as usize] += i64::from(c);
        }
    }
    counts
}
