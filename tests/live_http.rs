//! The secure port's routes: health, delegated authn/z (fake TokenReview/SAR API), metrics, and
//! the trigger API (200/401/403/429/504) with a running loop; plus HTTPS with a self-signed cert.

mod live_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use kube_descheduler::live::auth::KubeAuthorizer;
use kube_descheduler::live::cycle_loop::{CycleExec, LoopConfig, Source, run_loop};
use kube_descheduler::live::http::{AppState, router};
use kube_descheduler::live::server::{TlsSource, serve_https};
use kube_descheduler::serving::health::Readiness;
use kube_descheduler::serving::metrics::Metrics;
use kube_descheduler::serving::trigger::{CycleSummary, trigger_channel};
use live_common::FakeApi;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

#[derive(Clone)]
struct SlowExec {
    length: Duration,
    done: Arc<AtomicUsize>,
}

impl CycleExec for SlowExec {
    fn run(&self, _source: Source, _stop: CancellationToken) -> BoxFuture<'static, CycleSummary> {
        let this = self.clone();
        Box::pin(async move {
            tokio::time::sleep(this.length).await;
            this.done.fetch_add(1, Ordering::SeqCst);
            CycleSummary {
                status: "completed".into(),
                evicted: 2,
                deflected: 1,
                skipped: 1,
                errors: 0,
                requested: 0,
                duration_seconds: this.length.as_secs_f64(),
                message: None,
            }
        })
    }
}

struct Setup {
    app: axum::Router,
    api: Arc<FakeApi>,
    ready: Readiness,
    done: Arc<AtomicUsize>,
    shutdown: CancellationToken,
}

async fn setup(cycle: Duration, metrics_auth: bool) -> Setup {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    let (trigger, queue) = trigger_channel();
    let done = Arc::new(AtomicUsize::new(0));
    let exec = SlowExec {
        length: cycle,
        done: done.clone(),
    };
    let shutdown = CancellationToken::new();
    let (_tx, rx) = tokio::sync::watch::channel(true);
    let sd = shutdown.clone();
    tokio::spawn(async move {
        let _keep = _tx;
        let cfg = LoopConfig {
            interval: Duration::ZERO,
            trigger_enabled: true,
            event_debounce: Duration::ZERO,
        };
        run_loop(&exec, cfg, queue, rx, sd).await
    });
    // Let the one-shot cycle pass.
    while done.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ready = Readiness::default();
    let app = router(AppState {
        metrics: Some(Arc::new(Metrics::new())),
        metrics_auth,
        trigger: Some(trigger),
        authz: Arc::new(KubeAuthorizer::new(client)),
        ready: ready.clone(),
    });
    Setup {
        app,
        api,
        ready,
        done,
        shutdown,
    }
}

async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let code = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// A POST of `uri` (a trigger of the cycle) as the admin.
async fn trigger(app: &axum::Router, uri: &str) -> (StatusCode, String) {
    call(app, "POST", uri, Some("admin-token")).await
}

/// The status of a GET of `uri`, with `token` as the bearer token.
async fn status(app: &axum::Router, uri: &str, token: Option<&str>) -> StatusCode {
    call(app, "GET", uri, token).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_open_and_readiness_follows_sync() {
    let s = setup(Duration::from_millis(10), true).await;
    assert_eq!(status(&s.app, "/healthz", None).await, StatusCode::OK);
    assert_eq!(
        status(&s.app, "/readyz", None).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    s.ready.set(true);
    assert_eq!(status(&s.app, "/readyz", None).await, StatusCode::OK);
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_token_allowed_to_get_metrics() {
    let s = setup(Duration::from_millis(10), true).await;
    assert_eq!(
        status(&s.app, "/metrics", None).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&s.app, "/metrics", Some("forged")).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&s.app, "/metrics", Some("viewer-token")).await,
        StatusCode::FORBIDDEN
    );
    let (code, body) = call(&s.app, "GET", "/metrics", Some("admin-token")).await;
    assert_eq!(code, StatusCode::OK);
    assert!(body.contains("descheduler_build_info"), "{body}");
    let sars = s.api.sars.lock().unwrap().clone();
    let last = sars.last().unwrap();
    assert_eq!(last["spec"]["nonResourceAttributes"]["path"], "/metrics");
    assert_eq!(last["spec"]["nonResourceAttributes"]["verb"], "get");
    assert_eq!(last["spec"]["user"], "admin");
    assert_eq!(last["spec"]["uid"], "admin-uid");
    assert_eq!(last["spec"]["groups"][0], "system:authenticated");
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_be_left_open() {
    let s = setup(Duration::from_millis(10), false).await;
    assert_eq!(status(&s.app, "/metrics", None).await, StatusCode::OK);
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_runs_a_cycle_for_an_allowed_caller() {
    let s = setup(Duration::from_millis(300), true).await;
    let path = "/api/v1/descheduler/run";
    assert_eq!(
        call(&s.app, "POST", path, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        call(&s.app, "POST", path, Some("viewer-token")).await.0,
        StatusCode::FORBIDDEN
    );
    let sars = s.api.sars.lock().unwrap().clone();
    assert_eq!(
        sars.last().unwrap()["spec"]["nonResourceAttributes"]["path"],
        path
    );
    assert_eq!(
        sars.last().unwrap()["spec"]["nonResourceAttributes"]["verb"],
        "create"
    );
    assert_eq!(
        call(&s.app, "GET", path, Some("admin-token")).await.0,
        StatusCode::METHOD_NOT_ALLOWED
    );

    let app = s.app.clone();
    let first = tokio::spawn(async move { trigger(&app, path).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (code, body) = trigger(&s.app, path).await;
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let (code, body) = first.await.unwrap();
    assert_eq!(code, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["evicted"], 2);
    assert_eq!(v["deflected"], 1);
    assert_eq!(v["skipped"], 1);
    assert_eq!(v["errors"], 0);
    assert!(v["durationSeconds"].as_f64().unwrap() > 0.0);
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_times_out_with_504_and_the_cycle_still_completes() {
    let s = setup(Duration::from_millis(2500), true).await;
    let before = s.done.load(Ordering::SeqCst);
    let (code, body) = trigger(&s.app, "/api/v1/descheduler/run?timeoutSeconds=1").await;
    assert_eq!(code, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(s.done.load(Ordering::SeqCst), before, "still running");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        s.done.load(Ordering::SeqCst),
        before + 1,
        "completed and accounted"
    );
    assert_eq!(
        trigger(&s.app, "/api/v1/descheduler/run?timeoutSeconds=zero")
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_after_shutdown_is_503() {
    let s = setup(Duration::from_millis(10), true).await;
    s.shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (code, body) = trigger(&s.app, "/api/v1/descheduler/run").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_https_with_a_self_signed_certificate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = setup(Duration::from_millis(10), true).await;
    let serving = serve_https(
        s.app.clone(),
        "127.0.0.1:0".parse().unwrap(),
        TlsSource::SelfSigned(vec!["localhost".into()]),
    )
    .await
    .unwrap();
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let resp = http
        .get(format!("https://localhost:{}/healthz", serving.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    serving.shutdown(Duration::from_millis(100)).await;
    s.shutdown.cancel();
}
