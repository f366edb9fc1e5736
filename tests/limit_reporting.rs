//! Evictions refused by `maxNoOfPodsToEvict*` are reported as upstream v0.36 does: each refusal is
//! kept in the cycle report, handed to the backend (for the `EvictionFailed` Event), and counted in
//! `descheduler_pods_evicted_total` with the limit's error text as `result`.

mod plugins_common;

use std::sync::{Arc, Mutex};

use kube_descheduler::evictor::{EvictOutcome, EvictionBackend, EvictionRequest, LimitError};
use kube_descheduler::framework::cycle::{CycleConfig, Profile, run_cycle};
use kube_descheduler::plugins::default_evictor::DefaultEvictor;
use kube_descheduler::serving::metrics::Metrics;
use kube_descheduler::snapshot::{PodId, Snapshot};
use kube_descheduler::testing::*;
use plugins_common::EvictAll;

/// Evicts everything and remembers the limit refusals it was told about.
#[derive(Default)]
struct Recording {
    refused: Arc<Mutex<Vec<(String, LimitError)>>>,
}

impl EvictionBackend for Recording {
    fn evict(&mut self, _: &Snapshot, _: PodId, _: &EvictionRequest<'_>) -> EvictOutcome {
        EvictOutcome::Evicted
    }
    fn limit_refused(
        &mut self,
        s: &Snapshot,
        pod: PodId,
        _: &EvictionRequest<'_>,
        limit: &LimitError,
    ) {
        self.refused
            .lock()
            .unwrap()
            .push((s.pod(pod).name.clone(), limit.clone()));
    }
}

fn cluster() -> Snapshot {
    snapshot(
        vec![node("n1").build(), node("n2").build(), node("n3").build()],
        vec![
            pod("a", "p1", "n1").build(),
            pod("a", "p2", "n1").build(),
            pod("b", "p3", "n2").build(),
            pod("a", "p4", "n2").build(),
            pod("c", "p5", "n3").build(),
        ],
    )
}

fn run(
    cfg: CycleConfig,
) -> (
    kube_descheduler::framework::cycle::CycleReport,
    Vec<(String, LimitError)>,
) {
    let backend = Recording::default();
    let refused = backend.refused.clone();
    let mut snap = cluster();
    let profiles = [Profile {
        name: "prof".into(),
        evictor: Box::new(DefaultEvictor::default()),
        deschedule: vec![Box::new(EvictAll)],
        balance: vec![],
    }];
    let (report, _) = run_cycle(&profiles, &cfg, &mut snap, now(), Box::new(backend));
    let refused = refused.lock().unwrap().clone();
    (report, refused)
}

fn hits(
    report: &kube_descheduler::framework::cycle::CycleReport,
) -> Vec<(String, String, &'static str)> {
    report
        .limit_hits
        .iter()
        .map(|h| (h.name.clone(), h.node.to_string(), h.limit.result_label()))
        .collect()
}

/// Asserts that p1, p3 and p5 were evicted and `limit` refused p2 (on n1) and p4 (on n2).
fn assert_p2_and_p4_refused(report: &kube_descheduler::framework::cycle::CycleReport, limit: &str) {
    let evicted: Vec<&str> = report.records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(evicted, vec!["p1", "p3", "p5"]);
    let expected = [("p2", "n1", limit), ("p4", "n2", limit)];
    let expected: Vec<(String, String, &str)> = expected
        .iter()
        .map(|&(pod, node, limit)| (pod.into(), node.into(), limit))
        .collect();
    assert_eq!(hits(report), expected);
}

#[test]
fn node_and_namespace_limit_refusals_are_recorded_and_passed_to_the_backend() {
    let (report, refused) = run(CycleConfig {
        max_per_node: Some(kube_descheduler::evictor::LimitValue::Count(1)),
        max_per_namespace: Some(kube_descheduler::evictor::LimitValue::Count(1)),
        ..Default::default()
    });
    // p1 evicted (n1 and namespace a now full); p2 refused by the node limit, so n1 is left;
    // p3 evicted (namespace b); p4 would be the second of n2 → node limit; p5 evicted.
    assert_p2_and_p4_refused(&report, "maximum number of evicted pods per node reached");
    assert_eq!(
        refused,
        vec![
            ("p2".into(), LimitError::Node { limit: 1 }),
            ("p4".into(), LimitError::Node { limit: 1 }),
        ]
    );
    let h = &report.limit_hits[0];
    assert_eq!(
        (&*h.namespace, &*h.profile, &*h.plugin),
        ("a", "prof", "EvictAll")
    );

    // Namespace limit alone: only that pod is skipped, the node goes on.
    let (report, _) = run(CycleConfig {
        max_per_namespace: Some(kube_descheduler::evictor::LimitValue::Count(1)),
        ..Default::default()
    });
    assert_p2_and_p4_refused(
        &report,
        "maximum number of evicted pods per namespace reached",
    );
}

#[test]
fn total_limit_refusal_stops_the_plugin_and_is_recorded_once() {
    let (report, refused) = run(CycleConfig {
        max_total: Some(2),
        ..Default::default()
    });
    assert_eq!(report.records.len(), 2);
    assert_eq!(
        hits(&report),
        vec![(
            "p3".into(),
            "n2".into(),
            "maximum number of evicted pods per a descheduling cycle reached"
        )]
    );
    assert_eq!(refused.len(), 1);
}

#[test]
fn no_limits_no_refusals() {
    let (report, refused) = run(CycleConfig::default());
    assert_eq!(report.records.len(), 5);
    assert!(report.limit_hits.is_empty() && refused.is_empty());
}

#[test]
fn limit_refusals_are_counted_with_upstreams_result_label() {
    let (report, _) = run(CycleConfig {
        max_per_node: Some(kube_descheduler::evictor::LimitValue::Count(1)),
        max_total: Some(2),
        ..Default::default()
    });
    let m = Metrics::new();
    m.record_cycle(&report, "completed", "once");
    m.record_cycle(&report, "completed", "once");
    let text = m.render();
    let line = |result: &str, ns: &str, node: &str| {
        format!(
            "descheduler_pods_evicted_total{{result=\"{result}\",strategy=\"EvictAll\",profile=\"prof\",namespace=\"{ns}\",node=\"{node}\"}} 2"
        )
    };
    // p1 evicted; p2 hits the node limit; p3 evicted; p4 hits the total limit (plugin stops).
    assert!(text.contains(&line("success", "a", "n1")), "{text}");
    assert!(text.contains(&line("success", "b", "n2")), "{text}");
    assert!(
        text.contains(&line(
            "maximum number of evicted pods per node reached",
            "a",
            "n1"
        )),
        "{text}"
    );
    assert!(
        text.contains(&line(
            "maximum number of evicted pods per a descheduling cycle reached",
            "a",
            "n2"
        )),
        "{text}"
    );
    // Limit refusals are not errors, skips or deflections.
    assert!(!text.contains("result=\"error\""), "{text}");
    assert!(
        text.contains("kube_descheduler_evictions_skipped_total 0"),
        "{text}"
    );
}
