//! A tiny fake Kubernetes API over plain HTTP for the live tests: pod evictions (outcome chosen by
//! the pod name; `hang…` never answers), events, TokenReviews and SubjectAccessReviews. Every request is recorded.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// Recorded requests and switches.
#[derive(Default)]
pub struct FakeApi {
    /// (namespace, pod, body) of every eviction POST.
    pub evictions: Mutex<Vec<(String, String, Value)>>,
    /// Event bodies.
    pub events: Mutex<Vec<Value>>,
    /// SubjectAccessReview bodies.
    pub sars: Mutex<Vec<Value>>,
    /// Answer policy/v1 Evictions with a bare 404 (the group version is absent).
    pub v1_missing: AtomicBool,
    /// Objects served by LIST, by collection path (e.g. `/api/v1/pods`); other lists are empty.
    pub lists: Mutex<std::collections::HashMap<String, Vec<Value>>>,
    /// Number of LIST and WATCH calls.
    pub list_calls: std::sync::atomic::AtomicUsize,
}

/// LIST answers the configured items; WATCH (`watch=true`) stays open without events; a streaming
/// list (`sendInitialEvents=true`) is refused as a server without the WatchList feature refuses it.
async fn list_or_watch(State(api): State<Arc<FakeApi>>, uri: axum::http::Uri) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or_default();
    api.list_calls.fetch_add(1, Ordering::Relaxed);
    if query.split('&').any(|kv| kv == "sendInitialEvents=true") {
        // As kube-apiserver with its WatchList feature gate off: streaming lists are refused
        // (422), and the client lists in pages instead.
        return status(
            422,
            "Invalid",
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            None,
        );
    }
    if query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
    {
        let stream =
            futures::stream::pending::<Result<axum::body::Bytes, std::convert::Infallible>>();
        return (StatusCode::OK, axum::body::Body::from_stream(stream)).into_response();
    }
    let items = api
        .lists
        .lock()
        .unwrap()
        .get(&path)
        .cloned()
        .unwrap_or_default();
    axum::Json(json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})).into_response()
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": if code < 300 { "Success" } else { "Failure" },
        "message": message, "reason": reason, "code": code,
    });
    if let Some(d) = details {
        body["details"] = d;
    }
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

async fn evict(
    State(api): State<Arc<FakeApi>>,
    Path((ns, name)): Path<(String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    api.evictions
        .lock()
        .unwrap()
        .push((ns.clone(), name.clone(), body.clone()));
    if api.v1_missing.load(Ordering::Relaxed) && body["apiVersion"] == "policy/v1" {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    }
    if name.starts_with("deflect") {
        return status(
            429,
            "TooManyRequests",
            &format!(
                "admission webhook \"guard.kube-descheduler.io\" denied the request: Eviction triggered evacuation: Deployment {ns}/web has a single replica; a rolling restart is in progress"
            ),
            None,
        );
    }
    if name.starts_with("pdb") {
        return status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            Some(
                json!({"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]}),
            ),
        );
    }
    if name.starts_with("hang") {
        // Never answers (a hung connection); the client's call timeout must cut it short.
        std::future::pending::<()>().await;
    }
    if name.starts_with("boom") {
        return status(500, "InternalError", "etcd is on fire", None);
    }
    if name.starts_with("gone") {
        return status(
            404,
            "NotFound",
            &format!("pods \"{name}\" not found"),
            Some(json!({"name": name, "kind": "pods"})),
        );
    }
    status(201, "", "", None)
}

async fn event(State(api): State<Arc<FakeApi>>, axum::Json(body): axum::Json<Value>) -> Response {
    api.events.lock().unwrap().push(body.clone());
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

/// Tokens: "admin-token" → user admin, "viewer-token" → user viewer; anything else is invalid.
async fn token_review(axum::Json(mut body): axum::Json<Value>) -> Response {
    let token = body["spec"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let user = match token.as_str() {
        "admin-token" => Some("admin"),
        "viewer-token" => Some("viewer"),
        _ => None,
    };
    body["status"] = match user {
        Some(u) => {
            json!({"authenticated": true, "user": {"username": u, "uid": format!("{u}-uid"), "groups": ["system:authenticated"]}})
        }
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

/// Only user admin may do anything.
async fn sar(State(api): State<Arc<FakeApi>>, axum::Json(mut body): axum::Json<Value>) -> Response {
    api.sars.lock().unwrap().push(body.clone());
    let allowed = body["spec"]["user"] == "admin";
    body["status"] =
        json!({"allowed": allowed, "reason": if allowed { "" } else { "no RBAC rule" }});
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

/// Serves the fake API on 127.0.0.1; returns a client for it.
pub async fn start(api: Arc<FakeApi>) -> (kube::Client, SocketAddr) {
    let app = Router::new()
        .route("/api/v1/namespaces/{ns}/pods/{name}/eviction", post(evict))
        .route("/apis/events.k8s.io/v1/namespaces/{ns}/events", post(event))
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            post(token_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(sar),
        )
        .fallback(axum::routing::get(list_or_watch))
        .with_state(api);
    let addr = kube_descheduler_guard::testing::serve_on_loopback(app).await;
    let uri: http::Uri = format!("http://{addr}").parse().unwrap();
    let mut config = kube::Config::new(uri);
    // As `run` does: kube's default client retries 429/503/504 — never for evictions.
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    (client, addr)
}
