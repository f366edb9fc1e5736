//! Cluster fixtures and AdmissionReview bodies.

use super::*;
use kube_descheduler::guard::testing::{web_deployment, web_pod, web_replica_set};

pub(crate) fn pod() -> PodFacts {
    web_pod()
}

pub(crate) fn rs() -> ReplicaSetFacts {
    web_replica_set(1)
}

pub(crate) fn dep() -> DeploymentFacts {
    web_deployment(1)
}

pub(crate) fn cluster(d: DeploymentFacts) -> MemorySource {
    let mut s = MemorySource::new();
    s.pods.insert("shop/web-7d9f-abcde".into(), pod());
    s.replica_sets
        .insert("shop/web-7d9f".into(), Arc::new(rs()));
    s.deployments.insert("shop/web".into(), Arc::new(d));
    s
}

pub(crate) fn eviction_review(
    api_version: &str,
    delete_options: Value,
    query_dry_run: bool,
) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "policy", "version": api_version.trim_start_matches("policy/"), "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": "web-7d9f-abcde",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:cluster-autoscaler", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": api_version,
                "kind": "Eviction",
                "metadata": {"name": "web-7d9f-abcde", "namespace": "shop", "creationTimestamp": null},
                "deleteOptions": delete_options
            },
            "oldObject": null,
            "dryRun": query_dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// Asserts that the review was denied with 429 TooManyRequests; returns the status message.
pub(crate) fn denied_429(resp: &Value) -> &str {
    assert_eq!(resp["allowed"], false);
    let status = &resp["status"];
    assert_eq!(status["code"], 429);
    assert_eq!(status["reason"], "TooManyRequests");
    status["message"].as_str().unwrap()
}

pub(crate) fn assert_deflection(resp: &Value) {
    let message = denied_429(resp);
    let status = &resp["status"];
    assert!(
        status.get("details").is_none(),
        "no details, so no retryAfterSeconds: {status}"
    );
    kube_descheduler_guard::testing::assert_restart_deflection(message, "shop/web");
}

/// Asserts that the review was allowed with a first warning containing `text`.
pub(crate) fn assert_allowed_warning(resp: &Value, text: &str) {
    assert_eq!(resp["allowed"], true, "{resp}");
    let warning = resp["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains(text), "{resp}");
}
