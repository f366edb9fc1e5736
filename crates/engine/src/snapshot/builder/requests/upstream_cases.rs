//! The cases of component-helpers' `TestPodResourceRequests`, `TestPodLevelResourceRequests`,
//! `TestPodRequestsAndLimits(WithoutOverhead)` and the in-place resize cases of
//! `TestPodRequestsAndLimitsVerticalScalingWrappers` (Kubernetes 1.37), requests only: `spec` is the
//! view without status (`UseStatusResources: false`), `status` kube-scheduler's (with status and
//! pod-level status). Options this crate never uses (`ExcludeOverhead`, `SkipPodLevelResources`,
//! `NonMissingContainerRequests`) are left out.

use serde_json::{Value, json};

use super::pod_requests_of;
use crate::snapshot::resources::Resources;
use crate::snapshot::view::PodView;

/// Requests of the pod given as JSON: from the spec alone and with its status.
fn both(pod: Value) -> (Resources, Resources) {
    let text = pod.to_string();
    let view = PodView::from_json(&text).expect("a pod");
    let spec = pod_requests_of(&view.spec, None).expect("spec requests");
    let status = pod_requests_of(&view.spec, Some(&view.status)).expect("status requests");
    (spec, status)
}

/// The expected list (and the one pod slot every pod takes).
fn want(list: &[(&str, &str)]) -> Resources {
    let mut r = Resources::default();
    for (name, q) in list {
        let q = crate::quantity::Quantity::parse(q).expect("quantity");
        r.set(
            name,
            if *name == "cpu" {
                q.milli_value()
            } else {
                q.value()
            },
        );
    }
    r.pods = 1;
    r
}

fn c(name: &str, requests: Value) -> Value {
    json!({"name": name, "resources": {"requests": requests}})
}

fn sidecar(name: &str, requests: Value) -> Value {
    json!({"name": name, "restartPolicy": "Always", "resources": {"requests": requests}})
}

const INFEASIBLE: &str = r#"[{"type":"PodResizePending","status":"True","reason":"Infeasible"}]"#;

fn infeasible() -> Value {
    serde_json::from_str(INFEASIBLE).expect("conditions")
}

/// A case: its name, the pod, and the requests expected (resource, quantity).
type Case = (&'static str, Value, Vec<(&'static str, &'static str)>);

#[test]
fn spec_requests_sum_containers_and_take_the_init_peak() {
    let cases: Vec<Case> = vec![
        (
            "larger init container",
            json!({"spec": {"initContainers": [c("i", json!({"cpu": "4"}))],
                            "containers": [c("c", json!({"cpu": "1"}))]}}),
            vec![("cpu", "4")],
        ),
        (
            "larger containers",
            json!({"spec": {"initContainers": [c("i", json!({"cpu": "2"}))],
                            "containers": [c("a", json!({"cpu": "2"})), c("b", json!({"cpu": "3"}))]}}),
            vec![("cpu", "5")],
        ),
        (
            "pod overhead included",
            json!({"spec": {"overhead": {"cpu": "1", "memory": "1Gi"},
                            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}],
                            "containers": [c("a", json!({"cpu": "2"})), c("b", json!({"cpu": "3"}))]}}),
            vec![("cpu", "6"), ("memory", "1Gi")],
        ),
        (
            "just a limit: the request defaults to it (API defaulting)",
            json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "9"}}}]}}),
            vec![("cpu", "9")],
        ),
        (
            "requests and overhead",
            json!({"spec": {"overhead": {"cpu": "5", "memory": "5"},
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "10"}, "limits": {"cpu": "2", "memory": "12"}}}]}}),
            vec![("cpu", "6"), ("memory", "15")],
        ),
        (
            "restartable init container",
            json!({"spec": {"initContainers": [sidecar("s", json!({"cpu": "1"}))],
                            "containers": [c("c", json!({"cpu": "1"}))]}}),
            vec![("cpu", "2")],
        ),
        (
            "multiple restartable init containers: max(5, 3+2+1 + 1)",
            json!({"spec": {"initContainers": [c("init-1", json!({"cpu": "5"})),
                                               sidecar("s1", json!({"cpu": "1"})),
                                               sidecar("s2", json!({"cpu": "2"})),
                                               sidecar("s3", json!({"cpu": "3"}))],
                            "containers": [c("c", json!({"cpu": "1"}))]}}),
            vec![("cpu", "7")],
        ),
        (
            "multiple restartable and regular init containers: init-2 + the sidecars before it",
            json!({"spec": {"initContainers": [c("init-1", json!({"cpu": "5"})),
                                               sidecar("s1", json!({"cpu": "1"})),
                                               sidecar("s2", json!({"cpu": "2"})),
                                               c("init-2", json!({"cpu": "5"})),
                                               sidecar("s3", json!({"cpu": "3"}))],
                            "containers": [c("c", json!({"cpu": "1"}))]}}),
            vec![("cpu", "8")],
        ),
        (
            "restartable-init, init and regular",
            json!({"spec": {"initContainers": [sidecar("s", json!({"cpu": "10"})), c("i", json!({"cpu": "200"}))],
                            "containers": [c("c", json!({"cpu": "100"}))]}}),
            vec![("cpu", "210")],
        ),
    ];
    for (name, pod, expected) in cases {
        let (spec, status) = both(pod);
        assert_eq!(spec, want(&expected), "{name}");
        // Without status the resize-aware view is the spec's.
        assert_eq!(status, spec, "{name}");
    }
}

#[test]
fn pod_level_requests_replace_the_containers_total_for_what_they_set() {
    let cases: Vec<Case> = vec![
        ("nil", json!({"spec": {}}), vec![]),
        (
            "pod level memory",
            json!({"spec": {"resources": {"requests": {"memory": "2Mi"}}}}),
            vec![("memory", "2Mi")],
        ),
        (
            "pod level memory and container level cpu",
            json!({"spec": {"resources": {"requests": {"memory": "2Mi"}},
                            "containers": [c("c", json!({"cpu": "2m"}))]}}),
            vec![("memory", "2Mi"), ("cpu", "2m")],
        ),
        (
            "unsupported resource at both levels: the containers'",
            json!({"spec": {"resources": {"requests": {"storage": "2Mi"}},
                            "containers": [c("c", json!({"storage": "3Mi"}))]}}),
            vec![("storage", "3Mi")],
        ),
        (
            "unsupported resource at pod level only",
            json!({"spec": {"resources": {"requests": {"storage": "2Mi"}},
                            "containers": [c("c", json!({"memory": "3Mi"}))]}}),
            vec![("memory", "3Mi")],
        ),
        (
            "both levels",
            json!({"spec": {"resources": {"requests": {"memory": "6Mi", "cpu": "8m"}},
                            "containers": [c("c", json!({"memory": "3Mi", "cpu": "2m"}))]}}),
            vec![("memory", "6Mi"), ("cpu", "8m")],
        ),
        (
            "container level and sidecar",
            json!({"spec": {"initContainers": [sidecar("s", json!({"memory": "5Mi", "cpu": "4m"}))],
                            "containers": [c("c", json!({"memory": "3Mi", "cpu": "2m"}))]}}),
            vec![("memory", "8Mi"), ("cpu", "6m")],
        ),
        (
            "container level, init and sidecar",
            json!({"spec": {"initContainers": [sidecar("s", json!({"memory": "5Mi", "cpu": "4m"})),
                                               c("i", json!({"memory": "6Mi", "cpu": "8m"}))],
                            "containers": [c("c", json!({"memory": "3Mi", "cpu": "2m"}))]}}),
            vec![("memory", "11Mi"), ("cpu", "12m")],
        ),
        (
            "pod level over container level, init and sidecar",
            json!({"spec": {"resources": {"requests": {"memory": "15Mi", "cpu": "18m"}},
                            "initContainers": [sidecar("s", json!({"memory": "5Mi", "cpu": "4m"})),
                                               c("i", json!({"memory": "6Mi", "cpu": "8m"}))],
                            "containers": [c("c", json!({"memory": "3Mi", "cpu": "2m"}))]}}),
            vec![("memory", "15Mi"), ("cpu", "18m")],
        ),
        (
            "hugepages, one page size",
            json!({"spec": {"resources": {"limits": {"hugepages-2Mi": "2Mi"},
                                          "requests": {"memory": "10Mi", "hugepages-2Mi": "2Mi"}}}}),
            vec![("memory", "10Mi"), ("hugepages-2Mi", "2Mi")],
        ),
        (
            "hugepages at both levels",
            json!({"spec": {"resources": {"requests": {"cpu": "1", "hugepages-2Mi": "10Mi"}},
                            "containers": [{"name": "c", "resources": {"limits": {"hugepages-2Mi": "6Mi"}, "requests": {"hugepages-2Mi": "6Mi"}}}]}}),
            vec![("cpu", "1"), ("hugepages-2Mi", "10Mi")],
        ),
        (
            "hugepage sizes split between the levels",
            json!({"spec": {"resources": {"requests": {"cpu": "1", "hugepages-2Mi": "10Mi"}},
                            "containers": [{"name": "c", "resources": {"limits": {"hugepages-1Gi": "1Gi"}, "requests": {"memory": "4Mi", "hugepages-1Gi": "1Gi"}}}]}}),
            vec![
                ("cpu", "1"),
                ("memory", "4Mi"),
                ("hugepages-2Mi", "10Mi"),
                ("hugepages-1Gi", "1Gi"),
            ],
        ),
        (
            // The brief's pod: 2 CPU / 1 GiB at pod level, two containers of 100m / 100Mi.
            "pod level over two containers",
            json!({"spec": {"resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                            "containers": [c("a", json!({"cpu": "100m", "memory": "100Mi"})),
                                           c("b", json!({"cpu": "100m", "memory": "100Mi"}))]}}),
            vec![("cpu", "2"), ("memory", "1Gi")],
        ),
        (
            "pod level with overhead: overhead still added",
            json!({"spec": {"overhead": {"cpu": "250m"}, "resources": {"requests": {"cpu": "1"}},
                            "containers": [c("a", json!({"cpu": "100m"}))]}}),
            vec![("cpu", "1250m")],
        ),
    ];
    for (name, pod, expected) in cases {
        let (spec, status) = both(pod);
        assert_eq!(spec, want(&expected), "{name}");
        assert_eq!(status, spec, "{name}");
    }
}

#[test]
fn resized_pods_count_the_largest_of_spec_allocated_and_actuated() {
    // (name, pod, spec view, kube-scheduler's view)
    type Case<'a> = (
        &'a str,
        Value,
        Vec<(&'a str, &'a str)>,
        Vec<(&'a str, &'a str)>,
    );
    let cases: Vec<Case> = vec![
        (
            "resized, infeasible: the actuated requests",
            json!({"spec": {"containers": [c("container-1", json!({"cpu": "4"}))]},
                   "status": {"conditions": infeasible(),
                              "containerStatuses": [{"name": "container-1", "resources": {"requests": {"cpu": "2"}}}]}}),
            vec![("cpu", "4")],
            vec![("cpu", "2")],
        ),
        (
            "resized, infeasible & in progress: allocated over actuated",
            json!({"spec": {"containers": [c("container-1", json!({"cpu": "6"}))]},
                   "status": {"conditions": infeasible(),
                              "containerStatuses": [{"name": "container-1", "allocatedResources": {"cpu": "4"},
                                                     "resources": {"requests": {"cpu": "2"}}}]}}),
            vec![("cpu", "6")],
            vec![("cpu", "4")],
        ),
        (
            "resized, no resize status: the spec is larger",
            json!({"spec": {"containers": [c("container-1", json!({"cpu": "4"}))]},
                   "status": {"containerStatuses": [{"name": "container-1", "resources": {"requests": {"cpu": "2"}}}]}}),
            vec![("cpu", "4")],
            vec![("cpu", "4")],
        ),
        (
            "per-resource 3-way maximum",
            json!({"spec": {"containers": [c("container-1", json!({"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"}))]},
                   "status": {"containerStatuses": [{"name": "container-1",
                       "allocatedResources": {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                       "resources": {"requests": {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"}}}]}}),
            vec![
                ("cpu", "30m"),
                ("memory", "20M"),
                ("ephemeral-storage", "10G"),
            ],
            vec![
                ("cpu", "30m"),
                ("memory", "30M"),
                ("ephemeral-storage", "30G"),
            ],
        ),
        (
            "restartable init container, infeasible",
            json!({"spec": {"initContainers": [sidecar("restartable-init-1", json!({"cpu": "4"}))]},
                   "status": {"conditions": infeasible(),
                              "initContainerStatuses": [{"name": "restartable-init-1", "resources": {"requests": {"cpu": "2"}}}]}}),
            vec![("cpu", "4")],
            vec![("cpu", "2")],
        ),
        (
            "restartable init container, no resize status",
            json!({"spec": {"initContainers": [sidecar("restartable-init-1", json!({"cpu": "4"}))]},
                   "status": {"initContainerStatuses": [{"name": "restartable-init-1", "resources": {"requests": {"cpu": "2"}}}]}}),
            vec![("cpu", "4")],
            vec![("cpu", "4")],
        ),
        (
            "max of sums, not sum of maxes",
            json!({"spec": {"containers": [c("c1", json!({"cpu": "1"})), c("c2", json!({"cpu": "2"}))]},
                   "status": {"containerStatuses": [{"name": "c1", "allocatedResources": {"cpu": "2"}},
                                                    {"name": "c2", "allocatedResources": {"cpu": "1"}}]}}),
            vec![("cpu", "3")],
            vec![("cpu", "3")],
        ),
        (
            "resize up admitted, not yet actuated: allocated counts",
            json!({"spec": {"containers": [c("c1", json!({"cpu": "1", "memory": "1Gi"}))]},
                   "status": {"containerStatuses": [{"name": "c1", "allocatedResources": {"cpu": "3", "memory": "1Gi"},
                                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}),
            vec![("cpu", "1"), ("memory", "1Gi")],
            vec![("cpu", "3"), ("memory", "1Gi")],
        ),
        (
            "pod-level status populated",
            json!({"spec": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
                            "containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]},
                   "status": {"allocatedResources": {"cpu": "3"},
                              "resources": {"requests": {"cpu": "3.5"}, "limits": {"cpu": "5"}}}}),
            vec![("cpu", "2")],
            vec![("cpu", "3.5")],
        ),
        (
            "pod-level status: allocated only",
            json!({"spec": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
                            "containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]},
                   "status": {"allocatedResources": {"cpu": "3"}}}),
            vec![("cpu", "2")],
            vec![("cpu", "3")],
        ),
        (
            "pod-level status, infeasible resize",
            json!({"spec": {"resources": {"requests": {"cpu": "10"}, "limits": {"cpu": "20"}},
                            "containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]},
                   "status": {"conditions": infeasible(), "allocatedResources": {"cpu": "3"},
                              "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "8"}}}}),
            vec![("cpu", "10")],
            vec![("cpu", "4")],
        ),
        (
            "infeasible without status: nothing counted",
            json!({"spec": {"containers": [{"name": "c1", "resources": {"limits": {"cpu": "10"}}}]},
                   "status": {"conditions": infeasible(),
                              "containerStatuses": [{"name": "c1", "resources": {"limits": {"cpu": "6"}}}]}}),
            vec![("cpu", "10")],
            vec![],
        ),
        (
            "pod-level status with overhead: status less overhead, then overhead",
            json!({"spec": {"overhead": {"cpu": "1", "memory": "500Mi"},
                            "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}}},
                   "status": {"allocatedResources": {"cpu": "3", "memory": "2.5Gi"},
                              "resources": {"requests": {"cpu": "3", "memory": "2.5Gi"}, "limits": {"cpu": "5", "memory": "4.5Gi"}}}}),
            // Spec: 2Gi + 500Mi; with status: max(2Gi, 2.5Gi − 500Mi) + 500Mi (upstream's case).
            vec![("cpu", "3"), ("memory", "2548Mi")],
            vec![("cpu", "3"), ("memory", "2.5Gi")],
        ),
        (
            "a deferred resize counts the spec",
            json!({"spec": {"containers": [c("c1", json!({"cpu": "4"}))]},
                   "status": {"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
                              "containerStatuses": [{"name": "c1", "allocatedResources": {"cpu": "2"},
                                                     "resources": {"requests": {"cpu": "2"}}}]}}),
            vec![("cpu", "4")],
            vec![("cpu", "4")],
        ),
    ];
    for (name, pod, spec_want, status_want) in cases {
        let (spec, status) = both(pod);
        assert_eq!(spec, want(&spec_want), "{name}: spec");
        assert_eq!(status, want(&status_want), "{name}: with status");
    }
}
