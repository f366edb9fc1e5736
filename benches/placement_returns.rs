//! Benchmark: the cost of `run`'s return detector (`live::returns`) at the 5,000-node /
//! 150,000-pod scale with the run_scale policy's ≈ 2,000 evictions a cycle: every pod watch event
//! shown to it with nothing remembered (the usual case) and with 2,000 evictions remembered,
//! recording 2,000 evictions, and 2,000 backoff checks (the eviction attempts of a cycle).
//! Best of five rounds. Run: `cargo bench --bench placement_returns`.

use std::time::{Duration, Instant};

use kube_descheduler::live::returns::{DEFAULT_WINDOW, ReturnDetector};
use kube_descheduler::snapshot::{PodId, Snapshot};
use kube_descheduler::testing::{node, pod, snapshot};

const NODES: usize = 5_000;
const PODS: usize = 150_000;
const EVICTIONS: usize = 2_000;
const ROUNDS: usize = 5;

/// 30 pods a node, each 3 a ReplicaSet (50,000 owners).
fn cluster() -> Snapshot {
    let nodes = (0..NODES).map(|i| node(&format!("n{i}")).build()).collect();
    let pods = (0..PODS)
        .map(|i| {
            pod("shop", &format!("p{i}"), &format!("n{}", i % NODES))
                .owner("ReplicaSet", &format!("rs{}", i / 3))
                .with(|p| {
                    p.metadata.creation_timestamp = Some(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            jiff::Timestamp::now(),
                        ),
                    )
                })
                .build()
        })
        .collect();
    snapshot(nodes, pods)
}

fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..ROUNDS).map(|_| f()).min().unwrap_or_default()
}

fn main() {
    let s = cluster();
    let evicted: Vec<PodId> = (0..EVICTIONS)
        .map(|i| (i * (PODS / EVICTIONS)) as PodId)
        .collect();
    let observe_all = |d: &ReturnDetector| {
        let started = Instant::now();
        let mut returns = 0;
        for id in 0..s.pods.len() as PodId {
            returns += usize::from(d.observe(s.pod(id)).is_some());
        }
        (started.elapsed(), returns)
    };
    let idle = best(|| observe_all(&ReturnDetector::new(DEFAULT_WINDOW, None, None)).0);
    let mut record_time = Duration::MAX;
    let mut busy = Duration::MAX;
    let mut check_time = Duration::MAX;
    for _ in 0..ROUNDS {
        let d = ReturnDetector::new(DEFAULT_WINDOW, None, None);
        let started = Instant::now();
        for &p in &evicted {
            d.record(&s, p, "default", "HighNodeUtilization");
        }
        record_time = record_time.min(started.elapsed());
        // Every pod of the cluster seen once: the evicted pods' siblings on their nodes are
        // known, so no pod here is a return (the lookups are all made).
        let (t, returns) = observe_all(&d);
        assert_eq!(returns, 0);
        busy = busy.min(t);
        let started = Instant::now();
        let refused = evicted
            .iter()
            .filter(|&&p| d.refusal(&s, p).is_some())
            .count();
        check_time = check_time.min(started.elapsed());
        assert_eq!(refused, 0);
    }
    println!("{NODES} nodes, {PODS} pods, {EVICTIONS} evictions; best of {ROUNDS} rounds");
    println!("| operation | total ms | per call ns |");
    println!("|---|---:|---:|");
    row(
        &format!("watch event, nothing remembered (×{PODS})"),
        idle,
        PODS,
    );
    row(
        &format!("watch event, {EVICTIONS} evictions remembered (×{PODS})"),
        busy,
        PODS,
    );
    row(
        &format!("record an eviction (×{EVICTIONS})"),
        record_time,
        EVICTIONS,
    );
    row(
        &format!("backoff check of an eviction attempt (×{EVICTIONS})"),
        check_time,
        EVICTIONS,
    );
}

/// One row of the table: `total` milliseconds for `calls` calls, and nanoseconds per call.
fn row(operation: &str, total: Duration, calls: usize) {
    println!(
        "| {operation} | {:.2} | {:.0} |",
        total.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e9 / calls as f64
    );
}
