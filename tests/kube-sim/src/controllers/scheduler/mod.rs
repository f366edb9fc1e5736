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
//! binding is accounted for the rest of the tick. As kube-scheduler, a pod's search stops once
//! it has found the adaptive `percentageOfNodesToScore` share of feasible nodes (see
//! [`feasible_nodes_to_find`]); below 100 nodes every node is scored.
//!
//! With a `KubeSchedulerConfiguration` ([`SimConfig::scheduler`](super::SimConfig), see
//! [`config`]) scoring is kube-scheduler's instead ([`score`]): the pod's profile (by
//! `schedulerName`; pods no profile serves stay Pending untouched, as kube-scheduler ignores
//! them) scores with NodeResourcesFit's strategy, NodeResourcesBalancedAllocation and
//! TaintToleration at their weights, and its `percentageOfNodesToScore` applies. Ties are still
//! broken by node name (kube-scheduler picks among them at random).

pub mod config;

mod affinity;
mod filters;
mod requests;
pub mod score;
#[cfg(test)]
mod score_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::util::{name, ns, pod_is_terminal, pod_phase, update_action};
use super::{Action, ClusterState};
use affinity::AffinityView;
use filters::check_node;
pub use filters::tolerates;
pub use requests::pod_requests;
use requests::{add_resources, allocatable};

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

/// Upstream's `minFeasibleNodesToFind`, `minFeasibleNodesPercentageToFind` and
/// `basePercentageOfNodesToScore` (kube-scheduler's `percentageOfNodesToScore`, adaptive).
const MIN_FEASIBLE_NODES: usize = 100;
const MIN_FEASIBLE_PERCENT: usize = 5;
const BASE_PERCENT: usize = 50;

/// How many feasible nodes a pod's search stops at, as kube-scheduler's default adaptive
/// `percentageOfNodesToScore` (50 % minus 1 % per 125 nodes, at least 5 %, at least 100
/// nodes): every node up to 100 nodes, 500 of 5,000. Each pod's search starts where the
/// previous one stopped, so bindings spread over the cluster as upstream's do.
#[cfg(test)]
fn feasible_nodes_to_find(all: usize) -> usize {
    feasible_nodes_to_find_with(all, None)
}

/// [`feasible_nodes_to_find`] with a configured `percentageOfNodesToScore` (1–100), which
/// replaces the adaptive one as in upstream's `numFeasibleNodesToFind`.
fn feasible_nodes_to_find_with(all: usize, percentage: Option<u32>) -> usize {
    if all < MIN_FEASIBLE_NODES || percentage.is_some_and(|p| p >= 100) {
        return all;
    }
    let percent = match percentage {
        Some(p) => p as usize,
        None => BASE_PERCENT
            .saturating_sub(all / 125)
            .max(MIN_FEASIBLE_PERCENT),
    };
    (all * percent / 100).max(MIN_FEASIBLE_NODES)
}

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
    let mut infos = node_infos(&state.nodes, base);
    let nodes: NodesByName = state.nodes.iter().map(|n| (name(&n.metadata), n)).collect();
    let mut placed = account_assigned_pods(&state.pods, &mut infos);
    let sched_config = state.config.scheduler.as_deref();
    let mut out = Vec::new();
    let mut start = 0;
    for pod in pending_in_scheduling_order(&state.pods, sched_config) {
        let profile = sched_config.and_then(|c| c.profiles.get(scheduler_name(pod)));
        let req = pod_requests(pod);
        let affinity = AffinityView::new(&nodes, pod, &placed);
        let search = search_nodes(state, pod, &req, &infos, &affinity, profile, start);
        if !infos.is_empty() {
            start = (start + search.processed) % infos.len();
        }
        let best = match profile {
            Some(profile) => best_by_profile(profile, pod, &req, &infos, &search.feasible),
            None => search.best,
        };
        match best {
            Some((_, idx)) => {
                let info = &mut infos[idx];
                let node_name = name(&info.node.metadata).to_string();
                out.extend(binding(pod, &node_name, state.now));
                add_resources(&mut info.requested, &req);
                info.pods += 1;
                placed.push((pod, node_name));
            }
            None => out.extend(unschedulable_update(
                pod,
                &search.failures,
                infos.len(),
                state.now,
            )),
        }
    }
    out
}

/// One [`NodeInfo`] per node of `nodes`, starting from what `base` says is already used.
fn node_infos<'a>(nodes: &'a [Node], base: &NodeUsage) -> Vec<NodeInfo<'a>> {
    nodes
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
        .collect()
}

/// Adds the requests and count of the non-terminal assigned pods of `pods` to their nodes in
/// `infos`, and returns the non-terminal assigned pods with their node names.
fn account_assigned_pods<'p, 'n>(
    pods: &'p [Pod],
    infos: &mut [NodeInfo<'n>],
) -> Vec<(&'p Pod, String)> {
    let index: HashMap<&'n str, usize> = infos
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let node: &'n Node = info.node;
            (name(&node.metadata), i)
        })
        .collect();
    let mut placed = Vec::new();
    for pod in pods {
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
    placed
}

/// The unassigned, undeleted Pending pods of `pods` the scheduler serves, by priority (desc),
/// then creation time, then namespace/name.
fn pending_in_scheduling_order<'p>(
    pods: &'p [Pod],
    config: Option<&config::SchedulerConfig>,
) -> Vec<&'p Pod> {
    let mut pending: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            assigned_node(p).is_none()
                && p.metadata.deletion_timestamp.is_none()
                && pod_phase(p) == "Pending"
                && served(config, p)
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
    pending
}

/// What one pod's search over the nodes found.
struct NodeSearch {
    /// Without a profile: the best feasible node by [`score`] (lowest name on ties) and its score.
    best: Option<(i128, usize)>,
    /// With a profile: the feasible nodes, for [`best_by_profile`] to score.
    feasible: Vec<usize>,
    /// Filter failure reason → number of nodes it ruled out.
    failures: BTreeMap<String, usize>,
    /// How many nodes were examined (the next pod's search starts after them).
    processed: usize,
}

/// Filters the nodes for `pod` from `start` round the ring until the share of feasible nodes
/// to find (see [`feasible_nodes_to_find_with`]) is reached.
fn search_nodes(
    state: &ClusterState,
    pod: &Pod,
    req: &Resources,
    infos: &[NodeInfo],
    affinity: &AffinityView,
    profile: Option<&config::Profile>,
    start: usize,
) -> NodeSearch {
    let to_find = feasible_nodes_to_find_with(
        infos.len(),
        profile.and_then(|p| p.percentage_of_nodes_to_score),
    );
    let mut search = NodeSearch {
        best: None,
        feasible: Vec::new(),
        failures: BTreeMap::new(),
        processed: 0,
    };
    let mut feasible = 0;
    for idx in (start..infos.len()).chain(0..start) {
        if feasible >= to_find {
            break;
        }
        search.processed += 1;
        let info = &infos[idx];
        match check_node(state, pod, req, info, affinity) {
            Err(reasons) => {
                for r in reasons {
                    *search.failures.entry(r).or_default() += 1;
                }
            }
            Ok(()) if profile.is_some() => {
                feasible += 1;
                search.feasible.push(idx);
            }
            Ok(()) => {
                feasible += 1;
                let score = score(info, req);
                let better = match search.best {
                    None => true,
                    Some((s, i)) => {
                        score > s
                            || (score == s
                                && name(&info.node.metadata) < name(&infos[i].node.metadata))
                    }
                };
                if better {
                    search.best = Some((score, idx));
                }
            }
        }
    }
    search
}

/// The update binding `pod` to `node_name` (with `PodScheduled` True).
fn binding(pod: &Pod, node_name: &str, now: jiff::Timestamp) -> Option<Action> {
    let mut bound = pod.clone();
    bound.spec.get_or_insert_with(Default::default).node_name = Some(node_name.to_string());
    set_scheduled(&mut bound, now, true, None);
    update_action(&bound)
}

/// The update marking `pod` Unschedulable with kube-scheduler's "0/N nodes are available"
/// message built from `failures`, or `None` when the pod already says exactly that.
fn unschedulable_update(
    pod: &Pod,
    failures: &BTreeMap<String, usize>,
    node_count: usize,
    now: jiff::Timestamp,
) -> Option<Action> {
    let mut reasons: Vec<String> = failures.iter().map(|(r, n)| format!("{n} {r}")).collect();
    reasons.sort();
    let msg = format!(
        "0/{node_count} nodes are available: {}.",
        if reasons.is_empty() {
            "no nodes".to_string()
        } else {
            reasons.join(", ")
        }
    );
    let mut unsched = pod.clone();
    set_scheduled(&mut unsched, now, false, Some(msg));
    if super::util::same_json(pod, &unsched) {
        return None;
    }
    update_action(&unsched)
}

/// The profile name serving `pod` (`default-scheduler` when unset).
fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or(config::DEFAULT_SCHEDULER)
}

/// Whether the scheduler serves `pod`: a profile of `config` has its `schedulerName` (without
/// a configuration, only `default-scheduler`).
fn served(config: Option<&config::SchedulerConfig>, pod: &Pod) -> bool {
    let name = scheduler_name(pod);
    match config {
        Some(c) => c.profiles.contains_key(name),
        None => name == config::DEFAULT_SCHEDULER,
    }
}

/// The best of the `feasible` nodes under `profile` (highest total, then lowest name) and its
/// score.
fn best_by_profile(
    profile: &config::Profile,
    pod: &Pod,
    req: &Resources,
    infos: &[NodeInfo],
    feasible: &[usize],
) -> Option<(i128, usize)> {
    let nodes: Vec<&NodeInfo> = feasible.iter().map(|&i| &infos[i]).collect();
    let scores = score::profile_scores(profile, pod, req, &nodes);
    feasible
        .iter()
        .zip(scores)
        .max_by(|(a, sa), (b, sb)| {
            sa.cmp(sb)
                .then_with(|| name(&infos[**b].node.metadata).cmp(name(&infos[**a].node.metadata)))
        })
        .map(|(&i, s)| (i128::from(s), i))
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
