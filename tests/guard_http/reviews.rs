//! Reviews: deflection, dry-run, malformed bodies, PDBs, health, endpoints.

use super::*;

#[tokio::test]
async fn v1_eviction_of_single_replica_pod_is_deflected_into_one_restart() {
    let h = start(cluster(dep())).await;
    let resp = h.evict_uid("pod-uid").await;
    assert_deflection(&resp);
    let calls = h.restarts();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (
            calls[0].namespace.as_str(),
            calls[0].deployment.as_str(),
            calls[0].pod.as_str()
        ),
        ("shop", "web", "web-7d9f-abcde")
    );
    assert_eq!(
        calls[0].requested_by,
        "system:serviceaccount:kube-system:cluster-autoscaler"
    );
}

#[tokio::test]
async fn v1beta1_eviction_is_accepted() {
    let h = start(cluster(dep())).await;
    let resp = h
        .review(eviction_review("policy/v1beta1", Value::Null, false))
        .await;
    assert_deflection(&resp);
    assert_eq!(h.restarts().len(), 1);
}

#[tokio::test]
async fn dry_run_in_query_has_no_side_effect_and_warns() {
    let h = start(cluster(dep())).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), true))
        .await;
    assert_eq!(resp["allowed"], true);
    let warning = resp["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("dry run") && warning.contains("rolling restart of Deployment shop/web"),
        "{warning}"
    );
    assert!(h.restarts().is_empty(), "dry run must not restart");
}

#[tokio::test]
async fn dry_run_in_delete_options_has_no_side_effect_and_warns() {
    let h = start(cluster(dep())).await;
    // kubectl drain --dry-run=server: dryRun only in the Eviction body.
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"dryRun": ["All"]}),
            false,
        ))
        .await;
    assert_allowed_warning(&resp, "would refuse");
    assert!(h.restarts().is_empty());
}

#[tokio::test]
async fn uid_mismatch_is_allowed_without_restart() {
    let h = start(cluster(dep())).await;
    let resp = h.evict_uid("someone-else").await;
    assert_eq!(resp["allowed"], true);
    assert!(resp.get("warnings").is_none());
    assert!(h.restarts().is_empty());
}

#[tokio::test]
async fn missing_pod_is_allowed() {
    let h = start(MemorySource::new()).await;
    let resp = h.evict().await;
    assert_eq!(resp["allowed"], true);
    assert!(h.restarts().is_empty());
}

#[tokio::test]
async fn malformed_bodies_get_400_naming_the_problem() {
    let h = start(cluster(dep())).await;
    let (status, text) = h.post(b"{not json".to_vec()).await;
    assert_eq!(status, 400);
    assert!(text.contains("malformed AdmissionReview"), "{text}");

    let mut bad = eviction_review("policy/v1", json!({}), false);
    bad["request"]["uid"] = json!(42);
    let (status, text) = h.post(serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(status, 400);
    assert!(text.contains("request.uid"), "{text}");

    let bad = eviction_review("policy/v1", json!({"dryRun": "All"}), false);
    let (status, text) = h.post(serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(status, 400);
    assert!(
        text.contains("deleteOptions") && text.contains("dryRun"),
        "{text}"
    );

    let mut bad = eviction_review("policy/v1", json!({}), false);
    bad["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, text) = h.post(serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(status, 400);
    assert!(text.contains("admission.k8s.io/v1beta1"), "{text}");

    // Oversized bodies are cut off, not buffered forever.
    let (status, _) = h.post(vec![b' '; 5 * 1024 * 1024]).await;
    assert_eq!(status, 413);
    assert!(h.restarts().is_empty());
}

#[tokio::test]
async fn non_eviction_requests_are_allowed() {
    let h = start(cluster(dep())).await;
    let mut review = eviction_review("policy/v1", json!({}), false);
    review["request"]["subResource"] = Value::Null;
    review["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    review["request"]["object"] =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
    let resp = h.review(review).await;
    assert_eq!(resp["allowed"], true);
    let mut delete = eviction_review("policy/v1", json!({}), false);
    delete["request"]["operation"] = json!("DELETE");
    assert_eq!(h.review(delete).await["allowed"], true);
    assert!(h.restarts().is_empty());
}

#[tokio::test]
async fn failed_restart_answers_429_without_the_handoff_phrase() {
    let restarter = FakeRestarter {
        fail: Some("the server is on fire".into()),
        ..FakeRestarter::default()
    };
    let h = start_with(cluster(dep()), restarter, GuardConfig::default()).await;
    let resp = h.evict().await;
    let message = denied_429(&resp);
    assert!(
        message.contains("Deployment shop/web") && message.contains("the server is on fire"),
        "{message}"
    );
    assert!(
        !message.contains("Eviction triggered evacuation"),
        "not handed off: {message}"
    );
    // The retry tries again.
    let _ = h.evict().await;
    assert_eq!(h.restarts().len(), 2);
}

#[tokio::test]
async fn in_flight_rollout_is_denied_without_another_restart() {
    let d = DeploymentFacts {
        restart: Some(RecordedRestart {
            at: Timestamp::now(),
            by: Some("guard-1".into()),
        }),
        generation: 3,
        observed_generation: 2,
        ..dep()
    };
    let h = start(cluster(d)).await;
    let resp = h.evict().await;
    assert_deflection(&resp);
    assert!(h.restarts().is_empty(), "in flight: no second restart");
}

#[tokio::test]
async fn pdb_without_disruptions_is_denied_naming_the_budget() {
    let mut s = cluster(DeploymentFacts {
        replicas: 3,
        ready_replicas: 3,
        ..dep()
    });
    s.pdbs.push(Arc::new(PdbFacts {
        namespace: "shop".into(),
        name: "web-pdb".into(),
        selector: Some(Selector::from_iter([("app", "web")])),
        disruptions_allowed: 0,
    }));
    let h = start(s).await;
    let resp = h.evict().await;
    let message = denied_429(&resp);
    assert!(
        message.contains("PodDisruptionBudget shop/web-pdb"),
        "{message}"
    );
    assert!(!message.contains("Eviction triggered evacuation"));
}

#[tokio::test]
async fn health_guard_can_be_switched_off() {
    let s = cluster(DeploymentFacts {
        replicas: 3,
        ready_replicas: 2,
        ..dep()
    });
    let off = GuardConfig {
        health_guard: false,
        ..GuardConfig::default()
    };
    let h = start_with(s, FakeRestarter::default(), off).await;
    assert_eq!(h.evict().await["allowed"], true);
    let s = cluster(DeploymentFacts {
        replicas: 3,
        ready_replicas: 2,
        ..dep()
    });
    let h = start(s).await;
    let resp = h.evict().await;
    assert_eq!(resp["status"]["code"], 429);
    assert!(
        resp["status"]["message"]
            .as_str()
            .unwrap()
            .contains("only 2 of 3")
    );
}

#[tokio::test]
async fn when_unsure_the_guard_allows() {
    let mut s = cluster(dep());
    s.pod_error = Some("connection refused".into());
    let h = start(s).await;
    let resp = h.evict().await;
    assert_allowed_warning(&resp, "connection refused");

    let mut s = cluster(dep());
    s.synced = false;
    let h = start(s).await;
    assert_eq!(h.evict().await["allowed"], true);
    let ready = h.get("/readyz").await;
    assert_eq!(ready.status().as_u16(), 503);
    assert!(h.restarts().is_empty());
}

#[tokio::test]
async fn health_ready_and_metrics_endpoints() {
    let h = start(cluster(dep())).await;
    assert_eq!(h.get("/healthz").await.status().as_u16(), 200);
    assert_eq!(h.get("/readyz").await.status().as_u16(), 200);
    let _ = h.evict().await;
    let _ = h.evict_uid("x").await;
    let text = h.get("/metrics").await.text().await.unwrap();
    assert!(
        text.contains("kube_descheduler_guard_deflections_total 1"),
        "{text}"
    );
    assert!(
        text.contains("kube_descheduler_guard_allows_total{reason=\"uid_mismatch\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("kube_descheduler_guard_denials_total{reason=\"deflected\"} 1"),
        "{text}"
    );
}
