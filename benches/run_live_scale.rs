//! Benchmark: one live `kube-descheduler run` cycle (not dry-run) at cluster scale, end to end.
//!
//! kube-sim (in this process, controllers on) serves the scale bench's synthetic cluster
//! (`tests/kube-sim/benches/common/cluster.rs`; default 5,000 nodes / 150,000 pods), with the
//! eviction guard (the release `kube-descheduler webhook`) registered as `webhook-config/base`
//! ships it. The release `kube-descheduler run` runs a PodLifeTime policy that evicts the oldest
//! `LIVE_SCALE_EVICT` pods (default 2,000) in one cycle at `--client-connection-qps 50`. The bench
//! then waits until the controllers have recreated, scheduled and started every replacement and
//! checks, failing (exit 1) otherwise:
//! - every Deployment is back at its desired Ready replicas, no pod is Pending;
//! - no single-replica Deployment reported 0 Ready replicas at any moment (the guard deflects
//!   their evictions into rolling restarts), read from kube-sim's change stream;
//! - no pod was evicted twice (the `Descheduled` Events per pod uid; every evicted pod has
//!   one, and deflected evictions are the only others);
//! - `descheduler_pods_evicted_total{result="success"}` equals the evictions kube-sim recorded
//!   (pods that got the `DisruptionTarget` condition from the Eviction API).
//!
//! Prints evictions per second over the cycle, the cycle's wall time and the time until every
//! replacement was Ready. Knobs: `LIVE_SCALE_SIZE` (`NODESxPODS`), `LIVE_SCALE_EVICT`,
//! `LIVE_SCALE_QPS`, `LIVE_SCALE_TIMEOUT` (seconds per wait, default 900).
//! Run: `cargo bench --bench run_live_scale`.

mod bench_common;
#[path = "../tests/e2e_common/mod.rs"]
mod e2e_common;

#[path = "../tests/kube-sim/benches/common/cluster.rs"]
mod cluster;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e_common::{Cluster, guarded};
use kube_sim::{Sim, SimHandle, SimOptions};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

fn fail(msg: String) -> ! {
    eprintln!("run_live_scale: {msg}");
    std::process::exit(1);
}

fn env_num(name: &str, default: u64) -> u64 {
    bench_common::env_number(name, default)
}

/// What the change stream showed while the cycle ran.
#[derive(Default)]
struct Observed {
    /// Pod uid → `namespace/name` of pods that got `DisruptionTarget` from the Eviction API.
    evicted: BTreeMap<String, String>,
    /// Single-replica Deployments seen with 0 Ready replicas.
    zero_ready: BTreeSet<String>,
    /// The stream lagged (the checks above are then incomplete).
    lagged: u64,
}

fn evicted_by_api(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "DisruptionTarget"
                    && c["status"] == "True"
                    && c["reason"] == "EvictionByEvictionAPI"
            })
        })
}

/// Records evictions and 0-Ready single-replica Deployments from kube-sim's change stream.
fn observe(sim: &SimHandle, seen: Arc<Mutex<Observed>>) -> tokio::task::JoinHandle<()> {
    let mut rx = sim.store().subscribe();
    tokio::spawn(async move {
        loop {
            let ev = match rx.recv().await {
                Ok(ev) => ev,
                Err(RecvError::Lagged(n)) => {
                    if let Ok(mut s) = seen.lock() {
                        s.lagged += n;
                    }
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let obj = &ev.object;
            let Ok(mut s) = seen.lock() else { return };
            match ev.gr {
                ("", "pods") if evicted_by_api(obj) => {
                    let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
                    let name = format!(
                        "{}/{}",
                        obj["metadata"]["namespace"].as_str().unwrap_or_default(),
                        obj["metadata"]["name"].as_str().unwrap_or_default()
                    );
                    s.evicted.insert(uid.to_string(), name);
                }
                ("apps", "deployments") if obj["spec"]["replicas"] == 1 => {
                    let ready = obj["status"]["readyReplicas"].as_i64().unwrap_or(0);
                    if ready == 0 && obj["metadata"]["deletionTimestamp"].is_null() {
                        s.zero_ready.insert(format!(
                            "{}/{}",
                            obj["metadata"]["namespace"].as_str().unwrap_or_default(),
                            obj["metadata"]["name"].as_str().unwrap_or_default()
                        ));
                    }
                }
                _ => {}
            }
        }
    })
}

fn ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Ready pods, Pending pods, and Deployments not at their desired Ready replicas.
fn census(sim: &SimHandle) -> (usize, usize, usize) {
    let pods = sim.list("v1", "Pod", None);
    let ready_pods = pods
        .iter()
        .filter(|p| ready(p) && p["metadata"]["deletionTimestamp"].is_null())
        .count();
    let pending = pods
        .iter()
        .filter(|p| p["status"]["phase"] == "Pending")
        .count();
    drop(pods);
    let behind = sim
        .list("apps/v1", "Deployment", None)
        .iter()
        .filter(|d| {
            let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
            d["status"]["readyReplicas"].as_i64().unwrap_or(0) != want
                || d["status"]["replicas"].as_i64().unwrap_or(0) != want
        })
        .count();
    (ready_pods, pending, behind)
}

/// Waits (bounded) until `want` pods are Ready, none Pending, every Deployment at its scale.
async fn wait_settled(sim: &SimHandle, want: usize, timeout: Duration, what: &str) -> Duration {
    let start = Instant::now();
    loop {
        let (ready_pods, pending, behind) = census(sim);
        if ready_pods == want && pending == 0 && behind == 0 {
            return start.elapsed();
        }
        if start.elapsed() > timeout {
            fail(format!(
                "{what}: after {:.0} s {ready_pods}/{want} pods Ready, {pending} Pending, \
                 {behind} Deployments behind",
                start.elapsed().as_secs_f64()
            ));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// `descheduler_pods_evicted_total{result="success"}` summed over its other labels.
fn evicted_total(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("descheduler_pods_evicted_total{") && l.contains("result=\"success\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Pod uid → number of `Descheduled` Events (their series counts included).
fn descheduled_events(sim: &SimHandle) -> HashMap<String, u64> {
    let mut out: HashMap<String, u64> = HashMap::new();
    for e in sim.list("events.k8s.io/v1", "Event", None) {
        if e["action"] != "Descheduled" || e["type"] != "Normal" {
            continue;
        }
        let uid = e["regarding"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let n = e["series"]["count"].as_u64().unwrap_or(1);
        *out.entry(uid).or_default() += n;
    }
    out
}

/// The cycle line the child logs: (seconds since spawn, cycle seconds, evicted).
type Cycle = (f64, f64, u64);

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (nodes, pods) = bench_common::size_from_env("LIVE_SCALE_SIZE");
    let evict = env_num("LIVE_SCALE_EVICT", 2000);
    let qps = env_num("LIVE_SCALE_QPS", 50);
    let timeout = Duration::from_secs(env_num("LIVE_SCALE_TIMEOUT", 900));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("runtime: {e}")));
    rt.block_on(run(nodes, pods, evict, qps, timeout));
}

async fn run(nodes: usize, pods: usize, evict: u64, qps: u64, timeout: Duration) {
    let cluster = start_cluster(nodes, pods, timeout).await;
    let (webhook, _certs) = guarded(&cluster, &[]).await;

    let seen = Arc::new(Mutex::new(Observed::default()));
    let watcher = observe(&cluster.sim, seen.clone());

    let policy_path = write_policy(&cluster, evict);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| fail(format!("free port: {e}")));
    let started = Instant::now();
    let (mut child, rx) = spawn_run(&cluster, &policy_path, qps, port, started);
    let cycle = wait_for_cycle(&mut child, &rx, started, timeout);
    let metrics = scrape_metrics(port).await;
    let _ = child.kill();
    let _ = child.wait();
    let metric_total = evicted_total(&metrics);

    let replaced = wait_settled(&cluster.sim, pods, timeout, "replacements").await;
    // The replacements are Ready: nothing the cycle caused is still in the change stream.
    tokio::time::sleep(Duration::from_secs(2)).await;
    watcher.abort();
    let deflections = webhook
        .metric("kube_descheduler_guard_deflections_total")
        .await;
    let events = descheduled_events(&cluster.sim);
    let s = seen
        .lock()
        .unwrap_or_else(|_| fail("observer poisoned".into()));
    let (at, cycle_s, logged) = cycle;
    println!(
        "\n| nodes | pods | evicted (metric) | evicted (kube-sim) | deflected | cycle s | \
         evictions/s | replaced and Ready after s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {nodes} | {pods} | {metric_total} | {} | {deflections} | {cycle_s:.1} | {:.1} | {:.1} |",
        s.evicted.len(),
        metric_total / cycle_s.max(0.001),
        replaced.as_secs_f64()
    );
    println!(
        "(cycle ended {at:.1} s after spawn, run logged {logged} evictions, qps {qps}; \
         loaded machine)"
    );
    let problems = problems(
        &s,
        &events,
        Evictions {
            metric_total,
            deflections,
            limit: evict,
        },
    );
    if !problems.is_empty() {
        fail(problems.join("; "));
    }
    println!("all checks passed");
}

/// kube-sim (controllers on) serving the scale cluster, settled (every pod Ready).
async fn start_cluster(nodes: usize, pods: usize, timeout: Duration) -> Cluster {
    let mut json = Vec::new();
    cluster::write_cluster(nodes, pods, &mut json).unwrap_or_else(|e| fail(format!("{e}")));
    let objects = match bench_common::list_items(json) {
        Ok(objects) => objects,
        Err(e) => fail(e),
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(format!("temp dir: {e}")));
    let loading = Instant::now();
    let sim = Sim::start(SimOptions {
        objects,
        kubeconfig_path: Some(dir.path().join("kubeconfig")),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| fail(format!("kube-sim: {e}")));
    // No webhook here: kube-sim's webhook calls need no client certificate.
    let cluster = Cluster {
        sim,
        dir,
        webhook_client: None,
        same_ca_other_client: None,
    };
    let settled = wait_settled(&cluster.sim, pods, timeout, "initial settle").await;
    println!(
        "kube-sim {nodes} nodes / {pods} pods, controllers on: loaded and settled in {:.1} s \
         (loaded machine)",
        loading.elapsed().as_secs_f64().max(settled.as_secs_f64())
    );
    cluster
}

/// Writes the PodLifeTime policy that evicts at most `evict` pods; its path.
fn write_policy(cluster: &Cluster, evict: u64) -> std::path::PathBuf {
    let policy = format!(
        "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictTotal: {evict}
profiles:
  - name: lifetime
    pluginConfig:
      - name: DefaultEvictor
        args: {{}}
      - name: PodLifeTime
        args:
          maxPodLifeTimeSeconds: 3600
    plugins:
      deschedule:
        enabled: [PodLifeTime]
"
    );
    let policy_path = cluster.dir.path().join("policy.yaml");
    std::fs::write(&policy_path, policy).unwrap_or_else(|e| fail(format!("policy: {e}")));
    policy_path
}

/// Starts `kube-descheduler run` (hourly cycles, JSON logs, metrics on `port`); its cycle lines
/// arrive on the channel, timed from `started`.
fn spawn_run(
    cluster: &Cluster,
    policy_path: &std::path::Path,
    qps: u64,
    port: u16,
    started: Instant,
) -> (std::process::Child, std::sync::mpsc::Receiver<Cycle>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .arg("run")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .arg("--policy-config-file")
        .arg(policy_path)
        .args(["--descheduling-interval", "1h", "--logging-format", "json"])
        .args(["--client-connection-qps", &qps.to_string()])
        .args(["--client-connection-burst", &qps.to_string()])
        .args(["--bind-address", "127.0.0.1", "--metrics-unauthenticated"])
        .arg(format!("--secure-port={port}"))
        .env("POD_NAME", "live-scale")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(format!("kube-descheduler run: {e}")));
    let (tx, rx) = std::sync::mpsc::channel::<Cycle>();
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let f = &v["fields"];
                if f["message"] == "descheduling cycle finished" {
                    let _ = tx.send((
                        started.elapsed().as_secs_f64(),
                        f["duration_seconds"].as_f64().unwrap_or(0.0),
                        f["evicted"].as_u64().unwrap_or(0),
                    ));
                } else if v["level"] == "ERROR" {
                    eprintln!("run: {line}");
                }
            }
        });
    }
    (child, rx)
}

/// Waits (bounded by `timeout` from `started`) for the child's first cycle line.
fn wait_for_cycle(
    child: &mut std::process::Child,
    rx: &std::sync::mpsc::Receiver<Cycle>,
    started: Instant,
    timeout: Duration,
) -> Cycle {
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(c) => return c,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(status)) = child.try_wait() {
                    fail(format!(
                        "kube-descheduler run exited before a cycle: {status}"
                    ));
                }
                if started.elapsed() > timeout {
                    let _ = child.kill();
                    fail("no descheduling cycle finished in time".into());
                }
            }
            Err(e) => fail(format!("run's log: {e}")),
        }
    }
}

/// The child's `/metrics` (empty when the body cannot be read).
async fn scrape_metrics(port: u16) -> String {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap_or_else(|e| fail(format!("client: {e}")))
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap_or_else(|e| fail(format!("metrics: {e}")))
        .text()
        .await
        .unwrap_or_default()
}

/// The evictions as `run` and the guard counted them.
struct Evictions {
    /// `descheduler_pods_evicted_total{result="success"}`.
    metric_total: f64,
    /// The guard's deflections.
    deflections: f64,
    /// `maxNoOfPodsToEvictTotal`.
    limit: u64,
}

/// What the checks found wrong: the change stream lagged, the metric disagrees with kube-sim, the
/// count is out of bounds, a single-replica Deployment went to 0 Ready, a pod was evicted twice,
/// or the `Descheduled` Events do not match the evictions (`events`: per pod uid).
fn problems(s: &Observed, events: &HashMap<String, u64>, counted: Evictions) -> Vec<String> {
    let Evictions {
        metric_total,
        deflections,
        limit: evict,
    } = counted;
    let twice: Vec<&String> = events
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(u, _)| u)
        .collect();
    let mut problems = Vec::new();
    if s.lagged > 0 {
        problems.push(format!("the change stream lagged by {} events", s.lagged));
    }
    if metric_total as usize != s.evicted.len() {
        problems.push(format!(
            "metric total {metric_total} != {} evictions recorded by kube-sim",
            s.evicted.len()
        ));
    }
    if metric_total < 1.0 || metric_total > evict as f64 {
        problems.push(format!("{metric_total} evictions, expected 1..={evict}"));
    }
    if !s.zero_ready.is_empty() {
        problems.push(format!(
            "single-replica Deployments at 0 Ready: {:?}",
            s.zero_ready.iter().take(10).collect::<Vec<_>>()
        ));
    }
    if !twice.is_empty() {
        problems.push(format!(
            "pods evicted twice: {:?}",
            twice.iter().take(10).collect::<Vec<_>>()
        ));
    }
    // Deflected evictions get their Event too (the note carries the guard's answer).
    let without_event = s
        .evicted
        .keys()
        .filter(|u| !events.contains_key(*u))
        .count();
    if without_event > 0 || events.len() as f64 > s.evicted.len() as f64 + deflections {
        problems.push(format!(
            "{} pods with a Descheduled Event for {} evicted and {deflections} deflected; \
             {without_event} evicted pods without one",
            events.len(),
            s.evicted.len()
        ));
    }
    problems
}
