//! The responder against a tiny fake API server (plain HTTP on loopback): the pod, the
//! Eviction's status writes and Events; the guard's decision on an in-memory source with a
//! recording restarter.

use std::sync::Mutex;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};

use super::*;
use crate::rate::{RateLimits, parse_rate};
use crate::testing::{RecordingRestarter, fake_api_client, single_replica_source};

const POD: &str = "web-7d9f-abcde";

#[derive(Default)]
struct Fake {
    pod_present: Mutex<bool>,
    statuses: Mutex<Vec<Value>>,
    events: Mutex<Vec<Value>>,
}

async fn get_pod(State(f): State<Arc<Fake>>) -> Response {
    if *f.pod_present.lock().expect("lock") {
        axum::Json(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "namespace": "shop", "uid": "pod-uid"}}))
        .into_response()
    } else {
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound", "message": "not found"});
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
    }
}

async fn put_status(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    f.statuses.lock().expect("lock").push(v.clone());
    axum::Json(v).into_response()
}

async fn post_event(State(f): State<Arc<Fake>>, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    f.events.lock().expect("lock").push(v.clone());
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

async fn fake_api(fake: Arc<Fake>) -> Client {
    let app = Router::new()
        .route(&format!("/api/v1/namespaces/shop/pods/{POD}"), get(get_pod))
        .route(
            "/apis/lifecycle.k8s.io/v1alpha1/namespaces/shop/evictions/e/status",
            put(put_status),
        )
        .route(
            "/apis/events.k8s.io/v1/namespaces/shop/events",
            post(post_event),
        )
        .with_state(fake);
    fake_api_client(app).await
}

async fn responder(
    namespace_burst: u32,
    trusted: &[&str],
) -> (Responder, Arc<Fake>, Arc<RecordingRestarter>) {
    let fake = Arc::new(Fake::default());
    *fake.pod_present.lock().expect("lock") = true;
    let client = fake_api(fake.clone()).await;
    let source = single_replica_source();
    let rate = parse_rate("1/1h").expect("rate");
    let restarter = Arc::new(RecordingRestarter::default());
    let state = GuardState::new(
        Arc::new(source),
        restarter.clone(),
        crate::GuardConfig::default(),
    )
    .with_rate_limits(RateLimits {
        rate,
        burst: 100,
        namespace_rate: rate,
        namespace_burst,
    });
    let config = ResponderConfig {
        trusted_requesters: trusted.iter().map(|s| (*s).to_owned()).collect(),
        ..ResponderConfig::default()
    };
    let r = Responder::new(Arc::new(state), client, config, "guard-0");
    (r, fake, restarter)
}

fn eviction(state: &str, intent: &str) -> Eviction {
    let now = Timestamp::now();
    serde_json::from_value(json!({
        "apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "Eviction",
        "metadata": {"name": "e", "namespace": "shop", "uid": "e-uid", "resourceVersion": "7"},
        "spec": {"target": {"pod": {"name": POD, "uid": "pod-uid"}}},
        "status": {
            "requesters": [{"name": "acme.io/drainer", "intent": intent}],
            "targetResponders": [
                {"name": RESPONDER_NAME, "priority": 9000, "state": state},
                {"name": "imperative-eviction.k8s.io/evictor", "priority": 100, "state": "Inactive"}
            ],
            "responders": [{"name": RESPONDER_NAME, "startTime": now.to_string()},
                           {"name": "imperative-eviction.k8s.io/evictor"}]
        }
    }))
    .expect("an Eviction")
}

fn ours(status: &Value) -> Value {
    status["status"]["responders"][0].clone()
}

/// Our entry in the first status written to the fake API.
fn first_status(fake: &Fake) -> Value {
    ours(&fake.statuses.lock().expect("lock")[0])
}

/// Asserts that `status`'s message contains `part`.
fn assert_message_has(status: &Value, part: &str) {
    assert!(
        status["message"].as_str().is_some_and(|m| m.contains(part)),
        "{status}"
    );
}

async fn look(r: &mut Responder, e: &Eviction) {
    let uid = e.uid().unwrap_or_default();
    match turn_of(e, RESPONDER_NAME) {
        Turn::Active {
            pod,
            withdrawn,
            requesters,
        } => r.respond(e, &uid, &pod, withdrawn, &requesters).await,
        Turn::Over { state } => r.forget(e, &uid, &state).await,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_rollout_is_started_followed_with_heartbeats_and_completed_once_the_pod_is_gone() {
    let (mut r, fake, restarter) = responder(25, &[]).await;
    look(&mut r, &eviction("Active", "Eviction")).await;
    assert_eq!(restarter.count(), 1);
    let first = first_status(&fake);
    assert!(
        first["heartbeatTime"].is_string() && first["completionTime"].is_null(),
        "{first}"
    );
    assert_message_has(&first, "Rolling restart of Deployment shop/web");
    // The pod goes: completion, and no second restart.
    *fake.pod_present.lock().expect("lock") = false;
    look(&mut r, &eviction("Active", "Eviction")).await;
    assert_eq!(restarter.count(), 1, "restarted twice");
    let statuses = fake.statuses.lock().expect("lock").clone();
    let last = ours(statuses.last().expect("a status"));
    assert!(last["completionTime"].is_string(), "{last}");
    assert_message_has(&last, "is gone");
}

#[tokio::test]
async fn a_withdrawal_before_the_rollout_restarts_nothing_and_is_reported() {
    let (mut r, fake, restarter) = responder(25, &[]).await;
    look(&mut r, &eviction("Active", "Withdrawn")).await;
    assert!(restarter.count() == 0);
    let s = first_status(&fake);
    assert!(s["completionTime"].is_string(), "{s}");
    assert_message_has(&s, "nothing was restarted");
    let events = fake.events.lock().expect("lock").clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "EvictionWithdrawn");
    assert_eq!(events[0]["regarding"]["name"], POD);
}

#[tokio::test]
async fn an_empty_bucket_waits_and_a_cancellation_then_restarts_nothing() {
    let (mut r, fake, restarter) = responder(0, &[]).await;
    // Started a minute ago: a heartbeat is due, so the wait is reported.
    let mut e = eviction("Active", "Eviction");
    if let Some(mine) = e
        .status
        .as_mut()
        .and_then(|s| s.responders.as_mut())
        .and_then(|r| r.first_mut())
    {
        mine.start_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now() - jiff::SignedDuration::from_secs(60),
        ));
    }
    look(&mut r, &e).await;
    assert!(restarter.count() == 0);
    let s = first_status(&fake);
    assert!(
        s["completionTime"].is_null() && s["heartbeatTime"].is_string(),
        "{s}"
    );
    // Every requester withdrew; the controller canceled our turn.
    look(&mut r, &eviction("Canceled", "Withdrawn")).await;
    assert!(restarter.count() == 0);
    let events = fake.events.lock().expect("lock").clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("nothing was restarted")),
        "{events:?}"
    );
}

#[tokio::test]
async fn untrusted_requesters_are_passed_on_without_a_write() {
    let (mut r, fake, restarter) = responder(25, &["trusted.io/drainer"]).await;
    look(&mut r, &eviction("Active", "Eviction")).await;
    assert!(restarter.count() == 0);
    let s = first_status(&fake);
    assert!(s["completionTime"].is_string(), "{s}");
    assert_message_has(&s, "passing the eviction on");
}
