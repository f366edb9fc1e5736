//! Feature gate `EvictionsInBackground` (upstream v0.36) against the API stand-in: a pod
//! annotated `descheduler.alpha.kubernetes.io/request-evict-only` whose eviction is answered 429
//! "Eviction triggered evacuation" (as KubeVirt answers) is an eviction in progress — counted
//! `pods_evicted{result="background"}` once, not evicted again while it lasts, counted
//! `result="success"` when the pod is gone, and holding its place under the eviction limits
//! meanwhile. The eviction guard's own deflection (same phrase) and
//! the same answer for a pod without the annotation stay deflections.

mod run_sim_common;

use std::time::{Duration, Instant};

use kube_sim::FaultRule;
use run_sim_common::*;

const KUBEVIRT: &str = "admission webhook \"virt-launcher-eviction-interceptor.kubevirt.io\" denied the request: Eviction triggered evacuation of VMI \"shop/vm\"";
const GUARD: &str = "admission webhook \"guard.kube-descheduler.io\" denied the request: Eviction triggered evacuation: the kube-descheduler eviction guard started a rolling restart of Deployment shop/web; a rolling restart is in progress and a replacement pod starts before pod shop/web-1 is removed.";

fn annotated(rs: &str) -> Vec<serde_json::Value> {
    let mut objects = replica_set_with_pods(rs, 1, TAINTED);
    objects[1]["metadata"]["annotations"] =
        serde_json::json!({"descheduler.alpha.kubernetes.io/request-evict-only": ""});
    objects
}

fn answer(name: &str, message: &str) -> FaultRule {
    FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        name: Some(name.into()),
        status: Some(429),
        message: Some(message.into()),
        ..Default::default()
    }
}

async fn wait_metric(d: &mut Descheduler, what: &str, cond: impl Fn(&str) -> bool) {
    let start = Instant::now();
    loop {
        let text = d.metrics().await;
        if cond(&text) {
            return;
        }
        assert!(d.running(), "exited; log:\n{}", d.log_text());
        assert!(
            start.elapsed() < WAIT,
            "{what}: not reached; metrics:\n{text}\nlog:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn evicted_total(text: &str, result: &str) -> f64 {
    metric(
        text,
        "descheduler_pods_evicted_total",
        &[("result", result)],
    )
}

fn cycles(text: &str) -> f64 {
    metric(
        text,
        "kube_descheduler_cycles_total",
        &[("source", "interval")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_in_background_are_tracked_until_the_pod_is_gone() {
    let mut objects = annotated("vm");
    objects.extend(annotated("web"));
    objects.extend(replica_set_with_pods("plain", 1, TAINTED));
    let sim = start_sim(cluster(objects)).await;
    sim.add_fault(answer("vm-1", KUBEVIRT));
    sim.add_fault(answer("web-1", GUARD));
    sim.add_fault(answer("plain-1", KUBEVIRT));
    let mut d = start(
        &sim,
        "background",
        &policy(""),
        &[
            "--descheduling-interval=1s",
            "--metrics-unauthenticated",
            "--feature-gates=EvictionsInBackground=true",
        ],
    );
    d.wait_ready().await;

    wait_metric(&mut d, "vm-1 in background", |t| {
        evicted_total(t, "background") == 1.0
    })
    .await;
    // Two more cycles: vm-1 is not evicted again (it would count once more), web-1 (the
    // guard's answer) and plain-1 (no annotation) are deflected every cycle.
    let seen = cycles(&d.metrics().await);
    wait_metric(&mut d, "two more cycles", |t| cycles(t) >= seen + 2.0).await;
    let text = d.metrics().await;
    assert_eq!(evicted_total(&text, "background"), 1.0, "{text}");
    assert_eq!(evicted_total(&text, "success"), 0.0, "{text}");
    assert_eq!(evicted_total(&text, "error"), 0.0, "{text}");
    assert!(evicted_total(&text, "deflected") >= 4.0, "{text}");
    assert!(
        metric(&text, "kube_descheduler_evictions_deflected_total", &[]) >= 4.0,
        "{text}"
    );
    assert!(
        !evicted(&sim, "vm-1"),
        "vm-1 stays until its evacuation ends"
    );
    assert!(
        events_for(&sim, "vm-1", "Normal").is_empty(),
        "no Evicted Event for an eviction in background"
    );
    assert!(
        d.log_text().contains("Eviction in background assumed"),
        "{}",
        d.log_text()
    );

    // The evacuation ends: the pod goes; the eviction counts as a success (upstream PR #1880).
    let def = kube_sim::resources::by_kind("v1", "Pod").expect("pods");
    sim.store()
        .remove(def, NS, "vm-1", None)
        .expect("remove vm-1");
    wait_metric(&mut d, "vm-1 counted success", |t| {
        evicted_total(t, "success") == 1.0
    })
    .await;
    let text = d.metrics().await;
    assert_eq!(evicted_total(&text, "background"), 1.0, "{text}");
    sim.shutdown().await;
}

/// The background pod `avm-1` (sorted before `zplain-1`, so tried first) holds the only eviction
/// `maxNoOfPodsToEvictTotal: 1` allows while its evacuation lasts, as upstream counts its pending
/// eviction requests; once it is gone, `zplain-1` goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_in_background_counts_against_the_limits_until_the_pod_is_gone() {
    let mut objects = annotated("avm");
    objects.extend(replica_set_with_pods("zplain", 1, TAINTED));
    let sim = start_sim(cluster(objects)).await;
    sim.add_fault(answer("avm-1", KUBEVIRT));
    let mut d = start(
        &sim,
        "limits",
        &policy("maxNoOfPodsToEvictTotal: 1"),
        &[
            "--descheduling-interval=1s",
            "--metrics-unauthenticated",
            "--feature-gates=EvictionsInBackground=true",
        ],
    );
    d.wait_ready().await;
    wait_metric(&mut d, "avm-1 in background", |t| {
        evicted_total(t, "background") == 1.0
    })
    .await;
    let seen = cycles(&d.metrics().await);
    wait_metric(&mut d, "two more cycles", |t| cycles(t) >= seen + 2.0).await;
    assert!(
        !evicted(&sim, "zplain-1"),
        "the total limit is held by the eviction in background; log:\n{}",
        d.log_text()
    );
    let def = kube_sim::resources::by_kind("v1", "Pod").expect("pods");
    sim.store()
        .remove(def, NS, "avm-1", None)
        .expect("remove avm-1");
    wait_metric(&mut d, "zplain-1 evicted", |t| {
        evicted_total(t, "success") == 2.0
    })
    .await;
    assert!(evicted(&sim, "zplain-1"));
    sim.shutdown().await;
}

mod tracker {
    //! The tracker's rules on snapshots (no API): how an assumed eviction ends and is counted.

    use std::time::Duration;

    use kube_descheduler::live::background::{Assumed, BackgroundEvictions};
    use kube_descheduler::serving::metrics::Metrics;
    use kube_descheduler_engine::snapshot::Snapshot;
    use kube_descheduler_engine::testing::{node, pod, snapshot};

    const REQUEST: &str = "descheduler.alpha.kubernetes.io/request-evict-only";
    const IN_PROGRESS: &str = "descheduler.alpha.kubernetes.io/eviction-in-progress";

    fn cluster(phase: &str, annotations: &[&str]) -> Snapshot {
        let mut p = pod("ns", "vm", "n1").phase(phase);
        for a in annotations {
            p = p.annotation(a, "");
        }
        snapshot(vec![node("n1").build()], vec![p.build()])
    }

    fn assume(t: &BackgroundEvictions) {
        t.assume(Assumed {
            uid: "uid-ns-vm",
            namespace: "ns",
            name: "vm",
            node: "n1",
            profile: "p",
            strategy: "s",
        });
    }

    fn count(m: &Metrics, result: &str) -> u64 {
        m.pods_evicted_total(result, ("p", "s"), ("ns", "n1"))
    }

    #[test]
    fn an_assumed_eviction_in_progress_keeps_the_pod_marked() {
        let (t, m) = (BackgroundEvictions::default(), Metrics::new());
        assume(&t);
        let mut s = cluster("Running", &[REQUEST]);
        assert_eq!(t.apply(&mut s, Some(&m)), vec![0]);
        assert!(s.is_evicted(0));
        assert_eq!(t.len(), 1);
        assert_eq!(count(&m, "success") + count(&m, "error"), 0);
    }

    #[test]
    fn a_completed_pod_ends_it_succeeded_as_success_failed_as_error() {
        for (phase, result) in [("Succeeded", "success"), ("Failed", "error")] {
            let (t, m) = (BackgroundEvictions::default(), Metrics::new());
            assume(&t);
            let mut s = cluster(phase, &[REQUEST]);
            assert!(t.apply(&mut s, Some(&m)).is_empty(), "{phase}");
            assert!(t.is_empty(), "{phase}");
            assert_eq!(count(&m, result), 1, "{phase}");
        }
    }

    #[test]
    fn a_timed_out_assumption_counts_an_error_once() {
        let (t, m) = (BackgroundEvictions::new(Duration::ZERO), Metrics::new());
        assume(&t);
        std::thread::sleep(Duration::from_millis(5));
        // Still marked in progress by its controller: tracked again, as observed (not counted).
        let mut s = cluster("Running", &[REQUEST, IN_PROGRESS]);
        assert_eq!(t.apply(&mut s, Some(&m)), vec![0]);
        assert_eq!(count(&m, "error"), 1);
        let mut s = cluster("Running", &[REQUEST]);
        assert!(t.apply(&mut s, Some(&m)).is_empty(), "canceled");
        assert_eq!(count(&m, "error"), 1);
        assert_eq!(count(&m, "success"), 0);
    }

    #[test]
    fn an_observed_eviction_is_tracked_until_its_annotation_goes_and_never_counted() {
        let (t, m) = (BackgroundEvictions::default(), Metrics::new());
        let mut s = cluster("Running", &[REQUEST]);
        assert!(t.apply(&mut s, Some(&m)).is_empty(), "no in-progress mark");
        let mut s = cluster("Running", &[REQUEST, IN_PROGRESS]);
        assert_eq!(t.apply(&mut s, Some(&m)), vec![0]);
        let mut s = cluster("Running", &[REQUEST]);
        assert!(t.apply(&mut s, Some(&m)).is_empty(), "canceled");
        let mut s = cluster("Running", &[REQUEST, IN_PROGRESS]);
        t.apply(&mut s, Some(&m));
        let mut s = snapshot(vec![node("n1").build()], vec![]);
        t.apply(&mut s, Some(&m));
        assert!(t.is_empty());
        assert_eq!(count(&m, "success") + count(&m, "error"), 0);
    }

    #[test]
    fn a_lost_request_annotation_stops_the_tracking() {
        let (t, m) = (BackgroundEvictions::default(), Metrics::new());
        assume(&t);
        let mut s = cluster("Running", &[]);
        assert!(t.apply(&mut s, Some(&m)).is_empty());
        assert!(t.is_empty());
    }
}
