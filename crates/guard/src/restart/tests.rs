//! Restart actor tests against a tiny fake API server (plain HTTP on loopback) that applies JSON
//! patches for real, so the `test` op decides races the way the API server does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::*;
use crate::metrics::GuardMetrics;

#[derive(Default)]
struct Fake {
    deployment: Mutex<Value>,
    patches: AtomicUsize,
    patch_attempts: AtomicUsize,
    events: Mutex<Vec<Value>>,
    fail_patch: Mutex<Option<u16>>,
    get_delay_ms: AtomicUsize,
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message});
    (StatusCode::from_u16(code).unwrap(), axum::Json(body)).into_response()
}

async fn get_dep(State(f): State<Arc<Fake>>) -> Response {
    let snapshot = f.deployment.lock().unwrap().clone();
    let delay = f.get_delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay as u64)).await;
    }
    axum::Json(snapshot).into_response()
}

async fn patch_dep(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    f.patch_attempts.fetch_add(1, Ordering::SeqCst);
    if let Some(code) = *f.fail_patch.lock().unwrap() {
        return status(code, "InternalError", "injected failure");
    }
    let patch: json_patch::Patch = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => return status(400, "BadRequest", &e.to_string()),
    };
    let mut d = f.deployment.lock().unwrap();
    let mut next = d.clone();
    if let Err(e) = json_patch::patch(&mut next, &patch) {
        return status(
            422,
            "Invalid",
            &format!("the server rejected our request due to an error in our request: {e}"),
        );
    }
    let rv: u64 = next["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    next["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
    let generation = next["metadata"]["generation"].as_i64().unwrap();
    next["metadata"]["generation"] = json!(generation + 1);
    *d = next.clone();
    f.patches.fetch_add(1, Ordering::SeqCst);
    axum::Json(next).into_response()
}

async fn post_event(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    f.events.lock().unwrap().push(v.clone());
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "d1", "resourceVersion": "100", "generation": 4},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
        "status": {"observedGeneration": 4, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    })
}

async fn start(fake: Arc<Fake>) -> Client {
    let app = Router::new()
        .route(
            "/apis/apps/v1/namespaces/shop/deployments/web",
            get(get_dep).patch(patch_dep),
        )
        .route(
            "/apis/events.k8s.io/v1/namespaces/shop/events",
            post(post_event),
        )
        .with_state(fake);
    crate::testing::fake_api_client(app).await
}

fn request(pod: &str) -> RestartRequest {
    RestartRequest {
        namespace: "shop".into(),
        deployment: "web".into(),
        pod: pod.into(),
        pod_uid: "p1".into(),
        requested_by: "system:serviceaccount:kube-system:drainer".into(),
        audit: Default::default(),
    }
}

fn actor(client: Client, name: &str) -> RestartActor {
    RestartActor::new(client, name, Arc::new(GuardMetrics::default()))
}

#[tokio::test]
async fn restart_sets_restarted_at_and_records_who_why_when() {
    let fake = Arc::new(Fake::default());
    *fake.deployment.lock().unwrap() = deployment();
    let client = start(fake.clone()).await;
    let outcome = actor(client, "guard-0").restart(request("web-abc")).await;
    let RestartOutcome::Restarted { at } = outcome else {
        panic!("expected Restarted, got {outcome:?}")
    };
    let d = fake.deployment.lock().unwrap().clone();
    let at_s = at.to_string();
    assert!(
        at_s.ends_with('Z') && at_s.len() == 20,
        "RFC 3339 UTC seconds: {at_s}"
    );
    assert_eq!(
        d["spec"]["template"]["metadata"]["annotations"][TEMPLATE_RESTARTED_AT],
        json!(at_s)
    );
    assert_eq!(d["metadata"]["annotations"][RESTARTED_AT], json!(at_s));
    let by = d["metadata"]["annotations"][RESTARTED_BY].as_str().unwrap();
    assert!(by.contains("guard-0") && by.contains("drainer"), "{by}");
    assert!(
        d["metadata"]["annotations"][RESTART_REASON]
            .as_str()
            .unwrap()
            .contains("shop/web-abc")
    );
    // The restart is now in flight (generation bumped, not yet observed).
    let typed: Deployment = serde_json::from_value(d).unwrap();
    assert_eq!(restart_in_flight(&typed), Some(at));
    // Events on the Deployment and the Pod.
    for _ in 0..50 {
        if fake.events.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = fake.events.lock().unwrap().clone();
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| e["regarding"]["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"Deployment") && kinds.contains(&"Pod"),
        "{events:?}"
    );
}

#[tokio::test]
async fn concurrent_requests_across_replicas_restart_once() {
    let fake = Arc::new(Fake::default());
    *fake.deployment.lock().unwrap() = deployment();
    // Slow reads so every replica reads the old version before anyone writes.
    fake.get_delay_ms.store(50, Ordering::SeqCst);
    let client = start(fake.clone()).await;
    let replicas: Vec<Arc<RestartActor>> = (0..3)
        .map(|i| Arc::new(actor(client.clone(), &format!("guard-{i}"))))
        .collect();
    let mut tasks = Vec::new();
    for i in 0..12 {
        let a = replicas[i % 3].clone();
        tasks.push(tokio::spawn(
            async move { a.restart(request("web-abc")).await },
        ));
    }
    let mut restarted = 0;
    let mut in_flight = 0;
    for t in tasks {
        match t.await.unwrap() {
            RestartOutcome::Restarted { .. } => restarted += 1,
            RestartOutcome::InFlight { .. } => in_flight += 1,
            RestartOutcome::Failed { error } => panic!("unexpected failure: {error}"),
        }
    }
    assert_eq!(
        fake.patches.load(Ordering::SeqCst),
        1,
        "exactly one write reached the Deployment"
    );
    assert_eq!((restarted, in_flight), (1, 11));
    assert!(
        fake.patch_attempts.load(Ordering::SeqCst) >= 2,
        "the race reached the CAS at least once"
    );
}

#[tokio::test]
async fn in_flight_restart_is_not_patched_again() {
    let fake = Arc::new(Fake::default());
    *fake.deployment.lock().unwrap() = deployment();
    let client = start(fake.clone()).await;
    let a = actor(client, "guard-0");
    assert!(matches!(
        a.restart(request("web-abc")).await,
        RestartOutcome::Restarted { .. }
    ));
    assert!(matches!(
        a.restart(request("web-abc")).await,
        RestartOutcome::InFlight { .. }
    ));
    assert_eq!(fake.patches.load(Ordering::SeqCst), 1);
    // Once the rollout completes, a new eviction restarts again.
    {
        let mut d = fake.deployment.lock().unwrap();
        let generation = d["metadata"]["generation"].clone();
        d["status"]["observedGeneration"] = generation;
    }
    let first_at = fake.deployment.lock().unwrap()["spec"]["template"]["metadata"]["annotations"]
        [TEMPLATE_RESTARTED_AT]
        .clone();
    // No sleep: even within the same second the new restartedAt differs, so a rollout starts.
    let outcome = a.restart(request("web-new")).await;
    let RestartOutcome::Restarted { at } = outcome else {
        panic!("expected Restarted, got {outcome:?}")
    };
    let first: Timestamp = first_at.as_str().unwrap().parse().unwrap();
    assert!(at > first, "{at} must be later than {first}");
    assert_eq!(fake.patches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn api_failure_is_reported_as_failed() {
    let fake = Arc::new(Fake::default());
    *fake.deployment.lock().unwrap() = deployment();
    *fake.fail_patch.lock().unwrap() = Some(500);
    let client = start(fake.clone()).await;
    let outcome = actor(client, "guard-0").restart(request("web-abc")).await;
    let RestartOutcome::Failed { error } = outcome else {
        panic!("expected Failed, got {outcome:?}")
    };
    assert!(error.contains("shop/web"), "{error}");
    assert_eq!(fake.patches.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn slow_api_times_out_within_budget() {
    let fake = Arc::new(Fake::default());
    *fake.deployment.lock().unwrap() = deployment();
    fake.get_delay_ms.store(3_000, Ordering::SeqCst);
    let client = start(fake.clone()).await;
    let a = actor(client, "guard-0").with_timeout(Duration::from_millis(200));
    let started = Instant::now();
    let outcome = a.restart(request("web-abc")).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(outcome, RestartOutcome::Failed { ref error } if error.contains("timed out")),
        "{outcome:?}"
    );
}

#[test]
fn patch_creates_missing_annotation_maps_and_tests_the_resource_version() {
    let mut d: Deployment = serde_json::from_value(deployment()).unwrap();
    d.spec.template.metadata = None;
    let at: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
    let patch = restart_patch(&d, "100", at, "me", "why");
    let v = serde_json::to_value(&patch).unwrap();
    assert_eq!(
        v[0],
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": "100"})
    );
    let mut doc = serde_json::to_value(&d).unwrap();
    json_patch::patch(&mut doc, &patch).unwrap();
    assert_eq!(
        doc["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
        json!("2026-11-22T12:00:00Z")
    );
    let mut stale = serde_json::to_value(&d).unwrap();
    stale["metadata"]["resourceVersion"] = json!("101");
    assert!(
        json_patch::patch(&mut stale, &patch).is_err(),
        "a changed resourceVersion fails the test op"
    );
}

#[test]
fn restart_time_is_strictly_later_than_the_current_one() {
    let mut d: Deployment = serde_json::from_value(deployment()).unwrap();
    let now: Timestamp = "2026-11-22T12:00:00.4Z".parse().unwrap();
    assert_eq!(
        next_restart_time(&d, now).to_string(),
        "2026-11-22T12:00:00Z"
    );
    d.spec.template.metadata.as_mut().unwrap().annotations = Some(
        [(
            TEMPLATE_RESTARTED_AT.to_string(),
            "2026-11-22T12:00:00Z".to_string(),
        )]
        .into(),
    );
    assert_eq!(
        next_restart_time(&d, now).to_string(),
        "2026-11-22T12:00:01Z"
    );
    d.spec.template.metadata.as_mut().unwrap().annotations = Some(
        [(
            TEMPLATE_RESTARTED_AT.to_string(),
            "2026-11-22T11:00:00Z".to_string(),
        )]
        .into(),
    );
    assert_eq!(
        next_restart_time(&d, now).to_string(),
        "2026-11-22T12:00:00Z"
    );
}
