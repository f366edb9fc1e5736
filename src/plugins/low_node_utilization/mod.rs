//! LowNodeUtilization (Balance): evicts pods from nodes above `targetThresholds` so they can land
//! on schedulable nodes below `thresholds`. Usage is the sum of pod requests (all pods not
//! Succeeded/Failed, evictable or not) as a percentage of allocatable.
//!
//! `metricsUtilization` is decoded and validated as upstream, but only request-based usage is
//! implemented: a policy asking for KubernetesMetrics, metricsServer or Prometheus is rejected with
//! an [`ArgsError`](crate::framework::args::ArgsError) instead of silently using requests.

use super::node_utilization::{
    EvictionSpec, Usage, evict_from_sources, sort_rows_by_usage, tracked_resources,
};
use crate::framework::registry::ExtensionPoint;
use crate::framework::{BalancePlugin, Handle, PluginFactory};
use crate::snapshot::NodeId;

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

impl BalancePlugin for LowNodeUtilization {
    fn name(&self) -> &'static str {
        NAME
    }

    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let a = &self.args;
        let snapshot = h.snapshot;
        let resources = tracked_resources(a.thresholds.keys().map(String::as_str));
        let mut usage = Usage::compute(snapshot, nodes, resources);
        let (low_levels, high_levels) = if a.use_deviation_thresholds {
            usage.deviation_levels(&a.thresholds, &a.target_thresholds)
        } else {
            (
                usage.levels(&a.thresholds),
                usage.levels(&a.target_thresholds),
            )
        };
        let (mut low, mut high) = (Vec::new(), Vec::new());
        for (i, &n) in nodes.iter().enumerate() {
            if !snapshot.node(n).unschedulable && usage.is_below(i, &low_levels) {
                low.push(i);
            } else if usage.is_above(i, &high_levels) {
                high.push(i);
            }
        }
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
        let spec = EvictionSpec {
            sources: high,
            destinations: low,
            caps: &high_levels,
            excluded_namespaces: excluded,
            node_limit: a.eviction_limits.as_ref().and_then(|l| l.node),
            stop_under_target: true,
            pod_filter: &|_| true,
        };
        evict_from_sources(h, &mut usage, &spec);
    }
}

#[cfg(test)]
mod tests;
