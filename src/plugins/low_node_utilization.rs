//! LowNodeUtilization (Balance): evicts pods from nodes above `targetThresholds` so they can land
//! on schedulable nodes below `thresholds`. Usage is the sum of pod requests (all pods not
//! Succeeded/Failed, evictable or not) as a percentage of allocatable — or, with
//! `metricsUtilization`, measured usage (see [`super::measured_usage`]): metrics.k8s.io node
//! usage (pods picked and moved by their PodMetrics usage), or a Prometheus query's per-node
//! utilization as the single resource `MetricResource` (at most one pod per overutilized node
//! without `evictionLimits.node`, as upstream).

use serde::Deserialize;

use super::measured_usage::{self, MeasuredSource};
use super::node_utilization::{
    EvictableNamespaces, EvictionSpec, METRIC_RESOURCE, PodUsage, Thresholds, Tracked, Usage,
    evict_from_sources, sort_rows_by_usage, tracked_resources, validate_thresholds,
};
use crate::framework::args::{ArgsError, decode};
use crate::framework::registry::ExtensionPoint;
use crate::framework::{BalancePlugin, Handle, Plugin, PluginFactory};
use crate::snapshot::NodeId;

/// The plugin name.
pub const NAME: &str = "LowNodeUtilization";

/// `evictionLimits`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvictionLimits {
    /// At most this many evictions per node by this plugin per cycle (0: none).
    #[serde(default)]
    pub node: Option<u64>,
}

/// `metricsUtilization.prometheus`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prometheus {
    /// PromQL query returning per-node usage.
    #[serde(default)]
    pub query: String,
}

/// `metricsUtilization`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricsUtilization {
    /// Deprecated: use the metrics server.
    #[serde(default)]
    pub metrics_server: bool,
    /// `KubernetesMetrics` or `Prometheus`.
    #[serde(default)]
    pub source: String,
    /// Prometheus settings.
    #[serde(default)]
    pub prometheus: Option<Prometheus>,
}

/// LowNodeUtilization args (upstream `LowNodeUtilizationArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LowNodeUtilizationArgs {
    /// Thresholds are deviations from the mean usage instead of absolute percentages.
    #[serde(default)]
    pub use_deviation_thresholds: bool,
    /// A node is underutilized when every resource is at or below these.
    #[serde(default)]
    pub thresholds: Thresholds,
    /// A node is overutilized when some resource is above these.
    #[serde(default)]
    pub target_thresholds: Thresholds,
    /// Act only when more than this many nodes are underutilized.
    #[serde(default)]
    pub number_of_nodes: i64,
    /// Usage source (only request-based usage is supported here).
    #[serde(default)]
    pub metrics_utilization: Option<MetricsUtilization>,
    /// Namespaces excluded from eviction.
    #[serde(default)]
    pub evictable_namespaces: Option<EvictableNamespaces>,
    /// Per-node eviction limit of this plugin.
    #[serde(default)]
    pub eviction_limits: Option<EvictionLimits>,
}

impl LowNodeUtilizationArgs {
    /// Upstream `ValidateLowNodeUtilizationArgs`.
    pub fn validate(&self) -> Result<(), ArgsError> {
        if let Some(ns) = &self.evictable_namespaces {
            ns.validate()?;
        }
        validate_thresholds(
            "thresholds",
            "thresholds config is not valid: ",
            &self.thresholds,
        )?;
        validate_thresholds(
            "targetThresholds",
            "targetThresholds config is not valid: ",
            &self.target_thresholds,
        )?;
        let differ = || {
            ArgsError::new(
                "targetThresholds",
                "thresholds and targetThresholds configured different resources",
            )
        };
        if self.thresholds.len() != self.target_thresholds.len() {
            return Err(differ());
        }
        for (name, &value) in &self.thresholds {
            let Some(&target) = self.target_thresholds.get(name) else {
                return Err(differ());
            };
            if value > target && !self.use_deviation_thresholds {
                return Err(ArgsError::new(
                    format!("thresholds.{name}"),
                    format!("thresholds' {name} percentage is greater than targetThresholds'"),
                ));
            }
        }
        if let Some(m) = &self.metrics_utilization {
            self.validate_metrics(m)?;
        }
        Ok(())
    }

    fn validate_metrics(&self, m: &MetricsUtilization) -> Result<(), ArgsError> {
        const F: &str = "metricsUtilization";
        if m.source == "KubernetesMetrics" && m.metrics_server {
            return Err(ArgsError::new(
                F,
                "it is not allowed to set both \"KubernetesMetrics\" source and metricsServer",
            ));
        }
        if m.source == "KubernetesMetrics" && m.prometheus.is_some() {
            return Err(ArgsError::new(
                format!("{F}.prometheus"),
                "prometheus configuration is not allowed to set when source is set to \"KubernetesMetrics\"",
            ));
        }
        let query_missing = m.prometheus.as_ref().is_none_or(|p| p.query.is_empty());
        if m.source == "Prometheus" && query_missing {
            return Err(ArgsError::new(
                format!("{F}.prometheus.query"),
                "prometheus query is required when metrics source is set to \"Prometheus\"",
            ));
        }
        // Checks upstream makes when building the plugin.
        if m.source == "Prometheus" {
            for (field, t) in [
                ("thresholds", &self.thresholds),
                ("targetThresholds", &self.target_thresholds),
            ] {
                if t.len() != 1 || !t.contains_key(METRIC_RESOURCE) {
                    return Err(ArgsError::new(
                        field,
                        format!(
                            "{field} are expected to specify a single instance of \"{METRIC_RESOURCE}\" resource, got {:?} instead",
                            t.keys().collect::<Vec<_>>()
                        ),
                    ));
                }
            }
        }
        // Upstream reports these when the plugin first runs; a policy that can never work is
        // refused when it loads here.
        match m.source.as_str() {
            _ if m.metrics_server => Ok(()),
            "KubernetesMetrics" | "Prometheus" => Ok(()),
            "" => Err(ArgsError::new(
                format!("{F}.source"),
                "metrics source is empty",
            )),
            _ => Err(ArgsError::new(
                format!("{F}.source"),
                "unrecognized metrics source",
            )),
        }
    }

    /// `Some(true)`: metrics.k8s.io; `Some(false)`: Prometheus; `None`: requests.
    fn measures_with_kubernetes(&self) -> Option<bool> {
        let m = self.metrics_utilization.as_ref()?;
        if m.metrics_server || m.source == "KubernetesMetrics" {
            Some(true)
        } else if m.source == "Prometheus" {
            Some(false)
        } else {
            None
        }
    }
}

/// The LowNodeUtilization plugin.
#[derive(Debug)]
pub struct LowNodeUtilization {
    args: LowNodeUtilizationArgs,
}

impl LowNodeUtilization {
    /// A plugin with validated `args`.
    pub fn new(args: LowNodeUtilizationArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        Ok(LowNodeUtilization { args })
    }
}

fn build(args: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let args: LowNodeUtilizationArgs = decode(args)?;
    Ok(Plugin::Balance(Box::new(LowNodeUtilization::new(args)?)))
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
        let mode = a.measures_with_kubernetes();
        let resources = match mode {
            // Prometheus measures one pseudo-resource only (upstream's resourceNames).
            Some(false) => vec![Tracked::Metric],
            _ => tracked_resources(a.thresholds.keys().map(String::as_str)),
        };
        let columns = resources.clone();
        let mut usage = Usage::compute(snapshot, nodes, resources);
        let mut source = None;
        if let Some(kubernetes) = mode {
            let query = a
                .metrics_utilization
                .as_ref()
                .and_then(|m| m.prometheus.as_ref())
                .map(|p| p.query.as_str());
            let measured = measured_usage::source(snapshot.measured.as_deref(), kubernetes, query)
                .and_then(|src| {
                    measured_usage::apply(snapshot, &mut usage, src)?;
                    Ok(src)
                });
            match measured {
                Ok(src) => source = Some(src),
                Err(e) => return h.fail(e),
            }
        }
        let pod_amounts = |pod: &crate::snapshot::Pod| match source {
            Some(MeasuredSource::Kubernetes(k)) => measured_usage::pod_amounts(k, &columns, pod),
            _ => None,
        };
        let pod_usage = match source {
            None => PodUsage::Requests,
            Some(MeasuredSource::Kubernetes(_)) => PodUsage::Measured(&pod_amounts),
            Some(MeasuredSource::Prometheus(..)) => PodUsage::Unconstrained,
        };
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
            pod_usage,
        };
        evict_from_sources(h, &mut usage, &spec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::cycle::{CycleConfig, Profile};
    use crate::framework::testing::{evicted_names, node, pod, run_balance, run_profile, snapshot};
    use crate::plugins::default_evictor::DefaultEvictor;
    use crate::snapshot::model::ANNOTATION_PREFER_NO_EVICTION;
    use k8s_openapi::api::core::v1 as core;
    use serde_json::{Value, json};

    fn plugin(args: Value) -> Box<dyn BalancePlugin> {
        match build(&args) {
            Ok(Plugin::Balance(p)) => p,
            Ok(_) => panic!("not a balance plugin"),
            Err(e) => panic!("{e}"),
        }
    }

    fn run(args: Value, nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Vec<String> {
        let mut snap = snapshot(nodes, pods);
        evicted_names(&run_balance(
            plugin(args),
            DefaultEvictor::default(),
            &mut snap,
        ))
    }

    /// `count` pods `<prefix>0..` on `node`, each requesting `cpu`.
    fn pods_on(prefix: &str, node: &str, count: usize, cpu: &str) -> Vec<core::Pod> {
        (0..count)
            .map(|i| {
                pod("default", &format!("{prefix}{i}"), node)
                    .requests(cpu, "0")
                    .build()
            })
            .collect()
    }

    fn cpu_args(low: f64, high: f64) -> Value {
        json!({"thresholds": {"cpu": low}, "targetThresholds": {"cpu": high}})
    }

    /// n1 (4 cpu) with 8 × 400m = 80 %, n2 empty, n3 at 50 %.
    fn cluster() -> (Vec<core::Node>, Vec<core::Pod>) {
        let nodes = vec![node("n1").build(), node("n2").build(), node("n3").build()];
        let mut pods = pods_on("a", "n1", 8, "400m");
        pods.extend(pods_on("c", "n3", 2, "1"));
        (nodes, pods)
    }

    #[test]
    fn evicts_until_the_node_is_under_target() {
        let (nodes, pods) = cluster();
        // Target 60 % of 4000m = 2400m: 3200 → 2800 → 2400 (not above: stop).
        assert_eq!(
            run(cpu_args(20.0, 60.0), nodes, pods),
            ["default/a0", "default/a1"]
        );
    }

    #[test]
    fn stops_when_destination_capacity_is_used_up() {
        let nodes = vec![node("n1").build(), node("n2").build()];
        let mut pods = pods_on("a", "n1", 10, "400m");
        // n2 at 900m = 22.5 % ≤ 25 %; room up to 30 % = 1200m: 300m.
        pods.push(pod("default", "b", "n2").requests("900m", "0").build());
        assert_eq!(run(cpu_args(25.0, 30.0), nodes, pods), ["default/a0"]);
    }

    #[test]
    fn stops_when_any_pooled_resource_is_used_up() {
        // Pods: n2 allows 3 pods, holds 1 with target 100 % → room for 2 pods.
        let nodes = vec![
            node("n1").build(),
            node("n2").allocatable("4", "16Gi", "3").build(),
        ];
        let mut pods = pods_on("a", "n1", 8, "400m");
        pods.push(pod("default", "b", "n2").requests("0", "0").build());
        assert_eq!(
            run(cpu_args(20.0, 30.0), nodes, pods),
            ["default/a0", "default/a1"]
        );
    }

    #[test]
    fn early_exits() {
        // No low node (n2 is empty but cordoned).
        let (mut nodes, pods) = cluster();
        nodes[1] = node("n2").unschedulable().build();
        assert!(run(cpu_args(20.0, 60.0), nodes, pods).is_empty());
        // Low nodes ≤ numberOfNodes.
        let (nodes, pods) = cluster();
        let mut args = cpu_args(20.0, 60.0);
        args["numberOfNodes"] = json!(1);
        assert!(run(args, nodes, pods).is_empty());
        let (nodes, pods) = cluster();
        let mut args = cpu_args(20.0, 60.0);
        args["numberOfNodes"] = json!(0);
        assert_eq!(run(args, nodes, pods).len(), 2);
        // All nodes low.
        let (nodes, pods) = cluster();
        assert!(run(cpu_args(90.0, 95.0), nodes, pods).is_empty());
        // No high node.
        let (nodes, pods) = cluster();
        assert!(run(cpu_args(20.0, 85.0), nodes, pods).is_empty());
    }

    #[test]
    fn unschedulable_nodes_are_never_low() {
        let nodes = vec![
            node("n1").build(),
            node("n2").unschedulable().build(),
            node("n3").allocatable("4", "16Gi", "110").build(),
        ];
        let mut pods = pods_on("a", "n1", 8, "400m");
        pods.extend(pods_on("c", "n3", 2, "1"));
        assert!(run(cpu_args(20.0, 60.0), nodes, pods).is_empty());
    }

    #[test]
    fn high_nodes_are_drained_by_usage_descending() {
        let nodes = vec![node("n1").build(), node("n2").build(), node("n3").build()];
        let mut pods = pods_on("a", "n1", 7, "400m"); // 70 %
        pods.extend(pods_on("b", "n2", 9, "400m")); // 90 %
        // Node limit 1: each high node gives one pod, the fuller first.
        let mut args = cpu_args(20.0, 60.0);
        args["evictionLimits"] = json!({"node": 1});
        assert_eq!(run(args, nodes, pods), ["default/b0", "default/a0"]);
    }

    #[test]
    fn eviction_limit_zero_evicts_nothing() {
        let (nodes, pods) = cluster();
        let mut args = cpu_args(20.0, 60.0);
        args["evictionLimits"] = json!({"node": 0});
        assert!(run(args, nodes, pods).is_empty());
        let (nodes, pods) = cluster();
        let mut args = cpu_args(20.0, 60.0);
        args["evictionLimits"] = json!({});
        assert_eq!(run(args, nodes, pods).len(), 2);
    }

    #[test]
    fn global_node_limit_moves_to_the_next_node() {
        let nodes = vec![node("n1").build(), node("n2").build(), node("n3").build()];
        let mut pods = pods_on("a", "n1", 7, "400m");
        pods.extend(pods_on("b", "n2", 9, "400m"));
        let mut snap = snapshot(nodes, pods);
        let records = run_profile(
            Profile {
                name: "p".into(),
                evictor: DefaultEvictor::default(),
                deschedule: vec![],
                balance: vec![plugin(cpu_args(20.0, 60.0))],
            },
            &CycleConfig {
                max_per_node: Some(1),
                ..Default::default()
            },
            &mut snap,
        );
        assert_eq!(evicted_names(&records), ["default/b0", "default/a0"]);
    }

    #[test]
    fn excluded_namespaces_are_skipped() {
        let nodes = vec![node("n1").build(), node("n2").build()];
        let mut pods = pods_on("a", "n1", 6, "400m");
        pods.insert(
            0,
            pod("kube-system", "sys", "n1")
                .requests("800m", "0")
                .build(),
        );
        let mut args = cpu_args(20.0, 60.0);
        args["evictableNamespaces"] = json!({"exclude": ["kube-system"]});
        // 3200m; target 2400m: two 400m pods, never the kube-system one.
        assert_eq!(run(args, nodes, pods), ["default/a0", "default/a1"]);
    }

    #[test]
    fn pods_go_by_priority_then_qos_then_prefer_no_eviction() {
        // n2 is large: its room at 10 % (10 cpu) is never the limit.
        let nodes = vec![
            node("n1").build(),
            node("n2").allocatable("100", "16Gi", "110").build(),
        ];
        let pods = vec![
            pod("default", "high", "n1")
                .requests("1", "0")
                .priority(100)
                .build(),
            pod("default", "pne", "n1")
                .requests("1", "0")
                .priority(1)
                .annotation(ANNOTATION_PREFER_NO_EVICTION, "")
                .build(),
            pod("default", "burstable", "n1")
                .requests("1", "0")
                .priority(1)
                .build(),
            pod("default", "besteffort", "n1")
                .priority(1)
                .best_effort()
                .build(),
            // Not evictable (no owner): counted in usage, never evicted.
            pod("default", "bare", "n1")
                .requests("800m", "0")
                .bare()
                .build(),
        ];
        // 3800m of 4000m; target 10 % = 400m: everything evictable goes, in order.
        assert_eq!(
            run(cpu_args(5.0, 10.0), nodes, pods),
            [
                "default/besteffort",
                "default/burstable",
                "default/pne",
                "default/high"
            ]
        );
    }

    #[test]
    fn unset_native_resources_count_as_100_percent() {
        // Only memory is thresholded; n1 has more pods than allocatable allows (over 100 %), so it
        // stays "above target" for pods even after memory is fine.
        let nodes = vec![
            node("n1").allocatable("4", "16Gi", "3").build(),
            node("n2").build(),
        ];
        let mut pods: Vec<core::Pod> = (0..5)
            .map(|i| {
                pod("default", &format!("a{i}"), "n1")
                    .requests("0", "2Gi")
                    .build()
            })
            .collect();
        pods.push(pod("default", "b", "n2").requests("0", "0").build());
        let args = json!({"thresholds": {"memory": 20}, "targetThresholds": {"memory": 50}});
        // Memory 10Gi of 16Gi = 62.5 % > 50: high. Target 8Gi → one eviction fixes memory, but 4
        // pods > 3 allocatable keeps it above: a second eviction.
        assert_eq!(run(args, nodes, pods), ["default/a0", "default/a1"]);
    }

    #[test]
    fn extended_resources() {
        let nodes = vec![
            node("n1").resource("nvidia.com/gpu", "4").build(),
            node("n2").resource("nvidia.com/gpu", "4").build(),
            // No GPUs: 0 % for gpu, low on cpu too; contributes no gpu room.
            node("n3").build(),
        ];
        let pods: Vec<core::Pod> = (0..4)
            .map(|i| {
                pod("default", &format!("g{i}"), "n1")
                    .requests("100m", "0")
                    .request("nvidia.com/gpu", "1")
                    .build()
            })
            .collect();
        let args = json!({
            "thresholds": {"nvidia.com/gpu": 30},
            "targetThresholds": {"nvidia.com/gpu": 50}
        });
        // n1 100 % gpu; target 2 of 4. Destinations n2 (room 2) and n3 (room 0).
        assert_eq!(run(args, nodes, pods), ["default/g0", "default/g1"]);
    }

    #[test]
    fn extended_resource_without_room_stops_at_once() {
        let nodes = vec![
            node("n1").resource("nvidia.com/gpu", "4").build(),
            node("n2").build(),
        ];
        let pods: Vec<core::Pod> = (0..4)
            .map(|i| {
                pod("default", &format!("g{i}"), "n1")
                    .request("nvidia.com/gpu", "1")
                    .build()
            })
            .collect();
        let args = json!({
            "thresholds": {"nvidia.com/gpu": 30},
            "targetThresholds": {"nvidia.com/gpu": 50}
        });
        assert!(run(args, nodes, pods).is_empty());
    }

    #[test]
    fn deviation_mode_uses_the_mean_and_clamps() {
        // cpu: 80 %, 0 %, 50 % → mean 43.3; low = 43.3 − 50 → 0 (clamped), high = 63.3.
        let (nodes, pods) = cluster();
        let args = json!({
            "useDeviationThresholds": true,
            "thresholds": {"cpu": 50},
            "targetThresholds": {"cpu": 20}
        });
        // Only n2 (0 %) is low; n1 is above 63.3 % (2533m): 3200 → 2800 → 2400m.
        assert_eq!(run(args, nodes, pods), ["default/a0", "default/a1"]);
        // high = 43.3 + 70 → clamped to 100: no node above.
        let (nodes, pods) = cluster();
        let args = json!({
            "useDeviationThresholds": true,
            "thresholds": {"cpu": 10},
            "targetThresholds": {"cpu": 70}
        });
        assert!(run(args, nodes, pods).is_empty());
    }

    #[test]
    fn destination_taints_must_be_tolerated() {
        let nodes = vec![
            node("n1").build(),
            node("n2")
                .taint("dedicated", Some("x"), "NoSchedule")
                .build(),
        ];
        let mut pods = pods_on("a", "n1", 8, "400m");
        pods[1] = pod("default", "tolerant", "n1")
            .requests("400m", "0")
            .toleration("dedicated", "Equal", Some("x"), Some("NoSchedule"))
            .build();
        assert_eq!(run(cpu_args(20.0, 75.0), nodes, pods), ["default/tolerant"]);
    }

    #[test]
    fn validation() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (json!({}), "thresholds", "no resource threshold"),
            (
                json!({"thresholds": {"cpu": 10}}),
                "targetThresholds",
                "targetThresholds config is not valid: no resource threshold",
            ),
            (
                json!({"thresholds": {"cpu": 101}, "targetThresholds": {"cpu": 50}}),
                "thresholds.cpu",
                "not in [0, 100] range",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": -1}}),
                "targetThresholds.cpu",
                "not in [0, 100] range",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"memory": 50}}),
                "targetThresholds",
                "different resources",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50, "pods": 50}}),
                "targetThresholds",
                "different resources",
            ),
            (
                json!({"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}}),
                "thresholds.cpu",
                "greater than targetThresholds",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "evictableNamespaces": {"include": ["a"]}}),
                "evictableNamespaces.include",
                "inclusion is not supported",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50}, "bogus": 1}),
                "bogus",
                "bogus",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "evictionLimits": {"node": -1}}),
                "evictionLimits.node",
                "",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "evictionLimits": {"nodes": 1}}),
                "evictionLimits.nodes",
                "unknown field",
            ),
            (
                json!({"thresholds": {"cpu": "10"}, "targetThresholds": {"cpu": 50}}),
                "thresholds.cpu",
                "",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "metricsUtilization": {}}),
                "metricsUtilization.source",
                "metrics source is empty",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "metricsUtilization": {"source": "Foo"}}),
                "metricsUtilization.source",
                "unrecognized metrics source",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "metricsUtilization": {"source": "KubernetesMetrics", "metricsServer": true}}),
                "metricsUtilization",
                "not allowed to set both",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "metricsUtilization": {"source": "KubernetesMetrics", "prometheus": {}}}),
                "metricsUtilization.prometheus",
                "not allowed",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "metricsUtilization": {"source": "Prometheus"}}),
                "metricsUtilization.prometheus.query",
                "prometheus query is required",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                       "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}}}),
                "thresholds",
                "single instance of \"MetricResource\"",
            ),
        ];
        for (args, field, msg) in cases {
            let e = match build(&args) {
                Err(e) => e,
                Ok(_) => panic!("{args} should fail"),
            };
            assert_eq!(e.field, field, "{args}: {e}");
            assert!(e.message.contains(msg), "{args}: {e}");
        }
        // Deviation mode allows thresholds above targets; bounds are inclusive.
        for ok in [
            json!({"useDeviationThresholds": true, "thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}}),
            json!({"thresholds": {"cpu": 0, "memory": 100}, "targetThresholds": {"cpu": 100, "memory": 100},
                   "numberOfNodes": 3, "evictableNamespaces": {"exclude": ["a"]},
                   "evictionLimits": {"node": 2}}),
            json!({"thresholds": {"MetricResource": 10}, "targetThresholds": {"MetricResource": 50},
                   "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}}}),
            json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                   "metricsUtilization": {"source": "KubernetesMetrics"}}),
            json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50},
                   "metricsUtilization": {"metricsServer": true}}),
        ] {
            assert!(build(&ok).is_ok(), "{ok}");
        }
    }
}
