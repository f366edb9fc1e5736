//! The webhook wired as in the binary — watch caches (`KubeSource`) and the real restart actor on
//! a `kube::Client` — against a small fake API server (list/watch, GET, JSON PATCH with `test`
//! semantics, Events) that records every call, which checks the Kubernetes side end to end:
//! deflect → one restart → in flight from the watch cache → no second write.

mod guard_common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use kube::Client;
use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
use kube_descheduler::guard::cache::KubeSource;
use kube_descheduler::guard::decision::GuardConfig;
use kube_descheduler::guard::metrics::GuardMetrics;
use kube_descheduler::guard::server::{GuardState, router};
use kube_descheduler::guard::source::FactSource;
use kube_descheduler::restart::RestartActor;
use kube_descheduler::serving::tls::serve_https;
use serde_json::{Value, json};
use tokio::sync::broadcast;

struct Api {
    objects: Mutex<HashMap<&'static str, Vec<Value>>>,
    rv: AtomicUsize,
    patches: AtomicUsize,
    events: AtomicUsize,
    deployment_events: broadcast::Sender<Value>,
}

impl Api {
    fn next_rv(&self) -> String {
        (self.rv.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message});
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

fn list_kind(resource: &str) -> (&'static str, &'static str) {
    match resource {
        "deployments" => ("apps/v1", "DeploymentList"),
        "replicasets" => ("apps/v1", "ReplicaSetList"),
        _ => ("policy/v1", "PodDisruptionBudgetList"),
    }
}

async fn list_or_watch(
    State(api): State<Arc<Api>>,
    Path(resource): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let key: &'static str = match resource.as_str() {
        "deployments" => "deployments",
        "replicasets" => "replicasets",
        "poddisruptionbudgets" => "poddisruptionbudgets",
        _ => return status(404, "NotFound", "no such resource"),
    };
    if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
        let stream = if key == "deployments" {
            let rx = api.deployment_events.subscribe();
            tokio_stream_from(rx).boxed()
        } else {
            futures::stream::pending().boxed()
        };
        return Response::builder()
            .header("content-type", "application/json")
            .body(Body::from_stream(stream))
            .unwrap_or_default();
    }
    let items = api
        .objects
        .lock()
        .unwrap()
        .get(key)
        .cloned()
        .unwrap_or_default();
    let (api_version, kind) = list_kind(key);
    axum::Json(json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"resourceVersion": api.rv.load(Ordering::SeqCst).to_string()}, "items": items}))
    .into_response()
}

fn tokio_stream_from(
    rx: broadcast::Receiver<Value>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    let mut line = serde_json::to_vec(&ev).unwrap_or_default();
                    line.push(b'\n');
                    return Some((Ok(Bytes::from(line)), rx));
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

async fn get_pod(
    State(api): State<Arc<Api>>,
    Path((_ns, name)): Path<(String, String)>,
) -> Response {
    let pods = api
        .objects
        .lock()
        .unwrap()
        .get("pods")
        .cloned()
        .unwrap_or_default();
    match pods
        .into_iter()
        .find(|p| p["metadata"]["name"] == name.as_str())
    {
        Some(p) => axum::Json(p).into_response(),
        None => status(404, "NotFound", &format!("pods \"{name}\" not found")),
    }
}

async fn get_deployment(
    State(api): State<Arc<Api>>,
    Path((_ns, name)): Path<(String, String)>,
) -> Response {
    let deps = api
        .objects
        .lock()
        .unwrap()
        .get("deployments")
        .cloned()
        .unwrap_or_default();
    match deps
        .into_iter()
        .find(|d| d["metadata"]["name"] == name.as_str())
    {
        Some(d) => axum::Json(d).into_response(),
        None => status(404, "NotFound", "not found"),
    }
}

async fn patch_deployment(
    State(api): State<Arc<Api>>,
    Path((_ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let patch: json_patch::Patch = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => return status(400, "BadRequest", &e.to_string()),
    };
    let updated = {
        let mut objects = api.objects.lock().unwrap();
        let Some(d) = objects.get_mut("deployments").and_then(|v| {
            v.iter_mut()
                .find(|d| d["metadata"]["name"] == name.as_str())
        }) else {
            return status(404, "NotFound", "not found");
        };
        let mut next = d.clone();
        if let Err(e) = json_patch::patch(&mut next, &patch) {
            return status(422, "Invalid", &e.to_string());
        }
        next["metadata"]["resourceVersion"] = json!(api.next_rv());
        let generation = next["metadata"]["generation"].as_i64().unwrap_or(1);
        next["metadata"]["generation"] = json!(generation + 1);
        *d = next.clone();
        next
    };
    api.patches.fetch_add(1, Ordering::SeqCst);
    let _ = api
        .deployment_events
        .send(json!({"type": "MODIFIED", "object": updated}));
    axum::Json(updated).into_response()
}

async fn post_event(State(api): State<Arc<Api>>, body: Bytes) -> Response {
    api.events.fetch_add(1, Ordering::SeqCst);
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

fn cluster() -> HashMap<&'static str, Vec<Value>> {
    let labels = json!({"app": "web"});
    HashMap::from([
        (
            "deployments",
            vec![json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop", "uid": "dep-uid", "resourceVersion": "10", "generation": 2,
                    "annotations": {"deployment.kubernetes.io/revision": "3"},
                    "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}]},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
                "status": {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
            })],
        ),
        (
            "replicasets",
            vec![
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web-7d9f", "namespace": "shop", "uid": "rs-uid", "resourceVersion": "11",
                    "labels": {"app": "web", "pod-template-hash": "7d9f"},
                    "annotations": {"deployment.kubernetes.io/revision": "3"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "dep-uid", "controller": true}]},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
                "status": {"replicas": 1, "readyReplicas": 1}}),
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web-old", "namespace": "shop", "uid": "rs-old", "resourceVersion": "5",
                    "annotations": {"deployment.kubernetes.io/revision": "2"}},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels}},
                "status": {"replicas": 0}}),
            ],
        ),
        ("poddisruptionbudgets", vec![]),
        (
            "pods",
            vec![json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-7d9f-abcde", "namespace": "shop", "uid": "pod-uid", "labels": {"app": "web", "pod-template-hash": "7d9f"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "rs-uid", "controller": true}]},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            })],
        ),
    ])
}

async fn start_api() -> (Arc<Api>, Client) {
    let (tx, _) = broadcast::channel(64);
    let api = Arc::new(Api {
        objects: Mutex::new(cluster()),
        rv: AtomicUsize::new(20),
        patches: AtomicUsize::new(0),
        events: AtomicUsize::new(0),
        deployment_events: tx,
    });
    let app = Router::new()
        .route("/apis/apps/v1/{resource}", get(list_or_watch))
        .route("/apis/policy/v1/{resource}", get(list_or_watch))
        .route("/api/v1/namespaces/{ns}/pods/{name}", get(get_pod))
        .route(
            "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
            get(get_deployment).patch(patch_deployment),
        )
        .route(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events",
            post(post_event),
        )
        .with_state(api.clone());
    let client = kube_descheduler_guard::testing::fake_api_client(app).await;
    (api, client)
}

fn eviction(dry_run: bool) -> Value {
    kube_descheduler_guard::testing::eviction_review(
        "e2e-1",
        ("shop", "web-7d9f-abcde"),
        json!({"username": "kubectl-drain"}),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-7d9f-abcde", "namespace": "shop"},
            "deleteOptions": if dry_run { json!({"dryRun": ["All"]}) } else { json!({}) }}),
        false,
    )
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..100 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn drain_of_single_replica_deployment_restarts_once_and_then_waits() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (api, client) = start_api().await;
    let source = KubeSource::start(client.clone());
    wait_for("caches to sync", || source.ready()).await;
    assert!(source.deployment("shop", "web").is_some());
    assert_eq!(
        source.cache_sizes(),
        (1, 1, 0),
        "zero-replica ReplicaSets are not cached"
    );
    assert!(
        source
            .replica_set("shop", "web-7d9f")
            .await
            .unwrap()
            .is_some()
    );

    let metrics = Arc::new(GuardMetrics::default());
    let restarter = Arc::new(RestartActor::new(client, "guard-0", metrics));
    let state = Arc::new(GuardState::new(
        source.clone(),
        restarter,
        GuardConfig::default(),
    ));

    let dir = tempfile::tempdir().unwrap();
    let certs = generate(&CertsArgs::loopback(
        "guard",
        "kube-descheduler",
        dir.path(),
    ))
    .unwrap();
    write_files(dir.path(), &certs).unwrap();
    let (tls, _t) = guard_common::load_dir(dir.path(), Duration::from_secs(60)).await;
    let server = serve_https(router(state), "127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    let http = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(certs.ca_cert_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{}/validate/eviction", server.addr.port());
    let send = |body: Value| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            http.post(url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()["response"]
                .clone()
        }
    };

    // Dry run first: nothing written.
    let r = send(eviction(true)).await;
    assert_eq!(r["allowed"], true);
    assert_eq!(api.patches.load(Ordering::SeqCst), 0);

    // The eviction is deflected into exactly one restart.
    let r = send(eviction(false)).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 429);
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("Eviction triggered evacuation")
    );
    assert_eq!(api.patches.load(Ordering::SeqCst), 1);
    let d = api.objects.lock().unwrap()["deployments"][0].clone();
    let restarted_at =
        d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .clone();
    assert!(restarted_at.is_string());
    assert_eq!(
        d["metadata"]["annotations"]["kube-descheduler.io/restarted-at"],
        restarted_at
    );

    // The watch delivers the restart to the cache; retries are refused without writing again.
    wait_for("the watch to deliver the restart", || {
        source
            .deployment("shop", "web")
            .is_some_and(|d| d.restart.is_some())
    })
    .await;
    for _ in 0..3 {
        let r = send(eviction(false)).await;
        assert_eq!(r["status"]["code"], 429);
        assert!(
            r["status"]["message"]
                .as_str()
                .unwrap()
                .contains("a rolling restart is in progress")
        );
    }
    assert_eq!(
        api.patches.load(Ordering::SeqCst),
        1,
        "one restart per rollout"
    );
    wait_for("events on the Deployment and the Pod", || {
        api.events.load(Ordering::SeqCst) >= 2
    })
    .await;

    // The old pod is gone once the rollout is done: the drain's retry is allowed.
    api.objects.lock().unwrap().get_mut("pods").unwrap().clear();
    assert_eq!(send(eviction(false)).await["allowed"], true);
    server.shutdown(Duration::from_secs(1)).await.unwrap();
}
