//! `FaultRule::latency_after` (the request takes effect, the answer is late) and the log of
//! accepted evictions, over real HTTPS.
mod common;

use std::time::{Duration, Instant};

use common::*;
use kube_sim::{EvictionRecord, FaultRule};
use serde_json::json;

const DEPLOY: &str = "/apis/apps/v1/namespaces/app/deployments/api";

fn deployment() -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "app"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": {"app": "api"}},
                "spec": {"containers": [{"name": "c", "image": "api:1"}]}}}})
}

fn annotation(sim: &kube_sim::SimHandle) -> Option<String> {
    sim.get("apps/v1", "Deployment", "app", "api")
        .and_then(|d| {
            d.pointer("/spec/template/metadata/annotations/restartedAt")
                .cloned()
        })
        .and_then(|v| v.as_str().map(String::from))
}

#[tokio::test]
async fn faults_latency_after_stores_the_patch_before_the_late_answer() {
    let sim = start(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}),
        deployment(),
    ])
    .await;
    sim.add_fault(FaultRule {
        verb: Some("patch".into()),
        resource: Some("deployments".into()),
        name: Some("api".into()),
        latency_after: Some(Duration::from_millis(1500)),
        times: Some(1),
        ..Default::default()
    });
    let client = Client::new(&sim);
    let patch = json!([{"op": "add", "path": "/spec/template/metadata/annotations",
        "value": {"restartedAt": "2026-01-01T00:00:00Z"}}]);
    let started = Instant::now();
    let call = client.patch(DEPLOY, "application/json-patch+json", patch);
    tokio::pin!(call);
    // While the answer is held back, the store already has the change.
    let mut seen_early = None;
    let resp = loop {
        tokio::select! {
            r = &mut call => break r,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                if seen_early.is_none() && annotation(&sim).is_some() {
                    seen_early = Some(started.elapsed());
                }
            }
        }
    };
    let answered = started.elapsed();
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    let early = seen_early.expect("the patch was stored before the answer came");
    assert!(
        early < Duration::from_millis(1500),
        "stored after {early:?}"
    );
    assert!(
        answered >= Duration::from_millis(1500),
        "answered after {answered:?}"
    );
    // The rule was used once: the next patch is answered at once.
    let started = Instant::now();
    let resp = client
        .patch(
            DEPLOY,
            "application/merge-patch+json",
            json!({"spec": {"replicas": 2}}),
        )
        .await;
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    assert!(started.elapsed() < Duration::from_millis(1500));
    sim.shutdown().await;
}

#[tokio::test]
async fn accepted_evictions_are_logged_and_refused_or_dry_run_ones_are_not() {
    let sim = start(vec![
        node("n1"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}),
        pod("app", "p", "n1", json!({"app": "web"}), true),
        pod("app", "q", "n1", json!({"app": "web"}), true),
    ])
    .await;
    let client = Client::new(&sim);
    let dry = client
        .post(
            "/api/v1/namespaces/app/pods/p/eviction?dryRun=All",
            eviction("p", "app"),
        )
        .await;
    assert!(dry.status < 300, "{dry:?}");
    let missing = client
        .post(
            "/api/v1/namespaces/app/pods/nope/eviction",
            eviction("nope", "app"),
        )
        .await;
    assert_eq!(missing.status, 404);
    for name in ["q", "p"] {
        let r = client
            .post(
                &format!("/api/v1/namespaces/app/pods/{name}/eviction"),
                eviction(name, "app"),
            )
            .await;
        assert!(r.status < 300, "{r:?}");
    }
    let rec = |name: &str| EvictionRecord {
        namespace: "app".into(),
        name: name.into(),
    };
    assert_eq!(sim.evictions(), vec![rec("q"), rec("p")]);
    sim.shutdown().await;
}
