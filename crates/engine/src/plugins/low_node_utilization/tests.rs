use super::*;
use crate::framework::BalancePlugin;
use crate::snapshot::model::ANNOTATION_PREFER_NO_EVICTION;
use crate::testing::{
    balance_plugin, evicted_names, node, pod, pods_requesting as pods_on, run_built_balance,
    run_profile, snapshot,
};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

fn plugin(args: Value) -> Box<dyn BalancePlugin> {
    balance_plugin(build, args)
}

fn run(args: Value, nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Vec<String> {
    run_built_balance(build, args, nodes, pods)
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
        crate::testing::profile(vec![], vec![plugin(cpu_args(20.0, 60.0))]),
        &crate::testing::per_node_limit(1),
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

/// Pods g0..g3 on n1, each asking one GPU (and `cpu` with no memory, when given).
fn gpu_pods(cpu: Option<&str>) -> Vec<core::Pod> {
    let gpu_pod = |i: usize| {
        let p = pod("default", &format!("g{i}"), "n1");
        let p = match cpu {
            Some(cpu) => p.requests(cpu, "0"),
            None => p,
        };
        p.request("nvidia.com/gpu", "1").build()
    };
    (0..4).map(gpu_pod).collect()
}

/// Low below 30 % of GPUs, high above 50 %.
fn gpu_args() -> serde_json::Value {
    json!({"thresholds": {"nvidia.com/gpu": 30}, "targetThresholds": {"nvidia.com/gpu": 50}})
}

#[test]
fn extended_resources() {
    let nodes = vec![
        node("n1").resource("nvidia.com/gpu", "4").build(),
        node("n2").resource("nvidia.com/gpu", "4").build(),
        // No GPUs: 0 % for gpu, low on cpu too; contributes no gpu room.
        node("n3").build(),
    ];
    // n1 100 % gpu; target 2 of 4. Destinations n2 (room 2) and n3 (room 0).
    let pods = gpu_pods(Some("100m"));
    assert_eq!(run(gpu_args(), nodes, pods), ["default/g0", "default/g1"]);
}

#[test]
fn extended_resource_without_room_stops_at_once() {
    let nodes = vec![
        node("n1").resource("nvidia.com/gpu", "4").build(),
        node("n2").build(),
    ];
    assert!(run(gpu_args(), nodes, gpu_pods(None)).is_empty());
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
    crate::testing::assert_args_rejected(build, &cases);
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
