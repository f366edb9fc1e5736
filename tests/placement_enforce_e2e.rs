//! `placement: Enforce` end to end: `run` (not dry-run, a 2 s interval, at least three
//! cycles) against kube-sim with its controllers on, on the ping-pong cluster (six 4-CPU nodes;
//! n1–n4 one 2.4-CPU pod of `big` each, n5 / n6 one 200m pod of `small`; HighNodeUtilization at
//! cpu / memory 20 %; see `placement_e2e_common`).
//!
//! - kube-sim's default least-allocated scheduler would put both small pods straight back: Enforce
//!   evicts nothing in any cycle, and each refusal is explained — a log line and an
//!   `EvictionRefusedByPlacement` Event on the pod with the scores, and
//!   `kube_descheduler_placement_refusals_total{reason="PlacementReturn"}` counted; the small pods
//!   are the original ones (same UIDs, still on n5 / n6). `--dry-run` logs and counts the same
//!   refusals and publishes no Event.
//! - MostAllocated in both kube-sim's scheduler and `--scheduler-config`, with Enforce and with
//!   Report: the small pods are evicted once, their replacements land on n1–n4, and later cycles
//!   evict (and refuse) nothing.
//!
//! Every wait polls an observable condition with a deadline.

mod placement_e2e_common;
mod run_sim_common;

use placement_e2e_common::{
    MOST_ALLOCATED, MOST_ALLOCATED_FILE, Run, policy, small_nodes, small_pods, start_cluster,
    wait_packed,
};
use run_sim_common::{NS, metric};
use serde_json::Value;

const REFUSALS: &str = "kube_descheduler_placement_refusals_total";

/// The `EvictionRefusedByPlacement` Events on pod `name`.
fn refusal_events(sim: &kube_sim::SimHandle, name: &str) -> Vec<Value> {
    sim.list("events.k8s.io/v1", "Event", Some(NS))
        .into_iter()
        .filter(|e| e["reason"] == "EvictionRefusedByPlacement")
        .filter(|e| e.pointer("/regarding/name").and_then(Value::as_str) == Some(name))
        .collect()
}

/// Waits for three completed cycles and six PlacementReturn refusals (two per cycle).
async fn wait_three_refusing_cycles(run: &Run) {
    run.wait("three cycles refusing both small pods", |m| {
        metric(
            m,
            "kube_descheduler_cycles_total",
            &[("status", "completed")],
        ) >= 3.0
            && metric(
                m,
                REFUSALS,
                &[
                    ("profile", "pack"),
                    ("strategy", "HighNodeUtilization"),
                    ("reason", "PlacementReturn"),
                ],
            ) >= 6.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_with_the_least_allocated_scheduler_evicts_nothing_and_explains_each_refusal() {
    let sim = start_cluster(None).await;
    let before = small_pods(&sim);
    assert_eq!(small_nodes(&sim), ["n5", "n6"]);
    let run = Run::start(&sim, "enforce", &policy(Some("Enforce")), &[]).await;
    wait_three_refusing_cycles(&run).await;
    let text = run.d.metrics().await;
    assert_eq!(
        metric(&text, "descheduler_pods_evicted_total", &[]),
        0.0,
        "no eviction was attempted in any cycle"
    );
    assert_eq!(
        metric(&text, REFUSALS, &[("reason", "PlacementNoFit")])
            + metric(&text, REFUSALS, &[("reason", "PlacementTargetEmptied")]),
        0.0
    );
    assert_eq!(
        small_pods(&sim),
        before,
        "the small pods are the original ones"
    );
    // An Event on each small pod, with the sentence and its numbers.
    for (pod, node) in [("small-1", "n5"), ("small-2", "n6")] {
        let events = refusal_events(&sim, pod);
        assert!(!events.is_empty(), "no refusal Event on {pod}");
        for e in &events {
            assert_eq!(e["type"], "Warning");
            assert_eq!(e["action"], "PlacementRefused");
            assert_eq!(
                e.pointer("/regarding/kind"),
                Some(&serde_json::json!("Pod"))
            );
            let note = e["note"].as_str().unwrap_or_default();
            assert!(
                note.starts_with(&format!(
                    "HighNodeUtilization's eviction from {node} refused by kube-descheduler's placement: Enforce (PlacementReturn): would be scheduled back onto {node}: score "
                )),
                "{note}"
            );
            assert!(
                note.contains("LeastAllocated")
                    && note.ends_with(
                        "; use MostAllocated in the scheduler configuration, or disable HighNodeUtilization"
                    ),
                "{note}"
            );
        }
    }
    // The log line of each refusal, and the cycle's count.
    let log = run.d.log_text();
    for node in ["n5", "n6"] {
        assert!(
            log.lines()
                .any(|l| l.contains("Eviction refused by placement")
                    && l.contains("PlacementReturn")
                    && l.contains(&format!("would be scheduled back onto {node}: score "))),
            "no refusal line for {node}; log:\n{log}"
        );
    }
    assert!(
        log.contains("placement_refusals=2"),
        "the cycle line counts the refusals; log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_logs_and_counts_the_same_refusals_without_events() {
    let sim = start_cluster(None).await;
    let before = small_pods(&sim);
    let run = Run::start(
        &sim,
        "enforce-dry",
        &policy(Some("Enforce")),
        &["--dry-run"],
    )
    .await;
    wait_three_refusing_cycles(&run).await;
    assert_eq!(run.value("descheduler_pods_evicted_total", &[]).await, 0.0);
    assert_eq!(small_pods(&sim), before);
    assert!(refusal_events(&sim, "small-1").is_empty());
    let log = run.d.log_text();
    assert!(
        log.contains("Eviction refused by placement") && log.contains("dry_run=true"),
        "log:\n{log}"
    );
}

/// MostAllocated in kube-sim and in `--scheduler-config`: the small pods are evicted once and
/// packed onto n1–n4; later cycles evict and refuse nothing.
async fn most_allocated_packs_once(mode: &str) {
    let sim = start_cluster(Some(MOST_ALLOCATED)).await;
    let run = Run::start(
        &sim,
        &format!("most-{}", mode.to_lowercase()),
        &policy(Some(mode)),
        &["--scheduler-config", MOST_ALLOCATED_FILE],
    )
    .await;
    run.wait_evicted("the two small pods evicted", 2.0).await;
    wait_packed(&sim).await;
    run.wait_cycles(2.0).await;
    assert!(run.cycles().await >= 3.0);
    assert_eq!(run.evicted().await, 2.0, "later cycles evict nothing");
    assert_eq!(
        run.value(REFUSALS, &[]).await,
        0.0,
        "{mode}: nothing refused"
    );
    let nodes = small_nodes(&sim);
    assert!(
        nodes.iter().all(|n| n != "n5" && n != "n6"),
        "{mode}: {nodes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_with_most_allocated_packs_the_small_pods_once() {
    most_allocated_packs_once("Enforce").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_with_most_allocated_packs_the_small_pods_once() {
    most_allocated_packs_once("Report").await;
}
