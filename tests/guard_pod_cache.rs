//! The webhook's pod cache against kube-sim: real paginated list + watch of pods through
//! `KubeSource`, reviews through the real router, and the cache following creations and
//! deletions.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use jiff::Timestamp;
use kube_descheduler::guard::cache::KubeSource;
use kube_descheduler::guard::decision::GuardConfig;
use kube_descheduler::guard::server::{GuardState, router};
use kube_descheduler::guard::source::FactSource;
use kube_descheduler::restart::{RestartOutcome, RestartRequest, Restarter};
use serde_json::{Value, json};
use tower::ServiceExt;

#[derive(Default)]
struct FakeRestarter {
    calls: Mutex<Vec<RestartRequest>>,
}

impl Restarter for FakeRestarter {
    fn restart(&self, req: RestartRequest) -> BoxFuture<'_, RestartOutcome> {
        self.calls.lock().unwrap().push(req);
        Box::pin(std::future::ready(RestartOutcome::Restarted {
            at: Timestamp::now(),
        }))
    }
}

fn deployment(name: &str, replicas: usize) -> Vec<Value> {
    let hash = "5c6d7e8f";
    let rs = format!("{name}-{hash}");
    let labels = json!({"app": name, "pod-template-hash": hash});
    let mut out = vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop", "uid": format!("dep-{name}"), "generation": 1,
                "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "img"}]}}},
            "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                "readyReplicas": replicas, "availableReplicas": replicas}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": rs, "namespace": "shop", "uid": format!("rs-{name}"), "labels": labels,
                "annotations": {"deployment.kubernetes.io/revision": "1"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                    "uid": format!("dep-{name}"), "controller": true}]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "img"}]}}},
            "status": {"replicas": replicas, "readyReplicas": replicas}}),
    ];
    for i in 0..replicas {
        out.push(pod(name, &format!("{rs}-{i}")));
    }
    out
}

fn pod(app: &str, name: &str) -> Value {
    let hash = "5c6d7e8f";
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
            "labels": {"app": app, "pod-template-hash": hash},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-{hash}"),
                "uid": format!("rs-{app}"), "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "img"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn review(name: &str) -> Value {
    let user = kube_sim::UserInfo::new("system:serviceaccount:kube-system:drainer", &[]);
    kube_sim::admission::eviction_review(
        &format!("review-{name}"),
        "shop",
        name,
        &format!("uid-{name}"),
        &user,
    )
}

async fn call(app: &axum::Router, method: &str, path: &str, body: Option<Value>) -> String {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(match body {
            Some(b) => Body::from(serde_json::to_vec(&b).unwrap()),
            None => Body::empty(),
        })
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

async fn allowed(app: &axum::Router, name: &str) -> bool {
    let text = call(app, "POST", "/validate/eviction", Some(review(name))).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    v["response"]["allowed"].as_bool().unwrap()
}

fn pod_reads(metrics: &str, source: &str) -> u64 {
    let prefix = format!("kube_descheduler_guard_pod_reads_total{{source=\"{source}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Asserts the guard's pod reads so far: (from the cache, from the API).
async fn assert_pod_reads(app: &axum::Router, (cache, api): (u64, u64)) {
    let m = call(app, "GET", "/metrics", None).await;
    assert_eq!(
        (pod_reads(&m, "cache"), pod_reads(&m, "api")),
        (cache, api),
        "{m}"
    );
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

fn cached_pods(source: &KubeSource) -> Option<usize> {
    let (_, n, synced) = source.cache_status()[0];
    synced.then_some(n)
}

#[tokio::test]
async fn pod_cache_follows_the_cluster_and_serves_the_allow_path() {
    // More pods than one list page (500), so the initial list is paginated.
    let mut objects = vec![json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})];
    objects.extend(deployment("web", 3));
    objects.extend(deployment("solo", 1));
    objects.extend(deployment("batch", 600));
    let sim = kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        objects,
        ..Default::default()
    })
    .await
    .unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(sim.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let source = KubeSource::start(client);
    let restarter = Arc::new(FakeRestarter::default());
    let state = Arc::new(GuardState::new(
        source.clone(),
        restarter.clone(),
        GuardConfig::default(),
    ));
    let app = router(state);
    wait_for("caches", || {
        source.ready() && cached_pods(&source) == Some(604)
    })
    .await;

    // Healthy 3-replica Deployment: allowed from the cache.
    assert!(allowed(&app, "web-5c6d7e8f-0").await);
    assert_pod_reads(&app, (1, 0)).await;

    // A pod created after the initial list reaches the cache through the watch.
    sim.apply(pod("web", "web-5c6d7e8f-new")).unwrap();
    wait_for("the new pod in the cache", || {
        source.cached_pod("shop", "web-5c6d7e8f-new").is_some()
    })
    .await;
    assert!(allowed(&app, "web-5c6d7e8f-new").await);

    // A deleted pod leaves the cache; its eviction is a miss, read from the API: gone → allow.
    let def = kube_sim::resources::by_kind("v1", "Pod").unwrap();
    sim.store()
        .remove(def, "shop", "web-5c6d7e8f-1", None)
        .unwrap();
    wait_for("the deleted pod to leave the cache", || {
        source.cached_pod("shop", "web-5c6d7e8f-1").is_none()
    })
    .await;
    assert!(allowed(&app, "web-5c6d7e8f-1").await);
    assert_pod_reads(&app, (2, 1)).await;

    // Single-replica Deployment: the cached pod leads to a deflection, confirmed by a fresh read.
    assert!(!allowed(&app, "solo-5c6d7e8f-0").await);
    assert_eq!(restarter.calls.lock().unwrap().len(), 1);
    let m = call(&app, "GET", "/metrics", None).await;
    assert_eq!(pod_reads(&m, "recheck"), 1, "{m}");
    sim.shutdown().await;
}
