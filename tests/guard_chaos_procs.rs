//! Process-level chaos for the eviction guard: the real `kube-descheduler webhook` binary is
//! SIGKILLed after its `restartedAt` patch reached the API and before it answered the eviction.
//! A new process on the same port (same certificates) must recognise the rollout in flight, so
//! the Deployment is restarted once, the real `kubectl drain` completes, and the app never has
//! 0 Ready replicas.

mod e2e_common;

use std::time::{Duration, Instant};

use e2e_common::*;
use kube_sim::FaultRule;
use serde_json::Value;

/// How long the API holds back its answer to the guard's restart patch (already stored). Longer
/// than the restart actor's 2 s budget, so the killed process can never have seen the answer.
const PATCH_ANSWER_DELAY: Duration = Duration::from_secs(3);

fn failure_policies(cluster: &Cluster) -> Vec<String> {
    cluster
        .sim
        .list(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            None,
        )
        .iter()
        .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
        .map(|w| w["failurePolicy"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_killed_between_its_restart_patch_and_its_answer_restarts_once_and_the_drain_completes()
 {
    // One replica behind `minAvailable: 1`; the spare node is cordoned until the new guard has
    // answered a retry, so the retry meets the old pod and the rollout still in flight.
    let cluster = Cluster::start_single_replica_behind_budget("api").await;
    let (mut first, certs) = guarded(&cluster, &[]).await;
    let certs_dir = cluster.dir.path().join("certs");
    let port = first.addr.port();
    // While the guard is down the API server calls nothing: kube-apiserver treats a webhook it
    // cannot reach (refused, reset, timed out) per failurePolicy — `Ignore` admits the request
    // with a warning, `Fail` refuses it with 500 "failed calling webhook". The chart and
    // webhook-config ship `Ignore` (never block a drain on the guard), so here the eviction
    // falls through to the PodDisruptionBudget, which keeps the app's one Ready pod.
    assert_eq!(failure_policies(&cluster), vec!["Ignore".to_string()]);
    let generation = cluster.deployment("api")["metadata"]["generation"].as_i64();
    assert!(cluster.restarted_at("api").is_none());
    cluster.sim.add_fault(FaultRule {
        verb: Some("patch".into()),
        resource: Some("deployments".into()),
        namespace: Some(NS.into()),
        name: Some("api".into()),
        latency_after: Some(PATCH_ANSWER_DELAY),
        times: Some(1),
        ..Default::default()
    });

    let sampler = Sampler::start(&cluster.sim, &["api"]);
    let bin = kubectl();
    let chaos = async {
        wait_until(
            "the guard's restartedAt patch in the store",
            Duration::from_secs(60),
            || cluster.restarted_at("api").is_some(),
        )
        .await;
        let patched = Instant::now();
        first.stop().await;
        let killed_after = patched.elapsed();
        let restarted_at = cluster.restarted_at("api");
        // The killed process never learnt how its patch went (its log reader ends at EOF).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let old_logs = first.logs();
        assert!(
            !old_logs.contains("restarted Deployment") && !old_logs.contains("restart failed"),
            "the first guard answered before it was killed ({killed_after:?} after the patch):\n{old_logs}"
        );
        let second = Webhook::start_on(
            &cluster,
            &certs_dir,
            &certs.ca_cert_pem,
            "guard-1",
            port,
            &[],
        )
        .await;
        // kubectl retries every 5 s; the new guard refuses while the rollout is in flight.
        let denied = "kube_descheduler_guard_denials_total{reason=\"in_flight\"}";
        let deadline = Instant::now() + Duration::from_secs(60);
        while second.metric(denied).await < 1.0 {
            assert!(
                Instant::now() < deadline,
                "no retry reached the new guard; logs:\n{}",
                second.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        cluster.set_schedulable("n2", true);
        (second, restarted_at, killed_after)
    };
    let (out, (second, restarted_at, killed_after)) =
        tokio::join!(drain(&bin, &cluster, "n1", "90s", &[]), chaos);
    let series = sampler.finish().await;
    let ctx = format!("{out:?}\nnew guard logs:\n{}", second.logs());

    eprintln!(
        "guard killed {killed_after:?} after its patch was stored; drain took {:?}; {series:?}",
        out.elapsed
    );
    assert!(out.ok, "the drain did not complete: {ctx}");
    // The first attempt: guard gone mid-call, failurePolicy Ignore, the budget refused.
    assert!(out.all().contains("disruption budget"), "{ctx}");
    // A retry: the new guard's in-flight refusal.
    assert!(out.all().contains(DEFLECTION), "{ctx}");
    cluster.wait_moved("api", 1, "n1").await;
    // Exactly one restart: the annotation written once, one new template generation, and the new
    // guard restarted nothing.
    assert!(restarted_at.is_some());
    assert_eq!(cluster.restarted_at("api"), restarted_at, "{ctx}");
    assert_eq!(
        cluster.deployment("api")["metadata"]["generation"].as_i64(),
        generation.map(|g| g + 1),
        "{ctx}"
    );
    assert_eq!(cluster.replica_sets("api").len(), 2, "{ctx}");
    assert_eq!(
        second
            .metric("kube_descheduler_guard_restart_duration_seconds_count")
            .await,
        0.0,
        "{ctx}"
    );
    assert_eq!(
        second
            .metric("kube_descheduler_guard_restart_errors_total")
            .await,
        0.0,
        "{ctx}"
    );
    for (app, s) in &series {
        assert!(s.samples > 10, "{app}: {s:?}");
        assert!(
            s.min_ready_pods >= 1 && s.min_ready_replicas >= 1,
            "{app} had 0 Ready replicas ({s:?}): {ctx}"
        );
    }
    assert_eq!(
        second.healthz().await,
        Some((200, "ok".to_string())),
        "{ctx}"
    );
    let pods: Vec<Value> = cluster.pods("api");
    assert!(pods.iter().all(|p| node_of(p) == "n2"), "{pods:?}");
}
