//! Node affinity and node selectors (Kubernetes component-helpers semantics), and pod affinity
//! term matching used for inter-pod anti-affinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, PreferredSchedulingTerm,
};

use kube_core::{Selector, SelectorExt};

use super::selector;
use crate::snapshot::{Node, Pod, Snapshot};

/// Whether a node label requirement matches (`nodeSelectorRequirementsAsSelector`): an invalid
/// requirement (`In`/`NotIn` without values, `Exists`/`DoesNotExist` with values, `Gt`/`Lt` without
/// exactly one integer, an unknown operator) makes its term match nothing.
fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => !values.is_empty() && value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !values.is_empty() && value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => values.is_empty() && value.is_some(),
        "DoesNotExist" => values.is_empty() && value.is_none(),
        "Gt" | "Lt" => {
            let [bound] = values else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            match value.map(str::parse::<i64>) {
                Some(Ok(v)) if req.operator == "Gt" => v > bound,
                Some(Ok(v)) => v < bound,
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether a node field requirement matches (`nodeSelectorRequirementsAsFieldSelector`): only
/// `In` / `NotIn` with exactly one value; the only field a node has is `metadata.name`.
fn field_requirement_matches(req: &NodeSelectorRequirement, node_name: &str) -> bool {
    let field = if req.key == "metadata.name" {
        node_name
    } else {
        ""
    };
    match (req.operator.as_str(), req.values.as_deref().unwrap_or(&[])) {
        ("In", [v]) => field == v,
        ("NotIn", [v]) => field != v,
        _ => false,
    }
}

/// Whether `node` matches one `NodeSelectorTerm` (all expressions and fields; an empty term
/// matches nothing).
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, node.labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| field_requirement_matches(r, &node.name))
}

/// Whether `node` satisfies the pod's `nodeSelector` and required node affinity (terms are ORed).
pub fn matches_node_selector_and_affinity(pod: &Pod, node: &Node) -> bool {
    if !pod
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return false;
    }
    match required_node_terms(pod) {
        None => true,
        Some(terms) => terms.iter().any(|t| term_matches(t, node)),
    }
}

/// The pod's required node affinity terms, if it has any required node affinity.
pub fn required_node_terms(pod: &Pod) -> Option<&[NodeSelectorTerm]> {
    pod.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .map(|s| s.node_selector_terms.as_slice())
}

/// Whether the pod has required node affinity.
pub fn has_required_node_affinity(pod: &Pod) -> bool {
    required_node_terms(pod).is_some()
}

/// Whether the pod has preferred node affinity terms.
pub fn has_preferred_node_affinity(pod: &Pod) -> bool {
    preferred_node_terms(pod).is_some_and(|p| !p.is_empty())
}

/// The pod's preferred node affinity terms, if it declares them.
fn preferred_node_terms(pod: &Pod) -> Option<&Vec<PreferredSchedulingTerm>> {
    let node_affinity = pod.affinity.as_ref()?.node_affinity.as_ref()?;
    node_affinity
        .preferred_during_scheduling_ignored_during_execution
        .as_ref()
}

/// Sum of the weights of the pod's preferred node affinity terms that `node` matches.
pub fn preferred_node_affinity_score(pod: &Pod, node: &Node) -> i64 {
    preferred_node_terms(pod)
        .map(|terms| {
            terms
                .iter()
                .filter(|t| term_matches(&t.preference, node))
                .map(|t| t.weight as i64)
                .sum()
        })
        .unwrap_or(0)
}

/// Whether `other` is selected by the pod affinity `term` declared by `owner` (namespaces:
/// `term.namespaces`, else `namespaceSelector`, else the owner's namespace).
pub fn affinity_term_selects(
    snapshot: &Snapshot,
    term: &PodAffinityTerm,
    owner: &Pod,
    other: &Pod,
) -> bool {
    let namespaces = term.namespaces.as_deref().unwrap_or(&[]);
    let ns_ok = if !namespaces.is_empty() {
        namespaces.iter().any(|n| **n == *other.namespace)
            || term
                .namespace_selector
                .as_ref()
                .is_some_and(|s| ns_selected(snapshot, s, &other.namespace))
    } else if let Some(sel) = &term.namespace_selector {
        ns_selected(snapshot, sel, &other.namespace)
    } else {
        other.namespace == owner.namespace
    };
    if !ns_ok {
        return false;
    }
    let Some(label_selector) = &term.label_selector else {
        // A nil label selector selects no pods.
        return false;
    };
    let mut sel = label_selector.clone();
    // matchLabelKeys / mismatchLabelKeys (KEP-3633) add requirements taken from the owner's labels.
    let extra_in = term
        .match_label_keys
        .iter()
        .flatten()
        .filter_map(|k| owner.labels.get(k).map(|v| (k, v, "In")));
    let extra_not = term
        .mismatch_label_keys
        .iter()
        .flatten()
        .filter_map(|k| owner.labels.get(k).map(|v| (k, v, "NotIn")));
    for (k, v, op) in extra_in.chain(extra_not) {
        sel.match_expressions.get_or_insert_with(Vec::new).push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: k.clone(),
                operator: op.to_string(),
                values: Some(vec![v.clone()]),
            },
        );
    }
    selector::matches(&sel, &other.labels)
}

fn ns_selected(
    snapshot: &Snapshot,
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    namespace: &str,
) -> bool {
    let empty = BTreeMap::new();
    let labels = snapshot.namespace_labels(namespace).unwrap_or(&empty);
    selector::matches(sel, labels)
}

/// The pod's required anti-affinity terms.
pub fn required_anti_affinity_terms(pod: &Pod) -> &[PodAffinityTerm] {
    pod.affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or(&[])
}

/// Whether two nodes are in the same topology domain for `key` (the same node always is).
pub fn same_topology(a: &Node, b: &Node, key: &str) -> bool {
    if a.name == b.name {
        return true;
    }
    match (a.labels.get(key), b.labels.get(key)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// How a compiled anti-affinity term picks namespaces: the term's `namespaces`, else the owner's
/// namespace (upstream descheduler ignores `namespaceSelector`).
#[derive(Debug, Clone)]
pub enum TermNamespaces<'a> {
    /// `term.namespaces`.
    Listed(&'a [String]),
    /// The owner pod's namespace.
    Own(&'a str),
}

impl TermNamespaces<'_> {
    /// Whether `namespace` is one of them.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            TermNamespaces::Listed(l) => l.iter().any(|n| n == namespace),
            TermNamespaces::Own(n) => *n == namespace,
        }
    }
}

/// A term's label selector after `LabelSelectorAsSelector`.
#[derive(Debug, Clone)]
pub enum TermSelector {
    /// A nil selector: selects no pod.
    Nothing,
    /// The selector does not convert (the error text).
    Invalid(String),
    /// A valid selector (empty selects every pod).
    Match(Selector),
}

/// A required pod anti-affinity term prepared the way upstream descheduler evaluates it
/// (`GetNamespacesFromPodAffinityTerm` + `LabelSelectorAsSelector`; `namespaceSelector`,
/// `matchLabelKeys` and `mismatchLabelKeys` are not consulted — the API server already merged the
/// label keys into the selector).
#[derive(Debug, Clone)]
pub struct CompiledAntiAffinityTerm<'a> {
    /// Namespaces the term looks at.
    pub namespaces: TermNamespaces<'a>,
    /// Its selector.
    pub selector: TermSelector,
    /// `topologyKey`.
    pub topology_key: &'a str,
}

impl CompiledAntiAffinityTerm<'_> {
    /// Whether the term selects `other` by namespace and labels (an invalid selector selects none).
    pub fn selects(&self, other: &Pod) -> bool {
        match &self.selector {
            TermSelector::Match(sel) => {
                self.namespaces.contains(&other.namespace) && sel.matches(&other.labels)
            }
            TermSelector::Nothing | TermSelector::Invalid(_) => false,
        }
    }

    /// Whether the selector failed to convert.
    pub fn is_invalid(&self) -> bool {
        matches!(self.selector, TermSelector::Invalid(_))
    }
}

/// The pod's required anti-affinity terms, compiled (empty when it has none).
pub fn compile_anti_affinity_terms(pod: &Pod) -> Vec<CompiledAntiAffinityTerm<'_>> {
    required_anti_affinity_terms(pod)
        .iter()
        .map(|t| CompiledAntiAffinityTerm {
            namespaces: match t.namespaces.as_deref() {
                Some(l) if !l.is_empty() => TermNamespaces::Listed(l),
                _ => TermNamespaces::Own(&pod.namespace),
            },
            selector: match &t.label_selector {
                None => TermSelector::Nothing,
                Some(sel) => match selector::compile_strict(sel) {
                    Ok(s) => TermSelector::Match(s),
                    Err(e) => TermSelector::Invalid(e),
                },
            },
            topology_key: &t.topology_key,
        })
        .collect()
}
