//! Answers in which kube-sim follows kube-apiserver 1.34/1.37 as observed on the real control
//! plane (`tests/real_sim_parity.rs` checks each of them against both servers): Status bodies of
//! eviction denials and precondition conflicts, NamespaceLifecycle on evictions, create-on-update
//! of Leases, Deployment generations, ListOptions validation, the 410 of a compacted watch, what
//! a created pod gets from defaults and admission, list items, TokenReview answers and the
//! AdmissionReview of an eviction.
mod common;

use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const EVICT: &str = "/api/v1/namespaces/p/pods/app/eviction";

fn app_pod() -> Value {
    pod("p", "app", "n1", json!({"app": "web"}), true)
}

fn has_disruption_target(sim: &kube_sim::SimHandle) -> bool {
    sim.get("v1", "Pod", "p", "app")
        .and_then(|p| p.pointer("/status/conditions").cloned())
        .and_then(|c| c.as_array().cloned())
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "DisruptionTarget"))
}

#[tokio::test]
async fn pdb_denial_names_its_cause_by_reason() {
    let sim = start(vec![
        node("n1"),
        app_pod(),
        pdb("p", "web-pdb", json!({"app": "web"}), 0, 1, 1),
    ])
    .await;
    let r = Client::new(&sim).post(EVICT, eviction("app", "p")).await;
    assert_eq!(r.status, 429);
    // metav1.StatusCause's Go field `Type` is `reason` in JSON.
    assert_eq!(
        r.body["details"],
        json!({"causes": [{"reason": "DisruptionBudget",
            "message": "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}]})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn eviction_precondition_conflict_leaves_the_pod_untouched() {
    let sim = start(vec![node("n1"), app_pod()]).await;
    let uid = sim.get("v1", "Pod", "p", "app").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let c = Client::new(&sim);
    let mut body = eviction("app", "p");
    body["deleteOptions"] = json!({"preconditions": {"uid": "other"}});
    let r = c.post(EVICT, body).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["reason"], "Conflict");
    assert_eq!(
        r.body["message"],
        format!(
            "Operation cannot be fulfilled on Pod \"app\": the UID in the precondition (other) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(r.body["details"], json!({"name": "app", "kind": "Pod"}));
    let mut body = eviction("app", "p");
    body["deleteOptions"] = json!({"preconditions": {"resourceVersion": "1"}});
    let r = c.post(EVICT, body).await;
    assert_eq!(r.status, 409);
    assert!(
        r.body["message"].as_str().unwrap().contains(
            "the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ("
        ),
        "{}",
        r.body
    );
    // kube-apiserver checks the preconditions before it writes the DisruptionTarget condition.
    assert!(!has_disruption_target(&sim));
    sim.shutdown().await;
}

#[tokio::test]
async fn delete_precondition_conflict_names_the_kind() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l", "namespace": "default"}, "spec": {"holderIdentity": "a"}});
    let created = c
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            lease,
        )
        .await;
    assert_eq!(created.status, 201);
    let uid = created.body["metadata"]["uid"].as_str().unwrap();
    let r = c
        .delete(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
            Some(json!({"preconditions": {"uid": "x"}})),
        )
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.body["message"],
        format!(
            "Operation cannot be fulfilled on Lease.coordination.k8s.io \"l\": the UID in the precondition (x) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(
        r.body["details"],
        json!({"name": "l", "group": "coordination.k8s.io", "kind": "Lease"})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn eviction_in_a_missing_namespace_names_the_namespace() {
    let sim = start(vec![]).await;
    let r = Client::new(&sim)
        .post(
            "/api/v1/namespaces/gone/pods/x/eviction",
            eviction("x", "gone"),
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["message"], "namespaces \"gone\" not found");
    assert_eq!(
        r.body["details"],
        json!({"name": "gone", "kind": "namespaces"})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn eviction_body_errors_are_worded_as_kube_apiserver() {
    let sim = start(vec![node("n1"), app_pod()]).await;
    let c = Client::new(&sim);
    let mut v2 = eviction("app", "p");
    v2["apiVersion"] = json!("policy/v2");
    let r = c.post(EVICT, v2).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["message"],
        "Eviction in version \"v2\" cannot be handled as a Eviction: no kind \"Eviction\" is registered for version \"policy/v2\" in scheme \"pkg/runtime/scheme.go:111\""
    );
    let mut both = eviction("app", "p");
    both["deleteOptions"] = json!({"dryRun": ["x"]});
    let r = c
        .post("/api/v1/namespaces/p/pods/app/eviction?dryRun=All", both)
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Non-matching dry-run options in request and content: [All] and [x]",
            "code": 500})
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn eviction_review_leaves_out_empty_dry_run_lists() {
    let wh = FakeWebhook::start(
        "wh",
        "hooks",
        Arc::new(|req: &Value| (Duration::ZERO, review_response(req, true, None, &[]))),
    )
    .await;
    let sim = start(vec![
        node("n1"),
        app_pod(),
        eviction_webhook("wh", "wh", "hooks", &wh.ca_pem, "Fail", "None", 5),
    ])
    .await;
    sim.set_service_override("hooks", "wh", wh.addr);
    let mut body = eviction("app", "p");
    body["deleteOptions"] = json!({"preconditions": {"uid": "u"}});
    let r = Client::new(&sim).post(EVICT, body).await;
    assert_eq!(r.status, 409, "{}", r.body);
    let seen = wh.requests();
    let req = &seen[0]["request"];
    assert_eq!(
        req["options"],
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"})
    );
    assert_eq!(
        req["object"]["deleteOptions"],
        json!({"preconditions": {"uid": "u"}})
    );
    assert_eq!(req["dryRun"], false);
    assert_eq!(req["oldObject"], Value::Null);
    wh.stop();
    sim.shutdown().await;
}

#[tokio::test]
async fn lease_put_of_a_missing_lease_creates_it() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/l";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l", "namespace": "default", "resourceVersion": "2"},
        "spec": {"holderIdentity": "b"}});
    let r = c.put(path, lease).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["spec"]["holderIdentity"], "b");
    // Kinds without AllowCreateOnUpdate still answer 404.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"}});
    let r = c.put("/api/v1/namespaces/default/configmaps/c", cm).await;
    assert_eq!(r.status, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn deployment_annotation_change_bumps_generation() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    let r = c
        .post("/apis/apps/v1/namespaces/default/deployments", dep)
        .await;
    assert_eq!(r.body["metadata"]["generation"], 1);
    let path = "/apis/apps/v1/namespaces/default/deployments/d";
    let patch = json!({"metadata": {"annotations": {"x": "1"}}});
    let r = c
        .patch(path, "application/merge-patch+json", patch.clone())
        .await;
    assert_eq!(r.body["metadata"]["generation"], 2);
    // The same annotations again change nothing.
    let r = c.patch(path, "application/merge-patch+json", patch).await;
    assert_eq!(r.body["metadata"]["generation"], 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn streaming_list_without_bookmarks_has_no_end_marker() {
    let sim = start(vec![node("n1"), app_pod()]).await;
    let c = Client::new(&sim);
    let (events, _) = c
        .watch(
            "/api/v1/namespaces/p/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            2,
            Duration::from_secs(2),
        )
        .await;
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["ADDED"]);
    sim.shutdown().await;
}

#[tokio::test]
async fn list_options_errors_list_every_cause() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let r = c
        .get("/api/v1/pods?sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]"
    );
    assert_eq!(r.body["details"]["group"], "meta.k8s.io");
    assert_eq!(r.body["details"]["kind"], "ListOptions");
    assert!(r.body["details"].get("name").is_none());
    assert_eq!(
        r.body["details"]["causes"][1],
        json!({"reason": "FieldValueForbidden", "field": "sendInitialEvents",
            "message": "Forbidden: sendInitialEvents is forbidden for list"})
    );
    let r = c
        .get("/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true")
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn compacted_watch_names_the_oldest_version() {
    let sim = start(vec![node("n1")]).await;
    let c = Client::new(&sim);
    let list = c.get("/api/v1/nodes").await;
    let rv: u64 = list.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    sim.compact_watch_history();
    let (events, _) = c
        .watch(
            "/api/v1/nodes?watch=true&resourceVersion=1",
            1,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
    assert_eq!(
        events[0]["object"]["message"],
        format!("too old resource version: 1 ({rv})")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn created_pods_get_admission_defaults() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let path = "/api/v1/namespaces/default/pods";
    let p = |name: &str, extra: Value| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i:1",
                "resources": {"requests": {"cpu": "100m"}}}]}});
        if let (Some(s), Some(e)) = (p["spec"].as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        p
    };
    let r = c.post(path, p("plain", json!({}))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let spec = &r.body["spec"];
    assert_eq!(spec["priority"], 0);
    assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    assert_eq!(spec["enableServiceLinks"], true);
    assert_eq!(
        spec["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ])
    );
    assert_eq!(r.body["status"]["qosClass"], "Burstable");
    let r = c
        .post(
            path,
            p(
                "critical",
                json!({"priorityClassName": "system-node-critical"}),
            ),
        )
        .await;
    assert_eq!(r.body["spec"]["priority"], 2_000_001_000);
    let r = c
        .post(path, p("unknown", json!({"priorityClassName": "nope"})))
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.body["message"],
        "pods \"unknown\" is forbidden: no PriorityClass with name nope was found"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn list_items_carry_no_type() {
    let sim = start(vec![node("n1"), app_pod()]).await;
    let c = Client::new(&sim);
    for path in [
        "/api/v1/pods",
        "/api/v1/pods?limit=1",
        "/api/v1/pods?labelSelector=app",
    ] {
        let r = c.get(path).await;
        assert_eq!(r.body["kind"], "PodList");
        let item = &r.body["items"][0];
        assert_eq!(item["metadata"]["name"], "app", "{path}");
        assert!(
            item.get("kind").is_none() && item.get("apiVersion").is_none(),
            "{path}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn token_reviews_answer_as_the_token_authenticator() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let review = |token: Value| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}})
    };
    let r = c.post(path, review(json!("garbage"))).await;
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );
    let r = c.post(path, review(json!(""))).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["message"],
        "token is required for TokenReview in authentication"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn bookmarks_come_only_once_the_resource_moved() {
    let sim = start(vec![node("n1"), app_pod()]).await;
    let c = Client::new(&sim);
    let rv = c.get("/api/v1/namespaces/p/pods").await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // 3 s: the pre-deadline bookmark would come at 1 s, the periodic one (5 s) never.
    let path = format!(
        "/api/v1/namespaces/p/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion={rv}"
    );
    let (quiet, ended) = c.watch(&path, 5, Duration::from_secs(6)).await;
    assert!(quiet.is_empty() && ended, "{quiet:?}");
    let other = pod("elsewhere", "x", "n1", json!({}), true);
    let watching = c.watch(&path, 5, Duration::from_secs(6));
    let (result, _) = tokio::join!(watching, async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        sim.apply(other).unwrap();
    });
    let (events, ended) = result;
    assert!(ended);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "BOOKMARK");
    assert_ne!(
        events[0]["object"]["metadata"]["resourceVersion"],
        json!(rv)
    );
    sim.shutdown().await;
}
