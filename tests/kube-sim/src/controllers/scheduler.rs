//! A small default-scheduler: binds Pending, unassigned pods to a fitting node.
//!
//! Filters mirror the kube-scheduler plugins documented under "Scheduling Framework" /
//! "Assigning Pods to Nodes" / "Taints and Tolerations" / "Resource Management for Pods":
//! NodeReady (Ready condition True; the real scheduler relies on the not-ready taint instead),
//! NodeUnschedulable (tolerable with the `node.kubernetes.io/unschedulable:NoSchedule` toleration),
//! TaintToleration (NoSchedule and NoExecute), NodeAffinity (nodeSelector and required
//! nodeSelectorTerms), NodeResourcesFit (requests = max(sum of containers + sidecars, any init
//! container step) + overhead; a container without requests uses its limits as API defaulting
//! does; pod count against allocatable `pods`, 110 when unknown), and InterPodAffinity (required
//! affinity and anti-affinity, both directions for anti-affinity). Scoring is "least allocated"
//! on cpu and memory (with the scheduler's non-zero defaults 100m / 200Mi), ties broken by name.
//! Pods are considered by priority (desc), then creation time, then namespace/name, and each
//! binding is accounted for the rest of the tick.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinityTerm, PodCondition, Taint,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::quantity::parse_milli;
use super::util::{name, ns, pod_is_terminal, pod_phase, selector_matches, update_action};
use super::{Action, ClusterState};

/// Resource name → amount in milli-units.
pub type Resources = BTreeMap<String, i128>;

/// What pods outside the state handed to [`reconcile_with`] already use on each node
/// (requests and pod count), so a state holding only the pods to schedule accounts for the
/// rest of the cluster.
#[derive(Clone, Debug, Default)]
pub struct NodeUsage {
    /// Node name → summed requests of its non-terminal pods.
    pub requested: HashMap<String, Resources>,
    /// Node name → number of non-terminal pods.
    pub pods: HashMap<String, i128>,
}

/// Node name → node, for lookups by name.
type NodesByName<'a> = HashMap<&'a str, &'a Node>;

const DEFAULT_MAX_PODS: i128 = 110;
const NON_ZERO_CPU_MILLI: i128 = 100;
const NON_ZERO_MEMORY_MILLI: i128 = 200 * 1024 * 1024 * 1000;

struct NodeInfo<'a> {
    node: &'a Node,
    allocatable: Resources,
    requested: Resources,
    pods: i128,
}

/// Bindings (and Unschedulable conditions) for one tick.
pub fn reconcile(state: &ClusterState) -> Vec<Action> {
    reconcile_with(state, &NodeUsage::default())
}

/// [`reconcile`] with `base` added to what the pods of `state` use on each node.
pub fn reconcile_with(state: &ClusterState, base: &NodeUsage) -> Vec<Action> {
    let mut infos: Vec<NodeInfo> = state
        .nodes
        .iter()
        .map(|node| {
            let n = name(&node.metadata);
            NodeInfo {
                node,
                allocatable: allocatable(node),
                requested: base.requested.get(n).cloned().unwrap_or_default(),
                pods: base.pods.get(n).copied().unwrap_or(0),
            }
        })
        .collect();
    let index: HashMap<&str, usize> = infos
        .iter()
        .enumerate()
        .map(|(i, info)| (name(&info.node.metadata), i))
        .collect();
    let nodes: NodesByName = state.nodes.iter().map(|n| (name(&n.metadata), n)).collect();
    // Pods already assigned: (pod, node name).
    let mut placed: Vec<(&Pod, String)> = Vec::new();
    for pod in &state.pods {
        let Some(node_name) = assigned_node(pod) else {
            continue;
        };
        if pod_is_terminal(pod) {
            continue;
        }
        if let Some(info) = index.get(node_name).map(|&i| &mut infos[i]) {
            add_resources(&mut info.requested, &pod_requests(pod));
            info.pods += 1;
        }
        placed.push((pod, node_name.to_string()));
    }

    let mut pending: Vec<&Pod> = state
        .pods
        .iter()
        .filter(|p| {
            assigned_node(p).is_none()
                && p.metadata.deletion_timestamp.is_none()
                && pod_phase(p) == "Pending"
                && p.spec
                    .as_ref()
                    .and_then(|s| s.scheduler_name.as_deref())
                    .is_none_or(|s| s.is_empty() || s == "default-scheduler")
        })
        .collect();
    pending.sort_by(|a, b| {
        let prio = |p: &Pod| p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        prio(b)
            .cmp(&prio(a))
            .then_with(|| {
                a.metadata
                    .creation_timestamp
                    .cmp(&b.metadata.creation_timestamp)
            })
            .then_with(|| {
                (ns(&a.metadata), name(&a.metadata)).cmp(&(ns(&b.metadata), name(&b.metadata)))
            })
    });

    let mut out = Vec::new();
    for pod in pending {
        let req = pod_requests(pod);
        let affinity = AffinityView::new(&nodes, pod, &placed);
        let mut failures: BTreeMap<String, usize> = BTreeMap::new();
        let mut best: Option<(i128, usize)> = None;
        for (idx, info) in infos.iter().enumerate() {
            match check_node(state, pod, &req, info, &affinity) {
                Err(reasons) => {
                    for r in reasons {
                        *failures.entry(r).or_default() += 1;
                    }
                }
                Ok(()) => {
                    let score = score(info, &req);
                    let better = match best {
                        None => true,
                        Some((s, i)) => {
                            score > s
                                || (score == s
                                    && name(&info.node.metadata) < name(&infos[i].node.metadata))
                        }
                    };
                    if better {
                        best = Some((score, idx));
                    }
                }
            }
        }
        match best {
            Some((_, idx)) => {
                let node_name = name(&infos[idx].node.metadata).to_string();
                let mut bound = pod.clone();
                bound.spec.get_or_insert_with(Default::default).node_name = Some(node_name.clone());
                set_scheduled(&mut bound, state.now, true, None);
                if let Some(a) = update_action(&bound) {
                    out.push(a);
                }
                add_resources(&mut infos[idx].requested, &req);
                infos[idx].pods += 1;
                placed.push((pod, node_name));
            }
            None => {
                let mut reasons: Vec<String> =
                    failures.iter().map(|(r, n)| format!("{n} {r}")).collect();
                reasons.sort();
                let msg = format!(
                    "0/{} nodes are available: {}.",
                    infos.len(),
                    if reasons.is_empty() {
                        "no nodes".to_string()
                    } else {
                        reasons.join(", ")
                    }
                );
                let mut unsched = pod.clone();
                set_scheduled(&mut unsched, state.now, false, Some(msg));
                if super::util::same_json(pod, &unsched) {
                    continue;
                }
                if let Some(a) = update_action(&unsched) {
                    out.push(a);
                }
            }
        }
    }
    out
}

fn assigned_node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn set_scheduled(pod: &mut Pod, now: jiff::Timestamp, ok: bool, message: Option<String>) {
    let status = pod.status.get_or_insert_with(Default::default);
    let conds = status.conditions.get_or_insert_with(Vec::new);
    let want_status = if ok { "True" } else { "False" };
    let reason = (!ok).then(|| "Unschedulable".to_string());
    let ltt = conds
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == want_status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    conds.retain(|c| c.type_ != "PodScheduled");
    conds.push(PodCondition {
        type_: "PodScheduled".to_string(),
        status: want_status.to_string(),
        reason,
        message,
        last_transition_time: Some(ltt),
        ..Default::default()
    });
    if status.phase.is_none() {
        status.phase = Some("Pending".to_string());
    }
}

/// Largest quantity considered (milli-units); keeps all sums far from overflow.
const MAX_QUANTITY: i128 = 1_000_000_000_000_000_000_000_000;

fn to_resources(map: Option<&BTreeMap<String, Quantity>>) -> Resources {
    map.into_iter()
        .flatten()
        .filter_map(|(k, q)| parse_milli(&q.0).map(|v| (k.clone(), v.clamp(0, MAX_QUANTITY))))
        .collect()
}

fn allocatable(node: &Node) -> Resources {
    let status = node.status.as_ref();
    let alloc = status
        .and_then(|s| s.allocatable.as_ref())
        .filter(|a| !a.is_empty());
    let alloc = alloc.or_else(|| status.and_then(|s| s.capacity.as_ref()));
    to_resources(alloc)
}

fn add_resources(into: &mut Resources, add: &Resources) {
    for (k, v) in add {
        let e = into.entry(k.clone()).or_default();
        *e = e.saturating_add(*v);
    }
}

fn max_resources(into: &mut Resources, other: &Resources) {
    for (k, v) in other {
        let e = into.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

fn container_requests(c: &k8s_openapi::api::core::v1::Container) -> Resources {
    let res = c.resources.as_ref();
    let mut r = to_resources(res.and_then(|r| r.limits.as_ref()));
    // Explicit requests win over limits (limits only stand in for missing requests).
    r.extend(to_resources(res.and_then(|r| r.requests.as_ref())));
    r
}

/// Effective pod requests in milli-units (upstream `resourcehelper.PodRequests` semantics).
pub fn pod_requests(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::new();
    };
    let mut sum = Resources::new();
    for c in &spec.containers {
        add_resources(&mut sum, &container_requests(c));
    }
    let mut sidecars = Resources::new();
    let mut init_max = Resources::new();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            add_resources(&mut sidecars, &r);
            max_resources(&mut init_max, &sidecars);
        } else {
            let mut step = sidecars.clone();
            add_resources(&mut step, &r);
            max_resources(&mut init_max, &step);
        }
    }
    add_resources(&mut sum, &sidecars);
    max_resources(&mut sum, &init_max);
    add_resources(&mut sum, &to_resources(spec.overhead.as_ref()));
    sum
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn check_node(
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

/// Namespaces an affinity term of a pod in `own_ns` applies to; `None` means all namespaces.
fn term_namespaces(term: &PodAffinityTerm, own_ns: &str) -> Option<BTreeSet<String>> {
    let mut set: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
    match &term.namespace_selector {
        // An empty namespaceSelector selects every namespace. Non-empty ones would need
        // namespace labels, which the snapshot lacks: they add no namespaces here.
        Some(sel) if super::util::selector_is_empty(sel) => return None,
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
struct AffinityView {
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
    fn new(nodes: &NodesByName, pod: &Pod, placed: &[(&Pod, String)]) -> Self {
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
    fn check(&self, node: &Node) -> Result<(), Vec<String>> {
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

/// "Least allocated" score (higher is better) over cpu and memory.
fn score(info: &NodeInfo, req: &Resources) -> i128 {
    let mut total = 0;
    for (res, non_zero) in [
        ("cpu", NON_ZERO_CPU_MILLI),
        ("memory", NON_ZERO_MEMORY_MILLI),
    ] {
        let alloc = info.allocatable.get(res).copied().unwrap_or(0);
        if alloc <= 0 {
            continue;
        }
        let want = req.get(res).copied().filter(|v| *v > 0).unwrap_or(non_zero);
        let used = info
            .requested
            .get(res)
            .copied()
            .unwrap_or(0)
            .saturating_add(want);
        total += (alloc - used).max(0) * 1000 / alloc;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testing::{Sim, node, template};
    use k8s_openapi::api::core::v1::{
        Affinity, Container, NodeAffinity, NodeSelector, PodAffinity, PodAntiAffinity, PodSpec,
        PodStatus, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    fn pod(name: &str, app: &str, cpu: Option<&str>) -> Pod {
        let t = template(app, "nginx", cpu);
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: t.metadata.and_then(|m| m.labels),
                ..Default::default()
            },
            spec: t.spec,
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            }),
        }
    }

    fn on(mut p: Pod, node: &str) -> Pod {
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p.status.get_or_insert_with(Default::default).phase = Some("Running".into());
        p
    }

    fn label(n: &mut Node, k: &str, v: &str) {
        n.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
    }

    fn taint(n: &mut Node, key: &str, value: Option<&str>, effect: &str) {
        n.spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Vec::new)
            .push(Taint {
                key: key.into(),
                value: value.map(str::to_string),
                effect: effect.into(),
                time_added: None,
            });
    }

    fn tolerate(
        p: &mut Pod,
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) {
        p.spec
            .get_or_insert_with(Default::default)
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                key: key.map(str::to_string),
                operator: op.map(str::to_string),
                value: value.map(str::to_string),
                effect: effect.map(str::to_string),
                toleration_seconds: None,
            });
    }

    fn node_affinity(p: &mut Pod, terms: Vec<NodeSelectorTerm>) {
        p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: Some(values.iter().map(|s| s.to_string()).collect()),
            }]),
            match_fields: None,
        }
    }

    fn term(app: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            }),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        }
    }

    fn anti_affinity(p: &mut Pod, app: &str) {
        p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term(app)]),
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    fn container(cpu: &str) -> Container {
        Container {
            name: format!("c{cpu}"),
            resources: Some(ResourceRequirements {
                requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    type Setup = fn(&mut Vec<Node>, &mut Pod, &mut Vec<Pod>, &mut ClusterState);

    /// Runs the scheduler for `pod` on nodes n1/n2 (4 cpu, 8Gi) and returns the chosen node.
    fn schedule(setup: Setup) -> (Option<String>, Vec<Action>) {
        let mut nodes = vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")];
        let mut p = pod("new", "web", None);
        let mut existing = Vec::new();
        let mut st = Sim::with_nodes(vec![]).state;
        setup(&mut nodes, &mut p, &mut existing, &mut st);
        st.nodes = nodes;
        st.pods = existing;
        st.pods.push(p);
        let actions = reconcile(&st);
        let bound = actions.iter().find_map(|a| match a {
            Action::Update(v) if v["metadata"]["name"] == "new" => {
                v["spec"]["nodeName"].as_str().map(str::to_string)
            }
            _ => None,
        });
        (bound, actions)
    }

    #[test]
    fn fit_rules() {
        let cases: Vec<(&str, Setup, Option<&str>)> = vec![
            ("tie broken by name", |_, _, _, _| {}, Some("n1")),
            (
                "least requested wins",
                |_, _, e, _| e.push(on(pod("busy", "x", Some("3")), "n1")),
                Some("n2"),
            ),
            (
                "terminal pods free resources",
                |_, p, e, _| {
                    let mut done = on(pod("done", "x", Some("4")), "n1");
                    done.status.get_or_insert_with(Default::default).phase =
                        Some("Succeeded".into());
                    e.push(done);
                    e.push(on(pod("busy", "x", Some("1")), "n2"));
                    *p = pod("new", "web", Some("3"));
                },
                Some("n1"),
            ),
            (
                "NotReady node skipped",
                |n, _, _, _| {
                    if let Some(c) = n[0].status.as_mut().and_then(|s| s.conditions.as_mut()) {
                        c[0].status = "False".into();
                    }
                },
                Some("n2"),
            ),
            (
                "node without conditions skipped",
                |n, _, _, _| n[0].status = None,
                Some("n2"),
            ),
            (
                "stopped node skipped",
                |_, _, _, s| s.config.stopped_nodes = vec!["n1".into()],
                Some("n2"),
            ),
            (
                "unschedulable skipped",
                |n, _, _, _| {
                    n[0].spec.get_or_insert_with(Default::default).unschedulable = Some(true)
                },
                Some("n2"),
            ),
            (
                "unschedulable tolerated",
                |n, p, _, _| {
                    n[0].spec.get_or_insert_with(Default::default).unschedulable = Some(true);
                    tolerate(
                        p,
                        Some("node.kubernetes.io/unschedulable"),
                        Some("Exists"),
                        None,
                        Some("NoSchedule"),
                    );
                },
                Some("n1"),
            ),
            (
                "NoSchedule taint blocks",
                |n, _, _, _| taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule"),
                Some("n2"),
            ),
            (
                "NoExecute taint blocks",
                |n, _, _, _| taint(&mut n[0], "dedicated", Some("gpu"), "NoExecute"),
                Some("n2"),
            ),
            (
                "PreferNoSchedule does not block",
                |n, _, _, _| taint(&mut n[0], "dedicated", Some("gpu"), "PreferNoSchedule"),
                Some("n1"),
            ),
            (
                "Equal toleration (empty operator)",
                |n, p, _, _| {
                    taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule");
                    taint(&mut n[1], "other", None, "NoSchedule");
                    tolerate(p, Some("dedicated"), None, Some("gpu"), Some("NoSchedule"));
                },
                Some("n1"),
            ),
            (
                "Equal toleration wrong value",
                |n, p, _, _| {
                    taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule");
                    tolerate(p, Some("dedicated"), Some("Equal"), Some("cpu"), None);
                },
                Some("n2"),
            ),
            (
                "toleration for another effect",
                |n, p, _, _| {
                    taint(&mut n[0], "dedicated", Some("gpu"), "NoExecute");
                    tolerate(
                        p,
                        Some("dedicated"),
                        Some("Exists"),
                        None,
                        Some("NoSchedule"),
                    );
                },
                Some("n2"),
            ),
            (
                "Exists with empty key tolerates all",
                |n, p, _, _| {
                    taint(&mut n[0], "a", Some("1"), "NoSchedule");
                    taint(&mut n[0], "b", None, "NoExecute");
                    taint(&mut n[1], "a", Some("1"), "NoSchedule");
                    tolerate(p, None, Some("Exists"), None, None);
                },
                Some("n1"),
            ),
            (
                "nodeSelector",
                |n, p, _, _| {
                    label(&mut n[1], "disk", "ssd");
                    p.spec.get_or_insert_with(Default::default).node_selector =
                        Some([("disk".to_string(), "ssd".to_string())].into());
                },
                Some("n2"),
            ),
            (
                "nodeSelector unmatched",
                |_, p, _, _| {
                    p.spec.get_or_insert_with(Default::default).node_selector =
                        Some([("disk".to_string(), "ssd".to_string())].into());
                },
                None,
            ),
            (
                "affinity In",
                |n, p, _, _| {
                    label(&mut n[0], "zone", "a");
                    label(&mut n[1], "zone", "b");
                    node_affinity(p, vec![expr("zone", "In", &["b", "c"])]);
                },
                Some("n2"),
            ),
            (
                "affinity NotIn",
                |n, p, _, _| {
                    label(&mut n[0], "zone", "a");
                    node_affinity(p, vec![expr("zone", "NotIn", &["a"])]);
                },
                Some("n2"),
            ),
            (
                "affinity Exists",
                |n, p, _, _| {
                    label(&mut n[1], "gpu", "");
                    node_affinity(p, vec![expr("gpu", "Exists", &[])]);
                },
                Some("n2"),
            ),
            (
                "affinity DoesNotExist",
                |n, p, _, _| {
                    label(&mut n[0], "gpu", "");
                    node_affinity(p, vec![expr("gpu", "DoesNotExist", &[])]);
                },
                Some("n2"),
            ),
            (
                "affinity Gt",
                |n, p, _, _| {
                    label(&mut n[0], "cores", "4");
                    label(&mut n[1], "cores", "16");
                    node_affinity(p, vec![expr("cores", "Gt", &["8"])]);
                },
                Some("n2"),
            ),
            (
                "affinity Lt",
                |n, p, _, _| {
                    label(&mut n[0], "cores", "16");
                    label(&mut n[1], "cores", "4");
                    node_affinity(p, vec![expr("cores", "Lt", &["8"])]);
                },
                Some("n2"),
            ),
            (
                "affinity Gt with non-integer label",
                |n, p, _, _| {
                    label(&mut n[0], "cores", "many");
                    label(&mut n[1], "cores", "many");
                    node_affinity(p, vec![expr("cores", "Gt", &["8"])]);
                },
                None,
            ),
            (
                "affinity terms are ORed",
                |n, p, _, _| {
                    label(&mut n[1], "zone", "b");
                    node_affinity(
                        p,
                        vec![expr("zone", "In", &["x"]), expr("zone", "In", &["b"])],
                    );
                },
                Some("n2"),
            ),
            (
                "affinity matchFields metadata.name",
                |_, p, _, _| {
                    node_affinity(
                        p,
                        vec![NodeSelectorTerm {
                            match_expressions: None,
                            match_fields: Some(vec![NodeSelectorRequirement {
                                key: "metadata.name".into(),
                                operator: "In".into(),
                                values: Some(vec!["n2".into()]),
                            }]),
                        }],
                    );
                },
                Some("n2"),
            ),
            (
                "empty affinity term matches nothing",
                |_, p, _, _| node_affinity(p, vec![NodeSelectorTerm::default()]),
                None,
            ),
            (
                "insufficient cpu",
                |_, p, _, _| *p = pod("new", "web", Some("5")),
                None,
            ),
            (
                "requests fill exactly",
                |_, p, e, _| {
                    e.push(on(pod("a", "x", Some("1500m")), "n1"));
                    e.push(on(pod("b", "x", Some("1500m")), "n2"));
                    *p = pod("new", "web", Some("2.5"));
                },
                Some("n1"),
            ),
            (
                "limits stand in for requests",
                |_, p, e, _| {
                    e.push(on(pod("a", "x", Some("2")), "n1"));
                    e.push(on(pod("b", "x", Some("2")), "n2"));
                    if let Some(c) = p.spec.as_mut().map(|s| &mut s.containers[0]) {
                        c.resources = Some(ResourceRequirements {
                            limits: Some([("cpu".to_string(), Quantity("3".into()))].into()),
                            ..Default::default()
                        });
                    }
                },
                None,
            ),
            (
                "init container max counts",
                |_, p, e, _| {
                    e.push(on(pod("a", "x", Some("2")), "n1"));
                    e.push(on(pod("b", "x", Some("2")), "n2"));
                    if let Some(s) = p.spec.as_mut() {
                        s.containers = vec![container("1")];
                        s.init_containers = Some(vec![container("3")]);
                    }
                },
                None,
            ),
            (
                "init container below sum",
                |_, p, e, _| {
                    e.push(on(pod("a", "x", Some("2")), "n1"));
                    e.push(on(pod("b", "x", Some("2")), "n2"));
                    if let Some(s) = p.spec.as_mut() {
                        s.containers = vec![container("1"), container("1")];
                        s.init_containers = Some(vec![container("1500m")]);
                    }
                },
                Some("n1"),
            ),
            (
                "overhead counts",
                |_, p, e, _| {
                    e.push(on(pod("a", "x", Some("2")), "n1"));
                    e.push(on(pod("b", "x", Some("2")), "n2"));
                    if let Some(s) = p.spec.as_mut() {
                        s.containers = vec![container("1500m")];
                        s.overhead = Some([("cpu".to_string(), Quantity("600m".into()))].into());
                    }
                },
                None,
            ),
            (
                "unknown extended resource",
                |_, p, _, _| {
                    if let Some(c) = p.spec.as_mut().map(|s| &mut s.containers[0]) {
                        c.resources = Some(ResourceRequirements {
                            requests: Some(
                                [("nvidia.com/gpu".to_string(), Quantity("1".into()))].into(),
                            ),
                            ..Default::default()
                        });
                    }
                },
                None,
            ),
            (
                "pod count limit",
                |n, _, e, _| {
                    for node in n.iter_mut() {
                        if let Some(a) = node.status.as_mut().and_then(|s| s.allocatable.as_mut()) {
                            a.insert("pods".into(), Quantity("1".into()));
                        }
                    }
                    e.push(on(pod("a", "x", None), "n1"));
                },
                Some("n2"),
            ),
            (
                "pod anti-affinity by hostname",
                |_, p, e, _| {
                    e.push(on(pod("old", "web", None), "n1"));
                    anti_affinity(p, "web");
                },
                Some("n2"),
            ),
            (
                "pod anti-affinity everywhere",
                |_, p, e, _| {
                    e.push(on(pod("old1", "web", None), "n1"));
                    e.push(on(pod("old2", "web", None), "n2"));
                    anti_affinity(p, "web");
                },
                None,
            ),
            (
                "pod anti-affinity other namespace ignored",
                |_, p, e, _| {
                    let mut other = on(pod("old", "web", None), "n1");
                    other.metadata.namespace = Some("elsewhere".into());
                    e.push(other);
                    anti_affinity(p, "web");
                },
                Some("n1"),
            ),
            (
                "existing pod's anti-affinity is symmetric",
                |_, _, e, _| {
                    let mut guard = on(pod("guard", "db", None), "n1");
                    anti_affinity(&mut guard, "web");
                    e.push(guard);
                },
                Some("n2"),
            ),
            (
                "pod affinity",
                |_, p, e, _| {
                    e.push(on(pod("cache", "cache", None), "n2"));
                    p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
                        pod_affinity: Some(PodAffinity {
                            required_during_scheduling_ignored_during_execution: Some(vec![term(
                                "cache",
                            )]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    });
                },
                Some("n2"),
            ),
            (
                "other scheduler's pod ignored",
                |_, p, _, _| {
                    p.spec.get_or_insert_with(Default::default).scheduler_name =
                        Some("custom".into());
                },
                None,
            ),
        ];
        for (desc, setup, want) in cases {
            let (got, _) = schedule(setup);
            assert_eq!(got.as_deref(), want, "{desc}");
        }
    }

    #[test]
    fn binding_sets_pod_scheduled_and_failure_reports_reasons() {
        let (got, actions) = schedule(|_, _, _, _| {});
        assert_eq!(got.as_deref(), Some("n1"));
        let Some(Action::Update(v)) = actions.first() else {
            panic!("expected an update");
        };
        let conds = v["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            conds
                .iter()
                .any(|c| c["type"] == "PodScheduled" && c["status"] == "True")
        );

        let (got, actions) = schedule(|n, p, _, _| {
            taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule");
            *p = pod("new", "web", Some("5"));
        });
        assert_eq!(got, None);
        let Some(Action::Update(v)) = actions.first() else {
            panic!("expected a status update");
        };
        let cond = v["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled").cloned())
            .unwrap_or_default();
        assert_eq!(cond["status"], "False");
        assert_eq!(cond["reason"], "Unschedulable");
        assert_eq!(
            cond["message"],
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}."
        );
    }

    #[test]
    fn bindings_within_a_tick_are_accounted_and_idempotent() {
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
        sim.state.pods.push(pod("a", "web", Some("3")));
        sim.state.pods.push(pod("b", "web", Some("3")));
        sim.state.pods.push(pod("c", "web", Some("3")));
        let mut sim = Sim::new(sim.state);
        let actions = reconcile(&sim.state);
        sim.apply(actions);
        let nodes: Vec<Option<String>> = sim
            .state
            .pods
            .iter()
            .map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
            .collect();
        assert_eq!(nodes, vec![Some("n1".into()), Some("n2".into()), None]);
        // The unschedulable pod's condition is written once.
        assert!(reconcile(&sim.state).is_empty());
    }

    #[test]
    fn pod_requests_formula() {
        let mut p = pod("p", "x", None);
        if let Some(s) = p.spec.as_mut() {
            s.containers = vec![container("1"), container("500m")];
            let mut sidecar = container("200m");
            sidecar.restart_policy = Some("Always".into());
            s.init_containers = Some(vec![sidecar, container("2")]);
            s.overhead = Some([("cpu".to_string(), Quantity("100m".into()))].into());
        }
        // max(1.5 + 0.2 sidecar, 0.2 + 2 init step) + 0.1 overhead = 2.3
        assert_eq!(pod_requests(&p).get("cpu"), Some(&2300));
        assert!(pod_requests(&Pod::default()).is_empty());
    }

    #[test]
    fn tolerations_table() {
        let t = |key: &str, value: Option<&str>, effect: &str| Taint {
            key: key.into(),
            value: value.map(str::to_string),
            effect: effect.into(),
            time_added: None,
        };
        let tol = |key: Option<&str>,
                   op: Option<&str>,
                   value: Option<&str>,
                   effect: Option<&str>| Toleration {
            key: key.map(str::to_string),
            operator: op.map(str::to_string),
            value: value.map(str::to_string),
            effect: effect.map(str::to_string),
            toleration_seconds: None,
        };
        let cases = [
            (
                tol(Some("k"), None, Some("v"), None),
                t("k", Some("v"), "NoSchedule"),
                true,
            ),
            (
                tol(Some("k"), Some("Equal"), Some("v"), Some("NoSchedule")),
                t("k", Some("v"), "NoExecute"),
                false,
            ),
            (
                tol(Some("k"), Some("Exists"), None, None),
                t("k", Some("v"), "NoExecute"),
                true,
            ),
            (
                tol(None, Some("Exists"), None, None),
                t("any", None, "NoSchedule"),
                true,
            ),
            (
                tol(None, Some("Equal"), None, None),
                t("any", None, "NoSchedule"),
                false,
            ),
            (
                tol(Some("k"), None, None, None),
                t("k", None, "NoSchedule"),
                true,
            ),
            (
                tol(Some("k"), Some("Bogus"), None, None),
                t("k", None, "NoSchedule"),
                false,
            ),
        ];
        for (i, (tol, taint, want)) in cases.iter().enumerate() {
            assert_eq!(tolerates(tol, taint), *want, "case {i}");
        }
    }

    #[test]
    fn odd_pods_do_not_panic() {
        let mut st = Sim::with_nodes(vec![node("n1", "4", "8Gi"), Node::default()]).state;
        st.pods.push(Pod::default());
        let mut weird = pod("w", "x", None);
        if let Some(c) = weird.spec.as_mut().map(|s| &mut s.containers[0]) {
            c.resources = Some(ResourceRequirements {
                requests: Some([("cpu".to_string(), Quantity("lots".into()))].into()),
                ..Default::default()
            });
        }
        st.pods.push(weird);
        let _ = reconcile(&st);
        let _ = PodSpec::default();
    }
}
