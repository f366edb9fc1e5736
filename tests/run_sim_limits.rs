//! `kube-descheduler run` (the real binary) against the API stand-in with the per-workload
//! eviction limits: `workloadEvictionWindow` holds across interval cycles in one process, and its
//! refusals are counted in `descheduler_pods_evicted_total` with their own result text and
//! logged.

mod run_sim_common;

use run_sim_common::*;

/// ReplicaSet `web` (4 replicas) on the tainted node; per cycle at most one of its pods may go
/// (`maxNoOfPodsToEvictPerWorkload: 1`), and at most 2 within an hour (the window). Without the
/// window every cycle would take one more; with it, two go and later cycles refuse the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workload_window_holds_across_interval_cycles() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 4, TAINTED))).await;
    let mut d = start_interval(
        &sim,
        "window",
        &policy(
            "maxNoOfPodsToEvictPerWorkload: 1\nworkloadEvictionWindow:\n  duration: 1h\n  maxEvictions: 2",
        ),
    )
    .await;
    let names = ["web-1", "web-2", "web-3", "web-4"];
    let s = sim.clone();
    wait_for("two pods evicted", || {
        names.iter().filter(|n| evicted(&s, n)).count() >= 2
    })
    .await;
    // Let at least three more cycles run: none may evict another pod of `web`.
    d.more_cycles(3.0).await;
    let log = d.log_text();
    assert_eq!(
        names.iter().filter(|n| evicted(&sim, n)).count(),
        2,
        "the window allows 2 per hour; log:\n{log}"
    );
    let text = d.metrics().await;
    assert_eq!(evicted_from_tainted(&text, "success"), 2.0, "{text}");
    let window = evicted_from_tainted(
        &text,
        "maximum number of evicted pods per workload within the eviction window reached",
    );
    assert!(window >= 3.0, "window refusals not counted:\n{text}");
    // The first cycle's second pod was refused by the per-cycle workload limit.
    let per_cycle =
        evicted_from_tainted(&text, "maximum number of evicted pods per workload reached");
    assert!(per_cycle >= 1.0, "{text}");
    assert!(
        log.contains("workloadEvictionWindow.maxEvictions 2 = 2"),
        "log:\n{log}"
    );
    d.terminate();
    assert_eq!(d.wait_exit().await, 0, "log:\n{}", d.log_text());
    sim.shutdown().await;
}
