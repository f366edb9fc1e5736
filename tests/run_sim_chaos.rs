//! Process-level chaos with the real binary against the API stand-in: the API fails every third
//! eviction of a cycle with 5xx or a gateway timeout. Each scenario asserts that no pod is evicted
//! twice, no app is left without a Ready replica, and the process still serves `/healthz`.

mod run_sim_common;

use std::time::{Duration, Instant};

use kube_sim::{FaultRule, SimHandle};
use run_sim_common::*;

/// The app of every pod here.
const APP: &str = "web";

fn eviction_fault(pod: &str, status: u16) -> FaultRule {
    FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        name: Some(pod.into()),
        status: Some(status),
        message: Some(match status {
            504 => "Timeout: request did not complete within requested timeout".into(),
            _ => format!("injected {status}"),
        }),
        times: Some(1),
        ..Default::default()
    }
}

fn count(text: &str, result: &str) -> f64 {
    metric(
        text,
        "descheduler_pods_evicted_total",
        &[("result", result), ("node", TAINTED)],
    )
}

/// Every pod named was evicted exactly once (one `Descheduled` Event each).
fn assert_evicted_once(sim: &SimHandle, d: &Descheduler, pods: &[String]) {
    for name in pods {
        let normal = events_for(sim, name, "Normal");
        assert_eq!(
            occurrences(&normal),
            1,
            "{name} evicted {} times: {normal:?}; log:\n{}",
            occurrences(&normal),
            d.log_text()
        );
    }
}

async fn assert_healthz(d: &Descheduler) {
    assert_eq!(
        d.status("/healthz").await,
        Some(200),
        "log:\n{}",
        d.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_third_eviction_failing_for_a_cycle_keeps_limits_and_counts_each_failure_once() {
    let pods: Vec<String> = (1..=9).map(|i| format!("{APP}-{i}")).collect();
    let sim = start_sim(cluster(replica_set_with_pods(APP, 9, TAINTED))).await;
    // Every third eviction fails once: 503, gateway timeout, 500. The cycle tries the pods in
    // the order the API lists them (web-1 … web-9), so the failures are the 1st, 4th and 7th
    // attempts — all before the sixth success could reach the per-node limit.
    for (pod, status) in [("web-1", 503), ("web-4", 504), ("web-7", 500)] {
        sim.add_fault(eviction_fault(pod, status));
    }
    // With 9 candidates, 3 failing and a per-node limit of 6, the first cycle tries all 9 and
    // evicts exactly 6: failures do not count against the limit, and nothing exceeds it.
    let mut d = start(
        &sim,
        "chaos-evictions",
        &policy("maxNoOfPodsToEvictPerNode: 6"),
        &["--descheduling-interval=5s", "--metrics-unauthenticated"],
    );
    d.wait_ready().await;
    let first = d.cycles_reach(1.0).await;
    assert_eq!(count(&first, "success"), 6.0, "{first}");
    assert_eq!(
        count(&first, "error"),
        3.0,
        "each failure counted once: {first}"
    );

    // Later cycles evict the three that failed, once each; the failures stay counted once.
    let s = sim.clone();
    let all = pods.clone();
    let start = Instant::now();
    while !all.iter().all(|p| evicted(&s, p)) {
        assert!(
            start.elapsed() < WAIT,
            "not all evicted; log:\n{}",
            d.log_text()
        );
        // Never zero Ready replicas of the app while it moves.
        let ready = s
            .list("v1", "Pod", Some(NS))
            .iter()
            .filter(|p| pod_ready(p))
            .count();
        assert!(
            ready > 0,
            "no Ready replica of {APP}; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = interval_cycles(&d.metrics().await);
    let text = d.cycles_reach(seen + 1.0).await;
    assert_eq!(count(&text, "success"), 9.0, "{text}");
    assert_eq!(count(&text, "error"), 3.0, "{text}");
    assert_evicted_once(&sim, &d, &pods);
    let ready = sim
        .list("v1", "Pod", Some(NS))
        .iter()
        .filter(|p| pod_ready(p))
        .count();
    assert!(ready > 0, "the app has Ready replicas");
    assert_healthz(&d).await;
    assert!(d.running());
    assert!(!d.log_text().contains("panicked"));
    sim.shutdown().await;
}
