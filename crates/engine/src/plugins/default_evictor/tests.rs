use super::*;
use crate::testing::*;
use serde_json::json;

fn evictor(args: serde_json::Value) -> DefaultEvictor {
    DefaultEvictor::from_args(&args).unwrap()
}

/// `filter` stops at the first failing rule; it must agree with `check` (every reason) on
/// every pod, whatever the args.
#[test]
fn filter_agrees_with_check_on_a_varied_cluster() {
    let s = crate::testing::synthetic_snapshot(20, 600, 5);
    let args = [
        json!({}),
        json!({"minPodAge": "1h", "minReplicas": 3}),
        json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
        json!({"podProtections": {"extraEnabled": ["PodsWithPVC", "PodsWithoutPDB"], "defaultDisabled": ["DaemonSetPods"]}}),
        json!({"evictLocalStoragePods": true, "priorityThreshold": {"value": 1000}}),
    ];
    let (mut passed, mut failed) = (0, 0);
    for a in args {
        let ev = evictor(a.clone());
        for p in 0..s.pods.len() as PodId {
            let check = ev.check(&s, p, now());
            assert_eq!(
                ev.filter(&s, p, now()),
                check.is_ok(),
                "{a} pod {p}: {check:?}"
            );
            if check.is_ok() {
                passed += 1
            } else {
                failed += 1
            }
        }
    }
    assert!(
        passed > 0 && failed > 0,
        "both verdicts occur ({passed} / {failed})"
    );
}

/// Whether the single pod `p` of a two-node cluster passes the Filter.
fn passes(ev: &DefaultEvictor, p: k8s_openapi::api::core::v1::Pod) -> bool {
    let s = snapshot(vec![node("n1").build(), node("n2").build()], vec![p]);
    ev.filter(&s, 0, now())
}

/// One case of `filter_table`: its name, the evictor, the pod, and whether the pod passes.
type FilterCase = (
    &'static str,
    DefaultEvictor,
    k8s_openapi::api::core::v1::Pod,
    bool,
);

/// Pods the evictor refuses for what they are: no UID, mirror, static, terminating.
fn pod_kind_cases() -> Vec<FilterCase> {
    let def = evictor(json!({}));
    vec![
        (
            "plain replica pod",
            def.clone(),
            pod("a", "p", "n1").build(),
            true,
        ),
        (
            "no uid",
            def.clone(),
            pod("a", "p", "n1").with(|p| p.metadata.uid = None).build(),
            false,
        ),
        (
            "mirror pod",
            def.clone(),
            pod("a", "p", "n1")
                .annotation(ANNOTATION_MIRROR_T, "x")
                .build(),
            false,
        ),
        (
            "static pod",
            def.clone(),
            pod("a", "p", "n1")
                .annotation("kubernetes.io/config.source", "file")
                .build(),
            false,
        ),
        (
            "api-sourced pod is not static",
            def.clone(),
            pod("a", "p", "n1")
                .annotation("kubernetes.io/config.source", "api")
                .build(),
            true,
        ),
        (
            "terminating",
            def.clone(),
            pod("a", "p", "n1").terminating().build(),
            false,
        ),
    ]
}

/// DaemonSet pods, and the two ways to let them go.
fn daemon_set_cases() -> Vec<FilterCase> {
    let def = evictor(json!({}));
    vec![
        (
            "daemonset",
            def.clone(),
            pod("a", "p", "n1").owner("DaemonSet", "ds").build(),
            false,
        ),
        (
            "daemonset, deprecated evictDaemonSetPods",
            evictor(json!({"evictDaemonSetPods": true})),
            pod("a", "p", "n1").owner("DaemonSet", "ds").build(),
            true,
        ),
        (
            "daemonset, DaemonSetPods disabled",
            evictor(json!({"podProtections": {"defaultDisabled": ["DaemonSetPods"]}})),
            pod("a", "p", "n1").owner("DaemonSet", "ds").build(),
            true,
        ),
    ]
}

/// Pods with local storage, and `evictLocalStoragePods`.
fn local_storage_cases() -> Vec<FilterCase> {
    let def = evictor(json!({}));
    vec![
        (
            "hostPath",
            def.clone(),
            pod("a", "p", "n1").host_path().build(),
            false,
        ),
        (
            "emptyDir",
            def.clone(),
            pod("a", "p", "n1").empty_dir().build(),
            false,
        ),
        (
            "emptyDir, evictLocalStoragePods",
            evictor(json!({"evictLocalStoragePods": true})),
            pod("a", "p", "n1").empty_dir().build(),
            true,
        ),
    ]
}

/// System-critical pods and the priority threshold.
fn priority_cases() -> Vec<FilterCase> {
    let def = evictor(json!({}));
    vec![
        (
            "critical priority",
            def.clone(),
            pod("a", "p", "n1").priority(2_000_000_000).build(),
            false,
        ),
        (
            "just below critical",
            def.clone(),
            pod("a", "p", "n1").priority(1_999_999_999).build(),
            true,
        ),
        (
            "critical, evictSystemCriticalPods",
            evictor(json!({"evictSystemCriticalPods": true})),
            pod("a", "p", "n1").priority(2_000_000_000).build(),
            true,
        ),
        (
            "threshold value",
            evictor(json!({"priorityThreshold": {"value": 100}})),
            pod("a", "p", "n1").priority(100).build(),
            false,
        ),
        (
            "under threshold",
            evictor(json!({"priorityThreshold": {"value": 100}})),
            pod("a", "p", "n1").priority(99).build(),
            true,
        ),
        (
            "no priority under threshold",
            evictor(json!({"priorityThreshold": {"value": 100}})),
            pod("a", "p", "n1").build(),
            true,
        ),
        (
            "threshold ignored when SystemCriticalPods is off",
            evictor(json!({"evictSystemCriticalPods": true, "priorityThreshold": {"value": 100}})),
            pod("a", "p", "n1").priority(500).build(),
            true,
        ),
    ]
}

/// Pods without a controller, and `evictFailedBarePods`.
fn bare_pod_cases() -> Vec<FilterCase> {
    let def = evictor(json!({}));
    vec![
        (
            "bare pod",
            def.clone(),
            pod("a", "p", "n1").bare().build(),
            false,
        ),
        (
            "bare failed pod, evictFailedBarePods",
            evictor(json!({"evictFailedBarePods": true})),
            pod("a", "p", "n1").bare().phase("Failed").build(),
            true,
        ),
        (
            "bare running pod, evictFailedBarePods",
            evictor(json!({"evictFailedBarePods": true})),
            pod("a", "p", "n1").bare().build(),
            false,
        ),
    ]
}

/// PersistentVolumeClaims, PodDisruptionBudgets and resource claims.
fn claim_and_budget_cases() -> Vec<FilterCase> {
    let def = evictor(json!({}));
    vec![
        (
            "pvc without protection",
            def.clone(),
            pod("a", "p", "n1").pvc("data").build(),
            true,
        ),
        (
            "pvc, ignorePvcPods",
            evictor(json!({"ignorePvcPods": true})),
            pod("a", "p", "n1").pvc("data").build(),
            false,
        ),
        (
            "pvc, PodsWithPVC",
            evictor(json!({"podProtections": {"extraEnabled": ["PodsWithPVC"]}})),
            pod("a", "p", "n1").pvc("data").build(),
            false,
        ),
        (
            "no pdb, PodsWithoutPDB",
            evictor(json!({"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}})),
            pod("a", "p", "n1").build(),
            false,
        ),
        (
            "resource claims",
            evictor(json!({"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}})),
            pod("a", "p", "n1")
                .with(|p| p.spec.as_mut().unwrap().resource_claims = Some(vec![Default::default()]))
                .build(),
            false,
        ),
    ]
}

/// The label selector and `minPodAge`.
fn selector_and_age_cases() -> Vec<FilterCase> {
    vec![
        (
            "label selector match",
            evictor(json!({"labelSelector": {"matchLabels": {"tier": "web"}}})),
            pod("a", "p", "n1").label("tier", "web").build(),
            true,
        ),
        (
            "label selector miss",
            evictor(json!({"labelSelector": {"matchLabels": {"tier": "web"}}})),
            pod("a", "p", "n1").build(),
            false,
        ),
        (
            "minPodAge old enough",
            evictor(json!({"minPodAge": "30m"})),
            pod("a", "p", "n1").age(3600).build(),
            true,
        ),
        (
            "minPodAge too young",
            evictor(json!({"minPodAge": "2h"})),
            pod("a", "p", "n1").age(3600).build(),
            false,
        ),
        (
            "minPodAge without startTime",
            evictor(json!({"minPodAge": "1s"})),
            pod("a", "p", "n1")
                .with(|p| p.status.as_mut().unwrap().start_time = None)
                .build(),
            false,
        ),
    ]
}

/// The evict and prefer-no-eviction annotations.
fn annotation_cases() -> Vec<FilterCase> {
    let def = evictor(json!({}));
    vec![
        (
            "evict annotation beats everything",
            def.clone(),
            pod("a", "p", "n1")
                .bare()
                .host_path()
                .priority(2_000_000_001)
                .annotation(ANNOTATION_EVICT_T, "")
                .build(),
            true,
        ),
        (
            "prefer-no-eviction, Preferred",
            evictor(json!({"noEvictionPolicy": "Preferred"})),
            pod("a", "p", "n1").annotation(ANNOTATION_PNE_T, "").build(),
            true,
        ),
        (
            "prefer-no-eviction, Mandatory",
            evictor(json!({"noEvictionPolicy": "Mandatory"})),
            pod("a", "p", "n1").annotation(ANNOTATION_PNE_T, "").build(),
            false,
        ),
        (
            "evict annotation beats Mandatory",
            evictor(json!({"noEvictionPolicy": "Mandatory"})),
            pod("a", "p", "n1")
                .annotation(ANNOTATION_PNE_T, "")
                .annotation(ANNOTATION_EVICT_T, "")
                .build(),
            true,
        ),
    ]
}

#[test]
fn filter_table() {
    let cases = [
        pod_kind_cases(),
        daemon_set_cases(),
        local_storage_cases(),
        priority_cases(),
        bare_pod_cases(),
        claim_and_budget_cases(),
        selector_and_age_cases(),
        annotation_cases(),
    ]
    .into_iter()
    .flatten();
    for (name, ev, p, want) in cases {
        assert_eq!(passes(&ev, p), want, "case: {name}");
    }
}

const ANNOTATION_MIRROR_T: &str = crate::snapshot::model::ANNOTATION_MIRROR;
const ANNOTATION_EVICT_T: &str = crate::snapshot::model::ANNOTATION_EVICT;
const ANNOTATION_PNE_T: &str = crate::snapshot::model::ANNOTATION_PREFER_NO_EVICTION;

#[test]
fn min_replicas_counts_pods_of_the_single_owner() {
    let ev = evictor(json!({"minReplicas": 3}));
    let mk = |n: usize| {
        let pods = (0..n)
            .map(|i| {
                pod("a", &format!("p{i}"), "n1")
                    .owner("ReplicaSet", "rs")
                    .build()
            })
            .collect();
        snapshot(vec![node("n1").build(), node("n2").build()], pods)
    };
    assert!(!ev.filter(&mk(2), 0, now()));
    assert!(ev.filter(&mk(3), 0, now()));
    // minReplicas 1 is inactive, as upstream.
    assert!(evictor(json!({"minReplicas": 1})).filter(&mk(1), 0, now()));
}

#[test]
fn priority_threshold_by_class_name() {
    let ev = evictor(json!({"priorityThreshold": {"name": "high"}}));
    let mut b = crate::snapshot::SnapshotBuilder::new();
    b.add_node(&node("n1").build()).unwrap();
    b.add_node(&node("n2").build()).unwrap();
    b.add_pod(&pod("a", "p", "n1").priority(1000).build())
        .unwrap();
    b.add_pod(&pod("a", "q", "n1").priority(999).build())
        .unwrap();
    b.add_priority_class(&k8s_openapi::api::scheduling::v1::PriorityClass {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("high".into()),
            ..Default::default()
        },
        value: Some(1000),
        ..Default::default()
    });
    let s = b.build();
    assert!(!ev.filter(&s, 0, now()));
    assert!(ev.filter(&s, 1, now()));
}

#[test]
fn pvc_protection_by_storage_class() {
    let ev = evictor(
        json!({"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}}}}),
    );
    let mut b = crate::snapshot::SnapshotBuilder::new();
    b.add_node(&node("n1").build()).unwrap();
    b.add_pod(&pod("a", "fast", "n1").pvc("c-local").build())
        .unwrap();
    b.add_pod(&pod("a", "net", "n1").pvc("c-net").build())
        .unwrap();
    b.add_pod(&pod("a", "unknown", "n1").pvc("c-missing").build())
        .unwrap();
    for (name, class) in [("c-local", "local"), ("c-net", "ceph")] {
        b.add_pvc(&k8s_openapi::api::core::v1::PersistentVolumeClaim {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("a".into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
                storage_class_name: Some(class.into()),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let s = b.build();
    assert!(!ev.filter(&s, 0, now()), "protected class");
    assert!(ev.filter(&s, 1, now()), "other class");
    assert!(
        !ev.filter(&s, 2, now()),
        "unresolvable class protects, as upstream"
    );
}

#[test]
fn pre_eviction_filter_node_fit_and_namespace_selector() {
    let pods = vec![pod("a", "p", "n1").node_selector("disk", "ssd").build()];
    let fit = evictor(json!({"nodeFit": true}));
    let s = snapshot(
        vec![node("n1").label("disk", "ssd").build(), node("n2").build()],
        pods.clone(),
    );
    assert!(
        !fit.pre_eviction_filter(&s, 0),
        "no other node matches the nodeSelector"
    );
    let s = snapshot(
        vec![
            node("n1").label("disk", "ssd").build(),
            node("n2").label("disk", "ssd").build(),
        ],
        pods.clone(),
    );
    assert!(fit.pre_eviction_filter(&s, 0));
    let s = snapshot(
        vec![
            node("n1").label("disk", "ssd").build(),
            node("n2").label("disk", "ssd").not_ready().build(),
        ],
        pods.clone(),
    );
    assert!(
        !fit.pre_eviction_filter(&s, 0),
        "NotReady nodes are not candidates"
    );
    let fit_sel = evictor(json!({"nodeFit": true, "nodeSelector": "pool=b"}));
    let s = snapshot(
        vec![
            node("n1").label("disk", "ssd").build(),
            node("n2").label("disk", "ssd").build(),
        ],
        pods,
    );
    assert!(
        !fit_sel.pre_eviction_filter(&s, 0),
        "nodeSelector limits nodeFit candidates"
    );
    assert!(evictor(json!({})).pre_eviction_filter(&s, 0), "nodeFit off");

    let ns_sel = evictor(json!({"namespaceLabelSelector": {"matchLabels": {"team": "x"}}}));
    let mut b = crate::snapshot::SnapshotBuilder::new();
    b.add_node(&node("n1").build()).unwrap();
    b.add_pod(&pod("a", "p", "n1").build()).unwrap();
    b.add_pod(&pod("b", "q", "n1").build()).unwrap();
    b.add_namespace(&k8s_openapi::api::core::v1::Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("a".into()),
            labels: Some([("team".to_string(), "x".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    });
    let s = b.build();
    assert!(ns_sel.pre_eviction_filter(&s, 0));
    assert!(!ns_sel.pre_eviction_filter(&s, 1));
}

#[test]
fn deprecated_booleans_map_like_upstream() {
    let args: DefaultEvictorArgs = crate::framework::args::decode(
        &json!({"ignorePvcPods": true, "ignorePodsWithoutPDB": true}),
    )
    .unwrap();
    let p = args.effective_protections();
    for want in [
        Protection::PodsWithLocalStorage,
        Protection::DaemonSetPods,
        Protection::SystemCriticalPods,
        Protection::FailedBarePods,
        Protection::PodsWithPVC,
        Protection::PodsWithoutPDB,
    ] {
        assert!(p.contains(&want), "{want:?}");
    }
    let args: DefaultEvictorArgs = crate::framework::args::decode(&json!({"podProtections": {"defaultDisabled": ["FailedBarePods"], "extraEnabled": ["PodsWithPVC"]}})).unwrap();
    assert_eq!(
        args.effective_protections(),
        vec![
            Protection::PodsWithLocalStorage,
            Protection::SystemCriticalPods,
            Protection::DaemonSetPods,
            Protection::PodsWithPVC
        ]
    );
}

/// The local-storage rule names the first hostPath / emptyDir volume, as `--explain` shows it.
#[test]
fn local_storage_rule_names_the_volume() {
    let volumes = |specs: serde_json::Value| {
        move |p: &mut k8s_openapi::api::core::v1::Pod| {
            p.spec.get_or_insert_with(Default::default).volumes =
                Some(serde_json::from_value(specs).unwrap());
        }
    };
    let s = snapshot(
        vec![node("n1").build()],
        vec![
            pod("a", "cached", "n1")
                .with(volumes(json!([
                    {"name": "cfg", "configMap": {"name": "cm"}},
                    {"name": "cache", "emptyDir": {}},
                    {"name": "logs", "hostPath": {"path": "/var/log"}},
                ])))
                .build(),
            pod("a", "logs", "n1")
                .with(volumes(json!([
                    {"name": "logs", "hostPath": {"path": "/var/log"}},
                    {"name": "cache", "emptyDir": {}},
                ])))
                .build(),
            pod("a", "config-only", "n1")
                .with(volumes(
                    json!([{"name": "cfg", "configMap": {"name": "cm"}}]),
                ))
                .build(),
        ],
    );
    assert_eq!(s.pods[0].local_storage_volume.as_deref(), Some("cache"));
    assert_eq!(s.pods[1].local_storage_volume.as_deref(), Some("logs"));
    assert_eq!(s.pods[2].local_storage_volume, None);
    let ev = DefaultEvictor::default();
    let rejected = |p: PodId| ev.check(&s, p, now()).err().unwrap_or_default();
    assert_eq!(
        rejected(0),
        ["pod has local storage (emptyDir volume `cache`)"]
    );
    assert_eq!(
        rejected(1),
        ["pod has local storage (hostPath volume `logs`)"]
    );
    assert!(rejected(2).is_empty());
}
