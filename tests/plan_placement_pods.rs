//! `plan` with `placement: Report` reads the pods' `schedulerName` and host ports from
//! the snapshot file. The ping-pong cluster (six 4-CPU nodes, `big` on n1–n4, `small` on n5 and n6,
//! HighNodeUtilization at 20 %), with the small pods changed:
//!
//! - a pod of a scheduler no profile serves is not predicted, and the JSON says why
//!   (`notPredicted`); a configuration with a profile of that name predicts it with that profile;
//! - a pod binding a host port is not predicted onto a node where that port is taken (NodePorts).

mod cli_common;

use std::path::Path;

use cli_common::{NOW, bin, evictions, json_of, succeeds};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The ping-pong cluster with `edit` applied to the pod named `pod`, written to `dir`.
fn cluster(dir: &Path, edits: &[(&str, Value)]) -> std::path::PathBuf {
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("tests/placement/ping-pong-cluster.json"))
            .expect("ping-pong cluster");
    let mut list: Value = serde_json::from_str(&text).expect("JSON");
    for item in list["items"].as_array_mut().expect("items") {
        for (name, spec) in edits {
            if item["kind"] == "Pod" && item["metadata"]["name"] == *name {
                for (k, v) in spec.as_object().expect("spec fields") {
                    item["spec"][k] = v.clone();
                }
            }
        }
    }
    let path = dir.join("cluster.json");
    std::fs::write(&path, list.to_string()).expect("written");
    path
}

fn plan(snapshot: &Path, scheduler_config: Option<&Path>) -> Value {
    let mut cmd = bin();
    cmd.args(["plan", "-o", "json", "--now", NOW])
        .args(["--policy", "tests/placement/hnu-report-policy.yaml"])
        .arg("--snapshot")
        .arg(snapshot);
    if let Some(c) = scheduler_config {
        cmd.arg("--scheduler-config").arg(c);
    }
    json_of(&succeeds(&mut cmd))
}

fn eviction<'a>(plan: &'a Value, name: &str) -> &'a Value {
    evictions(plan)
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no eviction of {name}: {plan}"))
}

#[test]
fn a_pod_of_a_scheduler_no_profile_serves_is_not_predicted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let snapshot = cluster(
        dir.path(),
        &[("small-5", json!({"schedulerName": "gpu-scheduler"}))],
    );
    let p = plan(&snapshot, None);
    let gpu = eviction(&p, "small-5");
    assert_eq!(
        gpu["notPredicted"],
        "no profile of the scheduler configuration serves schedulerName \"gpu-scheduler\"",
        "{gpu}"
    );
    assert!(gpu["predictedNode"].is_null(), "{gpu}");
    assert_eq!(gpu["predictedTies"], json!([]), "{gpu}");
    assert!(gpu.get("placementVerdict").is_none(), "{gpu}");
    // The other small pod, of the default scheduler, is predicted with the default profile; n5
    // and n6 tie for it: small-5 still terminates on n5 as small-6 does on n6, and small-5's
    // replacement is counted nowhere (another scheduler places it).
    let default = eviction(&p, "small-6");
    assert_eq!(default["predictedTies"], json!(["n5", "n6"]), "{default}");
    assert!(default.get("notPredicted").is_none(), "{default}");

    // A configuration serving gpu-scheduler (packing) predicts it with that profile, and the
    // default-scheduler pod with the default profile.
    let config = dir.path().join("scheduler.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n\
         - schedulerName: default-scheduler\n\
         - schedulerName: gpu-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      \
         scoringStrategy: {type: MostAllocated}\n",
    )
    .expect("written");
    let p = plan(&snapshot, Some(&config));
    let gpu = eviction(&p, "small-5");
    assert!(gpu.get("notPredicted").is_none(), "{gpu}");
    assert_eq!(
        gpu["predictedTies"],
        json!(["n1", "n2", "n3", "n4"]),
        "{gpu}"
    );
    let default = eviction(&p, "small-6");
    assert_eq!(default["predictedTies"], json!(["n5", "n6"]), "{default}");
}

#[test]
fn a_pod_is_not_predicted_onto_a_node_where_its_host_port_is_taken() {
    let port = |ip: &str| {
        json!({"containers": [{"name": "main", "image": "small",
            "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}},
            "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP", "hostIP": ip}]}]})
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // Without ports, small-5 comes straight back to n5 (LeastAllocated).
    let plain = plan(&cluster(dir.path(), &[]), None);
    assert_eq!(eviction(&plain, "small-5")["predictedNode"], "n5");
    // small-5 binds 0.0.0.0:8080 and small-6 binds 10.0.0.6:8080 on n6. While an evicted pod
    // terminates it still binds its port (kube-scheduler's NodeInfo keeps it): small-5's
    // replacement can go neither to n6 nor back to n5, and lands on n1; small-6's then can go
    // neither to n1 (small-5's replacement binds 0.0.0.0:8080), n5 nor n6.
    let snapshot = cluster(
        dir.path(),
        &[("small-5", port("")), ("small-6", port("10.0.0.6"))],
    );
    let p = plan(&snapshot, None);
    for (name, feasible) in [("small-5", 4), ("small-6", 3)] {
        let e = eviction(&p, name);
        assert_eq!(e["feasibleNodes"], feasible, "{name}: {e}");
        assert_eq!(e["currentNodeFilteredBy"], "NodePorts", "{name}: {e}");
        assert_eq!(e["mayReturn"], false, "{name}: {e}");
    }
    assert_eq!(eviction(&p, "small-5")["predictedNode"], "n1");
    let e = eviction(&p, "small-6");
    assert_eq!(e["predictedTies"], json!(["n2", "n3", "n4"]), "{e}");
}
