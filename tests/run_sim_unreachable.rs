//! `run` against an API server that is not there (its port closed): one-shot mode fails after
//! `--cache-sync-timeout` with one line naming the server; interval mode keeps retrying with a
//! growing backoff (one log line per kind per step) and `/readyz` stays false.

mod run_sim_common;

use std::time::{Duration, Instant};

use run_sim_common::{insecure_client, policy, start};

/// A kube-sim that has been shut down: its kubeconfig names a closed port.
async fn gone_server() -> kube_sim::SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        ..Default::default()
    })
    .await
    .expect("kube-sim starts");
    sim.shutdown().await;
    sim
}

fn failures_for(log: &str, kind: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("list/watch failed") && l.contains(&format!("kind=\"{kind}\"")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_fails_after_the_sync_timeout_naming_the_server() {
    let sim = gone_server().await;
    let started = Instant::now();
    let mut d = start(
        &sim,
        "once",
        &policy(""),
        &[
            "--descheduling-interval=0",
            "--cache-sync-timeout=2s",
            "--secure-port=0",
        ],
    );
    let code = d.wait_exit().await;
    let took = started.elapsed();
    let log = d.log_text();
    assert_ne!(code, 0, "log:\n{log}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "{took:?}"
    );
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line; log:\n{log}");
    assert!(
        errors[0].contains(sim.url()) && errors[0].contains("--cache-sync-timeout"),
        "the line names the server and the flag: {}",
        errors[0]
    );
    // Backoff 0.5 s, 1 s, …: at most a few attempts per kind in 2 s, one line each.
    let pods = failures_for(&log, "pods");
    assert!(
        (1..=4).contains(&pods),
        "{pods} failure lines for pods; log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_mode_keeps_retrying_with_backoff_and_is_not_ready() {
    let sim = gone_server().await;
    let mut d = start(
        &sim,
        "interval",
        &policy(""),
        &["--descheduling-interval=1s"],
    );
    let http = insecure_client();
    let started = Instant::now();
    let mut answered_not_ready = 0;
    while started.elapsed() < Duration::from_secs(6) {
        if let Ok(r) = http.get(d.url("/readyz")).send().await {
            assert_ne!(r.status(), 200, "ready without a cluster state");
            answered_not_ready += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        d.running(),
        "interval mode does not give up; log:\n{}",
        d.log_text()
    );
    assert!(answered_not_ready > 0, "/readyz was served");
    let log = d.log_text();
    // Attempts at about 0, 0.5, 1.5, 3.5 s (then 7.5 s): a growing delay, not a fixed rate.
    let pods = failures_for(&log, "pods");
    assert!(
        (3..=5).contains(&pods),
        "{pods} failure lines for pods in 6 s; log:\n{log}"
    );
    assert!(
        log.contains("retry_in_seconds=2"),
        "the delay grows; log:\n{log}"
    );
    assert!(
        !log.contains(" ERROR "),
        "each failure is one WARN line, not doubled by the client; log:\n{log}"
    );
    d.terminate();
    assert_eq!(d.wait_exit().await, 0);
}
