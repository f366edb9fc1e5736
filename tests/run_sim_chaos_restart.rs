//! Process-level chaos: the API server (kube-sim) restarts while the real `run` process is in the
//! middle of a cycle of slow evictions — its connections are reset, its watches break, and its
//! resourceVersions are too old when it resumes. `run` must recover in place (same PID), evict no
//! pod twice, finish the evictions it had not done, never leave the app without a Ready replica,
//! trigger no rollout, and keep serving `/healthz` (with `/readyz` true again once it resynced).

mod run_sim_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kube_sim::{FaultRule, SimHandle};
use run_sim_common::*;
use serde_json::{Value, json};

/// The Deployment whose pods are evicted.
const APP: &str = "web";
const REPLICAS: usize = 8;
/// Each eviction waits this long in the API server, so the cycle lasts several seconds.
const EVICTION_LATENCY: Duration = Duration::from_millis(600);

fn deployment() -> Value {
    kube_sim::fixtures::workload("Deployment", NS, APP, REPLICAS, 1)
}

fn terminating(p: &Value) -> bool {
    p.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// Ready and not terminating: a replica that serves.
fn serving(p: &Value) -> bool {
    pod_ready(p) && !terminating(p)
}

/// The Deployment's pods all run on `n1`; then `n1` is tainted and two free nodes join, so the
/// policy evicts every pod and the replacements land elsewhere.
async fn cluster_on_n1() -> SimHandle {
    let sim = start_sim(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        node(TAINTED, false),
        deployment(),
    ])
    .await;
    let s = sim.clone();
    wait_for("all replicas Ready on n1", || {
        let pods = s.list("v1", "Pod", Some(NS));
        pods.len() == REPLICAS && pods.iter().all(serving)
    })
    .await;
    for n in [node(TAINTED, true), node("n2", false), node("n3", false)] {
        sim.apply(n).expect("node applied");
    }
    sim
}

/// Per pod name, how many times the log says it was evicted.
fn evicted_in_log(log: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains("Evicted pod")) {
        if let Some(rest) = line.split("pod=").nth(1) {
            let key = rest.split_whitespace().next().unwrap_or_default();
            let name = key.rsplit('/').next().unwrap_or_default().to_string();
            *m.entry(name).or_insert(0) += 1;
        }
    }
    m
}

/// Samples the app every 75 ms until stopped: the lowest count of serving replicas seen.
fn sample_ready(sim: &SimHandle, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<usize> {
    let s = sim.clone();
    tokio::spawn(async move {
        let mut min = usize::MAX;
        let mut samples = 0;
        while !stop.load(Ordering::Relaxed) {
            let n = s
                .list("v1", "Pod", Some(NS))
                .iter()
                .filter(|p| p.pointer("/metadata/labels/app") == Some(&json!(APP)))
                .filter(|p| serving(p))
                .count();
            min = min.min(n);
            samples += 1;
            tokio::time::sleep(Duration::from_millis(75)).await;
        }
        assert!(samples > 10, "too few samples: {samples}");
        min
    })
}

/// Samples `/readyz` every 75 ms until stopped: whether it ever answered 503.
fn sample_readyz(port: u16, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<bool> {
    tokio::spawn(async move {
        let http = insecure_client();
        let mut unready = false;
        while !stop.load(Ordering::Relaxed) {
            if let Ok(r) = http
                .get(format!("https://127.0.0.1:{port}/readyz"))
                .send()
                .await
            {
                unready |= r.status() == 503;
            }
            tokio::time::sleep(Duration::from_millis(75)).await;
        }
        unready
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restart_mid_cycle_recovers_in_place_and_evicts_no_pod_twice() {
    let sim = cluster_on_n1().await;
    let originals: Vec<String> = sim
        .list("v1", "Pod", Some(NS))
        .iter()
        .filter_map(|p| p.pointer("/metadata/name")?.as_str().map(String::from))
        .collect();
    assert_eq!(originals.len(), REPLICAS);
    let replica_sets_before = sim.list("apps/v1", "ReplicaSet", Some(NS)).len();
    assert_eq!(replica_sets_before, 1);
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        latency: Some(EVICTION_LATENCY),
        ..Default::default()
    });

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_ready(&sim, stop.clone());
    let mut d = start(
        &sim,
        "chaos-restart",
        &policy(""),
        &["--descheduling-interval=3s", "--metrics-unauthenticated"],
    );
    let pid = d.child.id();
    d.wait_ready().await;
    let readyz = sample_readyz(d.port, stop.clone());

    // Restart the API server once the first evictions are recorded and before the last.
    let s = sim.clone();
    let done = |s: &SimHandle| originals.iter().filter(|p| evicted(s, p)).count();
    wait_for("the first eviction", || done(&s) >= 1).await;
    let before_restart = done(&sim);
    assert!(
        before_restart < REPLICAS,
        "the cycle must still be evicting when the server restarts"
    );
    sim.restart(Duration::from_secs(2))
        .await
        .expect("kube-sim restarts");
    let at_restart = done(&sim);
    assert!(d.running(), "run exited; log:\n{}", d.log_text());

    // It finishes the evictions it had not done, without restarting itself.
    let start_wait = Instant::now();
    while done(&sim) < REPLICAS {
        assert!(
            d.running(),
            "run exited after the restart; log:\n{}",
            d.log_text()
        );
        assert!(
            start_wait.elapsed() < WAIT,
            "{} of {REPLICAS} evicted after the restart; log:\n{}",
            done(&sim),
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        at_restart < REPLICAS,
        "evictions remained after the restart ({at_restart} done then)"
    );
    // Replacements settle, then the sampler stops.
    let s = sim.clone();
    wait_for("replacements Ready", || {
        s.list("v1", "Pod", Some(NS))
            .iter()
            .filter(|p| serving(p))
            .count()
            == REPLICAS
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let min_ready = sampler.await.expect("sampler");
    let was_unready = readyz.await.expect("readyz sampler");
    assert!(
        was_unready,
        "/readyz said 503 while the watches were broken; log:\n{}",
        d.log_text()
    );
    assert!(
        min_ready > 0,
        "the app had no Ready replica at some moment; log:\n{}",
        d.log_text()
    );

    // The same process, serving and ready again once its caches resynced.
    assert_eq!(d.child.id(), pid);
    assert!(d.running());
    assert_eq!(d.status("/healthz").await, Some(200));
    let s = Instant::now();
    while d.status("/readyz").await != Some(200) {
        assert!(
            s.elapsed() < WAIT,
            "never ready again; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        metric(&d.metrics().await, "kube_descheduler_caches_synced", &[]),
        1.0
    );
    let log = d.log_text();
    assert!(log.contains("in sync with the API server again"), "{log}");
    assert!(
        log.contains("relisting"),
        "the watches resumed from a too-old resourceVersion and relisted; log:\n{log}"
    );

    // No pod evicted twice: one success in the log and at most one Descheduled Event each
    // (an Event posted while the server was down may be lost; the eviction is not repeated).
    let in_log = evicted_in_log(&log);
    eprintln!(
        "evicted before the restart began: {before_restart}, when it ended: {at_restart}; \
         lowest Ready count sampled: {min_ready}; successes in the log: {in_log:?}"
    );
    for name in &originals {
        let times = in_log.get(name).copied().unwrap_or(0);
        assert!(times <= 1, "{name} evicted {times} times; log:\n{log}");
        let events = occurrences(&events_for(&sim, name, "Normal"));
        assert!(events <= 1, "{name}: {events} Descheduled Events");
    }
    assert!(
        in_log.values().sum::<usize>() >= REPLICAS - 1,
        "the log records the evictions: {in_log:?}"
    );
    // No Deployment restarted: still one ReplicaSet, no restartedAt in the template.
    assert_eq!(sim.list("apps/v1", "ReplicaSet", Some(NS)).len(), 1);
    let dep = sim
        .get("apps/v1", "Deployment", NS, APP)
        .expect("deployment");
    assert!(
        dep.pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt")
            .is_none(),
        "{dep}"
    );
    assert!(!log.contains("panicked"), "{log}");
    sim.shutdown().await;
}
