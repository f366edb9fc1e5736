//! Access: authentication, access reviews, and injected faults.

use super::*;

#[tokio::test]
async fn authentication_and_reviews() {
    let sim = start(vec![]).await;
    sim.add_token(
        "alice-token",
        UserInfo::new("alice", &["devs", "system:authenticated"]),
    );
    sim.allow(Permission::new(
        "group:devs",
        &["create"],
        &["pods/eviction"],
    ));
    sim.allow(Permission::new("alice", &["get"], &["/metrics"]));
    let anon = Client::with_token(&sim, "wrong");
    let r = anon.get("/api/v1/pods").await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["reason"], "Unauthorized");
    let c = Client::new(&sim);
    let tr = c.post("/apis/authentication.k8s.io/v1/tokenreviews", json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "alice-token"}})).await;
    assert_eq!(tr.status, 201);
    assert_eq!(tr.body["status"]["authenticated"], true);
    assert_eq!(tr.body["status"]["user"]["username"], "alice");
    assert_eq!(
        tr.body["status"]["user"]["groups"],
        json!(["devs", "system:authenticated"])
    );
    let tr = c
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": "nope"}}),
        )
        .await;
    // `authenticated: false` is omitted, as kube-apiserver serializes it.
    assert!(tr.body["status"].get("authenticated").is_none());
    assert_eq!(tr.body["status"]["error"], "invalid bearer token");
    let sar = |user: &str, groups: Value, attrs: Value| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attrs}})
    };
    let allowed = c.post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("alice", json!(["devs"]), json!({"verb": "create", "resource": "pods", "subresource": "eviction", "namespace": "x"}))).await;
    assert_eq!(allowed.body["status"]["allowed"], true);
    let denied = c
        .post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            sar(
                "alice",
                json!([]),
                json!({"verb": "delete", "resource": "pods", "namespace": "x"}),
            ),
        )
        .await;
    assert_eq!(denied.body["status"]["allowed"], false);
    let nonres = c.post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
        json!({"spec": {"user": "alice", "nonResourceAttributes": {"verb": "get", "path": "/metrics"}}})).await;
    assert_eq!(nonres.body["status"]["allowed"], true);
    let alice = Client::with_token(&sim, "alice-token");
    let ssar = alice.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction"}}})).await;
    assert_eq!(ssar.body["status"]["allowed"], true);
    sim.shutdown().await;
}

#[tokio::test]
async fn fault_injection() {
    let sim = start(vec![node("n1")]).await;
    let c = Client::new(&sim);
    sim.add_fault(FaultRule {
        verb: Some("get".into()),
        resource: Some("nodes".into()),
        status: Some(503),
        times: Some(1),
        ..Default::default()
    });
    let r = c.get("/api/v1/nodes/n1").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body["reason"], "ServiceUnavailable");
    assert_eq!(
        c.get("/api/v1/nodes/n1").await.status,
        200,
        "rule retired after one use"
    );
    let id = sim.add_fault(FaultRule {
        resource: Some("nodes".into()),
        latency: Some(Duration::from_millis(300)),
        ..Default::default()
    });
    let t = std::time::Instant::now();
    assert_eq!(c.get("/api/v1/nodes").await.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    sim.remove_fault(id);
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        status: Some(429),
        ..Default::default()
    });
    let e = c
        .post(
            "/api/v1/namespaces/default/pods/x/eviction",
            eviction("x", "default"),
        )
        .await;
    assert_eq!(e.status, 429);
    sim.clear_faults();
    assert_eq!(
        c.post(
            "/api/v1/namespaces/default/pods/x/eviction",
            eviction("x", "default")
        )
        .await
        .status,
        404
    );
    // Bounded bodies.
    let big = "x".repeat(4 * 1024 * 1024);
    let r = c
        .post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "big"}, "data": {"a": big}}),
        )
        .await;
    assert_eq!(r.status, 413);
    // Garbage bodies are 400, not panics.
    let r = c
        .send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            None,
            Some(json!("just a string")),
        )
        .await;
    assert_eq!(r.status, 400);
    sim.shutdown().await;
}
