//! Webhook memory benchmark: peak RSS of the real `kube-descheduler webhook` process on a
//! synthetic cluster (default 5,000 nodes / 150,000 pods, `src/synth.rs`), served by kube-sim.
//!
//! `cargo bench --bench guard_rss` (env `GUARD_RSS_SIZE=5000x150000`, `GUARD_RSS_REVIEWS=2000`).
//!
//! kube-sim runs in this process with the snapshot loaded and its controllers off (the cluster
//! holds still); the webhook is the release binary in its own process, pointed at kube-sim by a
//! kubeconfig. The bench waits until all four watch caches (pods, Deployments, ReplicaSets,
//! PodDisruptionBudgets) report synced on `/metrics` and `/readyz` answers 200, sends eviction
//! reviews for pods spread over the cluster, then reads `VmHWM` (peak RSS) and `VmRSS` from
//! `/proc/PID/status` of the webhook.

#[path = "../tests/guard_common/mod.rs"]
mod guard_common;

mod bench_common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
use serde_json::{Value, json};

const HOST: &str = "guard.kube-descheduler.svc";

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("guard_rss: {msg}");
    std::process::exit(1)
}

/// `VmHWM` and `VmRSS` of a process, in KiB (0 when unreadable).
fn memory_kib(pid: u32) -> (u64, u64) {
    let field = |name: &str| bench_common::proc_kib(pid, name).unwrap_or(0);
    (field("VmHWM:"), field("VmRSS:"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| fail(format!("no free port: {e}")))
}

fn review(ns: &str, name: &str, uid: &str, i: usize) -> Value {
    let user = kube_sim::UserInfo::new("system:serviceaccount:kube-system:drainer", &[]);
    let mut review =
        kube_sim::admission::eviction_review(&format!("rss-{i}"), ns, name, uid, &user);
    // Dry run (`?dryRun=All`): every decision path runs, nothing is written to the cluster.
    review["request"]["dryRun"] = json!(true);
    review["request"]["options"]["dryRun"] = json!(["All"]);
    review
}

struct Webhook {
    child: Child,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_webhook(dir: &Path, kubeconfig: &Path, port: u16) -> Webhook {
    let log = std::fs::File::create(dir.join("webhook.log"))
        .unwrap_or_else(|e| fail(format!("webhook log: {e}")));
    let err = log
        .try_clone()
        .unwrap_or_else(|e| fail(format!("webhook log: {e}")));
    let child = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .arg("webhook")
        .arg("--tls-cert-file")
        .arg(dir.join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(dir.join("tls.key"))
        .args(["--bind-address", "127.0.0.1", "--port", &port.to_string()])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| fail(format!("starting the webhook: {e}")));
    Webhook { child }
}

fn metric(text: &str, line_prefix: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// A pod to review: namespace, name and uid.
type Target = (String, String, String);

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (nodes, pods) = bench_common::size_from_env("GUARD_RSS_SIZE");
    let reviews: usize = bench_common::env_number("GUARD_RSS_REVIEWS", 2000);
    let file = bench_common::cluster_file(nodes, pods).unwrap_or_else(|e| fail(e));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("runtime: {e}")));
    runtime.block_on(async move {
        let t = Instant::now();
        let sim = start_sim(&file).await;
        let sim_load = t.elapsed();
        let (targets, pod_count) = review_targets(&sim, reviews);

        let dir = tempfile::tempdir().unwrap_or_else(|e| fail(format!("tempdir: {e}")));
        let certs = generate(&CertsArgs {
            valid_days: 1,
            ..guard_common::certs_args(dir.path())
        })
        .unwrap_or_else(|e| fail(format!("certs: {e}")));
        write_files(dir.path(), &certs).unwrap_or_else(|e| fail(format!("certs: {e}")));
        let port = free_port();
        let guard = Guard {
            client: https_client(&certs.ca_cert_pem, port),
            port,
        };

        let started = Instant::now();
        let mut webhook = start_webhook(dir.path(), sim.kubeconfig_path(), port);
        let pid = webhook.child.id();
        let (ready_after, synced_after) =
            wait_for_sync(&guard, &mut webhook, dir.path(), pod_count, started).await;
        let (hwm_synced, rss_synced) = memory_kib(pid);

        let t = Instant::now();
        let (allowed, denied) = send_reviews(&guard, &targets).await;
        let review_time = t.elapsed();
        let metrics = match guard.client.get(guard.url("/metrics")).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => fail(format!("metrics: {e}")),
        };
        let (hwm, rss) = memory_kib(pid);
        drop(webhook);

        let mib = |kib: u64| kib as f64 / 1024.0;
        println!(
            "eviction guard memory: {nodes} nodes / {pod_count} pods (kube-sim load {:.1} s)",
            sim_load.as_secs_f64()
        );
        println!(
            "| pods cached | ready (readyz) | all caches synced | peak RSS at sync | RSS at sync | reviews | allowed / refused | pod lookups | peak RSS (VmHWM) | RSS after reviews |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|");
        println!(
            "| {pod_count} | {:.1} s | {:.1} s | {:.1} MiB | {:.1} MiB | {} in {:.1} s | {allowed} / {denied} | {} | **{:.1} MiB** | {:.1} MiB |",
            ready_after.as_secs_f64(),
            synced_after.as_secs_f64(),
            mib(hwm_synced),
            mib(rss_synced),
            targets.len(),
            review_time.as_secs_f64(),
            pod_reads(&metrics),
            mib(hwm),
            mib(rss),
        );
        sim.shutdown().await;
    });
}

/// kube-sim with the snapshot in `file` loaded and its controllers off.
async fn start_sim(file: &Path) -> kube_sim::SimHandle {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| fail(format!("reading {}: {e}", file.display())));
    let objects = kube_sim::snapshot::parse(&text).unwrap_or_else(|e| fail(e));
    drop(text);
    kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        objects,
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| fail(format!("kube-sim: {e}")))
}

/// Up to `reviews` pods spread evenly over the cluster, and how many pods it holds.
fn review_targets(sim: &kube_sim::SimHandle, reviews: usize) -> (Vec<Target>, usize) {
    let all_pods = sim.list("v1", "Pod", None);
    let step = (all_pods.len() / reviews.max(1)).max(1);
    let targets = all_pods
        .iter()
        .step_by(step)
        .take(reviews)
        .map(|p| {
            let m = &p["metadata"];
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (s("namespace"), s("name"), s("uid"))
        })
        .collect();
    (targets, all_pods.len())
}

/// An HTTPS client that trusts `ca_pem` and reaches [`HOST`] at `127.0.0.1:port`.
fn https_client(ca_pem: &str, port: u16) -> reqwest::Client {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(ca_pem.as_bytes())
                .unwrap_or_else(|e| fail(format!("ca: {e}"))),
        )
        .resolve(HOST, ([127, 0, 0, 1], port).into())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| fail(format!("client: {e}")))
}

/// The webhook as the bench reaches it.
struct Guard {
    client: reqwest::Client,
    port: u16,
}

impl Guard {
    fn url(&self, path: &str) -> String {
        format!("https://{HOST}:{}{path}", self.port)
    }
}

/// Waits (at most 10 minutes) until `/readyz` answers 200 and `/metrics` shows all four caches
/// synced with every pod cached; returns when it was ready and when synced, after `started`.
async fn wait_for_sync(
    guard: &Guard,
    webhook: &mut Webhook,
    dir: &Path,
    pod_count: usize,
    started: Instant,
) -> (Duration, Duration) {
    let mut ready_after = None;
    loop {
        if let Ok(Some(status)) = webhook.child.try_wait() {
            let log = std::fs::read_to_string(dir.join("webhook.log")).unwrap_or_default();
            fail(format!("webhook exited with {status}:\n{log}"));
        }
        if started.elapsed() > Duration::from_secs(600) {
            fail("caches did not sync within 10 minutes");
        }
        if ready_after.is_none()
            && guard
                .client
                .get(guard.url("/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        {
            ready_after = Some(started.elapsed());
        }
        let metrics = match guard.client.get(guard.url("/metrics")).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let synced = ["pods", "deployments", "replicasets", "poddisruptionbudgets"]
            .iter()
            .all(|r| {
                metric(
                    &metrics,
                    &format!("kube_descheduler_guard_cache_synced{{resource=\"{r}\"}}"),
                ) == Some(1.0)
            });
        let cached = metric(
            &metrics,
            "kube_descheduler_guard_cache_objects{resource=\"pods\"}",
        );
        if let Some(ready) = ready_after
            && synced
            && cached == Some(pod_count as f64)
        {
            return (ready, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Sends a dry-run eviction review for each target, one at a time; how many were allowed and
/// how many refused.
async fn send_reviews(guard: &Guard, targets: &[Target]) -> (usize, usize) {
    let mut allowed = 0usize;
    let mut denied = 0usize;
    for (i, (ns, name, uid)) in targets.iter().enumerate() {
        let resp = guard
            .client
            .post(guard.url("/validate/eviction"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&review(ns, name, uid, i)).unwrap_or_default())
            .send()
            .await;
        let v: Value = match resp {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(e) => fail(format!("review: {e}")),
        };
        match v["response"]["allowed"].as_bool() {
            Some(true) => allowed += 1,
            Some(false) => denied += 1,
            None => fail(format!("bad review response: {v}")),
        }
    }
    (allowed, denied)
}

/// The guard's pod lookups by source (`cache 1990, api 10, recheck 0`) from its metrics.
fn pod_reads(metrics: &str) -> String {
    let reads: Vec<String> = ["cache", "api", "recheck"]
        .iter()
        .map(|s| {
            let n = metric(
                metrics,
                &format!("kube_descheduler_guard_pod_reads_total{{source=\"{s}\"}}"),
            )
            .unwrap_or(0.0);
            format!("{s} {n}")
        })
        .collect();
    reads.join(", ")
}
