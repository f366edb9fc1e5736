//! Benchmark: `kube-descheduler plan --kubeconfig` (the release binary, a child process) against
//! kube-sim (in this process, controllers off) serving the synthetic cluster of `src/synth.rs`
//! (default 5,000 nodes / 150,000 pods, the plan_scale bench's shape).
//!
//! Measures first how long kube-sim takes to serve every kind `plan` reads to a bare client (the
//! 11 kinds listed concurrently in pages of 500, each page's bytes read and dropped: nothing
//! decoded but the continue token), then `plan --kubeconfig -o json` end to end (spawn to exit,
//! the bundled example policy) with its peak resident size (VmHWM, printed by the child's
//! `--stats`). Targets (docs/performance.md): wall ≤ list time + 1 s, peak RSS ≤ 300 MiB; a missed target
//! exits 1. Knobs: `PLAN_LIVE_SIZE` (`NODESxPODS`), `PLAN_LIVE_RUNS` (default 1).
//! Run: `cargo bench --bench plan_live_scale`.

mod bench_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube_descheduler::cluster::kinds::Kind;
use kube_sim::{Sim, SimOptions};
use serde_json::Value;

const MIB: f64 = 1024.0 * 1024.0;

fn fail(msg: String) -> ! {
    eprintln!("plan_live_scale: {msg}");
    std::process::exit(1);
}

#[derive(serde::Deserialize)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

#[derive(serde::Deserialize)]
struct Page {
    #[serde(default)]
    metadata: Option<PageMeta>,
}

/// Lists `kind` in pages of 500 with a bare client; returns the bytes read.
async fn list_kind(client: kube::Client, kind: Kind) -> Result<usize, String> {
    let mut bytes = 0;
    let mut cont: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(c) = &cont {
            lp = lp.continue_token(c);
        }
        let req = kube::core::Request::new(kind.path())
            .list(&lp)
            .map_err(|e| e.to_string())?;
        let text = client.request_text(req).await.map_err(|e| e.to_string())?;
        bytes += text.len();
        let page: Page = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        cont = page
            .metadata
            .and_then(|m| m.continue_)
            .filter(|c| !c.is_empty());
        if cont.is_none() {
            return Ok(bytes);
        }
    }
}

/// Every kind listed concurrently; (seconds, bytes).
async fn bare_list(client: &kube::Client) -> (f64, usize) {
    let started = Instant::now();
    let tasks: Vec<_> = Kind::ALL
        .iter()
        .map(|&k| tokio::spawn(list_kind(client.clone(), k)))
        .collect();
    let mut bytes = 0;
    for t in tasks {
        match t.await {
            Ok(Ok(b)) => bytes += b,
            Ok(Err(e)) => fail(format!("bare list: {e}")),
            Err(e) => fail(format!("bare list task: {e}")),
        }
    }
    (started.elapsed().as_secs_f64(), bytes)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (nodes, pods) = bench_common::size_from_env("PLAN_LIVE_SIZE");
    let runs: usize = bench_common::env_number("PLAN_LIVE_RUNS", 1).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("runtime: {e}")));
    rt.block_on(run(nodes, pods, runs));
}

async fn run(nodes: usize, pods: usize, runs: usize) {
    let objects = bench_common::synth_objects(nodes, pods, 7).unwrap_or_else(|e| fail(e));
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(format!("temp dir: {e}")));
    let kubeconfig = dir.path().join("kubeconfig");
    let sim = Sim::start(SimOptions {
        objects,
        controllers: false,
        kubeconfig_path: Some(kubeconfig.clone()),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| fail(format!("kube-sim: {e}")));
    let served = sim.list("v1", "Pod", None).len();
    println!("kube-sim {nodes} nodes / {served} pods, controllers off");
    let client = bare_client(&sim.kubeconfig_yaml()).await;

    let mut failed = false;
    for round in 1..=runs {
        let (list_s, bytes) = bare_list(&client).await;
        let (wall, stats) = plan_stats(&kubeconfig);
        let planned_pods = stats["pods"].as_u64().unwrap_or(0);
        if planned_pods as usize != served {
            fail(format!(
                "plan saw {planned_pods} pods, kube-sim serves {served}"
            ));
        }
        failed |= !report_run(round, (list_s, bytes), wall, &stats);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    std::mem::forget(sim);
    if failed {
        std::process::exit(1);
    }
}

/// A client of kube-sim as `plan --kubeconfig` builds it.
async fn bare_client(kubeconfig_yaml: &str) -> kube::Client {
    let config = kube::config::Kubeconfig::from_yaml(kubeconfig_yaml)
        .unwrap_or_else(|e| fail(format!("kubeconfig: {e}")));
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .unwrap_or_else(|e| fail(format!("kubeconfig: {e}")));
    kube_descheduler::cluster::client::client(config)
        .unwrap_or_else(|e| fail(format!("client: {e}")))
}

/// Runs `plan --kubeconfig -o json --stats`: its wall time (spawn to exit) and the `--stats` line
/// it printed.
fn plan_stats(kubeconfig: &std::path::Path) -> (f64, Value) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "plan",
            "-o",
            "json",
            "--now",
            "2026-01-10T00:00:00Z",
            "--stats",
        ])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| fail(format!("plan: {e}")));
    let wall = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        fail(format!("plan exited {:?}: {stderr}", out.status.code()));
    }
    let stats = stderr
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| fail(format!("no --stats line: {stderr}")));
    (wall, stats)
}

/// Prints one run's line against the targets (wall ≤ list + 1 s, peak RSS ≤ 300 MiB); whether
/// both were met. `(list_s, bytes)`: the bare list's seconds and bytes.
fn report_run(round: usize, (list_s, bytes): (f64, usize), wall: f64, stats: &Value) -> bool {
    let rss_mib = stats["peakRssKiB"].as_f64().unwrap_or(0.0) * 1024.0 / MIB;
    let read_s = stats["loadSeconds"].as_f64().unwrap_or(0.0);
    let wall_ok = wall <= list_s + 1.0;
    let rss_ok = rss_mib <= 300.0;
    println!(
        "run {round}: bare list {list_s:.2} s ({:.0} MiB); plan --kubeconfig wall {wall:.2} s \
         (read {read_s:.2} s, cycle {:.2} s) [{}: ≤ list + 1 s], peak RSS {rss_mib:.0} MiB \
         [{}: ≤ 300 MiB], {} evictions",
        bytes as f64 / MIB,
        stats["cycleSeconds"].as_f64().unwrap_or(0.0),
        if wall_ok { "ok" } else { "MISSED" },
        if rss_ok { "ok" } else { "MISSED" },
        stats["evictions"],
    );
    wall_ok && rss_ok
}
