//! Objects for tests that drive the sim.

use serde_json::{Value, json};

/// A workload `kind` (`Deployment`, `ReplicaSet`) `namespace/name` of `replicas` pods labelled
/// `app=<name>`, one container `c` (image `<name>:1`) and `grace_seconds` to terminate.
pub fn workload(
    kind: &str,
    namespace: &str,
    name: &str,
    replicas: usize,
    grace_seconds: u32,
) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": grace_seconds,
                         "containers": [{"name": "c", "image": format!("{name}:1")}]}
            }
        }
    })
}

/// [`workload`]: a ReplicaSet with uid `rs-<name>`.
pub fn replica_set(namespace: &str, name: &str, replicas: usize, grace_seconds: u32) -> Value {
    let mut rs = workload("ReplicaSet", namespace, name, replicas, grace_seconds);
    rs["metadata"]["uid"] = json!(format!("rs-{name}"));
    rs
}
