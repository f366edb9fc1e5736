//! The InterPodAffinity filter: required pod affinity and anti-affinity, both directions.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm};

use super::NodesByName;
use crate::controllers::util::{ns, selector_matches};

/// Namespaces an affinity term of a pod in `own_ns` applies to; `None` means all namespaces.
fn term_namespaces(term: &PodAffinityTerm, own_ns: &str) -> Option<BTreeSet<String>> {
    let mut set: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
    match &term.namespace_selector {
        // An empty namespaceSelector selects every namespace. Non-empty ones would need
        // namespace labels, which the snapshot lacks: they add no namespaces here.
        Some(sel) if crate::controllers::util::selector_is_empty(sel) => return None,
        Some(_) => {}
        None if set.is_empty() => {
            set.insert(own_ns.to_string());
        }
        None => {}
    }
    Some(set)
}

fn term_matches_pod(term: &PodAffinityTerm, term_owner_ns: &str, pod: &Pod) -> bool {
    let Some(sel) = &term.label_selector else {
        return false;
    };
    term_namespaces(term, term_owner_ns).is_none_or(|s| s.contains(ns(&pod.metadata)))
        && selector_matches(sel, pod.metadata.labels.as_ref())
}

fn node_label<'a>(nodes: &NodesByName<'a>, node_name: &str, key: &str) -> Option<&'a str> {
    nodes
        .get(node_name)
        .and_then(|n| n.metadata.labels.as_ref())
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// The required inter-pod (anti-)affinity of one pending pod against the pods placed so far,
/// reduced to topology values, so each node is checked in time independent of the number of
/// placed pods.
pub(super) struct AffinityView {
    /// Own required anti-affinity: topology key → values where a selected pod runs.
    anti: Vec<(String, std::collections::HashSet<String>)>,
    /// Placed pods' required anti-affinity selecting this pod: forbidden (key, value) pairs.
    forbidden: Vec<(String, String)>,
    /// Own required affinity: (topology key, values where a selected pod runs, whether the
    /// pod may go anywhere as the first of its group).
    affinity: Vec<(String, std::collections::HashSet<String>, bool)>,
}

fn required<T: Clone>(terms: Option<&Vec<T>>) -> &[T] {
    terms.map(Vec::as_slice).unwrap_or(&[])
}

impl AffinityView {
    pub(super) fn new(nodes: &NodesByName, pod: &Pod, placed: &[(&Pod, String)]) -> Self {
        let own_ns = ns(&pod.metadata);
        let aff = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let values = |term: &PodAffinityTerm| {
            placed
                .iter()
                .filter(|(other, _)| term_matches_pod(term, own_ns, other))
                .filter_map(|(_, n)| node_label(nodes, n, &term.topology_key))
                .map(String::from)
                .collect::<std::collections::HashSet<String>>()
        };
        let anti_terms = required(
            aff.and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
        );
        let anti = anti_terms
            .iter()
            .map(|t| (t.topology_key.clone(), values(t)))
            .collect();
        let mut forbidden = Vec::new();
        for (other, other_node) in placed {
            let terms = required(
                other
                    .spec
                    .as_ref()
                    .and_then(|s| s.affinity.as_ref())
                    .and_then(|a| a.pod_anti_affinity.as_ref())
                    .and_then(|a| {
                        a.required_during_scheduling_ignored_during_execution
                            .as_ref()
                    }),
            );
            for term in terms {
                if let Some(v) = node_label(nodes, other_node, &term.topology_key)
                    && term_matches_pod(term, ns(&other.metadata), pod)
                {
                    forbidden.push((term.topology_key.clone(), v.to_string()));
                }
            }
        }
        let aff_terms = required(aff.and_then(|a| a.pod_affinity.as_ref()).and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }));
        let affinity = aff_terms
            .iter()
            .map(|t| {
                let any_match = placed
                    .iter()
                    .any(|(other, _)| term_matches_pod(t, own_ns, other));
                // Upstream allows the first pod of a group whose term matches the pod itself.
                let self_ok = !any_match && term_matches_pod(t, own_ns, pod);
                (t.topology_key.clone(), values(t), self_ok)
            })
            .collect();
        AffinityView {
            anti,
            forbidden,
            affinity,
        }
    }

    /// Whether `node` satisfies the view (the InterPodAffinity filter).
    pub(super) fn check(&self, node: &Node) -> Result<(), Vec<String>> {
        let no_labels = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&no_labels);
        for (key, values) in &self.anti {
            if labels.get(key).is_some_and(|v| values.contains(v)) {
                return Err(vec![
                    "node(s) didn't match pod anti-affinity rules".to_string(),
                ]);
            }
        }
        for (key, value) in &self.forbidden {
            if labels.get(key) == Some(value) {
                return Err(vec![
                    "node(s) didn't satisfy existing pods anti-affinity rules".to_string(),
                ]);
            }
        }
        for (key, values, self_ok) in &self.affinity {
            let here = labels.get(key).map(|v| values.contains(v));
            match here {
                None => return Err(vec!["node(s) didn't match pod affinity rules".to_string()]),
                Some(false) if !self_ok => {
                    return Err(vec!["node(s) didn't match pod affinity rules".to_string()]);
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}
