//! The lean pod cache on the allow and deflect paths.

use super::*;

fn pod_reads(h: &Harness) -> usize {
    h.source
        .pod_reads
        .load(std::sync::atomic::Ordering::Relaxed)
}

async fn metrics_text(h: &Harness) -> String {
    h.get("/metrics").await.text().await.unwrap()
}

fn three_replicas() -> DeploymentFacts {
    DeploymentFacts {
        replicas: 3,
        status_replicas: 3,
        updated_replicas: 3,
        ready_replicas: 3,
        available_replicas: 3,
        ..dep()
    }
}

#[tokio::test]
async fn cached_pod_answers_the_allow_path_without_a_read() {
    let mut s = cluster(three_replicas());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    let h = start(s).await;
    let resp = h.evict_uid("pod-uid").await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(pod_reads(&h), 0, "served from the cache");
    assert!(h.restarts().is_empty());
    let m = metrics_text(&h).await;
    assert!(
        m.contains("kube_descheduler_guard_pod_reads_total{source=\"cache\"} 1"),
        "{m}"
    );
}

#[tokio::test]
async fn pod_missing_from_the_cache_is_read_not_assumed_gone() {
    // Synced cache without the pod (just created, the watch lags): the API has it, and it is a
    // deflection candidate.
    let h = start(cluster(dep())).await;
    let resp = h.evict_uid("pod-uid").await;
    assert_deflection(&resp);
    assert_eq!(pod_reads(&h), 1);
    assert_eq!(h.restarts().len(), 1);
    let m = metrics_text(&h).await;
    assert!(
        m.contains("kube_descheduler_guard_pod_reads_total{source=\"api\"} 1"),
        "{m}"
    );
}

#[tokio::test]
async fn stale_cached_pod_that_the_api_says_is_gone_is_not_deflected() {
    let mut s = cluster(dep());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    s.pods.clear();
    let h = start(s).await;
    let resp = h.evict_uid("pod-uid").await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(h.restarts().is_empty(), "no restart for a pod that is gone");
    assert_eq!(pod_reads(&h), 1, "re-read before acting");
}

#[tokio::test]
async fn stale_cached_pod_that_stopped_being_ready_is_not_refused() {
    // The cache still sees the pod Ready under a budget with no disruptions left; the API says it
    // is terminating: allow, as a fresh read would.
    let mut s = cluster(three_replicas());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    s.pods.insert(
        "shop/web-7d9f-abcde".into(),
        PodFacts {
            terminating: true,
            ..pod()
        },
    );
    s.pdbs.push(Arc::new(PdbFacts {
        namespace: "shop".into(),
        name: "web".into(),
        selector: Some(Selector::from_iter([(
            "app".to_string(),
            "web".to_string(),
        )])),
        disruptions_allowed: 0,
    }));
    let h = start(s).await;
    let resp = h.evict().await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(pod_reads(&h), 1);
}

#[tokio::test]
async fn deflection_from_the_cache_is_confirmed_by_a_fresh_read() {
    let mut s = cluster(dep());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    let h = start(s).await;
    let resp = h.evict_uid("pod-uid").await;
    assert_deflection(&resp);
    assert_eq!(pod_reads(&h), 1, "one fresh read before the restart");
    assert_eq!(h.restarts().len(), 1);
    let m = metrics_text(&h).await;
    assert!(
        m.contains("kube_descheduler_guard_pod_reads_total{source=\"recheck\"} 1"),
        "{m}"
    );
}

/// Rule A through the webhook: of two replicas on a schedulable node, the first eviction is
/// allowed (the other replica stays); an eviction of the second right after it is deflected,
/// because the first replica is now being evicted (this webhook saw its eviction).
#[tokio::test]
async fn a_replica_whose_sibling_is_being_evicted_is_deflected() {
    use kube_descheduler::guard::source::Placement;
    let d = DeploymentFacts {
        replicas: 2,
        status_replicas: 2,
        updated_replicas: 2,
        ready_replicas: 2,
        available_replicas: 2,
        ..dep()
    };
    let mut source = cluster(d);
    let other = PodFacts {
        name: "web-7d9f-other".into(),
        uid: "other-uid".into(),
        ..pod()
    };
    source.pods.insert("shop/web-7d9f-other".into(), other);
    let placed = |name: &str| Placement {
        name: name.into(),
        ready: true,
        terminating: false,
        node: Some("a".into()),
    };
    source.placements.insert(
        "shop/web".into(),
        vec![placed("web-7d9f-abcde"), placed("web-7d9f-other")],
    );
    source.nodes.insert("a".into(), false);
    let h = start(source).await;

    let first = h.evict().await;
    assert_eq!(first["allowed"], true, "the other replica stays: {first}");
    assert!(h.restarts().is_empty());

    let mut second = eviction_review("policy/v1", json!({}), false);
    second["request"]["name"] = json!("web-7d9f-other");
    second["request"]["object"]["metadata"]["name"] = json!("web-7d9f-other");
    let resp = h.review(second).await;
    assert_deflection(&resp);
    let calls = h.restarts();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].pod, "web-7d9f-other");
}
