//! Process-level chaos for `run` with leader election: two replicas of the real binary, the
//! leader SIGKILLed in the middle of a cycle (some of its evictions accepted or deflected, others
//! not yet sent). The follower takes over only once the Lease has expired, and across both no pod
//! is evicted twice (the API stand-in logs every accepted eviction). The first scenario moves
//! bare ReplicaSets; the second moves Deployments through the real eviction guard, where a
//! deflected eviction becomes a rollout restart, and no Deployment may be restarted twice.

mod e2e_common;
mod run_sim_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube_sim::{EvictionRecord, FaultRule, SimHandle};
use run_sim_common::*;
use serde_json::Value;

const LEASE_SECONDS: u64 = 4;
/// The apps whose pods sit on the tainted node, and each one's replicas.
const APPS: [&str; 2] = ["api", "web"];
const REPLICAS: u32 = 3;
/// The API holds every eviction this long before handling it, so a cycle of six takes 6 s+.
const EVICTION_LATENCY: Duration = Duration::from_secs(1);

/// One scenario at a time: each times a Lease against the clock on a shared machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn flags() -> Vec<String> {
    let mut flags = vec![
        "--descheduling-interval=1s".into(),
        "--metrics-unauthenticated".into(),
    ];
    flags.extend(leader_elect_flags(LEASE_SECONDS));
    flags
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

/// Starts replica-a, waits until it holds the Lease, then starts replica-b, with every eviction
/// answered 503 until both are ready (nothing evicted, deflected or logged before the chaos).
/// Returns both and the id of the holding fault.
async fn start_pair_holding_evictions(sim: &SimHandle) -> (Descheduler, Descheduler, u64) {
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
    let mut a = start(sim, "replica-a", &pol, &flags);
    let s = sim.clone();
    wait_for("replica-a holds the lease", || {
        holder(&s).starts_with("replica-a_")
    })
    .await;
    let mut b = start(sim, "replica-b", &pol, &flags);
    a.wait_ready().await;
    b.wait_ready().await;
    (a, b, hold)
}

/// Every eviction takes [`EVICTION_LATENCY`] from now on (the first matching rule wins: the
/// slow one is added before the hold is dropped).
fn slow_evictions_from_now_on(sim: &SimHandle, hold: u64) {
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        latency: Some(EVICTION_LATENCY),
        ..Default::default()
    });
    sim.remove_fault(hold);
}

/// After the leader was killed: waits until replica-b holds the Lease and asserts it acquired
/// it only once replica-a's last renewal had expired. Returns (acquired, expiry).
async fn follower_takes_over_after_expiry(sim: &SimHandle) -> (jiff::Timestamp, jiff::Timestamp) {
    let last_renew = lease_time(sim, "renewTime").expect("renewTime of replica-a's lease");
    let s = sim.clone();
    wait_for("replica-b holds the lease", || {
        holder(&s).starts_with("replica-b_")
    })
    .await;
    let acquired = lease_time(sim, "acquireTime").expect("acquireTime of replica-b's lease");
    let expiry = last_renew + jiff::SignedDuration::from_secs(LEASE_SECONDS as i64);
    assert!(
        acquired >= expiry,
        "replica-b acquired at {acquired}, before replica-a's lease expired at {expiry}"
    );
    (acquired, expiry)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_mid_cycle_hands_over_after_lease_expiry_and_no_pod_is_evicted_twice() {
    let _serial = SERIAL.lock().await;
    let pods: Vec<String> = APPS
        .iter()
        .flat_map(|app| (1..=REPLICAS).map(move |i| format!("{app}-{i}")))
        .collect();
    let objects = APPS
        .iter()
        .flat_map(|app| replica_set_with_pods(app, REPLICAS, TAINTED))
        .collect();
    let sim = start_sim(cluster(objects)).await;
    let (mut a, mut b, hold) = start_pair_holding_evictions(&sim).await;
    let sampler = ReadySampler::start(&sim);
    slow_evictions_from_now_on(&sim, hold);

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
    let (acquired, expiry) = follower_takes_over_after_expiry(&sim).await;

    let s = sim.clone();
    let names = pods.clone();
    wait_for("every pod of the tainted node evicted", move || {
        names.iter().all(|n| evicted(&s, n))
    })
    .await;
    // Two more cycles of the new leader: the evicted pods (terminating, then replaced on n2/n3)
    // are not evicted again.
    b.more_cycles(2.0).await;
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
    let status = b.status("/healthz").await;
    assert_eq!(status, Some(200), "{logs}");
    assert!(b.running() && !b.log_text().contains("panicked"), "{logs}");
    sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The same handover with Deployments behind the eviction guard

/// The guarded scenario's Deployments and their replicas, all on the tainted (and cordoned)
/// node. The guard deflects an eviction of `api` (one replica) and of `web` (every other
/// replica on a cordoned node) into a rollout restart, so their pods leave only by rollouts;
/// `queue` cannot surge (maxSurge 0), so its pods are evicted one at a time. The descheduler
/// visits a node's pods in name order: `api` comes first, so the leader's first call is usually
/// a deflection (either order is a valid run).
const DEPLOYMENTS: [(&str, usize); 3] = [("api", 1), ("web", 3), ("queue", 2)];
/// The Deployments the guard restarts (each exactly once).
const RESTARTED: [&str; 2] = ["api", "web"];
const SPARE_NODES: [&str; 2] = ["n2", "n3"];

fn restarted_at(d: &Value) -> Option<String> {
    d.pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt")
        .and_then(Value::as_str)
        .map(String::from)
}

fn generation(d: &Value) -> i64 {
    d.pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Per Deployment: the `restartedAt` values seen, in order, and the highest generation seen.
type Restarts = BTreeMap<String, (Vec<String>, i64)>;

/// Every `restartedAt` value (in order of appearance) and the highest `metadata.generation` of
/// each Deployment, sampled every 50 ms until stopped.
struct RestartSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(usize, Restarts)>,
}

impl RestartSampler {
    fn start(sim: &SimHandle) -> Self {
        let sim = sim.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let task = tokio::spawn(async move {
            let mut seen = Restarts::new();
            let mut samples = 0;
            loop {
                for (app, _) in DEPLOYMENTS {
                    let d = sim
                        .get("apps/v1", "Deployment", NS, app)
                        .unwrap_or_default();
                    let (values, max_gen) = seen.entry(app.to_string()).or_default();
                    if let Some(at) = restarted_at(&d)
                        && values.last() != Some(&at)
                    {
                        values.push(at);
                    }
                    *max_gen = (*max_gen).max(generation(&d));
                }
                samples += 1;
                if stop2.load(Ordering::Acquire) {
                    return (samples, seen);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        RestartSampler { stop, task }
    }

    /// (samples taken, per Deployment: the `restartedAt` values seen and the highest generation).
    async fn finish(self) -> (usize, Restarts) {
        self.stop.store(true, Ordering::Release);
        self.task.await.expect("restart sampler task")
    }
}

/// Deployments restarted by the guard so far (their template carries `restartedAt`).
fn restarted(sim: &SimHandle) -> Vec<String> {
    DEPLOYMENTS
        .iter()
        .filter(|(app, _)| {
            sim.get("apps/v1", "Deployment", NS, app)
                .and_then(|d| restarted_at(&d))
                .is_some()
        })
        .map(|(app, _)| app.to_string())
        .collect()
}

/// The guarded scenario's cluster: the pods of [`DEPLOYMENTS`] Ready on n1 (the spare nodes
/// cordoned, so a rollout the guard starts stays in flight until they open). Returns the
/// cluster and the names of the original pods.
async fn cluster_ready_on_the_node_to_drain() -> (e2e_common::Cluster, Vec<String>) {
    let mut objects = vec![e2e_common::node(TAINTED, true)];
    objects.extend(SPARE_NODES.map(|n| e2e_common::node(n, false)));
    objects.push(e2e_common::deployment(
        "api",
        1,
        e2e_common::Strategy::Default,
    ));
    objects.push(e2e_common::deployment(
        "web",
        3,
        e2e_common::Strategy::Default,
    ));
    objects.push(e2e_common::deployment(
        "queue",
        2,
        e2e_common::Strategy::NoSurge,
    ));
    let cluster = e2e_common::Cluster::start(objects).await;
    cluster.wait_ready_on(&DEPLOYMENTS, TAINTED).await;
    let originals: Vec<String> = DEPLOYMENTS
        .iter()
        .flat_map(|(app, _)| cluster.pods(app))
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect();
    (cluster, originals)
}

/// Taints n1 (`maintenance=true:NoSchedule`) and cordons it.
fn taint_and_cordon_the_node_to_drain(sim: &SimHandle) {
    let mut n1 = sim.get("v1", "Node", "", TAINTED).expect("node n1");
    n1["spec"]["taints"] =
        serde_json::json!([{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]);
    n1["spec"]["unschedulable"] = Value::Bool(true);
    sim.apply(n1).expect("taint and cordon n1");
}

/// Kills the leader (replica-a) once its first eviction was accepted or deflected (the guard's
/// restart patch is stored before it answers), and asserts the rest of its cycle was still to
/// do. Returns the evictions accepted and the Deployments restarted by then.
async fn kill_the_leader_after_its_first_answer(
    sim: &SimHandle,
    a: &mut Descheduler,
    originals: usize,
) -> (usize, Vec<String>) {
    let s = sim.clone();
    wait_for("the leader's first accepted or deflected eviction", || {
        !s.evictions().is_empty() || !restarted(&s).is_empty()
    })
    .await;
    assert!(holder(sim).starts_with("replica-a_"), "{}", holder(sim));
    let _ = a.child.kill();
    let _ = a.child.wait();
    let (evicted_by_leader, restarted_by_leader) = (sim.evictions().len(), restarted(sim));
    assert!(
        evicted_by_leader + restarted_by_leader.len() < originals,
        "the leader finished its cycle before it was killed; log:\n{}",
        a.log_text()
    );
    (evicted_by_leader, restarted_by_leader)
}

/// Waits (at most [`WAIT`]) until the guard refuses the follower an eviction as in flight: it
/// asked again for a pod whose rollout the guard had started.
async fn wait_follower_meets_a_rollout_in_flight(guard: &e2e_common::Webhook, b: &mut Descheduler) {
    let in_flight = "kube_descheduler_guard_denials_total{reason=\"in_flight\"}";
    let denied_before = guard.metric(in_flight).await;
    let deadline = std::time::Instant::now() + WAIT;
    while guard.metric(in_flight).await <= denied_before {
        assert!(
            std::time::Instant::now() < deadline && b.running(),
            "the follower never met a rollout in flight; replica-b log:\n{}\nguard log:\n{}",
            b.log_text(),
            guard.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every original pod is gone and each Deployment has moved off n1 and settled.
async fn wait_moved_off_the_drained_node(
    cluster: &e2e_common::Cluster,
    sim: &SimHandle,
    originals: &[String],
) {
    let s = sim.clone();
    let names = originals.to_vec();
    wait_for("every original pod gone", move || {
        names.iter().all(|n| s.get("v1", "Pod", NS, n).is_none())
    })
    .await;
    for (app, n) in DEPLOYMENTS {
        cluster.wait_moved(app, n, TAINTED).await;
        cluster.wait_settled(app, n).await;
    }
}

/// The guard's allow, denial, deflection and restart series (no histogram buckets).
async fn guard_decision_metrics(guard: &e2e_common::Webhook) -> Vec<String> {
    guard
        .metrics()
        .await
        .lines()
        .filter(|l| {
            [
                "allows_total",
                "denials_total",
                "deflections_total",
                "restart_",
            ]
            .iter()
            .any(|m| l.starts_with(&format!("kube_descheduler_guard_{m}")))
                && !l.contains("_bucket")
        })
        .map(String::from)
        .collect()
}

/// Each Deployment restarted at most once: one `restartedAt` value ever seen, the template
/// generation one higher at most (than `generations`, before the chaos), one rollout. Returns
/// how many Deployments were restarted.
fn assert_each_deployment_restarted_at_most_once(
    cluster: &e2e_common::Cluster,
    restart_values: &Restarts,
    generations: &BTreeMap<&str, i64>,
    logs: &str,
) -> f64 {
    let mut restarted_apps = 0.0;
    for (app, _) in DEPLOYMENTS {
        let (values, max_gen) = restart_values.get(app).cloned().unwrap_or_default();
        let final_gen = generation(&cluster.deployment(app));
        assert!(
            values.len() <= 1,
            "{app} restarted {} times: {values:?}\n{logs}",
            values.len()
        );
        assert!(
            max_gen.max(final_gen) <= generations[app] + 1,
            "{app}: generation {} → {max_gen}\n{logs}",
            generations[app]
        );
        assert_eq!(values.last().cloned(), cluster.restarted_at(app), "{app}");
        if !values.is_empty() {
            restarted_apps += 1.0;
            // One rollout: the original ReplicaSet and the restarted template's.
            assert_eq!(cluster.replica_sets(app).len(), 2, "{app}\n{logs}");
        }
    }
    restarted_apps
}

/// `api` and `web` left by one restart each (their rollouts removed their pods), `queue` by
/// one eviction of each of its pods. An eviction of an `api` or `web` pod is accepted only
/// once the rollout had already deleted it: the cycle works from a list taken seconds
/// before, and kube-apiserver (like kube-sim and the guard) lets a terminating pod be evicted.
async fn assert_left_by_one_restart_or_eviction_each(
    sim: &SimHandle,
    guard: &e2e_common::Webhook,
    originals: &[String],
    evictions: &[EvictionRecord],
    logs: &str,
) {
    assert_eq!(restarted(sim), RESTARTED, "{logs}");
    for pod in originals.iter().filter(|p| p.starts_with("queue-")) {
        assert_eq!(evictions_of(sim, pod), 1, "{pod}: {evictions:?}\n{logs}");
    }
    let of_rolled = evictions
        .iter()
        .filter(|e| !e.name.starts_with("queue-"))
        .count();
    let terminating = guard
        .metric("kube_descheduler_guard_allows_total{reason=\"terminating\"}")
        .await;
    assert!(
        of_rolled as f64 <= terminating,
        "{of_rolled} evictions of pods of restarted Deployments, {terminating} of them terminating: {evictions:?}\n{logs}"
    );
}

/// Both replicas' and the guard's logs and the guard's decision metrics, for failure messages.
fn scenario_logs(
    a: &Descheduler,
    b: &Descheduler,
    guard: &e2e_common::Webhook,
    guard_metrics: &[String],
) -> String {
    format!(
        "replica-a log:\n{}\nreplica-b log:\n{}\nguard log:\n{}\nguard metrics:\n{}",
        a.log_text(),
        b.log_text(),
        guard.logs(),
        guard_metrics.join("\n")
    )
}

/// No pod evicted twice, and only original pods evicted.
fn assert_only_originals_evicted_at_most_once(
    sim: &SimHandle,
    originals: &[String],
    evictions: &[EvictionRecord],
    logs: &str,
) {
    for pod in originals {
        let n = evictions_of(sim, pod);
        assert!(n <= 1, "{pod} evicted {n} times: {evictions:?}\n{logs}");
    }
    assert!(
        evictions.iter().all(|e| originals.contains(&e.name)),
        "{evictions:?}"
    );
}

/// The guard timed `restarted_apps` restarts and none failed.
async fn assert_guard_counted_each_restart_once(
    guard: &e2e_common::Webhook,
    restarted_apps: f64,
    logs: &str,
) {
    assert_eq!(
        guard
            .metric("kube_descheduler_guard_restart_duration_seconds_count")
            .await,
        restarted_apps,
        "{logs}"
    );
    assert_eq!(
        guard
            .metric("kube_descheduler_guard_restart_errors_total")
            .await,
        0.0,
        "{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_mid_cycle_behind_the_guard_restarts_no_deployment_twice() {
    let _serial = SERIAL.lock().await;
    // The pods start on n1, which is then tainted and cordoned for maintenance; the spare nodes
    // stay cordoned until the follower has met a rollout the guard started, so that rollout is
    // still in flight when the follower asks again.
    let (cluster, originals) = cluster_ready_on_the_node_to_drain().await;
    let sim = cluster.sim.clone();
    let (guard, _certs) = e2e_common::guarded(&cluster, &[]).await;
    taint_and_cordon_the_node_to_drain(&sim);
    let generations: BTreeMap<&str, i64> = DEPLOYMENTS
        .iter()
        .map(|(app, _)| (*app, generation(&cluster.deployment(app))))
        .collect();
    assert!(restarted(&sim).is_empty());

    let (mut a, mut b, hold) = start_pair_holding_evictions(&sim).await;
    let apps: Vec<&str> = DEPLOYMENTS.iter().map(|(app, _)| *app).collect();
    let ready = e2e_common::Sampler::start(&sim, &apps);
    let restarts = RestartSampler::start(&sim);
    slow_evictions_from_now_on(&sim, hold);

    let (evicted_by_leader, restarted_by_leader) =
        kill_the_leader_after_its_first_answer(&sim, &mut a, originals.len()).await;
    let (acquired, expiry) = follower_takes_over_after_expiry(&sim).await;

    // The follower asks again for a pod whose rollout the guard started (by the leader's
    // deflection or its own): refused as in flight, not restarted a second time.
    wait_follower_meets_a_rollout_in_flight(&guard, &mut b).await;
    let restarted_when_met = restarted(&sim);
    for n in SPARE_NODES {
        cluster.set_schedulable(n, true);
    }

    wait_moved_off_the_drained_node(&cluster, &sim, &originals).await;
    // Two more cycles of the new leader: nothing is left to evict or restart.
    b.more_cycles(2.0).await;
    let series = ready.finish().await;
    let (restart_samples, restart_values) = restarts.finish().await;
    let guard_metrics = guard_decision_metrics(&guard).await;
    let logs = scenario_logs(&a, &b, &guard, &guard_metrics);
    let evictions = sim.evictions();

    assert_only_originals_evicted_at_most_once(&sim, &originals, &evictions, &logs);
    // Each Deployment restarted at most once, and the guard's restarts counted once per
    // Deployment.
    assert!(restart_samples > 20, "{restart_samples} samples");
    let restarted_apps = assert_each_deployment_restarted_at_most_once(
        &cluster,
        &restart_values,
        &generations,
        &logs,
    );
    assert_left_by_one_restart_or_eviction_each(&sim, &guard, &originals, &evictions, &logs).await;
    assert_guard_counted_each_restart_once(&guard, restarted_apps, &logs).await;
    eprintln!(
        "when the leader died: {evicted_by_leader} accepted evictions, restarted {restarted_by_leader:?}; \
         lease acquired {acquired} (expiry {expiry}); the follower met a rollout in flight with \
         {restarted_when_met:?} restarted; evictions {}; restartedAt seen {restart_values:?} in \
         {restart_samples} samples; Ready {series:?}; guard: {guard_metrics:?}",
        evictions.len()
    );
    // Never without a serving replica while the apps moved.
    for (app, s) in &series {
        assert!(s.samples > 20, "{app}: {s:?}");
        assert!(
            s.min_ready_pods >= 1 && s.min_ready_replicas >= 1,
            "{app} had 0 Ready replicas ({s:?})\n{logs}"
        );
    }
    let status = b.status("/healthz").await;
    assert_eq!(status, Some(200), "{logs}");
    assert!(b.running() && !b.log_text().contains("panicked"), "{logs}");
    assert_eq!(
        guard.healthz().await,
        Some((200, "ok".to_string())),
        "{logs}"
    );
    sim.shutdown().await;
}
