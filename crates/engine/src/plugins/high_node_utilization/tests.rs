use super::*;
use crate::testing::{node, pod, pods_requesting as pods_on, run_built_balance};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

fn run(args: Value, nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Vec<String> {
    run_built_balance(build, args, nodes, pods)
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
    crate::testing::assert_args_rejected(build, &cases);
    assert!(
        build(
            &json!({"thresholds": {"cpu": 0, "pods": 100}, "numberOfNodes": 1,
                          "evictionModes": ["OnlyThresholdingResources"],
                          "evictableNamespaces": {"exclude": ["x"]}})
        )
        .is_ok()
    );
}
