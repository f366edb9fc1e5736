//! Two `kube-descheduler run` replicas with leader election against the API stand-in: only the
//! Lease holder evicts (a follower's trigger API answers 503); when it dies the other takes over
//! once the Lease expires; SIGTERM releases the Lease.

mod run_sim_common;

use std::time::Duration;

use kube_sim::SimHandle;
use run_sim_common::*;
use serde_json::Value;

const LEASE_SECONDS: u64 = 4;

fn leader_flags() -> Vec<String> {
    let mut flags = vec!["--descheduling-interval=1s".to_string()];
    flags.extend(leader_elect_flags(LEASE_SECONDS));
    flags
}

fn lease(sim: &SimHandle) -> Option<Value> {
    sim.get(
        "coordination.k8s.io/v1",
        "Lease",
        "kube-system",
        "descheduler",
    )
}

fn holder(sim: &SimHandle) -> String {
    lease(sim)
        .and_then(|l| {
            l.pointer("/spec/holderIdentity")
                .and_then(Value::as_str)
                .map(String::from)
        })
        .unwrap_or_default()
}

/// POSTs the trigger API with `token`: (status code, JSON body).
async fn trigger(d: &Descheduler, token: &str) -> (u16, Value) {
    match insecure_client()
        .post(d.url("/api/v1/descheduler/run"))
        .bearer_auth(token)
        .send()
        .await
    {
        Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
        Err(e) => panic!("trigger request failed: {e}"),
    }
}

/// A MicroTime field of the Lease spec.
fn lease_time(sim: &SimHandle, field: &str) -> Option<jiff::Timestamp> {
    lease(sim)?
        .pointer(&format!("/spec/{field}"))?
        .as_str()?
        .parse()
        .ok()
}

/// Adds ReplicaSet `rs` with `n` pods on the tainted node (they are evicted by whoever leads).
fn add_batch(sim: &SimHandle, rs: &str, n: u32) -> Vec<String> {
    // Pods first: a ReplicaSet created before its pods would create pods of its own.
    let names: Vec<String> = (1..=n).map(|i| format!("{rs}-{i}")).collect();
    for name in &names {
        sim.apply(rs_pod(rs, name, TAINTED)).expect("pod");
    }
    sim.apply(replica_set(rs, n)).expect("replica set");
    // Not waiting for Ready: the leader may evict them before they get there.
    names
}

/// The replicas whose `Descheduled` Events name `pod` (reportingInstance = `$POD_NAME`), once
/// the Event is there (it is published just after the eviction is accepted).
async fn evicted_by(sim: &SimHandle, pod: &str) -> Vec<String> {
    let s = sim.clone();
    wait_for("the Descheduled Event", || {
        !events_for(&s, pod, "Normal").is_empty()
    })
    .await;
    events_for(sim, pod, "Normal")
        .iter()
        .map(|e| e["reportingInstance"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_evicts_and_the_follower_takes_over_after_lease_expiry() {
    let sim = start_sim(cluster(vec![
        replica_set("first", 1),
        rs_pod("first", "first-1", TAINTED),
    ]))
    .await;
    let flags = leader_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let pol = policy("");

    let mut a = start(&sim, "replica-a", &pol, &flags);
    let s = sim.clone();
    wait_for("replica-a holds the lease", || {
        holder(&s).starts_with("replica-a_")
    })
    .await;
    let mut b_flags = flags.clone();
    b_flags.push("--enable-trigger-api");
    let mut b = start(&sim, "replica-b", &pol, &b_flags);
    b.wait_ready().await;
    a.wait_ready().await;
    // A follower refuses to run a cycle on demand.
    let (code, body) = trigger(&b, sim.token()).await;
    assert_eq!(
        (code, body["status"].as_str()),
        (503, Some("not-leader")),
        "{body}"
    );

    // Both run; a new batch is evicted by the leader alone, once each.
    let batch = add_batch(&sim, "second", 2);
    let s = sim.clone();
    let names = batch.clone();
    wait_for("second batch evicted", move || {
        names.iter().all(|n| evicted(&s, n))
    })
    .await;
    for pod in batch.iter().map(String::as_str).chain(["first-1"]) {
        assert_eq!(
            evicted_by(&sim, pod).await,
            vec!["replica-a".to_string()],
            "{pod}"
        );
    }
    assert!(holder(&sim).starts_with("replica-a_"));
    assert!(
        !b.log_text().contains("Evicted pod"),
        "the follower evicted:\n{}",
        b.log_text()
    );
    let transitions = |s: &SimHandle| {
        lease(s)
            .and_then(|l| l.pointer("/spec/leaseTransitions").and_then(Value::as_i64))
            .unwrap_or(0)
    };
    let before = transitions(&sim);

    // The leader dies without releasing (SIGKILL): replica-b acquires only once the Lease, last
    // renewed by replica-a, has expired (both clocks are this machine's).
    let _ = a.child.kill();
    let _ = a.child.wait();
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
    assert!(transitions(&sim) > before);

    let batch = add_batch(&sim, "third", 2);
    let s = sim.clone();
    let names = batch.clone();
    wait_for("third batch evicted", move || {
        names.iter().all(|n| evicted(&s, n))
    })
    .await;
    for pod in &batch {
        assert_eq!(
            evicted_by(&sim, pod).await,
            vec!["replica-b".to_string()],
            "{pod}"
        );
    }

    // Leading now, replica-b runs a cycle on demand (429 only if an interval cycle is running).
    let started = std::time::Instant::now();
    let (code, body) = loop {
        let (code, body) = trigger(&b, sim.token()).await;
        if code != 429 || started.elapsed() > WAIT {
            break (code, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        (code, body["status"].as_str()),
        (200, Some("completed")),
        "{body}"
    );

    // SIGTERM: the new leader exits 0 and releases the Lease.
    b.terminate();
    assert_eq!(b.wait_exit().await, 0, "log:\n{}", b.log_text());
    assert_eq!(holder(&sim), "", "lease not released: {:?}", lease(&sim));
    sim.shutdown().await;
}
