//! Evictions a limit refused, as `plan` reports them (table, JSON `limitRefusals`, HTML). They
//! are listed when the policy uses one of kube-descheduler's own limits (a percentage or a
//! per-workload limit): an upstream-only policy's plan stays exactly as before (`--explain` still
//! shows every refusal for the pods asked about).
//!
//! Evictions the DefaultEvictor's `placement: Enforce` refused (JSON `placementRefusals`), in the
//! same shape; there are none unless a profile enforces placement.

use serde::Serialize;

use kube_descheduler_engine::evictor::{LimitError, LimitHit, PlacementHit};

/// One refused eviction.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LimitRefusal {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// The pod's node.
    pub node: String,
    /// Profile.
    pub profile: String,
    /// Plugin.
    pub plugin: String,
    /// Which limit: `total`, `node`, `namespace`, `workload`, `unavailable`, `window`.
    pub limit: &'static str,
    /// The `result` label `run` counts it under in `descheduler_pods_evicted_total`.
    pub result: &'static str,
    /// What the plugin did next: `ends the plugin`, `ends the node` or `skips the pod`.
    pub effect: &'static str,
    /// The limit with its numbers.
    pub message: String,
}

/// What a refusal made the plugin do.
pub fn effect(limit: &LimitError) -> &'static str {
    if matches!(limit, LimitError::Total { .. }) {
        "ends the plugin"
    } else if limit.ends_node() {
        "ends the node"
    } else {
        "skips the pod"
    }
}

/// The refusals of a cycle, in order.
pub fn from_hits(hits: &[LimitHit]) -> Vec<LimitRefusal> {
    hits.iter()
        .map(|h| LimitRefusal {
            namespace: h.namespace.to_string(),
            name: h.name.clone(),
            node: h.node.to_string(),
            profile: h.profile.to_string(),
            plugin: h.plugin.to_string(),
            limit: h.limit.kind(),
            result: h.limit.result_label(),
            effect: effect(&h.limit),
            message: h.limit.to_string(),
        })
        .collect()
}

/// One eviction `placement: Enforce` refused.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRefusal {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// The pod's node.
    pub node: String,
    /// Profile.
    pub profile: String,
    /// Plugin.
    pub plugin: String,
    /// Why the plugin chose the pod.
    pub reason: String,
    /// `PlacementReturn`, `PlacementNoFit` or `PlacementTargetEmptied`.
    pub code: &'static str,
    /// The sentence with the numbers.
    pub message: String,
    /// The node the replacement was predicted onto (`null`: none fits).
    pub predicted_node: Option<String>,
    /// Nodes tied with it.
    pub predicted_ties: Vec<String>,
}

/// The placement refusals of a cycle, in order.
pub fn from_placement_hits(hits: &[PlacementHit]) -> Vec<PlacementRefusal> {
    hits.iter()
        .map(|h| PlacementRefusal {
            namespace: h.namespace.to_string(),
            name: h.name.clone(),
            node: h.node.to_string(),
            profile: h.profile.to_string(),
            plugin: h.plugin.to_string(),
            reason: h.reason.text.clone(),
            code: h.code(),
            message: h.message().to_string(),
            predicted_node: h.placement.predicted_node.clone(),
            predicted_ties: h.placement.ties.clone(),
        })
        .collect()
}
