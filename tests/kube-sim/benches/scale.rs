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
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

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

/// splitmix64: a deterministic generator (the cluster is the same on every run).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const NAMESPACES: [&str; 5] = ["default", "team-a", "team-b", "team-c", "batch"];
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const T0: &str = "2026-01-01T00:00:00Z";

/// Writes the cluster: namespaces, Ready nodes, Deployments of 1–20 replicas with their
/// ReplicaSet and Running/Ready pods (10 % with required pod anti-affinity per host, 8 % with
/// node affinity), and a PDB for a fifth of the Deployments with more than two replicas.
fn write_cluster(nodes: usize, pods: usize, out: &mut impl Write) -> std::io::Result<usize> {
    let mut rng = Rng(20_261_125);
    let mut items = 0usize;
    out.write_all(b"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{},\"items\":[\n")?;
    let mut emit = |v: Value, out: &mut dyn Write| -> std::io::Result<()> {
        if items > 0 {
            out.write_all(b",\n")?;
        }
        items += 1;
        serde_json::to_writer(&mut *out, &v).map_err(std::io::Error::other)
    };
    for ns in NAMESPACES {
        emit(
            json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns}}),
            out,
        )?;
    }
    for i in 0..nodes {
        let cpu = [16u64, 32, 64][rng.below(3) as usize];
        let alloc =
            json!({"cpu": cpu.to_string(), "memory": format!("{}Gi", cpu * 4), "pods": "110"});
        emit(
            json!({"apiVersion":"v1","kind":"Node","metadata":{"name":format!("node-{i}"),
                "labels":{"kubernetes.io/hostname":format!("node-{i}"),
                    "topology.kubernetes.io/zone":ZONES[i % 3],
                    "disktype": if rng.below(2) == 0 {"ssd"} else {"hdd"}}},
              "spec":{},
              "status":{"capacity":alloc,"allocatable":alloc,
                "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady",
                    "message":"kubelet is posting ready status",
                    "lastHeartbeatTime":T0,"lastTransitionTime":T0}]}}),
            out,
        )?;
    }
    let mut left = pods;
    let mut d = 0usize;
    while left > 0 {
        let ns = NAMESPACES[d % NAMESPACES.len()];
        let app = format!("app-{d}");
        let replicas = (1 + rng.below(20) as usize).min(left);
        let hash = format!("{:08x}", rng.next() as u32);
        let rs = format!("{app}-{hash}");
        let labels = json!({"app": app, "pod-template-hash": hash});
        let mut pod_spec = json!({"containers":[{"name":"c","image":format!("registry.example.com/{app}:1"),
            "resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}]});
        match rng.below(100) {
            0..10 => {
                pod_spec["affinity"] = json!({"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
                    {"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app":app}}}]}});
            }
            10..18 => {
                pod_spec["affinity"] = json!({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{
                    "nodeSelectorTerms":[{"matchExpressions":[{"key":"disktype","operator":"In","values":["ssd","hdd"]}]}]}}});
            }
            _ => {}
        }
        let ready = json!({"replicas":replicas,"readyReplicas":replicas,"availableReplicas":replicas,
            "updatedReplicas":replicas,"observedGeneration":1});
        emit(
            json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":app,"namespace":ns,
                "uid":format!("dep-{d}"),"generation":1,"creationTimestamp":T0,
                "annotations":{"deployment.kubernetes.io/revision":"1"}},
              "spec":{"replicas":replicas,"selector":{"matchLabels":{"app":app}},
                "template":{"metadata":{"labels":{"app":app}},"spec":pod_spec}},
              "status":ready}),
            out,
        )?;
        emit(
            json!({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":rs,"namespace":ns,
                "uid":format!("rs-{d}"),"generation":1,"creationTimestamp":T0,"labels":labels,
                "annotations":{"deployment.kubernetes.io/revision":"1"},
                "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":app,
                    "uid":format!("dep-{d}"),"controller":true,"blockOwnerDeletion":true}]},
              "spec":{"replicas":replicas,"selector":{"matchLabels":labels},
                "template":{"metadata":{"labels":labels},"spec":pod_spec}},
              "status":ready}),
            out,
        )?;
        if replicas > 2 && rng.below(5) == 0 {
            emit(
                json!({"apiVersion":"policy/v1","kind":"PodDisruptionBudget",
                    "metadata":{"name":app,"namespace":ns,"generation":1},
                    "spec":{"maxUnavailable":1,"selector":{"matchLabels":{"app":app}}}}),
                out,
            )?;
        }
        let base = rng.below(nodes as u64) as usize;
        for r in 0..replicas {
            let node = (base + r * 7 + rng.below(3) as usize) % nodes;
            let mut spec = pod_spec.clone();
            spec["nodeName"] = json!(format!("node-{node}"));
            emit(
                json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":format!("{rs}-{r:05}"),
                    "namespace":ns,"uid":format!("pod-{d}-{r}"),"creationTimestamp":T0,"labels":labels,
                    "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":rs,
                        "uid":format!("rs-{d}"),"controller":true,"blockOwnerDeletion":true}]},
                  "spec":spec,
                  "status":{"phase":"Running","startTime":T0,"podIP":format!("10.{}.{}.{}", node / 250, node % 250, r + 2),
                    "conditions":[{"type":"Ready","status":"True","lastTransitionTime":T0}],
                    "containerStatuses":[{"name":"c","image":format!("registry.example.com/{app}:1"),
                        "imageID":"","ready":true,"restartCount":0,"started":true,
                        "state":{"running":{"startedAt":T0}}}]}}),
                out,
            )?;
        }
        left -= replicas;
        d += 1;
    }
    out.write_all(b"\n]}\n")?;
    Ok(items)
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

#[tokio::main]
async fn main() {
    kube_sim::tls::install_crypto_provider();
    let nodes = env_num("KUBE_SIM_SCALE_NODES", 5000) as usize;
    let pods = env_num("KUBE_SIM_SCALE_PODS", 150_000) as usize;
    let churn = env_num("KUBE_SIM_SCALE_CHURN", 2000) as usize;
    let ready_timeout = env_num("KUBE_SIM_SCALE_READY_TIMEOUT", 300);
    let controllers = std::env::var("KUBE_SIM_SCALE_CONTROLLERS").unwrap_or_else(|_| "true".into());
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(e));
    let snap = dir.path().join("cluster.json");
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

    let kubeconfig = dir.path().join("kubeconfig");
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .arg("--snapshot")
        .arg(&snap)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg(format!("--controllers={controllers}"))
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
        client: client_for(&kubeconfig),
    };
    let (hwm_ready, rss_ready) = memory_kib(pid);
    let settled = settle(&server, pid, start, ready_timeout).await;
    println!(
        "ready: `ready` line after {:.1} s (peak RSS {:.0} MiB, RSS {:.0} MiB), controllers settled after {:.1} s (controllers={controllers})",
        ready_line.as_secs_f64(),
        hwm_ready as f64 / 1024.0,
        rss_ready as f64 / 1024.0,
        settled.as_secs_f64()
    );

    let c0 = cpu_ticks(pid);
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = (cpu_ticks(pid) - c0) as f64 / ticks_per_second() / t0.elapsed().as_secs_f64();
    println!("idle CPU: {:.1} % of a core over 10 s", idle * 100.0);

    // Churn: delete pods of many Deployments so the controllers recreate, schedule and start
    // them while we measure.
    let (_, body) = server.get("/api/v1/pods").await.unwrap_or_else(|e| fail(e));
    let list: Value = serde_json::from_slice(&body).unwrap_or_else(|e| fail(e));
    let all: Vec<(String, String)> = list["items"]
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
        .unwrap_or_default();
    drop(list);
    if all.is_empty() {
        fail("no pods listed");
    }
    let step = (all.len() / churn.max(1)).max(1);
    let victims: Vec<(String, String)> = all.iter().step_by(step).take(churn).cloned().collect();
    let churn_start = Instant::now();
    let deleter = {
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
    };
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
    let t = Instant::now();
    let mut ready_pods = 0;
    while t.elapsed() < Duration::from_secs(ready_timeout) {
        ready_pods = count_ready(&server).await;
        if ready_pods >= all.len() || controllers == "false" {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    println!(
        "after churn: {ready_pods} of {} pods Ready again, {:.1} s after the measurement ended",
        all.len(),
        t.elapsed().as_secs_f64()
    );
    let since = Instant::now();
    let settled = settle(&server, pid, since, ready_timeout).await;
    let c0 = cpu_ticks(pid);
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = (cpu_ticks(pid) - c0) as f64 / ticks_per_second() / t0.elapsed().as_secs_f64();
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
