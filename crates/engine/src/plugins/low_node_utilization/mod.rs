//! LowNodeUtilization (Balance): evicts pods from nodes above `targetThresholds` so they can land
//! on schedulable nodes below `thresholds`. Usage is the sum of pod requests (all pods not
//! Succeeded/Failed, evictable or not) as a percentage of allocatable — or, with
//! `metricsUtilization`, measured usage ([`measured`]): metrics.k8s.io node usage (pods picked
//! and moved by their PodMetrics usage), or a Prometheus query's per-node utilization as the
//! single resource `MetricResource` (at most one pod per overutilized node without
//! `evictionLimits.node`, as upstream).

use super::node_utilization::{
    Classified, EvictionSpec, Levels, PodUsage, Tracked, Usage, evict_if_unbalanced,
    excluded_namespaces, over_target_reason, tracked_resources, usage_report, usage_text,
};
use super::{PodQuestion, extension_point};
use crate::framework::Handle;
use crate::snapshot::NodeId;
use crate::snapshot::Snapshot;

mod args;
pub mod measured;
pub use args::{EvictionLimits, LowNodeUtilizationArgs, MetricsUtilization, Prometheus};
use measured::MeasuredSource;

/// The plugin name.
pub const NAME: &str = "LowNodeUtilization";

/// The LowNodeUtilization plugin.
#[derive(Debug)]
pub struct LowNodeUtilization {
    args: LowNodeUtilizationArgs,
}

/// Node usage for one run: the rows, the low / high levels, and where the usage came from.
struct Measurement<'s> {
    usage: Usage,
    low: Levels,
    high: Levels,
    /// `None`: pod requests; otherwise the metrics source that replaced them.
    source: Option<MeasuredSource<'s>>,
    /// The tracked resources, in the order of the usage columns.
    columns: Vec<Tracked>,
}

impl Measurement<'_> {
    /// How the usage was obtained, for reasons: `requests`, `metrics.k8s.io` or `prometheus`.
    fn basis(&self) -> &'static str {
        match self.source {
            None => "requests",
            Some(MeasuredSource::Kubernetes(_)) => "metrics.k8s.io",
            Some(MeasuredSource::Prometheus(..)) => "prometheus",
        }
    }
}

impl LowNodeUtilization {
    /// Usage of `nodes` (requests, or measured with `metricsUtilization`) and the low / high
    /// levels (deviation mode: around the mean). Errors: the metrics source has no usable data.
    fn measure<'s>(
        &'s self,
        snapshot: &'s Snapshot,
        nodes: &[NodeId],
    ) -> Result<Measurement<'s>, String> {
        let a = &self.args;
        let mode = a.measures_with_kubernetes();
        let columns = match mode {
            // Prometheus measures one pseudo-resource only (upstream's resourceNames).
            Some(false) => vec![Tracked::Metric],
            _ => tracked_resources(a.thresholds.keys().map(String::as_str)),
        };
        let mut usage = Usage::compute(snapshot, nodes, columns.clone());
        let mut source = None;
        if let Some(kubernetes) = mode {
            let query = a
                .metrics_utilization
                .as_ref()
                .and_then(|m| m.prometheus.as_ref())
                .map(|p| p.query.as_str());
            let src = measured::source(snapshot.measured.as_deref(), kubernetes, query)?;
            measured::apply(snapshot, &mut usage, src)?;
            source = Some(src);
        }
        let (low, high) = if a.use_deviation_thresholds {
            usage.deviation_levels(&a.thresholds, &a.target_thresholds)
        } else {
            (
                usage.levels(&a.thresholds),
                usage.levels(&a.target_thresholds),
            )
        };
        Ok(Measurement {
            usage,
            low,
            high,
            source,
            columns,
        })
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

extension_point!(Balance for LowNodeUtilization, NAME);

impl LowNodeUtilization {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, nodes) = (q.snapshot, q.pod, q.nodes);
        let node = s.pod(pod).node?;
        let m = match self.measure(s, nodes) {
            Ok(m) => m,
            Err(e) => return Some(format!("the plugin evicts nothing this cycle: {e}")),
        };
        let i = m.usage.nodes.iter().position(|&n| n == node)?;
        let name = &s.node(node).name;
        let (low, _) = Self::classify(s, &m.usage, &m.low, &m.high);
        let text = usage_text(&m.usage, i, &m.high);
        let basis = m.basis();
        Some(if !m.usage.is_above(i, &m.high) {
            format!("{name} is not over any target: {text} ({basis})")
        } else if low.is_empty() || (low.len() as i64) <= self.args.number_of_nodes {
            format!(
                "{name} is over target ({text}, {basis}), but {} nodes are underutilized (numberOfNodes {}): nowhere to move pods",
                low.len(),
                self.args.number_of_nodes
            )
        } else {
            format!(
                "{name} is over target ({text}, {basis}); pods of lower priority went first and the node or the underutilized nodes' room was used up before this one"
            )
        })
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let a = &self.args;
        let snapshot = h.snapshot;
        let m = match self.measure(snapshot, nodes) {
            Ok(m) => m,
            Err(e) => return h.fail(e),
        };
        let basis = m.basis();
        let Measurement {
            mut usage,
            low: low_levels,
            high: high_levels,
            source,
            columns,
        } = m;
        h.report_node_usage(usage_report(&usage, &low_levels, &high_levels));
        let (low, high) = Self::classify(snapshot, &usage, &low_levels, &high_levels);
        tracing::debug!(
            plugin = NAME,
            underutilized = low.len(),
            overutilized = high.len(),
            "classified nodes"
        );
        let pod_amounts = |pod: &crate::snapshot::Pod| match source {
            Some(MeasuredSource::Kubernetes(k)) => measured::pod_amounts(k, &columns, pod),
            _ => None,
        };
        let pod_usage = match source {
            None => PodUsage::Requests,
            Some(MeasuredSource::Kubernetes(_)) => PodUsage::Measured(&pod_amounts),
            Some(MeasuredSource::Prometheus(..)) => PodUsage::Unconstrained,
        };
        let run = Classified {
            underutilized: low.len(),
            number_of_nodes: a.number_of_nodes,
            nodes: nodes.len(),
            ascending: false,
        };
        let destinations = low.len();
        let describe = |u: &Usage, i: usize| {
            over_target_reason(snapshot, u, i, &high_levels, destinations, basis)
        };
        let spec = EvictionSpec {
            sources: high,
            destinations: low,
            caps: &high_levels,
            excluded_namespaces: excluded_namespaces(a.evictable_namespaces.as_ref()),
            node_limit: a.eviction_limits.as_ref().and_then(|l| l.node),
            stop_under_target: true,
            pod_filter: &|_| true,
            pod_usage,
            describe: &describe,
        };
        evict_if_unbalanced(h, &mut usage, spec, &run);
    }
}

#[cfg(test)]
mod tests;
