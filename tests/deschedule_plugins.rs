//! Table-driven tests of the five Deschedule plugins: every arg, defaults, validation, ordering
//! and limits, against upstream v0.36 semantics.

use k8s_openapi::api::core::v1 as core;
use kube_descheduler::framework::cycle::{CycleConfig, Profile};
use kube_descheduler::framework::registry::Plugin;
use kube_descheduler::plugins::default_evictor::DefaultEvictor;
use kube_descheduler::testing::*;
use serde_json::{Value, json};

/// Builds plugin `name` from `args` through the registry (decode, validate, default).
fn build(
    name: &str,
    args: Value,
) -> Result<Box<dyn kube_descheduler::framework::DeschedulePlugin>, String> {
    let f = kube_descheduler::plugins::find(name).ok_or("not registered")?;
    match (f.build)(&args) {
        Ok(Plugin::Deschedule(p)) => Ok(p),
        Ok(Plugin::Balance(_)) => Err("not a deschedule plugin".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The validation error for `args` (panics if they are accepted).
fn build_err(name: &str, args: Value) -> String {
    match build(name, args.clone()) {
        Ok(_) => panic!("{name}: {args} should be rejected"),
        Err(e) => e,
    }
}

/// Runs plugin `name` with `args` on two Ready nodes (n1, n2) plus `extra_nodes`; returns evicted pods.
fn run(name: &str, args: Value, pods: Vec<core::Pod>) -> Vec<String> {
    run_with(
        name,
        args,
        json!({}),
        vec![node("n1").build(), node("n2").build()],
        pods,
        CycleConfig::default(),
    )
}

fn run_with(
    name: &str,
    args: Value,
    evictor: Value,
    nodes: Vec<core::Node>,
    pods: Vec<core::Pod>,
    cfg: CycleConfig,
) -> Vec<String> {
    let plugin = build(name, args).unwrap_or_else(|e| panic!("{name}: {e}"));
    let evictor = DefaultEvictor::from_args(&evictor).unwrap();
    let mut snap = snapshot(nodes, pods);
    let records = run_profile(
        Profile {
            name: "t".into(),
            evictor: Box::new(evictor),
            deschedule: vec![plugin],
            balance: vec![],
        },
        &cfg,
        &mut snap,
    );
    evicted_names(&records)
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

mod remove_failed_pods {
    use super::*;
    const P: &str = "RemoveFailedPods";

    fn failed(name: &str, age: i64) -> kube_descheduler::testing::PodBuilder {
        pod("a", name, "n1")
            .phase("Failed")
            .terminated("Error", 1)
            .age(age)
    }

    #[test]
    fn default_min_lifetime_is_3600s_and_only_failed_pods() {
        let pods = vec![
            failed("old", 7200).build(),
            failed("young", 60).build(),
            pod("a", "running", "n1").age(9999).build(),
            failed("exact", 3600).build(),
        ];
        // Age equal to the minimum qualifies (upstream rejects only age < min).
        assert_eq!(run(P, json!({}), pods), names(&["a/old", "a/exact"]));
    }

    #[test]
    fn min_lifetime_reasons_exit_codes_owner_kinds_init_containers() {
        let pods = || {
            vec![
                failed("err", 100).build(),
                failed("oom", 100).terminated("OOMKilled", 137).build(),
                failed("job", 100).owner("Job", "j").build(),
                failed("status-reason", 100)
                    .with(|p| p.status.as_mut().unwrap().reason = Some("Evicted".into()))
                    .build(),
                failed("init-oom", 100)
                    .with(|p| {
                        let s = p.status.as_mut().unwrap();
                        s.container_statuses = None;
                        s.init_container_statuses = Some(vec![core::ContainerStatus {
                            name: "init".into(),
                            state: Some(core::ContainerState {
                                terminated: Some(core::ContainerStateTerminated {
                                    reason: Some("OOMKilled".into()),
                                    exit_code: 137,
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }]);
                    })
                    .build(),
            ]
        };
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                json!({"minPodLifetimeSeconds": 0}),
                vec!["a/err", "a/oom", "a/job", "a/status-reason", "a/init-oom"],
            ),
            (
                json!({"minPodLifetimeSeconds": 0, "reasons": ["OOMKilled"]}),
                vec!["a/oom"],
            ),
            (
                json!({"minPodLifetimeSeconds": 0, "reasons": ["OOMKilled"], "includingInitContainers": true}),
                vec!["a/oom", "a/init-oom"],
            ),
            (
                json!({"minPodLifetimeSeconds": 0, "reasons": ["Evicted"]}),
                vec!["a/status-reason"],
            ),
            (
                json!({"minPodLifetimeSeconds": 0, "exitCodes": [137]}),
                vec!["a/oom"],
            ),
            (
                json!({"minPodLifetimeSeconds": 0, "exitCodes": [137], "includingInitContainers": true}),
                vec!["a/oom", "a/init-oom"],
            ),
            (
                json!({"minPodLifetimeSeconds": 0, "excludeOwnerKinds": ["Job"]}),
                vec!["a/err", "a/oom", "a/status-reason", "a/init-oom"],
            ),
            (json!({"minPodLifetimeSeconds": 101}), vec![]),
            (
                json!({"minPodLifetimeSeconds": 0, "namespaces": {"exclude": ["a"]}}),
                vec![],
            ),
            (
                json!({"minPodLifetimeSeconds": 0, "labelSelector": {"matchLabels": {"x": "y"}}}),
                vec![],
            ),
        ];
        for (args, want) in cases {
            assert_eq!(run(P, args.clone(), pods()), names(&want), "args {args}");
        }
    }

    #[test]
    fn validation_and_strict_decoding() {
        assert!(
            build_err(
                P,
                json!({"namespaces": {"include": ["a"], "exclude": ["b"]}})
            )
            .contains("only one of include or exclude")
        );
        assert!(
            build_err(P, json!({"minPodLifeTimeSeconds": 5})).contains("minPodLifeTimeSeconds")
        );
        assert!(
            build_err(P, json!({"minPodLifetimeSeconds": -1})).contains("minPodLifetimeSeconds")
        );
        assert!(
            build_err(
                P,
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}})
            )
            .contains("labelSelector")
        );
    }
}

mod too_many_restarts {
    use super::*;
    const P: &str = "RemovePodsHavingTooManyRestarts";

    #[test]
    fn threshold_is_inclusive_and_most_restarts_go_first() {
        let pods = vec![
            pod("a", "r5", "n1").restarts(5).build(),
            pod("a", "r9", "n1").restarts(9).build(),
            pod("a", "r4", "n1").restarts(4).build(),
            pod("a", "r7", "n1").restarts(7).build(),
        ];
        assert_eq!(
            run(P, json!({"podRestartThreshold": 5}), pods),
            names(&["a/r9", "a/r7", "a/r5"])
        );
    }

    #[test]
    fn init_containers_states_and_node_limit() {
        let with_init = |name: &str, main: i32, init: i32| {
            pod("a", name, "n1").restarts(main).with(move |p| {
                p.status.as_mut().unwrap().init_container_statuses =
                    Some(vec![core::ContainerStatus {
                        name: "init".into(),
                        restart_count: init,
                        ..Default::default()
                    }]);
            })
        };
        let pods = || {
            vec![
                with_init("split", 3, 3).build(),
                pod("a", "crash", "n1")
                    .restarts(10)
                    .waiting("CrashLoopBackOff")
                    .build(),
                pod("a", "pending", "n1")
                    .restarts(10)
                    .phase("Pending")
                    .build(),
            ]
        };
        assert_eq!(
            run(P, json!({"podRestartThreshold": 5}), pods()),
            names(&["a/crash", "a/pending"])
        );
        assert_eq!(
            run(
                P,
                json!({"podRestartThreshold": 5, "includingInitContainers": true}),
                pods()
            ),
            names(&["a/crash", "a/pending", "a/split"])
        );
        assert_eq!(
            run(
                P,
                json!({"podRestartThreshold": 5, "states": ["CrashLoopBackOff"]}),
                pods()
            ),
            names(&["a/crash"])
        );
        assert_eq!(
            run(
                P,
                json!({"podRestartThreshold": 5, "states": ["Running"]}),
                pods()
            ),
            names(&["a/crash"]),
            "crash is in phase Running"
        );
        let limited = run_with(
            P,
            json!({"podRestartThreshold": 5}),
            json!({}),
            vec![node("n1").build(), node("n2").build()],
            pods(),
            per_node_limit(1),
        );
        assert_eq!(limited, names(&["a/crash"]));
    }

    #[test]
    fn validation() {
        assert!(build_err(P, json!({})).contains("podRestartThreshold"));
        assert!(build_err(P, json!({"podRestartThreshold": 0})).contains("threshold"));
        assert!(
            build_err(P, json!({"podRestartThreshold": 1, "states": ["Pending"]}))
                .contains("states")
        );
        assert!(build_err(P, json!({"podRestartThreshold": 1, "bogus": 1})).contains("bogus"));
    }
}

mod pod_lifetime {
    use super::*;
    const P: &str = "PodLifeTime";

    #[test]
    fn strictly_older_than_max_and_oldest_first_across_nodes() {
        let pods = vec![
            pod("a", "n1-young", "n1").age(100).build(),
            pod("a", "n1-mid", "n1").age(500).build(),
            pod("a", "n2-oldest", "n2").age(900).build(),
            pod("a", "exact", "n2").age(300).build(),
        ];
        // Age equal to the max is not evicted; order is by age across nodes, not node by node.
        assert_eq!(
            run(P, json!({"maxPodLifeTimeSeconds": 300}), pods),
            names(&["a/n2-oldest", "a/n1-mid"])
        );
    }

    #[test]
    fn states_conditions_exit_codes_owner_kinds() {
        let pods = || {
            vec![
                pod("a", "pending", "n1").phase("Pending").build(),
                pod("a", "imgpull", "n1")
                    .waiting("ImagePullBackOff")
                    .build(),
                pod("a", "oom", "n1").terminated("OOMKilled", 137).build(),
                pod("a", "evicted", "n1")
                    .phase("Failed")
                    .with(|p| p.status.as_mut().unwrap().reason = Some("Evicted".into()))
                    .build(),
                pod("a", "unready", "n1")
                    .with(|p| {
                        p.status.as_mut().unwrap().conditions = Some(vec![core::PodCondition {
                            type_: "Ready".into(),
                            status: "False".into(),
                            reason: Some("ContainersNotReady".into()),
                            last_transition_time: Some(
                                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ago(600)),
                            ),
                            ..Default::default()
                        }]);
                    })
                    .build(),
                pod("a", "job", "n1")
                    .owner("Job", "j")
                    .phase("Pending")
                    .build(),
            ]
        };
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"states": ["Pending"]}), vec!["a/pending", "a/job"]),
            (json!({"states": ["ImagePullBackOff"]}), vec!["a/imgpull"]),
            (json!({"states": ["OOMKilled"]}), vec!["a/oom"]),
            (json!({"states": ["Evicted"]}), vec!["a/evicted"]),
            (
                json!({"states": ["Pending"], "ownerKinds": {"exclude": ["Job"]}}),
                vec!["a/pending"],
            ),
            (
                json!({"states": ["Pending"], "ownerKinds": {"include": ["Job"]}}),
                vec!["a/job"],
            ),
            (
                json!({"conditions": [{"type": "Ready", "status": "False"}]}),
                vec!["a/unready"],
            ),
            (
                json!({"conditions": [{"reason": "ContainersNotReady", "minTimeSinceLastTransitionSeconds": 300}]}),
                vec!["a/unready"],
            ),
            (
                json!({"conditions": [{"type": "Ready", "status": "False", "minTimeSinceLastTransitionSeconds": 601}]}),
                vec![],
            ),
            (json!({"exitCodes": [137]}), vec!["a/oom"]),
            (
                json!({"exitCodes": [137], "maxPodLifeTimeSeconds": 7200}),
                vec![],
            ),
        ];
        for (args, want) in cases {
            let mut got = run(P, args.clone(), pods());
            got.sort();
            let mut want = names(&want);
            want.sort();
            assert_eq!(got, want, "args {args}");
        }
    }

    #[test]
    fn validation() {
        assert!(build_err(P, json!({})).contains("at least one filtering criterion"));
        assert!(build_err(P, json!({"states": ["Sleeping"]})).contains("states"));
        assert!(build_err(P, json!({"maxPodLifeTimeSeconds": 1, "ownerKinds": {"include": ["Job"], "exclude": ["ReplicaSet"]}})).contains("ownerKinds"));
        assert!(build_err(P, json!({"conditions": [{}]})).contains("conditions[0]"));
        assert!(build(P, json!({"maxPodLifeTimeSeconds": 1, "namespaces": {"include": ["a"], "exclude": ["b"]}})).is_err());
        assert!(build(P, json!({"maxPodLifeTimeSeconds": 1, "includingInitContainers": true, "includingEphemeralContainers": true})).is_ok());
    }
}

mod node_taints {
    use super::*;
    const P: &str = "RemovePodsViolatingNodeTaints";

    fn nodes() -> Vec<core::Node> {
        vec![
            node("n1")
                .taint("dedicated", Some("gpu"), "NoSchedule")
                .taint("soft", None, "PreferNoSchedule")
                .taint("gone", None, "NoExecute")
                .build(),
            node("n2").build(),
        ]
    }

    fn pods() -> Vec<core::Pod> {
        vec![
            pod("a", "plain", "n1").build(),
            pod("a", "tolerates-gpu", "n1")
                .toleration("dedicated", "Equal", Some("gpu"), Some("NoSchedule"))
                .build(),
            pod("a", "tolerates-all", "n1")
                .with(|p| {
                    p.spec.as_mut().unwrap().tolerations = Some(vec![core::Toleration {
                        operator: Some("Exists".into()),
                        ..Default::default()
                    }])
                })
                .build(),
            pod("a", "empty-operator", "n1")
                .toleration("dedicated", "", Some("gpu"), None)
                .build(),
            pod("a", "on-n2", "n2").build(),
        ]
    }

    #[test]
    fn args_table() {
        let gpu_ok = |p: core::Pod| {
            let mut p = p;
            p.spec
                .as_mut()
                .unwrap()
                .tolerations
                .get_or_insert_with(Vec::new)
                .push(core::Toleration {
                    key: Some("dedicated".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                });
            p
        };
        let cases: Vec<(Value, Vec<core::Pod>, Vec<&str>)> = vec![
            // NoSchedule only; NoExecute is not this plugin's business; empty operator means Equal.
            (json!({}), pods(), vec!["a/plain"]),
            (
                json!({"includePreferNoSchedule": true}),
                pods(),
                vec!["a/plain", "a/tolerates-gpu", "a/empty-operator"],
            ),
            (json!({"excludedTaints": ["dedicated"]}), pods(), vec![]),
            (json!({"excludedTaints": ["dedicated=gpu"]}), pods(), vec![]),
            (
                json!({"excludedTaints": ["dedicated=cpu"]}),
                pods(),
                vec!["a/plain"],
            ),
            (
                json!({"includedTaints": ["dedicated=gpu"]}),
                pods(),
                vec!["a/plain"],
            ),
            (json!({"includedTaints": []}), pods(), vec![]),
            (
                json!({"includePreferNoSchedule": true, "includedTaints": ["soft"]}),
                pods().into_iter().map(gpu_ok).collect(),
                vec!["a/plain", "a/tolerates-gpu", "a/empty-operator"],
            ),
            (json!({"namespaces": {"include": ["b"]}}), pods(), vec![]),
        ];
        for (args, pods, want) in cases {
            let got = run_with(
                P,
                args.clone(),
                json!({}),
                nodes(),
                pods,
                CycleConfig::default(),
            );
            assert_eq!(got, names(&want), "args {args}");
        }
    }

    #[test]
    fn terminal_pods_are_ignored_and_validation() {
        let pods = vec![pod("a", "done", "n1").phase("Succeeded").build()];
        assert!(
            run_with(
                P,
                json!({}),
                json!({}),
                nodes(),
                pods,
                CycleConfig::default()
            )
            .is_empty()
        );
        assert!(
            build_err(P, json!({"excludedTaints": ["a"], "includedTaints": ["b"]}))
                .contains("not both")
        );
        assert!(build_err(P, json!({"includeNoExecute": true})).contains("includeNoExecute"));
    }
}

mod node_affinity {
    use super::*;
    const P: &str = "RemovePodsViolatingNodeAffinity";

    fn required(key: &str, value: &str) -> core::Affinity {
        serde_json::from_value(json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}}))
        .unwrap()
    }

    fn preferred(weights: &[(&str, i32)]) -> core::Affinity {
        let terms: Vec<Value> = weights
            .iter()
            .map(|(zone, w)| json!({"weight": w, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}}))
            .collect();
        serde_json::from_value(
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}),
        )
        .unwrap()
    }

    #[test]
    fn required_affinity_violated_and_fits_elsewhere() {
        let nodes = || {
            vec![
                node("n1").label("disk", "hdd").build(),
                node("n2").label("disk", "ssd").build(),
            ]
        };
        let pods = vec![
            pod("a", "wrong-node", "n1")
                .affinity(required("disk", "ssd"))
                .build(),
            pod("a", "right-node", "n2")
                .affinity(required("disk", "ssd"))
                .build(),
            pod("a", "no-affinity", "n1").build(),
            pod("a", "nowhere", "n1")
                .affinity(required("disk", "nvme"))
                .build(),
            pod("a", "selector-only", "n1")
                .node_selector("disk", "ssd")
                .build(),
        ];
        let args = json!({"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]});
        // `nowhere` fits no node, so it stays; a nodeSelector without required affinity is not this plugin's.
        assert_eq!(
            run_with(P, args, json!({}), nodes(), pods, CycleConfig::default()),
            names(&["a/wrong-node"])
        );
    }

    #[test]
    fn required_affinity_needs_room_somewhere() {
        let nodes = vec![
            node("n1").label("disk", "hdd").build(),
            node("n2")
                .label("disk", "ssd")
                .allocatable("1", "1Gi", "110")
                .build(),
        ];
        let pods = vec![
            pod("a", "big", "n1")
                .requests("2", "1Gi")
                .affinity(required("disk", "ssd"))
                .build(),
            pod("a", "small", "n1")
                .requests("100m", "100Mi")
                .affinity(required("disk", "ssd"))
                .build(),
        ];
        let args = json!({"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]});
        assert_eq!(
            run_with(P, args, json!({}), nodes, pods, CycleConfig::default()),
            names(&["a/small"])
        );
    }

    #[test]
    fn preferred_affinity_needs_a_strictly_better_node() {
        let nodes = || {
            vec![
                node("n1").label("zone", "a").build(),
                node("n2").label("zone", "b").build(),
            ]
        };
        let pods = vec![
            pod("a", "prefers-b", "n1")
                .affinity(preferred(&[("b", 10)]))
                .build(),
            pod("a", "tie", "n1")
                .affinity(preferred(&[("a", 10), ("b", 10)]))
                .build(),
            pod("a", "prefers-a", "n1")
                .affinity(preferred(&[("a", 5), ("b", 1)]))
                .build(),
        ];
        let args = json!({"nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]});
        assert_eq!(
            run_with(
                P,
                args.clone(),
                json!({}),
                nodes(),
                pods.clone(),
                CycleConfig::default()
            ),
            names(&["a/prefers-b"])
        );
        // Only the required type: preferred terms are ignored.
        let req = json!({"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]});
        assert!(run_with(P, req, json!({}), nodes(), pods, CycleConfig::default()).is_empty());
    }

    #[test]
    fn validation() {
        assert!(build_err(P, json!({})).contains("nodeAffinityType needs to be set"));
        assert!(
            build_err(P, json!({"nodeAffinityType": ["sometimes"]})).contains("nodeAffinityType")
        );
    }
}
