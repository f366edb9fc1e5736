//! Process-level chaos for `run` with leader election: two replicas of the real binary, the
//! leader SIGKILLed in the middle of a cycle (some of its evictions accepted, others not yet
//! sent). The follower takes over only once the Lease has expired, evicts the rest, and no pod
//! is evicted twice across both (the API stand-in logs every accepted eviction).

mod run_sim_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube_sim::{FaultRule, SimHandle};
use run_sim_common::*;
use serde_json::Value;

const LEASE_SECONDS: u64 = 4;
/// The apps whose pods sit on the tainted node, and each one's replicas.
const APPS: [&str; 2] = ["api", "web"];
const REPLICAS: u32 = 3;
/// The API holds every eviction this long before handling it, so a cycle of six takes 6 s+.
const EVICTION_LATENCY: Duration = Duration::from_secs(1);

fn flags() -> Vec<String> {
    vec![
        "--descheduling-interval=1s".into(),
        "--metrics-unauthenticated".into(),
        "--leader-elect".into(),
        format!("--leader-elect-lease-duration={LEASE_SECONDS}s"),
        "--leader-elect-renew-deadline=3s".into(),
        "--leader-elect-retry-period=500ms".into(),
        "--leader-elect-resource-name=descheduler".into(),
        "--leader-elect-resource-namespace=kube-system".into(),
    ]
}

fn lease_spec(sim: &SimHandle, field: &str) -> Option<Value> {
    sim.get(
        "coordination.k8s.io/v1",
        "Lease",
        "kube-system",
        "descheduler",
    )?
    .pointer(&format!("/spec/{field}"))
    .cloned()
}

fn holder(sim: &SimHandle) -> String {
    lease_spec(sim, "holderIdentity")
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn lease_time(sim: &SimHandle, field: &str) -> Option<jiff::Timestamp> {
    lease_spec(sim, field)?.as_str()?.parse().ok()
}

/// Accepted evictions of pod `name` in [`NS`].
fn evictions_of(sim: &SimHandle, name: &str) -> usize {
    sim.evictions()
        .iter()
        .filter(|e| e.namespace == NS && e.name == name)
        .count()
}

/// Samples each app's serving pods (Ready, not terminating) every 50 ms until stopped.
struct ReadySampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(usize, usize)>,
}

impl ReadySampler {
    fn start(sim: &SimHandle) -> Self {
        let sim = sim.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let task = tokio::spawn(async move {
            let (mut samples, mut min) = (0, usize::MAX);
            loop {
                let pods = sim.list("v1", "Pod", Some(NS));
                for app in APPS {
                    let ready = pods
                        .iter()
                        .filter(|p| p["metadata"]["labels"]["app"] == app)
                        .filter(|p| pod_ready(p) && p["metadata"]["deletionTimestamp"].is_null())
                        .count();
                    min = min.min(ready);
                }
                samples += 1;
                if stop2.load(Ordering::Acquire) {
                    return (samples, min);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        ReadySampler { stop, task }
    }

    /// (samples taken, fewest serving pods of one app in any sample).
    async fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Release);
        self.task.await.expect("sampler task")
    }
}

/// The `Descheduled` Events about `pod`, by reporting replica.
fn reported_by(sim: &SimHandle, pod: &str) -> Vec<String> {
    events_for(sim, pod, "Normal")
        .iter()
        .map(|e| e["reportingInstance"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn cycles(d: &Descheduler) -> f64 {
    metric(
        &d.metrics().await,
        "kube_descheduler_cycles_total",
        &[("source", "interval")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_mid_cycle_hands_over_after_lease_expiry_and_no_pod_is_evicted_twice() {
    let pods: Vec<String> = APPS
        .iter()
        .flat_map(|app| (1..=REPLICAS).map(move |i| format!("{app}-{i}")))
        .collect();
    let objects = APPS
        .iter()
        .flat_map(|app| replica_set_with_pods(app, REPLICAS, TAINTED))
        .collect();
    let sim = start_sim(cluster(objects)).await;
    // Until both replicas run, every eviction fails (nothing evicted, nothing logged).
    let hold = sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        status: Some(503),
        message: Some("held until both replicas run".into()),
        ..Default::default()
    });
    let flags = flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let pol = policy("");
    let mut a = start(&sim, "replica-a", &pol, &flags);
    let s = sim.clone();
    wait_for("replica-a holds the lease", || {
        holder(&s).starts_with("replica-a_")
    })
    .await;
    let mut b = start(&sim, "replica-b", &pol, &flags);
    a.wait_ready().await;
    b.wait_ready().await;
    let sampler = ReadySampler::start(&sim);
    // Slow evictions from now on (the first matching rule wins: add the slow one, then drop the
    // hold).
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        latency: Some(EVICTION_LATENCY),
        ..Default::default()
    });
    sim.remove_fault(hold);

    // Kill the leader once its first eviction is accepted: the rest of its cycle is still to do.
    let s = sim.clone();
    wait_for("the leader's first accepted eviction", || {
        !s.evictions().is_empty()
    })
    .await;
    assert!(holder(&sim).starts_with("replica-a_"), "{}", holder(&sim));
    let _ = a.child.kill();
    let _ = a.child.wait();
    let by_leader = sim.evictions().len();
    assert!(
        by_leader < pods.len(),
        "the leader finished its cycle before it was killed; log:\n{}",
        a.log_text()
    );
    let last_renew = lease_time(&sim, "renewTime").expect("renewTime of replica-a's lease");

    let s = sim.clone();
    wait_for("replica-b holds the lease", || {
        holder(&s).starts_with("replica-b_")
    })
    .await;
    let acquired = lease_time(&sim, "acquireTime").expect("acquireTime of replica-b's lease");
    let expiry = last_renew + jiff::SignedDuration::from_secs(LEASE_SECONDS as i64);
    assert!(
        acquired >= expiry,
        "replica-b acquired at {acquired}, before replica-a's lease expired at {expiry}"
    );

    let s = sim.clone();
    let names = pods.clone();
    wait_for("every pod of the tainted node evicted", move || {
        names.iter().all(|n| evicted(&s, n))
    })
    .await;
    // Two more cycles of the new leader: the evicted pods (terminating, then replaced on n2/n3)
    // are not evicted again.
    let seen = cycles(&b).await;
    let start = std::time::Instant::now();
    while cycles(&b).await < seen + 2.0 {
        assert!(b.running(), "replica-b exited; log:\n{}", b.log_text());
        assert!(
            start.elapsed() < WAIT,
            "no more cycles; log:\n{}",
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (samples, min_ready) = sampler.finish().await;
    let logs = format!(
        "replica-a log:\n{}\nreplica-b log:\n{}",
        a.log_text(),
        b.log_text()
    );

    for pod in &pods {
        let n = evictions_of(&sim, pod);
        assert_eq!(
            n,
            1,
            "{pod} evicted {n} times: {:?}\n{logs}",
            sim.evictions()
        );
        let reporters = reported_by(&sim, pod);
        assert!(reporters.len() <= 1, "{pod}: {reporters:?}\n{logs}");
    }
    // Only the original pods were evicted (replacements are on untainted nodes).
    assert_eq!(sim.evictions().len(), pods.len(), "{:?}", sim.evictions());
    // Each replica evicted part of the cycle: the leader the `by_leader` (≥ 1) accepted before it
    // died — it may die before publishing the last one's Event, so its Events may be fewer — and
    // the follower the rest (all but, at most, the one the leader's request left in flight).
    let by = |who: &str| {
        pods.iter()
            .filter(|p| reported_by(&sim, p) == vec![who.to_string()])
            .count()
    };
    assert!(by("replica-a") <= by_leader, "{logs}");
    assert!(
        by("replica-b") >= pods.len() - by_leader - 1,
        "replica-b evicted {} of the {} left; {logs}",
        by("replica-b"),
        pods.len() - by_leader
    );
    eprintln!(
        "accepted evictions when the leader died: {by_leader}; Events by replica-a {}, by replica-b {}; \
         lease acquired {acquired} (expiry {expiry}); fewest Ready {min_ready} in {samples} samples",
        by("replica-a"),
        by("replica-b")
    );
    // Never without a serving replica while the apps moved.
    assert!(samples > 20, "{samples} samples");
    assert!(min_ready >= 1, "an app had {min_ready} Ready pods; {logs}");
    let status = insecure_client()
        .get(b.url("/healthz"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .ok();
    assert_eq!(status, Some(200), "{logs}");
    assert!(b.running() && !b.log_text().contains("panicked"), "{logs}");
    sim.shutdown().await;
}
