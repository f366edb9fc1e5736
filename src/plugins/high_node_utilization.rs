//! HighNodeUtilization (Balance): evicts pods from underutilized nodes (every thresholded resource
//! at or below `thresholds`, cordoned nodes included), least used first, so the scheduler packs
//! them onto the other schedulable nodes. Usage is request-based, as for LowNodeUtilization.

use serde::Deserialize;

use super::node_utilization::{
    EvictableNamespaces, EvictionSpec, PodUsage, Thresholds, Usage, evict_from_sources,
    sort_rows_by_usage, tracked_resources, validate_thresholds,
};
use crate::framework::args::{ArgsError, decode};
use crate::framework::registry::ExtensionPoint;
use crate::framework::{BalancePlugin, Handle, Plugin, PluginFactory};
use crate::snapshot::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use crate::snapshot::{NodeId, Pod};

/// The plugin name.
pub const NAME: &str = "HighNodeUtilization";

/// `evictionModes` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionMode {
    /// Only evict pods that request at least one thresholded resource.
    OnlyThresholdingResources,
}

/// HighNodeUtilization args (upstream `HighNodeUtilizationArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HighNodeUtilizationArgs {
    /// A node is underutilized when every thresholded resource is at or below these.
    #[serde(default)]
    pub thresholds: Thresholds,
    /// Act only when more than this many nodes are underutilized.
    #[serde(default)]
    pub number_of_nodes: i64,
    /// Eviction modes (`OnlyThresholdingResources`).
    #[serde(default)]
    pub eviction_modes: Vec<String>,
    /// Namespaces excluded from eviction.
    #[serde(default)]
    pub evictable_namespaces: Option<EvictableNamespaces>,
}

impl HighNodeUtilizationArgs {
    /// Upstream `ValidateHighNodeUtilizationArgs`; returns the parsed eviction modes.
    pub fn validate(&self) -> Result<Vec<EvictionMode>, ArgsError> {
        if let Some(ns) = &self.evictable_namespaces {
            ns.validate()?;
        }
        validate_thresholds("thresholds", "", &self.thresholds)?;
        self.eviction_modes
            .iter()
            .enumerate()
            .map(|(i, m)| match m.as_str() {
                "OnlyThresholdingResources" => Ok(EvictionMode::OnlyThresholdingResources),
                other => Err(ArgsError::new(
                    format!("evictionModes[{i}]"),
                    format!("invalid eviction mode {other}"),
                )),
            })
            .collect()
    }
}

/// The HighNodeUtilization plugin.
#[derive(Debug)]
pub struct HighNodeUtilization {
    args: HighNodeUtilizationArgs,
    only_thresholding_resources: bool,
}

impl HighNodeUtilization {
    /// A plugin with validated `args`.
    pub fn new(args: HighNodeUtilizationArgs) -> Result<Self, ArgsError> {
        let modes = args.validate()?;
        Ok(HighNodeUtilization {
            only_thresholding_resources: modes.contains(&EvictionMode::OnlyThresholdingResources),
            args,
        })
    }

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

fn build(args: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let args: HighNodeUtilizationArgs = decode(args)?;
    Ok(Plugin::Balance(Box::new(HighNodeUtilization::new(args)?)))
}

/// The registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory {
        name: NAME,
        point: ExtensionPoint::Balance,
        build,
    }
}

impl BalancePlugin for HighNodeUtilization {
    fn name(&self) -> &'static str {
        NAME
    }

    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let a = &self.args;
        let snapshot = h.snapshot;
        let resources = tracked_resources(a.thresholds.keys().map(String::as_str));
        let mut usage = Usage::compute(snapshot, nodes, resources);
        let low_levels = usage.levels(&a.thresholds);
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
        if low.is_empty()
            || (low.len() as i64) <= a.number_of_nodes
            || low.len() == nodes.len()
            || schedulable.is_empty()
        {
            return;
        }
        sort_rows_by_usage(&usage, &mut low, true);
        let excluded = a
            .evictable_namespaces
            .as_ref()
            .map(|n| n.exclude.as_slice())
            .unwrap_or(&[]);
        let filter = |pod: &Pod| {
            !self.only_thresholding_resources || self.requests_thresholded_resource(pod)
        };
        let spec = EvictionSpec {
            sources: low,
            destinations: schedulable,
            caps: &caps,
            excluded_namespaces: excluded,
            node_limit: None,
            stop_under_target: false,
            pod_filter: &filter,
            pod_usage: PodUsage::Requests,
        };
        evict_from_sources(h, &mut usage, &spec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::testing::{evicted_names, node, pod, run_balance, snapshot};
    use crate::plugins::default_evictor::DefaultEvictor;
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

    fn pods_on(prefix: &str, node: &str, count: usize, cpu: &str) -> Vec<core::Pod> {
        (0..count)
            .map(|i| {
                pod("default", &format!("{prefix}{i}"), node)
                    .requests(cpu, "0")
                    .build()
            })
            .collect()
    }

    fn cpu(pct: f64) -> Value {
        json!({"thresholds": {"cpu": pct}})
    }

    /// n1 10 % (1 × 400m), n2 20 % (2 × 400m), n3 and n4 50 %.
    fn cluster() -> (Vec<core::Node>, Vec<core::Pod>) {
        let nodes = vec![
            node("n1").build(),
            node("n2").build(),
            node("n3").build(),
            node("n4").build(),
        ];
        let mut pods = pods_on("a", "n1", 1, "400m");
        pods.extend(pods_on("b", "n2", 2, "400m"));
        pods.extend(pods_on("c", "n3", 2, "1"));
        pods.extend(pods_on("d", "n4", 2, "1"));
        (nodes, pods)
    }

    #[test]
    fn evicts_everything_from_low_nodes_lowest_first() {
        let (nodes, pods) = cluster();
        assert_eq!(
            run(cpu(20.0), nodes, pods),
            ["default/a0", "default/b0", "default/b1"]
        );
        let (nodes, pods) = cluster();
        assert_eq!(run(cpu(10.0), nodes, pods), ["default/a0"]);
    }

    #[test]
    fn early_exits() {
        let (nodes, pods) = cluster();
        assert!(run(cpu(5.0), nodes, pods).is_empty());
        let (nodes, pods) = cluster();
        let mut args = cpu(20.0);
        args["numberOfNodes"] = json!(2);
        assert!(run(args, nodes, pods).is_empty());
        let (nodes, pods) = cluster();
        let mut args = cpu(20.0);
        args["numberOfNodes"] = json!(1);
        assert_eq!(run(args, nodes, pods).len(), 3);
        // All nodes low.
        let (nodes, pods) = cluster();
        assert!(run(cpu(60.0), nodes, pods).is_empty());
    }

    #[test]
    fn cordoned_nodes_are_sources_but_never_destinations() {
        let (mut nodes, pods) = cluster();
        nodes[0] = node("n1").unschedulable().build();
        assert_eq!(
            run(cpu(20.0), nodes, pods),
            ["default/a0", "default/b0", "default/b1"]
        );
        // Every non-low node cordoned: nowhere to go.
        let (mut nodes, pods) = cluster();
        nodes[2] = node("n3").unschedulable().build();
        nodes[3] = node("n4").unschedulable().build();
        assert!(run(cpu(20.0), nodes, pods).is_empty());
    }

    #[test]
    fn stops_when_destinations_are_full() {
        // n3 and n4 only have 3 pod slots each, 2 used: room for 2 pods in total.
        let (mut nodes, pods) = cluster();
        nodes[2] = node("n3").allocatable("4", "16Gi", "3").build();
        nodes[3] = node("n4").allocatable("4", "16Gi", "3").build();
        assert_eq!(run(cpu(20.0), nodes, pods), ["default/a0", "default/b0"]);
    }

    #[test]
    fn eviction_modes_only_thresholding_resources() {
        let nodes = vec![
            node("n1").build(),
            node("n2").resource("example.com/gpu", "4").build(),
        ];
        let pods = vec![
            pod("default", "be", "n1").best_effort().build(),
            pod("default", "mem", "n1").requests("0", "1Gi").build(),
            pod("default", "cpu", "n1").requests("100m", "0").build(),
            // Requests only an extended resource: BestEffort QoS.
            pod("default", "gpu", "n1")
                .best_effort()
                .request("example.com/gpu", "0")
                .build(),
            pod("default", "big", "n2").requests("3", "0").build(),
        ];
        let mut args = cpu(10.0);
        args["evictionModes"] = json!(["OnlyThresholdingResources"]);
        assert_eq!(run(args, nodes.clone(), pods.clone()), ["default/cpu"]);
        assert_eq!(
            run(cpu(10.0), nodes.clone(), pods.clone()),
            ["default/be", "default/gpu", "default/mem", "default/cpu"]
        );
        // An extended resource counts when a container lists it, even at 0.
        let args = json!({"thresholds": {"cpu": 10, "example.com/gpu": 10},
                          "evictionModes": ["OnlyThresholdingResources"]});
        assert_eq!(run(args, nodes, pods), ["default/gpu", "default/cpu"]);
    }

    #[test]
    fn excluded_namespaces_and_unevictable_pods_stay() {
        let (nodes, mut pods) = cluster();
        pods[1] = pod("kube-system", "sys", "n2")
            .requests("400m", "0")
            .build();
        pods[2] = pod("default", "bare", "n2")
            .requests("400m", "0")
            .bare()
            .build();
        let mut args = cpu(20.0);
        args["evictableNamespaces"] = json!({"exclude": ["kube-system"]});
        assert_eq!(run(args, nodes, pods), ["default/a0"]);
    }

    #[test]
    fn validation() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (
                json!({}),
                "thresholds",
                "no resource threshold is configured",
            ),
            (
                json!({"thresholds": {"cpu": 101}}),
                "thresholds.cpu",
                "cpu threshold not in [0, 100] range",
            ),
            (
                json!({"thresholds": {"memory": -0.5}}),
                "thresholds.memory",
                "not in [0, 100] range",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "evictionModes": ["OnlyThresholdingResources", "Bogus"]}),
                "evictionModes[1]",
                "invalid eviction mode Bogus",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "evictableNamespaces": {"include": ["a"]}}),
                "evictableNamespaces.include",
                "inclusion is not supported",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 10}}),
                "targetThresholds",
                "unknown field",
            ),
            (
                json!({"thresholds": {"cpu": 10}, "numberOfNodes": "2"}),
                "numberOfNodes",
                "",
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
        assert!(
            build(
                &json!({"thresholds": {"cpu": 0, "pods": 100}, "numberOfNodes": 1,
                          "evictionModes": ["OnlyThresholdingResources"],
                          "evictableNamespaces": {"exclude": ["x"]}})
            )
            .is_ok()
        );
    }
}
