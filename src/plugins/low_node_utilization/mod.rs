//! LowNodeUtilization (Balance): evicts pods from nodes above `targetThresholds` so they can land
//! on schedulable nodes below `thresholds`. Usage is the sum of pod requests (all pods not
//! Succeeded/Failed, evictable or not) as a percentage of allocatable.
//!
//! `metricsUtilization` is decoded and validated as upstream, but only request-based usage is
//! implemented: a policy asking for KubernetesMetrics, metricsServer or Prometheus is rejected with
//! an [`ArgsError`](crate::framework::args::ArgsError) instead of silently using requests.

use super::node_utilization::{
    EvictionSpec, Levels, Usage, evict_from_sources, over_target_reason, sort_rows_by_usage,
    tracked_resources, usage_report, usage_text,
};
use crate::framework::registry::ExtensionPoint;
use crate::framework::{BalancePlugin, Handle, PluginFactory};
use crate::snapshot::NodeId;
use crate::snapshot::{PodId, Snapshot};

mod args;
use args::build;
pub use args::{EvictionLimits, LowNodeUtilizationArgs, MetricsUtilization, Prometheus};

/// The plugin name.
pub const NAME: &str = "LowNodeUtilization";

/// The LowNodeUtilization plugin.
#[derive(Debug)]
pub struct LowNodeUtilization {
    args: LowNodeUtilizationArgs,
}

/// The registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory {
        name: NAME,
        point: ExtensionPoint::Balance,
        build,
    }
}

impl LowNodeUtilization {
    /// Usage of `nodes` and the low / high levels (deviation mode: around the mean).
    fn usage(&self, snapshot: &Snapshot, nodes: &[NodeId]) -> (Usage, Levels, Levels) {
        let a = &self.args;
        let resources = tracked_resources(a.thresholds.keys().map(String::as_str));
        let usage = Usage::compute(snapshot, nodes, resources);
        let (low_levels, high_levels) = if a.use_deviation_thresholds {
            usage.deviation_levels(&a.thresholds, &a.target_thresholds)
        } else {
            (
                usage.levels(&a.thresholds),
                usage.levels(&a.target_thresholds),
            )
        };
        (usage, low_levels, high_levels)
    }

    /// Rows of the underutilized (schedulable, below every low level) and overutilized nodes.
    fn classify(
        snapshot: &Snapshot,
        usage: &Usage,
        low_levels: &Levels,
        high_levels: &Levels,
    ) -> (Vec<usize>, Vec<usize>) {
        let (mut low, mut high) = (Vec::new(), Vec::new());
        for (i, &n) in usage.nodes.iter().enumerate() {
            if !snapshot.node(n).unschedulable && usage.is_below(i, low_levels) {
                low.push(i);
            } else if usage.is_above(i, high_levels) {
                high.push(i);
            }
        }
        (low, high)
    }
}

impl BalancePlugin for LowNodeUtilization {
    fn name(&self) -> &'static str {
        NAME
    }

    fn explain_pod(
        &self,
        s: &Snapshot,
        pod: PodId,
        nodes: &[NodeId],
        _now: jiff::Timestamp,
    ) -> Option<String> {
        let node = s.pod(pod).node?;
        let (usage, low_levels, high_levels) = self.usage(s, nodes);
        let i = usage.nodes.iter().position(|&n| n == node)?;
        let name = &s.node(node).name;
        let (low, _) = Self::classify(s, &usage, &low_levels, &high_levels);
        let text = usage_text(&usage, i, &high_levels);
        Some(if !usage.is_above(i, &high_levels) {
            format!("{name} is not over any target: {text}")
        } else if low.is_empty() || (low.len() as i64) <= self.args.number_of_nodes {
            format!(
                "{name} is over target ({text}), but {} nodes are underutilized (numberOfNodes {}): nowhere to move pods",
                low.len(),
                self.args.number_of_nodes
            )
        } else {
            format!(
                "{name} is over target ({text}); pods of lower priority went first and the node or the underutilized nodes' room was used up before this one"
            )
        })
    }

    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let a = &self.args;
        let snapshot = h.snapshot;
        let (mut usage, low_levels, high_levels) = self.usage(snapshot, nodes);
        h.report_node_usage(usage_report(&usage, &low_levels, &high_levels));
        let (low, mut high) = Self::classify(snapshot, &usage, &low_levels, &high_levels);
        tracing::debug!(
            plugin = NAME,
            underutilized = low.len(),
            overutilized = high.len(),
            "classified nodes"
        );
        if low.is_empty()
            || (low.len() as i64) <= a.number_of_nodes
            || low.len() == nodes.len()
            || high.is_empty()
        {
            return;
        }
        sort_rows_by_usage(&usage, &mut high, false);
        let excluded = a
            .evictable_namespaces
            .as_ref()
            .map(|n| n.exclude.as_slice())
            .unwrap_or(&[]);
        let destinations = low.len();
        let describe =
            |u: &Usage, i: usize| over_target_reason(snapshot, u, i, &high_levels, destinations);
        let spec = EvictionSpec {
            sources: high,
            destinations: low,
            caps: &high_levels,
            excluded_namespaces: excluded,
            node_limit: a.eviction_limits.as_ref().and_then(|l| l.node),
            stop_under_target: true,
            pod_filter: &|_| true,
            describe: &describe,
        };
        evict_from_sources(h, &mut usage, &spec);
    }
}

#[cfg(test)]
mod tests;
