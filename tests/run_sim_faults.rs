//! `kube-descheduler run` against an API stand-in that misbehaves: failing and slow LISTs at
//! start, dropped watches and expired watch history while running, 5xx and gateway timeouts on
//! evictions — no crash, every pod evicted exactly once in the end.

mod run_sim_common;

use std::time::{Duration, Instant};

use kube_sim::{FaultRule, SimHandle};
use run_sim_common::*;

fn fault(verb: &str, resource: &str) -> FaultRule {
    FaultRule {
        verb: Some(verb.into()),
        resource: Some(resource.into()),
        ..Default::default()
    }
}

fn assert_evicted_once(sim: &SimHandle, d: &Descheduler, pods: &[&str]) {
    let log = d.log_text();
    assert!(!log.contains("panicked"), "log:\n{log}");
    for name in pods {
        assert!(
            evicted(sim, name),
            "{name} not evicted; log:\n{}",
            d.log_text()
        );
        let normal = events_for(sim, name, "Normal");
        assert_eq!(
            occurrences(&normal),
            1,
            "{name} evicted {} times: {normal:?}",
            occurrences(&normal)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_and_slow_initial_lists_are_retried() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 2, TAINTED))).await;
    sim.add_fault(FaultRule {
        status: Some(500),
        times: Some(3),
        ..fault("list", "pods")
    });
    sim.add_fault(FaultRule {
        status: Some(503),
        times: Some(2),
        ..fault("list", "nodes")
    });
    sim.add_fault(FaultRule {
        latency: Some(Duration::from_secs(2)),
        times: Some(1),
        ..fault("list", "poddisruptionbudgets")
    });
    let flags = ["--descheduling-interval=0", "--secure-port=0"];
    let (d, code) = run_to_exit(&sim, "lists", &policy(""), &flags).await;
    assert_eq!(code, 0, "log:\n{}", d.log_text());
    assert_evicted_once(&sim, &d, &["web-1", "web-2"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watches_and_expired_history_are_survived_without_double_evictions() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 1, TAINTED))).await;
    let mut d = start_interval(&sim, "watches", &policy("")).await;
    let s = sim.clone();
    wait_for("web-1 evicted", || evicted(&s, "web-1")).await;

    // Watches end cleanly; then the history is compacted so re-watches get 410 Expired and must
    // re-list; then re-watches fail with 5xx twice (the watcher backs off 0.8 s, 1.6 s, … as
    // client-go's reflector does, so more failures would only make the test slower).
    sim.drop_watches();
    d.more_cycles(1.0).await;
    sim.compact_watch_history();
    sim.drop_watches();
    d.more_cycles(1.0).await;
    let flaky = sim.add_fault(FaultRule {
        status: Some(503),
        times: Some(2),
        ..fault("watch", "pods")
    });
    sim.drop_watches();

    // A pod created after all that is still seen (the caches recovered) and evicted once.
    // Pods first: a ReplicaSet created before its pods would create pods of its own.
    for name in ["late-1", "late-2"] {
        sim.apply(rs_pod("late", name, TAINTED)).expect("pod");
    }
    sim.apply(replica_set("late", 2)).expect("rs");
    let start = Instant::now();
    while !(evicted(&sim, "late-1") && evicted(&sim, "late-2")) {
        assert!(
            start.elapsed() < WAIT,
            "late pods not evicted after the watch disruptions; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sim.remove_fault(flaky);
    d.more_cycles(2.0).await;
    assert_evicted_once(&sim, &d, &["web-1", "late-1", "late-2"]);
    let ok = d.status("/healthz").await;
    assert_eq!(ok, Some(200));
    assert!(d.running());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_5xx_and_gateway_timeouts_are_errors_retried_by_the_next_cycle_only() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 3, TAINTED))).await;
    sim.add_fault(FaultRule {
        name: Some("web-1".into()),
        status: Some(504),
        message: Some("Timeout: request did not complete within requested timeout".into()),
        times: Some(1),
        ..fault("create", "pods/eviction")
    });
    sim.add_fault(FaultRule {
        name: Some("web-2".into()),
        status: Some(503),
        times: Some(1),
        ..fault("create", "pods/eviction")
    });
    sim.add_fault(FaultRule {
        name: Some("web-3".into()),
        latency: Some(Duration::from_secs(2)),
        times: Some(1),
        ..fault("create", "pods/eviction")
    });
    let mut d = start_interval(&sim, "evictions", &policy("")).await;
    let s = sim.clone();
    wait_for("all three evicted", || {
        ["web-1", "web-2", "web-3"].iter().all(|n| evicted(&s, n))
    })
    .await;
    d.more_cycles(2.0).await;
    assert_evicted_once(&sim, &d, &["web-1", "web-2", "web-3"]);
    let text = d.metrics().await;
    let count = |result| {
        metric(
            &text,
            "descheduler_pods_evicted_total",
            &[("result", result), ("node", TAINTED)],
        )
    };
    // Each failure happened once and was not retried within its cycle (kube's client retries
    // are off); the next cycle evicted the pod.
    assert_eq!(count("error"), 2.0, "{text}");
    assert_eq!(count("success"), 3.0, "{text}");
    assert!(d.running());
    sim.shutdown().await;
}
