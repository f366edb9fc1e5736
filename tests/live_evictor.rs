//! The live eviction backend against a fake API over HTTP: request body and UID precondition,
//! response classification, v1beta1 fallback, Events; and a full live cycle's metrics.

mod live_common;
mod plugins_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube_descheduler::evictor::{EvictOutcome, EvictionBackend, EvictionRequest};
use kube_descheduler::live::cycle::{LiveCycle, Mode};
use kube_descheduler::live::cycle_loop::{CycleExec, Source};
use kube_descheduler::live::events::EventSink;
use kube_descheduler::live::evictor::{ApiEvictor, ApiEvictorConfig};
use kube_descheduler::live::ratelimit::RateLimiter;
use kube_descheduler::policy::Policy;
use kube_descheduler::serving::metrics::Metrics;
use kube_descheduler::snapshot::Snapshot;
use kube_descheduler::testing::{node, pod, snapshot};
use live_common::FakeApi;
use tokio_util::sync::CancellationToken;

fn config(client: kube::Client, failure_events: bool) -> ApiEvictorConfig {
    ApiEvictorConfig {
        client: client.clone(),
        limiter: Arc::new(RateLimiter::new(0.0, 1)),
        grace_period_seconds: Some(7),
        failure_events,
        events: Some(EventSink::new(client)),
        pods: None,
        use_v1beta1: Arc::new(AtomicBool::new(false)),
        background: None,
        background_gate: false,
        eviction_api: Default::default(),
        call_timeout: std::time::Duration::from_secs(30),
    }
}

fn cluster(names: &[&str]) -> Snapshot {
    snapshot(
        vec![node("n1").build(), node("n2").build()],
        names.iter().map(|n| pod("ns", n, "n1").build()).collect(),
    )
}

/// Evicts every pod of `names` through `cfg` from a blocking thread, as the engine does.
async fn evict_all(
    cfg: ApiEvictorConfig,
    names: &[&str],
    stop: CancellationToken,
) -> Vec<EvictOutcome> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let snap = cluster(&refs);
        let mut backend = ApiEvictor::new(cfg, rt, stop);
        let reason = std::sync::Arc::new(kube_descheduler::evictor::EvictionReason::plugin(
            "PodLifeTime",
        ));
        let req = EvictionRequest {
            profile: "p",
            plugin: "PodLifeTime",
            reason: &reason,
        };
        (0..refs.len() as u32)
            .map(|p| backend.evict(&snap, p, &req))
            .collect()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classifies_answers_and_sends_a_uid_precondition() {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    let outcomes = evict_all(
        config(client, true),
        &["ok", "deflect", "pdb", "boom", "gone"],
        CancellationToken::new(),
    )
    .await;
    assert_eq!(outcomes[0], EvictOutcome::Evicted);
    assert!(
        matches!(&outcomes[1], EvictOutcome::Deflected { message } if message.contains("Eviction triggered evacuation"))
    );
    assert!(
        matches!(&outcomes[2], EvictOutcome::Denied { reason } if reason.contains("disruption budget"))
    );
    assert!(matches!(&outcomes[3], EvictOutcome::Failed { error } if error.contains("500")));
    assert!(
        matches!(&outcomes[4], EvictOutcome::Failed { error } if error.contains("pod not found"))
    );

    let ev = api.evictions.lock().unwrap().clone();
    assert_eq!(ev.len(), 5, "one call per pod, never retried");
    let (ns, name, body) = &ev[0];
    assert_eq!((ns.as_str(), name.as_str()), ("ns", "ok"));
    assert_eq!(body["apiVersion"], "policy/v1");
    assert_eq!(body["kind"], "Eviction");
    assert_eq!(body["metadata"]["name"], "ok");
    assert_eq!(body["metadata"]["namespace"], "ns");
    assert_eq!(body["deleteOptions"]["gracePeriodSeconds"], 7);
    let uid = body["deleteOptions"]["preconditions"]["uid"]
        .as_str()
        .unwrap();
    assert!(!uid.is_empty());

    // Events: Normal for evicted and deflected, Warning EvictionFailed for the three others.
    let events = api.events.lock().unwrap().clone();
    let summary: Vec<(String, String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_string(),
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["regarding"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert!(
        summary.contains(&("Normal".into(), "PodLifeTime".into(), "ok".into())),
        "{summary:?}"
    );
    assert!(summary.contains(&("Normal".into(), "PodLifeTime".into(), "deflect".into())));
    for p in ["pdb", "boom", "gone"] {
        assert!(
            summary.contains(&("Warning".into(), "EvictionFailed".into(), p.into())),
            "{summary:?}"
        );
    }
    let ok_event = events
        .iter()
        .find(|e| e["regarding"]["name"] == "ok")
        .unwrap();
    assert_eq!(ok_event["action"], "Descheduled");
    assert_eq!(ok_event["reportingController"], "kube-descheduler");
    assert_eq!(
        ok_event["note"],
        "pod eviction from n1 node by kube-descheduler"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_eviction_call_is_an_error_after_the_call_timeout() {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    let mut cfg = config(client, false);
    cfg.call_timeout = std::time::Duration::from_millis(300);
    let started = std::time::Instant::now();
    let outcomes = evict_all(cfg, &["hang", "ok"], CancellationToken::new()).await;
    assert!(
        matches!(&outcomes[0], EvictOutcome::Failed { error } if error.contains("no answer within 0.3s")),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[1], EvictOutcome::Evicted, "the cycle goes on");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the hung call was not cut short: {:?}",
        started.elapsed()
    );
    assert_eq!(api.evictions.lock().unwrap().len(), 2, "no retry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_failure_events_unless_asked() {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    evict_all(config(client, false), &["boom"], CancellationToken::new()).await;
    assert!(api.events.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falls_back_to_v1beta1_when_v1_is_absent() {
    let api = Arc::new(FakeApi::default());
    api.v1_missing.store(true, Ordering::Relaxed);
    let (client, _) = live_common::start(api.clone()).await;
    let cfg = config(client, false);
    let flag = cfg.use_v1beta1.clone();
    let outcomes = evict_all(cfg, &["ok", "ok2"], CancellationToken::new()).await;
    assert_eq!(outcomes, vec![EvictOutcome::Evicted, EvictOutcome::Evicted]);
    let versions: Vec<String> = api
        .evictions
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.2["apiVersion"].as_str().unwrap_or_default().to_string())
        .collect();
    // First pod: v1 (404) then v1beta1; second pod: straight to v1beta1.
    assert_eq!(
        versions,
        vec!["policy/v1", "policy/v1beta1", "policy/v1beta1"]
    );
    assert!(flag.load(Ordering::Relaxed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_backend_makes_no_calls() {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    let stop = CancellationToken::new();
    stop.cancel();
    let outcomes = evict_all(config(client, true), &["ok"], stop).await;
    assert!(
        matches!(&outcomes[0], EvictOutcome::NotAttempted { reason } if reason.contains("stopped"))
    );
    assert!(api.evictions.lock().unwrap().is_empty());
}

fn policy() -> Policy {
    plugins_common::try_every_policy()
}

/// A cycle of [`policy`] over [`cluster`] with the pods `names`.
fn cycle(names: &'static [&'static str], mode: Mode, metrics: Option<Arc<Metrics>>) -> LiveCycle {
    LiveCycle {
        usage: None,
        policy: Arc::new(policy()),
        snapshot: Arc::new(move || cluster(names)),
        mode,
        metrics,
        recent: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_cycle_accounts_outcomes_in_upstream_metrics() {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    let metrics = Arc::new(Metrics::new());
    let exec = cycle(
        &["ok", "deflect", "pdb", "boom"],
        Mode::Live(Box::new(config(client, false))),
        Some(metrics.clone()),
    );
    let s = exec.run(Source::Trigger, CancellationToken::new()).await;
    assert_eq!(s.status, "completed");
    assert_eq!((s.evicted, s.deflected, s.skipped, s.errors), (1, 1, 1, 1));
    let text = metrics.render();
    for line in [
        r#"descheduler_pods_evicted_total{result="success",strategy="EvictAll",profile="p",namespace="ns",node="n1"} 1"#,
        r#"descheduler_pods_evicted_total{result="deflected",strategy="EvictAll",profile="p",namespace="ns",node="n1"} 1"#,
        r#"descheduler_pods_evicted_total{result="skipped",strategy="EvictAll",profile="p",namespace="ns",node="n1"} 1"#,
        r#"descheduler_pods_evicted_total{result="error",strategy="EvictAll",profile="p",namespace="ns",node="n1"} 1"#,
        "descheduler_loop_duration_seconds_count 1",
        r#"descheduler_strategy_duration_seconds_count{strategy="EvictAll",profile="p"} 1"#,
        r#"descheduler_loop_duration_seconds_bucket{le="500.0"} 1"#,
        "kube_descheduler_evictions_deflected_total 1",
        "kube_descheduler_evictions_skipped_total 1",
        r#"kube_descheduler_cycles_total{status="completed",source="trigger"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(text.contains("descheduler_build_info{GoVersion="), "{text}");
}

/// The next cycle starts before the pod watch shows the evicted pod terminating (the snapshot
/// source here never catches up): the pod is not evicted a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_cache_does_not_cause_a_second_eviction() {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    let exec = cycle(
        &["ok", "pdb"],
        Mode::Live(Box::new(config(client, false))),
        None,
    );
    let first = exec.run(Source::Interval, CancellationToken::new()).await;
    assert_eq!((first.evicted, first.skipped), (1, 1));
    let second = exec.run(Source::Interval, CancellationToken::new()).await;
    // The refused pod is tried again (as upstream); the evicted one is not.
    assert_eq!((second.evicted, second.skipped), (0, 1));
    let names: Vec<String> = api
        .evictions
        .lock()
        .unwrap()
        .iter()
        .map(|(_, n, _)| n.clone())
        .collect();
    assert_eq!(
        names.iter().filter(|n| n.as_str() == "ok").count(),
        1,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| n.as_str() == "pdb").count(),
        2,
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_makes_no_calls_and_is_accounted() {
    let api = Arc::new(FakeApi::default());
    let (_client, _) = live_common::start(api.clone()).await;
    let metrics = Arc::new(Metrics::new());
    let exec = cycle(&["a", "b"], Mode::DryRun, Some(metrics.clone()));
    let s = exec.run(Source::Once, CancellationToken::new()).await;
    assert_eq!(s.evicted, 2);
    assert!(api.evictions.lock().unwrap().is_empty());
    assert!(api.events.lock().unwrap().is_empty());
    assert!(metrics.render().contains(r#"result="success""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fewer_than_two_ready_nodes_skips_the_cycle() {
    let metrics = Arc::new(Metrics::new());
    let exec = LiveCycle {
        usage: None,
        policy: Arc::new(policy()),
        snapshot: Arc::new(|| {
            snapshot(vec![node("n1").build()], vec![pod("ns", "a", "n1").build()])
        }),
        mode: Mode::DryRun,
        metrics: Some(metrics.clone()),
        recent: Default::default(),
    };
    let s = exec.run(Source::Interval, CancellationToken::new()).await;
    assert_eq!(s.status, "skipped");
    assert_eq!(s.evicted, 0);
    assert!(s.message.is_some());
}
