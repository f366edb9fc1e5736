//! Objects: nodes, Deployments and PodDisruptionBudgets for the workloads under test.

use super::*;

/// A Ready node with room for many pods; `schedulable: false` starts it cordoned.
pub fn node(name: &str, schedulable: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": !schedulable},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A node with a `NoSchedule` taint `key=value`.
pub fn tainted_node(name: &str, key: &str, value: &str) -> Value {
    let mut n = node(name, true);
    n["spec"]["taints"] = json!([{"key": key, "value": value, "effect": "NoSchedule"}]);
    n
}

/// How a Deployment rolls out.
#[derive(Clone, Copy, Debug)]
pub enum Strategy {
    /// No `strategy` field: RollingUpdate 25% / 25% (surge 1, unavailable 0 for one replica).
    Default,
    /// RollingUpdate maxSurge 0, maxUnavailable 1.
    NoSurge,
    /// Recreate.
    Recreate,
}

/// A Deployment `name` in [`NS`] (pods labelled `app: name`, 1 s grace period).
pub fn deployment(name: &str, replicas: i64, strategy: Strategy) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "app", "image": "registry.example/app:1",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}});
    match strategy {
        Strategy::Default => {}
        Strategy::NoSurge => {
            d["spec"]["strategy"] = json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})
        }
        Strategy::Recreate => d["spec"]["strategy"] = json!({"type": "Recreate"}),
    }
    d
}

/// Adds a toleration of the `NoSchedule` taint `key=value` to a Deployment's pods.
pub fn tolerating(mut d: Value, key: &str, value: &str) -> Value {
    d["spec"]["template"]["spec"]["tolerations"] =
        json!([{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]);
    d
}

/// A PodDisruptionBudget `minAvailable: n` over `app: <app>` in [`NS`].
pub fn pdb_min_available(app: &str, n: i64) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": NS},
        "spec": {"minAvailable": n, "selector": {"matchLabels": {"app": app}}}})
}
