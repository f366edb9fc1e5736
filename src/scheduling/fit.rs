//! Whether a pod fits a node (upstream `nodeutil.NodeFit`): node selector and required affinity,
//! NoSchedule/NoExecute taints, free allocatable and a pod slot (skipped on the pod's own node),
//! schedulability, and the pod's required anti-affinity against pods already on the node.

use super::{affinity, taints};
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

/// Why a pod does not fit a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    /// nodeSelector / required node affinity.
    Selector,
    /// An untolerated NoSchedule/NoExecute taint.
    Taint,
    /// Not enough of a resource (name).
    Resource(String),
    /// The node is cordoned.
    Unschedulable,
    /// The pod's required anti-affinity matches a pod on the node.
    AntiAffinity,
}

/// Checks whether `pod` fits `node`, returning every reason it does not.
pub fn node_fit(snapshot: &Snapshot, pod: PodId, node: NodeId) -> Vec<Misfit> {
    let p = snapshot.pod(pod);
    let n = snapshot.node(node);
    let mut misfits = Vec::new();
    if !affinity::matches_node_selector_and_affinity(p, n) {
        misfits.push(Misfit::Selector);
    }
    if !taints::tolerates_all(&p.tolerations, &n.taints, taints::is_scheduling_taint) {
        misfits.push(Misfit::Taint);
    }
    if p.node != Some(node)
        && let Some(res) = insufficient_resource(snapshot, p, node)
    {
        misfits.push(Misfit::Resource(res));
    }
    if n.unschedulable {
        misfits.push(Misfit::Unschedulable);
    }
    if anti_affinity_conflict(snapshot, pod, node) {
        misfits.push(Misfit::AntiAffinity);
    }
    misfits
}

/// Whether `pod` fits `node`.
pub fn fits(snapshot: &Snapshot, pod: PodId, node: NodeId) -> bool {
    node_fit(snapshot, pod, node).is_empty()
}

/// Whether `pod` fits some node of `nodes` other than its own.
pub fn fits_any_other_node(snapshot: &Snapshot, pod: PodId, nodes: &[NodeId]) -> bool {
    let own = snapshot.pod(pod).node;
    nodes
        .iter()
        .any(|&n| Some(n) != own && fits(snapshot, pod, n))
}

/// Whether `pod` fits some node of `nodes` (its own included).
pub fn fits_any_node(snapshot: &Snapshot, pod: PodId, nodes: &[NodeId]) -> bool {
    nodes.iter().any(|&n| fits(snapshot, pod, n))
}

/// The first requested resource the node lacks (free = allocatable − requests of its non-terminal
/// pods; one pod slot is needed). A resource the node does not have counts as 0.
pub fn insufficient_resource(snapshot: &Snapshot, pod: &Pod, node: NodeId) -> Option<String> {
    let n = snapshot.node(node);
    let used = snapshot.node_requested(node);
    let used_pods = snapshot.pods_on_node(node).count() as i64;
    if n.allocatable.pods > 0 && used_pods + 1 > n.allocatable.pods {
        return Some("pods".into());
    }
    for name in pod.requests.names() {
        if name == "pods" {
            continue;
        }
        let want = pod.requests.get(name);
        if want > 0 && n.allocatable.get(name) - used.get(name) < want {
            return Some(name.to_string());
        }
    }
    None
}

/// Whether the pod's required anti-affinity terms select a pod already on `node`.
pub fn anti_affinity_conflict(snapshot: &Snapshot, pod: PodId, node: NodeId) -> bool {
    let p = snapshot.pod(pod);
    let terms = affinity::required_anti_affinity_terms(p);
    if terms.is_empty() {
        return false;
    }
    snapshot.pods_on_node(node).filter(|&o| o != pod).any(|o| {
        terms
            .iter()
            .any(|t| affinity::affinity_term_selects(snapshot, t, p, snapshot.pod(o)))
    })
}
