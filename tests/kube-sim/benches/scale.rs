//! kube-sim at cluster scale: `cargo bench -p kube-sim --bench scale`.
//!
//! Generates a synthetic cluster (default 5,000 nodes / 150,000 pods, as a JSON `List`), starts
//! the `kube-sim` binary on it as a child process with its controllers on, and measures:
//! - ready: from spawn to the `ready` line, and to "settled" (the store's resourceVersion stops
//!   moving for 2 s: the controllers have nothing left to do);
//! - idle CPU of the process over 10 s once settled (percent of one core);
//! - p50/p99 GET of a pod and the wall time of a full LIST of pods while the controllers
//!   replace 2,000 deleted pods (scheduling and starting them);
//! - peak RSS (`VmHWM` of the child).
//!
//! Environment: `KUBE_SIM_SCALE_NODES`, `KUBE_SIM_SCALE_PODS` (shape), `KUBE_SIM_SCALE_CHURN`
//! (pods deleted during the measurement, default 2000), `KUBE_SIM_SCALE_CONTROLLERS`
//! (`false` to measure the frozen mode), `KUBE_SIM_SCALE_READY_TIMEOUT` (seconds, default 300).
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

#[path = "common/cluster.rs"]
mod cluster;
use cluster::{Rng, write_cluster};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("scale bench: {msg}");
    std::process::exit(1)
}

/// `VmHWM` (peak RSS) and `VmRSS` of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// User + system CPU time of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)`; utime and stime are the 14th and 15th of the line.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

fn ticks_per_second() -> f64 {
    // sysconf(_SC_CLK_TCK) is 100 on every Linux this runs on.
    100.0
}

struct Server {
    child: Child,
    url: String,
    client: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the CA and the token back from the kubeconfig the child wrote.
fn client_for(kubeconfig: &std::path::Path) -> reqwest::Client {
    use base64::Engine;
    let text = std::fs::read_to_string(kubeconfig).unwrap_or_else(|e| fail(e));
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| fail(format!("kubeconfig lacks {key}")))
    };
    let ca = base64::engine::general_purpose::STANDARD
        .decode(field("certificate-authority-data:"))
        .unwrap_or_else(|e| fail(e));
    let token = field("token:");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}")
            .parse()
            .unwrap_or_else(|e| fail(e)),
    );
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap_or_else(|e| fail(e)))
        .default_headers(headers)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap_or_else(|e| fail(e))
}

impl Server {
    async fn get(&self, path: &str) -> Result<(u16, Vec<u8>), String> {
        let r = self
            .client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let code = r.status().as_u16();
        let body = r.bytes().await.map_err(|e| e.to_string())?;
        Ok((code, body.to_vec()))
    }

    async fn list_rv(&self) -> Option<u64> {
        let (_, body) = self.get("/api/v1/pods?limit=1").await.ok()?;
        let v: Value = serde_json::from_slice(&body).ok()?;
        v.pointer("/metadata/resourceVersion")?
            .as_str()?
            .parse()
            .ok()
    }
}

/// Pods whose Ready condition is True (one streamed LIST).
async fn count_ready(server: &Server) -> usize {
    let Ok((_, body)) = server.get("/api/v1/pods").await else {
        return 0;
    };
    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
    v["items"].as_array().map_or(0, |items| {
        items
            .iter()
            .filter(|p| {
                p.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
            .count()
    })
}

/// Waits until the resourceVersion has not moved and the process used under 20 % of a core
/// for 3 s; returns the time from `since` to the start of that quiet window.
async fn settle(server: &Server, pid: u32, since: Instant, timeout: u64) -> Duration {
    let window = Duration::from_secs(3);
    let mut last = None;
    let mut quiet_since = Instant::now();
    let mut ticks_at = cpu_ticks(pid);
    loop {
        if since.elapsed() > Duration::from_secs(timeout) {
            fail(format!("controllers did not settle within {timeout} s"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rv = server.list_rv().await;
        let quiet_for = quiet_since.elapsed();
        let busy = (cpu_ticks(pid) - ticks_at) as f64 / ticks_per_second();
        if rv.is_some() && rv == last && busy < 0.2 * quiet_for.as_secs_f64().max(0.5) {
            if quiet_for >= window {
                return quiet_since.duration_since(since);
            }
        } else {
            last = rv;
            quiet_since = Instant::now();
            ticks_at = cpu_ticks(pid);
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The bench's shape and limits, from the environment.
struct Settings {
    nodes: usize,
    pods: usize,
    churn: usize,
    ready_timeout: u64,
    controllers: String,
}

impl Settings {
    fn from_env() -> Self {
        Settings {
            nodes: env_num("KUBE_SIM_SCALE_NODES", 5000) as usize,
            pods: env_num("KUBE_SIM_SCALE_PODS", 150_000) as usize,
            churn: env_num("KUBE_SIM_SCALE_CHURN", 2000) as usize,
            ready_timeout: env_num("KUBE_SIM_SCALE_READY_TIMEOUT", 300),
            controllers: std::env::var("KUBE_SIM_SCALE_CONTROLLERS")
                .unwrap_or_else(|_| "true".into()),
        }
    }
}

/// Writes the synthetic cluster to `dir/cluster.json`, prints its size, and returns its path.
fn generate_snapshot(dir: &Path, settings: &Settings) -> PathBuf {
    let (nodes, pods) = (settings.nodes, settings.pods);
    let snap = dir.join("cluster.json");
    let t = Instant::now();
    let items = {
        let f = std::fs::File::create(&snap).unwrap_or_else(|e| fail(e));
        let mut w = std::io::BufWriter::new(f);
        let n = write_cluster(nodes, pods, &mut w).unwrap_or_else(|e| fail(e));
        w.flush().unwrap_or_else(|e| fail(e));
        n
    };
    let size = std::fs::metadata(&snap).map(|m| m.len()).unwrap_or(0);
    println!(
        "cluster: {nodes} nodes, {pods} pods, {items} objects, {:.0} MB JSON (generated in {:.1} s)",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    snap
}

/// Spawns kube-sim on `snap` and waits (at most the ready timeout) for its `ready` line;
/// returns the server and how long the line took.
fn start_server(snap: &Path, kubeconfig: &Path, settings: &Settings) -> (Server, Duration) {
    let ready_timeout = settings.ready_timeout;
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .arg("--snapshot")
        .arg(snap)
        .arg("--kubeconfig-out")
        .arg(kubeconfig)
        .arg(format!("--controllers={}", settings.controllers))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| fail(e));
    let pid = child.id();
    let stdout = child.stdout.take().unwrap_or_else(|| fail("no stdout"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = match rx.recv_timeout(Duration::from_secs(ready_timeout)) {
        Ok(l) => l,
        Err(_) => {
            let (hwm, _) = memory_kib(pid);
            let _ = child.kill();
            fail(format!(
                "not ready within {ready_timeout} s (peak RSS so far {:.0} MiB)",
                hwm as f64 / 1024.0
            ))
        }
    };
    let ready_line = start.elapsed();
    let url = line
        .trim()
        .strip_prefix("ready ")
        .unwrap_or_else(|| fail(format!("unexpected first line {line:?}")))
        .to_string();
    let server = Server {
        child,
        url,
        client: client_for(kubeconfig),
    };
    (server, ready_line)
}

/// The process's CPU use over the next 10 s, as a fraction of one core.
async fn idle_cpu(pid: u32) -> f64 {
    let c0 = cpu_ticks(pid);
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    (cpu_ticks(pid) - c0) as f64 / ticks_per_second() / t0.elapsed().as_secs_f64()
}

/// Namespace and name of every pod (one LIST).
async fn pod_names(server: &Server) -> Vec<(String, String)> {
    let (_, body) = server.get("/api/v1/pods").await.unwrap_or_else(|e| fail(e));
    let list: Value = serde_json::from_slice(&body).unwrap_or_else(|e| fail(e));
    list["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        p["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or("")
                            .to_string(),
                        p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes `victims` (50 at a time, grace period 0) in a task that returns how many
/// deletions succeeded.
fn spawn_deleter(server: &Server, victims: Vec<(String, String)>) -> JoinHandle<usize> {
    let client = server.client.clone();
    let url = server.url.clone();
    tokio::spawn(async move {
        let mut ok = 0usize;
        for chunk in victims.chunks(50) {
            let calls = chunk.iter().map(|(ns, name)| {
                client
                    .delete(format!("{url}/api/v1/namespaces/{ns}/pods/{name}"))
                    .json(&json!({"gracePeriodSeconds": 0}))
                    .send()
            });
            for r in futures::future::join_all(calls).await {
                if r.is_ok_and(|r| r.status().is_success()) {
                    ok += 1;
                }
            }
        }
        ok
    })
}

/// Latencies measured while the churn runs.
struct ChurnLatencies {
    /// GET of a random pod, in ms.
    gets: Vec<f64>,
    /// Full LIST of pods: seconds and body bytes.
    lists: Vec<(f64, usize)>,
}

/// GETs random pods of `all` for 20 s (and at least 500 times), with a full LIST every 250
/// GETs (at most 3).
async fn measure_gets_and_lists(server: &Server, all: &[(String, String)]) -> ChurnLatencies {
    let mut rng = Rng(7);
    let mut gets = Vec::new();
    let mut lists = Vec::new();
    let measure_until = Instant::now() + Duration::from_secs(20);
    let mut n = 0usize;
    while Instant::now() < measure_until || gets.len() < 500 {
        let (ns, name) = &all[rng.below(all.len() as u64) as usize];
        let t = Instant::now();
        let r = server
            .get(&format!("/api/v1/namespaces/{ns}/pods/{name}"))
            .await
            .unwrap_or_else(|e| fail(e));
        gets.push(t.elapsed().as_secs_f64() * 1000.0);
        if r.0 != 200 && r.0 != 404 {
            fail(format!("GET pod answered {}", r.0));
        }
        n += 1;
        if n.is_multiple_of(250) && lists.len() < 3 {
            let t = Instant::now();
            let (code, body) = server.get("/api/v1/pods").await.unwrap_or_else(|e| fail(e));
            let secs = t.elapsed().as_secs_f64();
            if code != 200 {
                fail(format!("LIST pods answered {code}"));
            }
            lists.push((secs, body.len()));
        }
        if gets.len() > 200_000 {
            break;
        }
    }
    ChurnLatencies { gets, lists }
}

/// Waits (at most the ready timeout; not at all in frozen mode) until `total` pods are Ready
/// again and returns how many are.
async fn wait_ready_again(server: &Server, total: usize, settings: &Settings) -> usize {
    let t = Instant::now();
    let mut ready_pods = 0;
    while t.elapsed() < Duration::from_secs(settings.ready_timeout) {
        ready_pods = count_ready(server).await;
        if ready_pods >= total || settings.controllers == "false" {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    println!(
        "after churn: {ready_pods} of {total} pods Ready again, {:.1} s after the measurement ended",
        t.elapsed().as_secs_f64()
    );
    ready_pods
}

#[tokio::main]
async fn main() {
    kube_sim::tls::install_crypto_provider();
    let settings = Settings::from_env();
    let (churn, ready_timeout) = (settings.churn, settings.ready_timeout);
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(e));
    let snap = generate_snapshot(dir.path(), &settings);

    let kubeconfig = dir.path().join("kubeconfig");
    let start = Instant::now();
    let (server, ready_line) = start_server(&snap, &kubeconfig, &settings);
    let pid = server.child.id();
    let (hwm_ready, rss_ready) = memory_kib(pid);
    let settled = settle(&server, pid, start, ready_timeout).await;
    println!(
        "ready: `ready` line after {:.1} s (peak RSS {:.0} MiB, RSS {:.0} MiB), controllers settled after {:.1} s (controllers={})",
        ready_line.as_secs_f64(),
        hwm_ready as f64 / 1024.0,
        rss_ready as f64 / 1024.0,
        settled.as_secs_f64(),
        settings.controllers
    );

    let idle = idle_cpu(pid).await;
    println!("idle CPU: {:.1} % of a core over 10 s", idle * 100.0);

    // Churn: delete pods of many Deployments so the controllers recreate, schedule and start
    // them while we measure.
    let all = pod_names(&server).await;
    if all.is_empty() {
        fail("no pods listed");
    }
    let step = (all.len() / churn.max(1)).max(1);
    let victims: Vec<(String, String)> = all.iter().step_by(step).take(churn).cloned().collect();
    let churn_start = Instant::now();
    let deleter = spawn_deleter(&server, victims);
    let ChurnLatencies { mut gets, lists } = measure_gets_and_lists(&server, &all).await;
    let deleted = deleter.await.unwrap_or(0);
    gets.sort_by(f64::total_cmp);
    println!(
        "during churn ({deleted} pods deleted in {:.1} s): GET pod p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms over {} GETs",
        churn_start.elapsed().as_secs_f64(),
        percentile(&gets, 0.5),
        percentile(&gets, 0.99),
        gets.last().copied().unwrap_or(f64::NAN),
        gets.len()
    );
    for (secs, bytes) in &lists {
        println!(
            "full LIST of pods: {secs:.2} s, {:.0} MB",
            *bytes as f64 / 1e6
        );
    }
    // Replacement pods: the controllers restore the number of Ready pods.
    wait_ready_again(&server, all.len(), &settings).await;
    let since = Instant::now();
    let settled = settle(&server, pid, since, ready_timeout).await;
    let idle = idle_cpu(pid).await;
    println!(
        "settled again after {:.1} s; idle CPU after churn: {:.1} % of a core over 10 s",
        settled.as_secs_f64(),
        idle * 100.0
    );

    let (hwm, rss) = memory_kib(pid);
    println!(
        "peak RSS (VmHWM): {:.0} MiB; RSS now {:.0} MiB",
        hwm as f64 / 1024.0,
        rss as f64 / 1024.0
    );
    drop(server);
}
