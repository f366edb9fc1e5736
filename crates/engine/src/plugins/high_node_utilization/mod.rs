//! HighNodeUtilization (Balance): evicts pods from underutilized nodes (every thresholded resource
//! at or below `thresholds`, cordoned nodes included), least used first, so the scheduler packs
//! them onto the other schedulable nodes. Usage is request-based, as for LowNodeUtilization.

use super::node_utilization::{
    Classified, EvictionSpec, PodUsage, Thresholds, Usage, evict_if_unbalanced,
    excluded_namespaces, tracked_resources,
};
use super::{PodQuestion, extension_point};
use crate::framework::Handle;
use crate::snapshot::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use crate::snapshot::{NodeId, Pod};

mod args;
pub use args::{EvictionMode, HighNodeUtilizationArgs};

/// The plugin name.
pub const NAME: &str = "HighNodeUtilization";

/// The HighNodeUtilization plugin.
#[derive(Debug)]
pub struct HighNodeUtilization {
    args: HighNodeUtilizationArgs,
    only_thresholding_resources: bool,
}

impl HighNodeUtilization {
    /// `OnlyThresholdingResources`: the pod requests some thresholded resource. Upstream checks
    /// that a container lists the request; the lean model keeps effective requests, so a native
    /// resource counts when its request is non-zero and an extended one when it is listed.
    fn requests_thresholded_resource(&self, pod: &Pod) -> bool {
        let r = &pod.requests;
        self.args.thresholds.keys().any(|name| match name.as_str() {
            CPU => r.cpu_milli > 0,
            MEMORY => r.memory > 0,
            EPHEMERAL_STORAGE => r.ephemeral_storage > 0,
            PODS => false,
            other => r.has(other),
        })
    }
}

extension_point!(Balance for HighNodeUtilization, NAME);

impl HighNodeUtilization {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, nodes) = (q.snapshot, q.pod, q.nodes);
        let node = s.pod(pod).node?;
        let resources = tracked_resources(self.args.thresholds.keys().map(String::as_str));
        let usage = Usage::compute(s, nodes, resources);
        let levels = usage.levels(&self.args.thresholds);
        let i = usage.nodes.iter().position(|&n| n == node)?;
        let text = super::node_utilization::usage_text(&usage, i, &levels);
        let name = &s.node(node).name;
        Some(if usage.is_below(i, &levels) {
            format!(
                "{name} is underutilized ({text}), but the plugin stopped before this pod (numberOfNodes, room on the other nodes, or evictionModes)"
            )
        } else {
            format!("{name} is not underutilized: {text}")
        })
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let a = &self.args;
        let snapshot = h.snapshot;
        let resources = tracked_resources(a.thresholds.keys().map(String::as_str));
        let mut usage = Usage::compute(snapshot, nodes, resources);
        let low_levels = usage.levels(&a.thresholds);
        h.report_node_usage(super::node_utilization::usage_report(
            &usage,
            &low_levels,
            &vec![None; low_levels.len()],
        ));
        // Destinations are capped at 100 % of every thresholded resource.
        let full: Thresholds = a.thresholds.keys().map(|k| (k.clone(), 100.0)).collect();
        let caps = usage.levels(&full);
        let (mut low, mut schedulable) = (Vec::new(), Vec::new());
        for (i, &n) in nodes.iter().enumerate() {
            if usage.is_below(i, &low_levels) {
                low.push(i);
            } else if !snapshot.node(n).unschedulable {
                schedulable.push(i);
            }
        }
        tracing::debug!(
            plugin = NAME,
            underutilized = low.len(),
            schedulable = schedulable.len(),
            "classified nodes"
        );
        let run = Classified {
            underutilized: low.len(),
            number_of_nodes: a.number_of_nodes,
            nodes: nodes.len(),
            ascending: true,
        };
        let filter = |pod: &Pod| {
            !self.only_thresholding_resources || self.requests_thresholded_resource(pod)
        };
        let destinations = schedulable.len();
        let describe = |u: &Usage, i: usize| {
            super::node_utilization::underutilized_reason(snapshot, u, i, &low_levels, destinations)
        };
        let spec = EvictionSpec {
            sources: low,
            destinations: schedulable,
            caps: &caps,
            excluded_namespaces: excluded_namespaces(a.evictable_namespaces.as_ref()),
            node_limit: None,
            stop_under_target: false,
            pod_filter: &filter,
            pod_usage: PodUsage::Requests,
            describe: &describe,
        };
        evict_if_unbalanced(h, &mut usage, spec, &run);
    }
}

#[cfg(test)]
mod tests;
