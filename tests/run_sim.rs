//! `kube-descheduler run` (the real binary) against the API stand-in: a one-shot run with every
//! eviction outcome and its Events, interval runs with limits (reported as upstream does) and a
//! retried error, and dry-run making no writes.

mod run_sim_common;

use std::sync::{Arc, Mutex};

use kube_sim::FaultRule;
use run_sim_common::*;
use serde_json::Value;

/// One-shot: two pods evicted (`Descheduled` Events), one refused by a PodDisruptionBudget (429,
/// skipped), one failing with 500 (error) — both `EvictionFailed` Events since the policy asks for
/// them — and a pod on an untainted node untouched. The process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_run_evicts_and_reports_every_outcome_with_events() {
    let sim = start_sim(cluster(
        [
            replica_set_with_pods("web", 2, TAINTED),
            replica_set_with_pods("db", 1, TAINTED),
            replica_set_with_pods("api", 1, TAINTED),
            vec![
                blocking_pdb("db"),
                replica_set("ok", 1),
                rs_pod("ok", "ok-1", "n2"),
            ],
        ]
        .concat(),
    ))
    .await;
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        name: Some("api-1".into()),
        status: Some(500),
        message: Some("etcd is having a bad day".into()),
        ..Default::default()
    });
    let mut d = start(
        &sim,
        "oneshot",
        &policy("evictionFailureEventNotification: true"),
        &["--descheduling-interval=0", "--secure-port=0"],
    );
    let code = d.wait_exit().await;
    let log = d.log_text();
    assert_eq!(code, 0, "log:\n{log}");

    for name in ["web-1", "web-2"] {
        assert!(evicted(&sim, name), "{name} should be evicted; log:\n{log}");
    }
    for name in ["db-1", "api-1", "ok-1"] {
        assert!(
            !evicted(&sim, name),
            "{name} must not be evicted; log:\n{log}"
        );
    }

    // Events are published asynchronously to the eviction, but before the process exits.
    for name in ["web-1", "web-2"] {
        let normal = events_for(&sim, name, "Normal");
        assert_eq!(occurrences(&normal), 1, "{name}: {normal:?}");
        let e = &normal[0];
        assert_eq!(e["action"], "Descheduled");
        assert_eq!(e["reason"], "RemovePodsViolatingNodeTaints");
        assert_eq!(e["reportingController"], "kube-descheduler");
        let note = e["note"].as_str().unwrap_or_default();
        assert!(note.contains("pod eviction from n1 node"), "{note}");
        assert!(events_for(&sim, name, "Warning").is_empty());
    }
    let pdb = events_for(&sim, "db-1", "Warning");
    assert_eq!(occurrences(&pdb), 1, "{pdb:?}");
    assert_eq!(pdb[0]["reason"], "EvictionFailed");
    let note = pdb[0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("disruption budget"), "{note}");
    let err = events_for(&sim, "api-1", "Warning");
    assert_eq!(occurrences(&err), 1, "{err:?}");
    assert_eq!(err[0]["reason"], "EvictionFailed");
    let note = err[0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("etcd is having a bad day"), "{note}");
    for name in ["db-1", "api-1", "ok-1"] {
        assert!(events_for(&sim, name, "Normal").is_empty());
    }
    assert!(events_for(&sim, "ok-1", "Warning").is_empty());

    // The cycle summary counts each outcome once.
    assert!(
        log.contains("evicted=2") && log.contains("skipped=1") && log.contains("errors=1"),
        "log:\n{log}"
    );
    assert!(log.contains("Error evicting pod"), "log:\n{log}");
    sim.shutdown().await;
}

/// Interval runs with `maxNoOfPodsToEvictPerNode: 1`: one pod per cycle leaves the tainted node;
/// the limit refusals are counted in `descheduler_pods_evicted_total` with upstream's result text
/// and logged (and get upstream's `EvictionFailed` Event); an eviction that failed (500) is retried by a later cycle; nobody is evicted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_runs_honour_the_node_limit_report_it_and_retry_errors() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 3, TAINTED))).await;
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        name: Some("web-1".into()),
        status: Some(500),
        times: Some(1),
        ..Default::default()
    });
    let mut d = start_interval(
        &sim,
        "interval",
        &policy("maxNoOfPodsToEvictPerNode: 1\nevictionFailureEventNotification: true"),
    )
    .await;

    let s = sim.clone();
    wait_for("all three pods evicted", || {
        ["web-1", "web-2", "web-3"].iter().all(|n| evicted(&s, n))
    })
    .await;
    // Let at least two more cycles run over the settled cluster.
    d.more_cycles(2.0).await;
    let text = d.metrics().await;
    let log = d.log_text();
    assert_eq!(evicted_from_tainted(&text, "success"), 3.0, "{text}\n{log}");
    assert_eq!(evicted_from_tainted(&text, "error"), 1.0, "{text}");
    let limited = evicted_from_tainted(&text, "maximum number of evicted pods per node reached");
    assert!(limited >= 1.0, "no limit refusal counted:\n{text}");
    assert!(log.contains("Eviction refused by a limit"), "log:\n{log}");
    // Upstream's EvictionFailed Event for a limit hit (the policy asks for failure Events).
    let limit_events: Vec<Value> = ["web-1", "web-2", "web-3"]
        .iter()
        .flat_map(|n| events_for(&sim, n, "Warning"))
        .filter(|e| {
            e["note"]
                .as_str()
                .is_some_and(|n| n.ends_with("failed: node eviction limit exceeded (1)"))
        })
        .collect();
    assert!(!limit_events.is_empty(), "{:?}", all_events(&sim));
    assert!(limit_events.iter().all(|e| e["reason"] == "EvictionFailed"));
    // One eviction per cycle at most: the limit held.
    assert!(interval_cycles(&text) >= 3.0, "{text}");

    for name in ["web-1", "web-2", "web-3"] {
        let normal = events_for(&sim, name, "Normal");
        assert_eq!(
            occurrences(&normal),
            1,
            "{name} evicted more than once: {normal:?}"
        );
    }
    // The replacements run on the untainted nodes and stay there.
    let pods = sim.list("v1", "Pod", Some(NS));
    let replacements: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
        })
        .collect();
    assert!(
        replacements
            .iter()
            .all(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) != Some(TAINTED)),
        "{replacements:?}"
    );
    assert!(d.running());
    d.terminate();
    assert_eq!(d.wait_exit().await, 0, "log:\n{}", d.log_text());
    sim.shutdown().await;
}

/// `--dry-run`: the plan is logged (with the PodDisruptionBudget evaluated locally) and nothing is
/// written: no pod deleted or marked terminating, no Event, no Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_makes_no_writes() {
    let sim = start_sim(cluster(
        [
            replica_set_with_pods("web", 2, TAINTED),
            replica_set_with_pods("db", 1, TAINTED),
            vec![blocking_pdb("db")],
        ]
        .concat(),
    ))
    .await;
    // Wait for the PDB controller to publish the budget's status (the local check reads it).
    let s = sim.clone();
    wait_for("PDB status", || {
        s.get("policy/v1", "PodDisruptionBudget", NS, "db-pdb")
            .is_some_and(|p| p.pointer("/status/observedGeneration").is_some())
    })
    .await;
    let writes = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut rx = sim.store().subscribe();
    let w = writes.clone();
    let watcher = tokio::spawn(async move {
        while let Ok(ev) = rx.recv().await {
            let o = &ev.object;
            let kind = o["kind"].as_str().unwrap_or_default();
            let terminating = o
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|v| !v.is_null());
            let interesting = match kind {
                "Event" | "Lease" => true,
                "Pod" => terminating || ev.kind.as_str() == "DELETED",
                _ => false,
            };
            if interesting {
                let name = o
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                w.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(format!("{} {kind} {name}", ev.kind.as_str()));
            }
        }
    });
    let mut d = start(
        &sim,
        "dry",
        &policy("evictionFailureEventNotification: true"),
        &["--descheduling-interval=0", "--secure-port=0", "--dry-run"],
    );
    let code = d.wait_exit().await;
    let log = d.log_text();
    assert_eq!(code, 0, "log:\n{log}");
    watcher.abort();
    let writes = writes.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(writes.is_empty(), "dry-run wrote: {writes:?}\nlog:\n{log}");
    assert!(all_events(&sim).is_empty());
    for name in ["web-1", "web-2", "db-1"] {
        assert!(!evicted(&sim, name), "{name}");
    }
    let planned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Evicted pod in dry run mode"))
        .collect();
    assert_eq!(planned.len(), 3, "log:\n{log}");
    let db = planned.iter().find(|l| l.contains("shop/db-1"));
    assert!(
        db.is_some_and(|l| l.contains("outcome=\"denied\"") || l.contains("outcome=denied")),
        "db-1 should be predicted as refused by its budget: {planned:?}"
    );
    assert!(
        log.contains("evicted=2") && log.contains("skipped=1"),
        "log:\n{log}"
    );
    sim.shutdown().await;
}
