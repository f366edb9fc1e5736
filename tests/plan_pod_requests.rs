//! `plan` through the binary: pods count at their effective requests as kube-scheduler computes
//! them (pod-level resources replace the containers' total), and a plan does not depend on the
//! order of the objects in the snapshot file.

mod cli_common;

use std::path::Path;

use kube_descheduler::synth::{Rng, Shape, write_cluster};
use serde_json::{Value, json};

const NOW: &str = "2026-02-01T00:00:00Z";

fn plan_bytes(snapshot: &Path, policy: &Path) -> Vec<u8> {
    cli_common::succeeds(cli_common::plan_with(policy, snapshot).args(["-o", "json", "--now", NOW]))
        .stdout
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn container(name: &str) -> Value {
    json!({"name": name, "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}})
}

#[test]
fn pod_level_requests_count_in_node_usage() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "big", "namespace": "default", "uid": "u-big",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-rs", "controller": true}]},
        "spec": {"nodeName": "node-a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                 "containers": [container("a"), container("b")]},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}});
    let list =
        json!({"apiVersion": "v1", "kind": "List", "items": [node("node-a"), node("node-b"), pod]});
    let snapshot = dir.path().join("cluster.json");
    std::fs::write(&snapshot, list.to_string()).expect("write snapshot");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: DefaultEvictor\n    args: {}\n  - name: LowNodeUtilization\n    args:\n      thresholds: {cpu: 10, memory: 10}\n      targetThresholds: {cpu: 40, memory: 40}\n  plugins:\n    balance:\n      enabled: [LowNodeUtilization]\n",
    )
    .expect("write policy");
    let plan: Value =
        serde_json::from_slice(&plan_bytes(&snapshot, &policy)).expect("one JSON object");
    let table = &plan["nodeUsage"][0];
    assert_eq!(table["plugin"], "LowNodeUtilization", "{plan:#}");
    let node_a = cli_common::node_row(table, "node-a");
    // 2 CPU of 4 and 1 GiB of 8, not the containers' 200m / 200Mi.
    assert_eq!(node_a["before"]["percent"]["cpu"], 50.0, "{node_a:#}");
    assert_eq!(node_a["before"]["percent"]["memory"], 12.5, "{node_a:#}");
}

/// The items of a `List` in JSON, shuffled (Fisher–Yates with the synthetic generator's PRNG).
fn shuffled(list: &[u8], seed: u64) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(list).expect("a List");
    let items = v["items"].as_array_mut().expect("items");
    let mut rng = Rng::new(seed);
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
    serde_json::to_vec(&v).expect("JSON")
}

#[test]
fn a_shuffled_snapshot_gives_the_same_plan() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut generated = Vec::new();
    write_cluster(
        Shape {
            nodes: 120,
            pods: 3600,
            seed: 7,
        },
        &mut generated,
    )
    .expect("generate");
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/all-plugins-policy.yaml");
    let in_order = dir.path().join("in-order.json");
    std::fs::write(&in_order, &generated).expect("write");
    let expected = plan_bytes(&in_order, &policy);
    let decisions = serde_json::from_slice::<Value>(&expected).expect("plan")["evictions"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(decisions > 10, "a plan with something in it: {decisions}");
    for seed in [1, 2] {
        let file = dir.path().join(format!("shuffled-{seed}.json"));
        std::fs::write(&file, shuffled(&generated, seed)).expect("write");
        assert!(
            plan_bytes(&file, &policy) == expected,
            "the plan of the cluster shuffled with seed {seed} differs"
        );
    }
}
