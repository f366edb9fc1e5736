//! `run` end to end against the fake API: watch caches sync from LIST, one cycle, evictions and
//! Events through the API (or none in dry-run), then exit.

mod live_common;
mod plugins_common;

use std::sync::Arc;
use std::time::Duration;

use kube_descheduler::live::run::{LiveOptions, run};
use kube_descheduler::policy::Policy;
use kube_descheduler::testing::{node, pod};
use live_common::FakeApi;
use tokio_util::sync::CancellationToken;

fn options(dry_run: bool) -> LiveOptions {
    LiveOptions {
        policy: Policy {
            grace_period_seconds: Some(5),
            eviction_failure_event_notification: true,
            ..plugins_common::try_every_policy()
        },
        interval: Duration::ZERO,
        dry_run,
        eviction_api: Default::default(),
        qps: 50.0,
        burst: 100,
        leader: None,
        serve: None,
        serve_limits: Default::default(),
        protocols: Default::default(),
        feature_gates: Default::default(),
        disable_metrics: false,
        metrics_unauthenticated: false,
        trigger: false,
        one_shot_sync_timeout: Duration::from_secs(20),
        api_server: "https://fake".into(),
        cycle_on_events: None,
        metrics_max_age: kube_descheduler::usage::collector::DEFAULT_MAX_AGE,
        watch: Default::default(),
        placement_return_window: Duration::ZERO,
    }
}

async fn cluster() -> (kube::Client, Arc<FakeApi>) {
    let api = Arc::new(FakeApi::default());
    {
        let mut lists = api.lists.lock().unwrap();
        lists.insert(
            "/api/v1/nodes".into(),
            vec![
                serde_json::to_value(node("n1").build()).unwrap(),
                serde_json::to_value(node("n2").build()).unwrap(),
            ],
        );
        lists.insert(
            "/api/v1/pods".into(),
            vec![
                serde_json::to_value(pod("ns", "ok-a", "n1").build()).unwrap(),
                serde_json::to_value(pod("ns", "pdb-b", "n2").build()).unwrap(),
            ],
        );
    }
    let (client, _) = live_common::start(api.clone()).await;
    (client, api)
}

/// `run` with `options` against the fake API, which must exit successfully within 30 s.
async fn run_once(options: LiveOptions, client: kube::Client) {
    tokio::time::timeout(
        Duration::from_secs(30),
        run(options, client, CancellationToken::new()),
    )
    .await
    .expect("exits")
    .expect("succeeds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_syncs_evicts_and_exits() {
    let (client, api) = cluster().await;
    run_once(options(false), client).await;
    let ev = api.evictions.lock().unwrap().clone();
    let mut names: Vec<&str> = ev.iter().map(|e| e.1.as_str()).collect();
    names.sort();
    assert_eq!(names, vec!["ok-a", "pdb-b"], "one call per pod");
    let events = api.events.lock().unwrap().clone();
    let kinds: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().into(),
                e["regarding"]["name"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("Normal".into(), "ok-a".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("Warning".into(), "pdb-b".into())),
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_makes_no_writes() {
    let (client, api) = cluster().await;
    run_once(options(true), client).await;
    assert!(api.evictions.lock().unwrap().is_empty());
    assert!(api.events.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_before_sync_exits_cleanly() {
    let api = Arc::new(FakeApi::default());
    let (client, _) = live_common::start(api.clone()).await;
    let stop = CancellationToken::new();
    stop.cancel();
    let mut o = options(false);
    o.interval = Duration::from_secs(60);
    tokio::time::timeout(Duration::from_secs(10), run(o, client, stop))
        .await
        .expect("exits")
        .expect("ok");
    assert!(api.evictions.lock().unwrap().is_empty());
}
