//! Cluster fixtures and AdmissionReview bodies.

use super::*;

pub(crate) fn pod() -> PodFacts {
    PodFacts {
        namespace: "shop".into(),
        name: "web-7d9f-abcde".into(),
        uid: "pod-uid".into(),
        labels: std::sync::Arc::new(BTreeMap::from([("app".into(), "web".into())])),
        opt_out: false,
        phase: PodPhase::Running,
        terminating: false,
        ready: true,
        owner: Some(OwnerFacts {
            kind: "ReplicaSet".into(),
            name: "web-7d9f".into(),
            uid: "rs-uid".into(),
        }),
        pod_template_hash: Some("7d9f".into()),
        claims: vec![],
        ephemeral_single_node_volume: false,
    }
}

pub(crate) fn rs() -> ReplicaSetFacts {
    ReplicaSetFacts {
        namespace: "shop".into(),
        name: "web-7d9f".into(),
        uid: "rs-uid".into(),
        owner: Some(OwnerFacts {
            kind: "Deployment".into(),
            name: "web".into(),
            uid: "dep-uid".into(),
        }),
        revision: Some(3),
        pod_template_hash: Some("7d9f".into()),
        desired: 1,
        replicas: 1,
        ready: 1,
    }
}

pub(crate) fn dep() -> DeploymentFacts {
    DeploymentFacts {
        namespace: "shop".into(),
        name: "web".into(),
        uid: "dep-uid".into(),
        replicas: 1,
        strategy: Strategy::RollingUpdate {
            max_surge: IntOrPercent::Percent(25),
            max_unavailable: IntOrPercent::Percent(25),
        },
        paused: false,
        progress_deadline_exceeded: false,
        opt_out: false,
        revision: Some(3),
        generation: 2,
        observed_generation: 2,
        status_replicas: 1,
        updated_replicas: 1,
        ready_replicas: 1,
        available_replicas: 1,
        restart: None,
        pdb_surge: None,
        surge: None,
    }
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

pub(crate) fn assert_deflection(resp: &Value) {
    assert_eq!(resp["allowed"], false);
    let status = &resp["status"];
    assert_eq!(status["code"], 429);
    assert_eq!(status["reason"], "TooManyRequests");
    assert!(
        status.get("details").is_none(),
        "no details, so no retryAfterSeconds: {status}"
    );
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("Eviction triggered evacuation"),
        "{message}"
    );
    assert!(message.contains("Deployment shop/web"), "{message}");
    assert!(
        message.contains("rolling restart is in progress"),
        "{message}"
    );
}

/// Asserts that the review was allowed with a first warning containing `text`.
pub(crate) fn assert_allowed_warning(resp: &Value, text: &str) {
    assert_eq!(resp["allowed"], true, "{resp}");
    let warning = resp["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains(text), "{resp}");
}
