//! Eviction guard benchmark: decision + HTTP path over loopback TLS at a fixed request rate.
//!
//! `cargo bench --bench guard_http [-- --rate 2000 --count 20000]`
//!
//! Sends allow-path AdmissionReviews (a pod of a healthy 3-replica Deployment whose budget allows
//! disruptions) open-loop at `--rate` requests/s over HTTP/2 over TLS (ALPN h2, as the API server's webhook client negotiates), and
//! reports server-side latency (request received → response produced, measured by a middleware
//! around the real router) and client-side round trips. Three fact sources:
//! - `memory`: pod facts from memory (decision + parsing + serialisation only);
//! - `pod-cache`: the webhook's real `KubeSource`, its caches (pods included) fed by paginated
//!   lists and watches from kube-sim on loopback holding `--cache-pods` other pods as well —
//!   what the webhook does in a cluster once its pod cache has synced;
//! - `pod-get`: the pod read through a `kube::Client` GET from a fake API server on loopback
//!   (what the webhook does on a pod-cache miss, minus the network to a real API server).

#[path = "../tests/guard_common/mod.rs"]
mod guard_common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::core::Selector;
use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
use kube_descheduler::guard::cache::KubeSource;
use kube_descheduler::guard::decision::GuardConfig;
use kube_descheduler::guard::facts::{
    DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts,
};
use kube_descheduler::guard::server::{GuardState, router};
use kube_descheduler::guard::source::{FactSource, MemorySource, SourceError};
use kube_descheduler::guard::testing::{web_deployment, web_replica_set};
use kube_descheduler::restart::{RestartOutcome, RestartRequest, Restarter};
use kube_descheduler::serving::tls::{HttpsServer, load_with_reload, serve_https};
use serde_json::json;

struct NoRestart;
impl Restarter for NoRestart {
    fn restart(&self, _req: RestartRequest) -> BoxFuture<'_, RestartOutcome> {
        Box::pin(std::future::ready(RestartOutcome::Restarted {
            at: Timestamp::now(),
        }))
    }
}

/// Memory facts, but the pod is read with a real kube client from a fake API server.
struct PodGetSource {
    inner: MemorySource,
    client: kube::Client,
}

impl FactSource for PodGetSource {
    fn ready(&self) -> bool {
        true
    }
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodFacts>, SourceError>> {
        Box::pin(async move {
            let api: kube::Api<Pod> = kube::Api::namespaced(self.client.clone(), namespace);
            match api.get_opt(name).await {
                Ok(p) => Ok(p.as_ref().map(PodFacts::from_pod)),
                Err(e) => Err(SourceError::Api(e.to_string())),
            }
        })
    }
    fn replica_set<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<ReplicaSetFacts>>, SourceError>> {
        self.inner.replica_set(namespace, name)
    }
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentFacts>> {
        self.inner.deployment(namespace, name)
    }
    fn pdbs(&self, namespace: &str) -> Vec<Arc<PdbFacts>> {
        self.inner.pdbs(namespace)
    }
    fn pvc<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PvcFacts>, SourceError>> {
        self.inner.pvc(namespace, name)
    }
}

fn pod_json() -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d9f-abcde", "namespace": "shop", "uid": "pod-uid",
            "labels": {"app": "web", "pod-template-hash": "7d9f"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "rs-uid", "controller": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]},
        "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx:1.27",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"},
                           {"type": "ContainersReady", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}
    })
}

fn memory_cluster() -> MemorySource {
    let mut s = MemorySource::new();
    let pod: Pod = serde_json::from_value(pod_json()).expect("fixture pod");
    s.pods
        .insert("shop/web-7d9f-abcde".into(), PodFacts::from_pod(&pod));
    s.replica_sets
        .insert("shop/web-7d9f".into(), Arc::new(web_replica_set(3)));
    s.deployments
        .insert("shop/web".into(), Arc::new(web_deployment(3)));
    for i in 0..5 {
        let app = if i == 0 {
            "web".to_string()
        } else {
            format!("other-{i}")
        };
        s.pdbs.push(Arc::new(PdbFacts {
            namespace: "shop".into(),
            name: format!("pdb-{i}"),
            selector: Some(Selector::from_iter([("app".to_string(), app)])),
            disruptions_allowed: 1,
        }));
    }
    s
}

fn review(i: usize) -> Vec<u8> {
    let user = kube_sim::UserInfo::new(
        "system:serviceaccount:kube-system:cluster-autoscaler",
        &["system:serviceaccounts"],
    );
    let review = kube_sim::admission::eviction_review(
        &format!("bench-{i}"),
        "shop",
        "web-7d9f-abcde",
        "pod-uid",
        &user,
    );
    serde_json::to_vec(&review).unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn fmt_us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

async fn fake_api() -> kube::Client {
    let body = serde_json::to_vec(&pod_json()).unwrap_or_default();
    let app = axum::Router::new().route(
        "/api/v1/namespaces/shop/pods/web-7d9f-abcde",
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([("content-type", "application/json")], body) }
        }),
    );
    kube_descheduler_guard::testing::fake_api_client(app).await
}

/// The fixture cluster as API objects (pod, ReplicaSet, Deployment, 5 PDBs) plus `extra` other
/// pods in other namespaces, for kube-sim.
fn sim_objects(extra: usize) -> Vec<serde_json::Value> {
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}),
        pod_json(),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-7d9f", "namespace": "shop", "uid": "rs-uid",
                "labels": {"app": "web", "pod-template-hash": "7d9f"},
                "annotations": {"deployment.kubernetes.io/revision": "3"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "dep-uid", "controller": true}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d9f"}},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "7d9f"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
            "status": {"replicas": 3, "readyReplicas": 3}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "dep-uid", "generation": 2,
                "annotations": {"deployment.kubernetes.io/revision": "3"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
            "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}}),
    ];
    for i in 0..5 {
        let app = if i == 0 {
            "web".to_string()
        } else {
            format!("other-{i}")
        };
        out.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": format!("pdb-{i}"), "namespace": "shop"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}}));
    }
    for i in 0..extra {
        let mut p = pod_json();
        p["metadata"]["name"] = json!(format!("other-{i}"));
        p["metadata"]["namespace"] = json!(format!("team-{}", i % 50));
        p["metadata"]["uid"] = json!(format!("uid-{i}"));
        out.push(p);
    }
    out
}

/// kube-sim with [`sim_objects`], and the webhook's real `KubeSource` once all its caches,
/// pods included, have synced.
async fn sim_source(extra: usize) -> (kube_sim::SimHandle, Arc<KubeSource>) {
    let sim = kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        objects: sim_objects(extra),
        ..Default::default()
    })
    .await
    .expect("kube-sim");
    let kubeconfig =
        kube::config::Kubeconfig::read_from(sim.kubeconfig_path()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("client config");
    let source = KubeSource::start(kube::Client::try_from(config).expect("client"));
    let started = Instant::now();
    while !(source.ready() && source.cache_status().iter().all(|c| c.2)) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "caches did not sync"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        source.cached_pod("shop", "web-7d9f-abcde").is_some(),
        "the pod is cached"
    );
    (sim, source)
}

struct Report {
    server: Vec<Duration>,
    client: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
    /// Where the pods came from (`pod_reads` counters of the guard's metrics).
    pod_reads: String,
}

/// Serves the guard on `source` over HTTPS (certificates in `dir`, trusted through `ca`), sends
/// 500 warm-up reviews, then `count` reviews at `rate` per second, each on its own task; reports
/// the server-side and client-side latencies.
async fn run(
    source: Arc<dyn FactSource>,
    rate: u64,
    count: usize,
    dir: &std::path::Path,
    ca: &str,
) -> Report {
    let samples: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::with_capacity(count + 1000)));
    let (server, registry) = timed_guard(source, dir, samples.clone()).await;
    let host = "guard.kube-descheduler.svc";
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).expect("ca"))
        .resolve(host, server.addr)
        .http2_adaptive_window(true)
        .build()
        .expect("client");
    let url = format!("https://{host}:{}/validate/eviction", server.addr.port());
    let bodies: Vec<Vec<u8>> = (0..256).map(review).collect();

    // Warm-up: open connections, fill caches.
    for i in 0..500 {
        let _ = client
            .post(&url)
            .body(bodies[i % bodies.len()].clone())
            .send()
            .await;
    }
    if let Ok(mut s) = samples.lock() {
        s.clear();
    }

    let load = paced_load(&client, &url, &bodies, rate, count).await;
    let _ = server.shutdown(Duration::from_secs(1)).await;
    let server = samples.lock().map(|s| s.clone()).unwrap_or_default();
    let mut text = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    let pod_reads = text
        .lines()
        .filter_map(|l| l.strip_prefix("kube_descheduler_guard_pod_reads_total"))
        .collect::<Vec<_>>()
        .join(", ");
    Report {
        server,
        client: load.samples,
        errors: load.errors,
        elapsed: load.elapsed,
        pod_reads,
    }
}

/// The guard's router on `source`, served over HTTPS on a free local port with the
/// certificates in `dir`; each request's time in the server goes to `samples`. Also the
/// guard's metrics registry.
async fn timed_guard(
    source: Arc<dyn FactSource>,
    dir: &std::path::Path,
    samples: Arc<Mutex<Vec<Duration>>>,
) -> (HttpsServer, Arc<prometheus_client::registry::Registry>) {
    let (tls, _task) = load_with_reload(
        dir.join("tls.crt"),
        dir.join("tls.key"),
        Duration::from_secs(3600),
    )
    .await
    .expect("tls");
    let state = Arc::new(GuardState::new(
        source,
        Arc::new(NoRestart),
        GuardConfig::default(),
    ));
    let registry = state.registry.clone();
    let app = router(state).layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let sink = samples.clone();
            async move {
                let started = Instant::now();
                let resp = next.run(req).await;
                if let Ok(mut s) = sink.lock() {
                    s.push(started.elapsed());
                }
                resp
            }
        },
    ));
    let server = serve_https(app, "127.0.0.1:0".parse().expect("addr"), tls)
        .await
        .expect("serve");
    (server, registry)
}

/// What the client saw of a paced load.
struct Load {
    /// Latencies of the successful requests.
    samples: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
}

/// Posts `count` of `bodies` (round robin) to `url`, one every 1/`rate` s on its own task
/// (late ticks burst to catch up), and waits for all.
async fn paced_load(
    client: &reqwest::Client,
    url: &str,
    bodies: &[Vec<u8>],
    rate: u64,
    count: usize,
) -> Load {
    let client_samples: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::with_capacity(count)));
    let errors = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let period = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        ticker.tick().await;
        let (client, url, body) = (
            client.clone(),
            url.to_string(),
            bodies[i % bodies.len()].clone(),
        );
        let (cs, errors) = (client_samples.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let ok = match client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
            {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            };
            if ok {
                if let Ok(mut s) = cs.lock() {
                    s.push(t.elapsed());
                }
            } else {
                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed();
    let samples = client_samples.lock().map(|s| s.clone()).unwrap_or_default();
    Load {
        samples,
        errors: errors.load(std::sync::atomic::Ordering::Relaxed),
        elapsed,
    }
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

type Lean<F> = HashMap<String, HashMap<String, Arc<F>>>;

/// Builds the guard's caches for a synthetic large cluster from API objects (as the watchers do)
/// and reports the resident memory they add.
fn memory_estimate(deployments: usize, pdbs: usize) {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let before = rss_bytes();
    let mut deps: Lean<DeploymentFacts> = HashMap::new();
    let mut rss: Lean<ReplicaSetFacts> = HashMap::new();
    let mut budgets: Lean<PdbFacts> = HashMap::new();
    for i in 0..deployments {
        let ns = format!("team-{:04}", i % 2000);
        let name = format!("service-{i:06}-api");
        let labels = json!({"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "prod", "app.kubernetes.io/part-of": "platform"});
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "uid": format!("{i:08}-aaaa-bbbb-cccc-dddddddddddd"), "generation": 12,
                "labels": labels,
                "annotations": {"deployment.kubernetes.io/revision": "7", "meta.helm.sh/release-name": "platform"},
                "managedFields": [{"manager": "helm", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "api", "image": "registry.example/api:1.2.3", "env": [{"name": "A", "value": "x".repeat(200)}]}]}}},
            "status": {"observedGeneration": 12, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                "conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}
        }))
        .expect("deployment");
        let f = DeploymentFacts::from_deployment(&d);
        deps.entry(f.namespace.clone())
            .or_default()
            .insert(f.name.clone(), Arc::new(f));
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-7d9f8c6b5"), "namespace": ns, "uid": format!("{i:08}-rs-uid"),
                "labels": {"pod-template-hash": "7d9f8c6b5"},
                "annotations": {"deployment.kubernetes.io/revision": "7"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": format!("{i:08}-aaaa-bbbb-cccc-dddddddddddd"), "controller": true}]},
            "spec": {"replicas": 3, "selector": {}},
            "status": {"replicas": 3, "readyReplicas": 3}
        }))
        .expect("replicaset");
        let f = ReplicaSetFacts::from_replica_set(&rs);
        rss.entry(f.namespace.clone())
            .or_default()
            .insert(f.name.clone(), Arc::new(f));
    }
    for i in 0..pdbs {
        let p: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": format!("pdb-{i}"), "namespace": format!("team-{:04}", i % 2000)},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": format!("service-{i:06}-api")}}},
            "status": {"disruptionsAllowed": 1}
        }))
        .expect("pdb");
        let f = PdbFacts::from_pdb(&p);
        budgets
            .entry(f.namespace.clone())
            .or_default()
            .insert(f.name.clone(), Arc::new(f));
    }
    let after = rss_bytes();
    println!(
        "cache memory: {deployments} Deployments + {deployments} active ReplicaSets + {pdbs} PDBs as facts: +{:.1} MiB RSS (total RSS {:.1} MiB)",
        (after.saturating_sub(before)) as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    drop((deps, rss, budgets));
}

fn arg(args: &HashMap<String, String>, name: &str, default: u64) -> u64 {
    args.get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // `cargo bench` passes `--bench`; accept `--rate N --count N`.
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut args = HashMap::new();
    for pair in raw.windows(2) {
        if let Some(k) = pair[0].strip_prefix("--") {
            args.insert(k.to_string(), pair[1].clone());
        }
    }
    let rate = arg(&args, "rate", 2000);
    let count = arg(&args, "count", 20_000) as usize;
    let workers = arg(&args, "workers", 2) as usize;
    let cache_pods = arg(&args, "cache-pods", 10_000) as usize;
    let memory_deployments = arg(&args, "memory-deployments", 50_000) as usize;
    if memory_deployments > 0 {
        memory_estimate(memory_deployments, memory_deployments / 10);
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = generate(&CertsArgs {
            valid_days: 1,
            ..guard_common::certs_args(dir.path())
        })
        .expect("certs");
        write_files(dir.path(), &certs).expect("write certs");

        println!("eviction guard benchmark: allow path, {rate} req/s, {count} requests, {workers} runtime workers");
        println!("| source | target req/s | sent | errors | achieved req/s | server p50 | server p99 | server max | client p50 | client p99 |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        let memory: Arc<dyn FactSource> = Arc::new(memory_cluster());
        let pod_get: Arc<dyn FactSource> = Arc::new(PodGetSource { inner: memory_cluster(), client: fake_api().await });
        let (_sim, cached) = sim_source(cache_pods).await;
        let cached: Arc<dyn FactSource> = cached;
        let slow = (rate / 10).max(1);
        let scenarios = [
            ("memory", memory, rate, count),
            ("pod-cache", cached, rate, count),
            ("pod-get", pod_get.clone(), rate, count),
            ("pod-get", pod_get, slow, (count / 10).max(100)),
        ];
        let mut reads = Vec::new();
        for (name, source, rate, count) in scenarios {
            let mut r = run(source, rate, count, dir.path(), &certs.ca_cert_pem).await;
            r.server.sort();
            r.client.sort();
            println!(
                "| {name} | {rate} | {count} | {} | {:.0} | {} | {} | {} | {} | {} |",
                r.errors,
                count as f64 / r.elapsed.as_secs_f64(),
                fmt_us(percentile(&r.server, 0.50)),
                fmt_us(percentile(&r.server, 0.99)),
                fmt_us(r.server.last().copied().unwrap_or_default()),
                fmt_us(percentile(&r.client, 0.50)),
                fmt_us(percentile(&r.client, 0.99)),
            );
            reads.push(format!("{name} @ {rate}/s: {}", if r.pod_reads.is_empty() { "no pod lookups counted (source reads directly)" } else { &r.pod_reads }));
        }
        println!();
        println!("pod lookups (incl. warm-up): {}", reads.join("; "));
    });
}
