//! The per-node filters: NodeReady, NodeUnschedulable, TaintToleration, NodeAffinity,
//! NodeResourcesFit (InterPodAffinity is in [`super::affinity`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use super::affinity::AffinityView;
use super::{DEFAULT_MAX_PODS, NodeInfo, Resources};
use crate::controllers::ClusterState;
use crate::controllers::util::name;

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

pub(super) fn check_node(
    state: &ClusterState,
    pod: &Pod,
    req: &Resources,
    info: &NodeInfo,
    affinity: &AffinityView,
) -> Result<(), Vec<String>> {
    let node = info.node;
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    let node_name = name(&node.metadata);
    if !node_ready(node) || state.config.stopped_nodes.iter().any(|n| n == node_name) {
        return Err(vec!["node(s) were not ready".to_string()]);
    }
    let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let unsched_taint = Taint {
        key: "node.kubernetes.io/unschedulable".to_string(),
        effect: "NoSchedule".to_string(),
        ..Default::default()
    };
    if unschedulable && !tolerations.iter().any(|t| tolerates(t, &unsched_taint)) {
        return Err(vec!["node(s) were unschedulable".to_string()]);
    }
    if let Some(t) = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .find(|t| {
            matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                && !tolerations.iter().any(|tol| tolerates(tol, t))
        })
    {
        let value = t.value.as_deref().unwrap_or("");
        return Err(vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key, value
        )]);
    }
    if !node_affinity_matches(pod, node) {
        return Err(vec![
            "node(s) didn't match Pod's node affinity/selector".to_string(),
        ]);
    }
    let mut reasons = Vec::new();
    let max_pods = info
        .allocatable
        .get("pods")
        .copied()
        .map_or(DEFAULT_MAX_PODS, |m| m / 1000);
    if info.pods + 1 > max_pods {
        reasons.push("Too many pods".to_string());
    }
    for (res, want) in req {
        if *want <= 0 || res == "pods" {
            continue;
        }
        let alloc = info.allocatable.get(res).copied().unwrap_or(0);
        let used = info.requested.get(res).copied().unwrap_or(0);
        if used.saturating_add(*want) > alloc {
            reasons.push(format!("Insufficient {res}"));
        }
    }
    if !reasons.is_empty() {
        return Err(reasons);
    }
    affinity.check(node)
}

/// Upstream `v1helper.TolerationsTolerateTaint` semantics.
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = tol.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or("");
    match tol.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" | "" => {
            key == taint.key
                && tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

fn node_affinity_matches(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    if let Some(sel) = &spec.node_selector
        && sel.iter().any(|(k, v)| labels.get(k) != Some(v))
    {
        return false;
    }
    let Some(required) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return true;
    };
    // Terms are ORed; an empty term matches nothing.
    required
        .node_selector_terms
        .iter()
        .any(|t| term_matches(t, node, labels))
}

fn term_matches(term: &NodeSelectorTerm, node: &Node, labels: &BTreeMap<String, String>) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, node.metadata.name.as_deref())
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let as_int = |v: &str| v.trim().parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (value.and_then(as_int), values) else {
                return false;
            };
            let Some(want) = as_int(want) else {
                return false;
            };
            if r.operator == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}
