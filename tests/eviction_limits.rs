//! Eviction limits that scale with the workload — percentage node / namespace limits,
//! `maxNoOfPodsToEvictPerWorkload`, `maxUnavailablePerWorkload` and `workloadEvictionWindow` —
//! decided in a cycle the way `plan` and `run` run it.

mod plugins_common;

use std::time::Duration;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube_descheduler::evictor::planner::PlanBackend;
use kube_descheduler::evictor::window::{WindowLimit, WindowSpec};
use kube_descheduler::evictor::{LimitError, LimitValue, ScaledLimits};
use kube_descheduler::framework::cycle::{CycleConfig, CycleReport, Profile, run_cycle};
use kube_descheduler::plugins::default_evictor::DefaultEvictor;
use kube_descheduler::snapshot::Snapshot;
use kube_descheduler::snapshot::builder::SnapshotBuilder;
use kube_descheduler::testing::*;
use kube_descheduler::workload::DeploymentFacts;
use plugins_common::EvictAll;

fn cycle(snap: &mut Snapshot, cfg: &CycleConfig, at: jiff::Timestamp) -> CycleReport {
    let profiles = [Profile {
        name: "prof".into(),
        evictor: Box::new(DefaultEvictor::default()),
        deschedule: vec![Box::new(EvictAll)],
        balance: vec![],
    }];
    run_cycle(&profiles, cfg, snap, at, Box::new(PlanBackend::new())).0
}

fn scaled(s: ScaledLimits) -> CycleConfig {
    CycleConfig {
        scaled: s,
        ..Default::default()
    }
}

/// Evicted pods per namespace, and the limit hits' messages.
fn evicted_in(report: &CycleReport, namespace: &str) -> usize {
    report
        .records
        .iter()
        .filter(|r| &*r.namespace == namespace && r.outcome.moves_pod())
        .count()
}

/// The names of the pods the cycle moved (evicted or deflected), in order.
fn moved_pods(report: &CycleReport) -> Vec<&str> {
    report
        .records
        .iter()
        .filter(|r| r.outcome.moves_pod())
        .map(|r| r.name.as_str())
        .collect()
}

fn owner(kind: &str, name: &str, uid: &str) -> Option<Vec<OwnerReference>> {
    Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        ..Default::default()
    }])
}

/// Deployment `shop/web` (`replicas` desired) with ReplicaSet `web-1`, and `pods` of its pods
/// spread over n1..n3 (`not_ready` of them not Ready), plus two empty nodes.
fn deployment_cluster(replicas: i32, pods: usize, not_ready: usize) -> Snapshot {
    let mut b = SnapshotBuilder::new();
    for n in ["n1", "n2", "n3"] {
        b.add_node(&node(n).build()).expect("node");
    }
    b.add_deployment_facts(DeploymentFacts::from_deployment(&apps::Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some("dep-web".into()),
            ..Default::default()
        },
        spec: apps::DeploymentSpec {
            replicas: Some(replicas),
            ..Default::default()
        },
        status: None,
    }));
    b.add_replica_set(&apps::ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web-1".into()),
            namespace: Some("shop".into()),
            uid: Some("rs-web-1".into()),
            owner_references: owner("Deployment", "web", "dep-web"),
            ..Default::default()
        },
        spec: apps::ReplicaSetSpec {
            replicas: Some(replicas),
            ..Default::default()
        },
        status: None,
    });
    for i in 0..pods {
        let mut p = pod("shop", &format!("web-{i}"), ["n1", "n2", "n3"][i % 3]);
        if i < not_ready {
            p = p.not_ready();
        }
        let p = p
            .with(|p| p.metadata.owner_references = owner("ReplicaSet", "web-1", "rs-web-1"))
            .build();
        b.add_pod(&p).expect("pod");
    }
    b.build()
}

#[test]
fn namespace_percentages_scale_with_a_namespace_of_10_and_one_of_1000() {
    let mut pods = Vec::new();
    for i in 0..10 {
        pods.push(pod("small", &format!("s{i}"), ["n1", "n2"][i % 2]).build());
    }
    for i in 0..1000 {
        pods.push(pod("big", &format!("b{i}"), ["n1", "n2"][i % 2]).build());
    }
    let mut snap = snapshot(vec![node("n1").build(), node("n2").build()], pods);
    let report = cycle(
        &mut snap,
        &CycleConfig {
            max_per_namespace: Some(LimitValue::Percent(10)),
            ..Default::default()
        },
        now(),
    );
    // ceil(10% × 10) = 1, ceil(10% × 1000) = 100.
    assert_eq!(evicted_in(&report, "small"), 1);
    assert_eq!(evicted_in(&report, "big"), 100);
    let small_hit = report
        .limit_hits
        .iter()
        .find(|h| &*h.namespace == "small")
        .expect("the small namespace's 2nd pod is refused");
    assert_eq!(
        small_hit.limit,
        LimitError::NamespaceScaled {
            percent: LimitValue::Percent(10),
            pods: 10,
            limit: 1
        }
    );
    assert_eq!(
        small_hit.limit.to_string(),
        "maximum number of evicted pods per namespace reached (limit 10% of 10 pods = 1)"
    );
    assert_eq!(
        small_hit.limit.result_label(),
        "maximum number of evicted pods per namespace reached"
    );
    // A namespace refusal skips the pod only: every other pod was tried.
    assert_eq!(report.limit_hits.len(), 9 + 900);
}

#[test]
fn node_percentages_round_up_count_every_pod_at_start_and_end_the_node() {
    // n1: 11 pods, of which one is a DaemonSet pod (not evictable, still counted) and one has
    // Succeeded (ended: not counted). n2: 3 pods.
    let mut pods = vec![
        pod("a", "ds", "n1").owner("DaemonSet", "agent").build(),
        pod("a", "done", "n1").phase("Succeeded").build(),
    ];
    for i in 0..9 {
        pods.push(pod("a", &format!("x{i}"), "n1").build());
    }
    for i in 0..3 {
        pods.push(pod("b", &format!("y{i}"), "n2").build());
    }
    // 10% of the 10 not-ended pods on n1 = 1; of 3 on n2 = 1 (rounded up); 50%: 5 and 2.
    // (The Succeeded pod is evictable: with 100% all 10 evictable pods of n1 go.)
    for (percent, on_n1, on_n2) in [(10, 1, 1), (50, 5, 2), (0, 0, 0), (100, 10, 3)] {
        let mut snap = snapshot(vec![node("n1").build(), node("n2").build()], pods.clone());
        let report = cycle(
            &mut snap,
            &CycleConfig {
                max_per_node: Some(LimitValue::Percent(percent)),
                ..Default::default()
            },
            now(),
        );
        assert_eq!(
            (evicted_in(&report, "a"), evicted_in(&report, "b")),
            (on_n1, on_n2),
            "{percent}%"
        );
        // A node refusal ends the node: at most one refusal per node.
        assert!(report.limit_hits.len() <= 2, "{percent}%");
        for h in &report.limit_hits {
            assert!(
                matches!(h.limit, LimitError::NodeScaled { .. }),
                "{:?}",
                h.limit
            );
            assert_eq!(
                h.limit.result_label(),
                "maximum number of evicted pods per node reached"
            );
        }
    }
    let mut snap = snapshot(vec![node("n1").build(), node("n2").build()], pods);
    let report = cycle(
        &mut snap,
        &CycleConfig {
            max_per_node: Some(LimitValue::Percent(10)),
            ..Default::default()
        },
        now(),
    );
    assert_eq!(
        report.limit_hits[0].limit.to_string(),
        "maximum number of evicted pods per node reached (limit 10% of 10 pods = 1)"
    );
}

#[test]
fn per_workload_limit_counts_the_deployment_and_its_percentage_follows_the_hpa() {
    let cfg = scaled(ScaledLimits {
        per_workload: Some(LimitValue::Percent(33)),
        ..Default::default()
    });
    // 6 replicas: ceil(33% × 6) = 2.
    let mut snap = deployment_cluster(6, 6, 0);
    let report = cycle(&mut snap, &cfg, now());
    assert_eq!(evicted_in(&report, "shop"), 2);
    assert_eq!(
        report.limit_hits.len(),
        4,
        "each other pod is refused, none ends a node"
    );
    assert_eq!(
        report.limit_hits[0].limit.to_string(),
        "workload Deployment shop/web: 2 of 6 replicas evicted this cycle, maxNoOfPodsToEvictPerWorkload 33% = 2"
    );
    assert_eq!(
        report.limit_hits[0].limit.result_label(),
        "maximum number of evicted pods per workload reached"
    );
    // The HPA scales the Deployment to 12 before the next cycle: ceil(33% × 12) = 4.
    let mut snap = deployment_cluster(12, 12, 0);
    let report = cycle(&mut snap, &cfg, now());
    assert_eq!(evicted_in(&report, "shop"), 4);
    assert!(
        report.limit_hits[0]
            .limit
            .to_string()
            .contains("4 of 12 replicas evicted this cycle, maxNoOfPodsToEvictPerWorkload 33% = 4")
    );
    // Scaled down to 3: ceil(33% × 3) = 1.
    let mut snap = deployment_cluster(3, 3, 0);
    assert_eq!(evicted_in(&cycle(&mut snap, &cfg, now()), "shop"), 1);
    // An integer limit does not scale.
    let fixed = scaled(ScaledLimits {
        per_workload: Some(LimitValue::Count(3)),
        ..Default::default()
    });
    let mut snap = deployment_cluster(12, 12, 0);
    assert_eq!(evicted_in(&cycle(&mut snap, &fixed, now()), "shop"), 3);
}

#[test]
fn workloads_are_top_owners_and_bare_pods_are_not_limited() {
    let mut b = SnapshotBuilder::new();
    for n in ["n1", "n2"] {
        b.add_node(&node(n).build()).expect("node");
    }
    b.add_stateful_set(&apps::StatefulSet {
        metadata: ObjectMeta {
            name: Some("db".into()),
            namespace: Some("a".into()),
            uid: Some("StatefulSet-db".into()),
            ..Default::default()
        },
        spec: apps::StatefulSetSpec {
            replicas: Some(4),
            ..Default::default()
        },
        status: None,
    });
    // Two Jobs of CronJob `nightly` (parallelism 2 each) → one workload of 4.
    for j in ["nightly-1", "nightly-2"] {
        b.add_job(&batch::Job {
            metadata: ObjectMeta {
                name: Some(j.into()),
                namespace: Some("a".into()),
                uid: Some(format!("Job-{j}")),
                owner_references: Some(vec![OwnerReference {
                    api_version: "batch/v1".into(),
                    kind: "CronJob".into(),
                    name: "nightly".into(),
                    uid: "cron-nightly".into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            spec: Some(batch::JobSpec {
                parallelism: Some(2),
                ..Default::default()
            }),
            status: None,
        });
    }
    let mut pods = Vec::new();
    for i in 0..4 {
        let n = ["n1", "n2"][i % 2];
        pods.push(
            pod("a", &format!("db-{i}"), n)
                .owner("StatefulSet", "db")
                .build(),
        );
        pods.push(
            pod("a", &format!("agent-{i}"), n)
                .owner("DaemonSet", "agent")
                .build(),
        );
        pods.push(
            pod("a", &format!("bare-{i}"), n)
                .bare()
                .phase("Failed")
                .build(),
        );
        let job = ["nightly-1", "nightly-2"][i / 2];
        pods.push(pod("a", &format!("job-{i}"), n).owner("Job", job).build());
    }
    for p in &pods {
        b.add_pod(p).expect("pod");
    }
    let mut snap = b.build();
    // DaemonSet pods and (Failed) bare pods are evictable for this test.
    let evictor = DefaultEvictor::from_args(&serde_json::json!({
        "podProtections": {"defaultDisabled": ["DaemonSetPods", "FailedBarePods"]}
    }))
    .expect("evictor args");
    let profiles = [Profile {
        name: "prof".into(),
        evictor: Box::new(evictor),
        deschedule: vec![Box::new(EvictAll)],
        balance: vec![],
    }];
    let cfg = scaled(ScaledLimits {
        per_workload: Some(LimitValue::Percent(50)),
        ..Default::default()
    });
    let (report, _) = run_cycle(
        &profiles,
        &cfg,
        &mut snap,
        now(),
        Box::new(PlanBackend::new()),
    );
    let moved = |prefix: &str| {
        report
            .records
            .iter()
            .filter(|r| r.name.starts_with(prefix) && r.outcome.moves_pod())
            .count()
    };
    // 50% of 4 = 2 for the StatefulSet, the DaemonSet (its 4 pods) and the CronJob (2 Jobs ×
    // parallelism 2); bare pods have no workload.
    assert_eq!(moved("db-"), 2);
    assert_eq!(moved("agent-"), 2);
    assert_eq!(moved("job-"), 2);
    assert_eq!(moved("bare-"), 4);
    let names: Vec<String> = report
        .limit_hits
        .iter()
        .map(|h| h.limit.to_string())
        .collect();
    for w in ["StatefulSet a/db", "DaemonSet a/agent", "CronJob a/nightly"] {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&format!("workload {w}: 2 of 4 replicas"))),
            "{w}: {names:?}"
        );
    }
}

#[test]
fn max_unavailable_counts_not_ready_replicas_and_this_cycles_moves() {
    let cfg = scaled(ScaledLimits {
        max_unavailable_per_workload: Some(LimitValue::Count(2)),
        ..Default::default()
    });
    // 6 desired, 6 pods, 1 not Ready (web-0, first on n1).
    // web-0 (not Ready): 1 unavailable + 0 moved, stays 1 ≤ 2 → evicted.
    // web-1 (Ready): 1 + 0 + 1 = 2 ≤ 2 → evicted. web-2: 1 + 1 + 1 = 3 > 2 → refused; so is
    // every other Ready pod.
    let mut snap = deployment_cluster(6, 6, 1);
    let report = cycle(&mut snap, &cfg, now());
    let moved = moved_pods(&report);
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert!(moved.contains(&"web-0"), "{moved:?}");
    assert_eq!(report.limit_hits.len(), 4);
    assert_eq!(
        report.limit_hits[0].limit.to_string(),
        "workload Deployment shop/web: 1 of 6 replicas not Ready and 1 moved this cycle, evicting this pod would make 3 unavailable, maxUnavailablePerWorkload 2 = 2"
    );
    assert_eq!(
        report.limit_hits[0].limit.result_label(),
        "maximum number of unavailable pods per workload reached"
    );
    // Already at the limit (2 of 6 not Ready, "34%" = ceil(2.04) = 3 … use 25% = 2): no Ready pod
    // may go, and a not-Ready one may go only while the workload is within the limit.
    let cfg = scaled(ScaledLimits {
        max_unavailable_per_workload: Some(LimitValue::Percent(25)),
        ..Default::default()
    });
    let mut snap = deployment_cluster(6, 6, 2);
    let report = cycle(&mut snap, &cfg, now());
    let moved = moved_pods(&report);
    assert_eq!(moved, vec!["web-0", "web-1"], "the two not-Ready pods");
    // Missing replicas count as not Ready: 6 desired, only 4 pods exist (all Ready), limit 2 →
    // nothing may go.
    let cfg = scaled(ScaledLimits {
        max_unavailable_per_workload: Some(LimitValue::Count(2)),
        ..Default::default()
    });
    let mut snap = deployment_cluster(6, 4, 0);
    assert_eq!(evicted_in(&cycle(&mut snap, &cfg, now()), "shop"), 0);
}

#[test]
fn the_window_counts_evictions_across_cycles_and_only_with_a_history() {
    let window = WindowLimit::from_spec(&WindowSpec {
        duration: "1h".into(),
        max_evictions: LimitValue::Percent(50),
    })
    .expect("window");
    // Without a history (as `plan`), the window is not applied.
    let plan_cfg = scaled(ScaledLimits {
        window: Some(window.clone()),
        ..Default::default()
    });
    let mut snap = deployment_cluster(6, 6, 0);
    assert_eq!(evicted_in(&cycle(&mut snap, &plan_cfg, now()), "shop"), 6);

    // With one (as `run`): 50% of 6 = 3 within any hour, the current cycle included.
    let run_cfg = scaled(ScaledLimits {
        per_workload: Some(LimitValue::Count(2)),
        window: Some(window.with_history()),
        ..Default::default()
    });
    let t0 = now();
    let at = |mins: u64| t0 + Duration::from_secs(mins * 60);
    let mut evicted = Vec::new();
    for mins in [0, 20, 40, 61, 80] {
        let mut snap = deployment_cluster(6, 6, 0);
        let report = cycle(&mut snap, &run_cfg, at(mins));
        evicted.push(evicted_in(&report, "shop"));
        if mins == 20 {
            assert_eq!(
                report.limit_hits[0].limit.to_string(),
                "workload Deployment shop/web: 3 of 6 replicas evicted in the last 1h, workloadEvictionWindow.maxEvictions 50% = 3"
            );
            assert_eq!(
                report.limit_hits[0].limit.result_label(),
                "maximum number of evicted pods per workload within the eviction window reached"
            );
        }
    }
    // 0 min: 2 (per-cycle limit); 20: 1 (3 in the hour); 40: 0; 61: the 2 of minute 0 left the
    // window → 2; 80: the one of minute 20 left → 1 (3 within (20, 80]).
    assert_eq!(evicted, vec![2, 1, 0, 2, 1]);
}

#[test]
fn policies_accept_percentages_and_name_the_field_of_a_bad_value() {
    let head = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n";
    let p = kube_descheduler::policy::load_str(&format!(
        "{head}maxNoOfPodsToEvictPerNode: \"25%\"\nmaxNoOfPodsToEvictPerNamespace: 3\nmaxNoOfPodsToEvictPerWorkload: \"33%\"\nmaxUnavailablePerWorkload: 1\nworkloadEvictionWindow:\n  duration: 1h\n  maxEvictions: \"50%\"\n"
    ))
    .expect("valid policy");
    assert_eq!(p.cycle.max_per_node, Some(LimitValue::Percent(25)));
    assert_eq!(p.cycle.max_per_namespace, Some(LimitValue::Count(3)));
    assert_eq!(p.cycle.scaled.per_workload, Some(LimitValue::Percent(33)));
    assert_eq!(
        p.cycle.scaled.max_unavailable_per_workload,
        Some(LimitValue::Count(1))
    );
    let w = p.cycle.scaled.window.as_ref().expect("window");
    assert_eq!(
        (w.duration, w.max, w.history.is_none()),
        (Duration::from_secs(3600), LimitValue::Percent(50), true)
    );
    for field in [
        "maxNoOfPodsToEvictPerNode",
        "maxNoOfPodsToEvictPerNamespace",
        "maxNoOfPodsToEvictPerWorkload",
        "maxUnavailablePerWorkload",
    ] {
        for bad in ["\"150%\"", "-1", "\"-1\"", "abc", "\"10.5%\"", "2.5"] {
            let e = match kube_descheduler::policy::load_str(&format!("{head}{field}: {bad}\n")) {
                Ok(_) => panic!("{field}: {bad} was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains(field), "{field}: {bad}: {e}");
        }
    }
    for (bad, needle) in [
        (
            "workloadEvictionWindow: {duration: 0s, maxEvictions: 1}",
            "workloadEvictionWindow.duration",
        ),
        ("workloadEvictionWindow: {duration: 1h}", "maxEvictions"),
        (
            "workloadEvictionWindow: {duration: 1h, maxEvictions: \"101%\"}",
            "workloadEvictionWindow.maxEvictions",
        ),
        (
            "workloadEvictionWindow: {duration: 1h, maxEvictions: 1, size: 2}",
            "unknown field `size`",
        ),
    ] {
        let e = match kube_descheduler::policy::load_str(&format!("{head}{bad}\n")) {
            Ok(_) => panic!("{bad} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(needle), "{bad}: {e}");
    }
    // v1alpha1 had the node and namespace limits: they take the same forms.
    let p = kube_descheduler::policy::load_str(
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nmaxNoOfPodsToEvictPerNode: \"10%\"\nmaxNoOfPodsToEvictPerNamespace: 4\n",
    )
    .expect("v1alpha1");
    assert_eq!(p.cycle.max_per_node, Some(LimitValue::Percent(10)));
    assert_eq!(p.cycle.max_per_namespace, Some(LimitValue::Count(4)));
    assert!(
        kube_descheduler::policy::load_str(
            "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nmaxNoOfPodsToEvictPerNamespace: \"150%\"\n",
        )
        .is_err()
    );
}
