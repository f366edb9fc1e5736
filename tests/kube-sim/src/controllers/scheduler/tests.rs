//! Scheduler filter, scoring and binding tests.
use super::*;
use crate::controllers::testing::{Sim, node, pending_pod};
use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec, ResourceRequirements, Taint,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn pod(name: &str, app: &str, cpu: Option<&str>) -> Pod {
    pending_pod(name, app, "nginx", cpu)
}

fn on(mut p: Pod, node: &str) -> Pod {
    p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
    p.status.get_or_insert_with(Default::default).phase = Some("Running".into());
    p
}

fn label(n: &mut Node, k: &str, v: &str) {
    n.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(k.into(), v.into());
}

fn taint(n: &mut Node, key: &str, value: Option<&str>, effect: &str) {
    n.spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new)
        .push(Taint {
            key: key.into(),
            value: value.map(str::to_string),
            effect: effect.into(),
            time_added: None,
        });
}

fn tolerate(
    p: &mut Pod,
    key: Option<&str>,
    op: Option<&str>,
    value: Option<&str>,
    effect: Option<&str>,
) {
    p.spec
        .get_or_insert_with(Default::default)
        .tolerations
        .get_or_insert_with(Vec::new)
        .push(Toleration {
            key: key.map(str::to_string),
            operator: op.map(str::to_string),
            value: value.map(str::to_string),
            effect: effect.map(str::to_string),
            toleration_seconds: None,
        });
}

fn node_affinity(p: &mut Pod, terms: Vec<NodeSelectorTerm>) {
    p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: terms,
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
}

fn expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }]),
        match_fields: None,
    }
}

fn term(app: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), app.to_string())].into()),
            ..Default::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    }
}

fn anti_affinity(p: &mut Pod, app: &str) {
    p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term(app)]),
            ..Default::default()
        }),
        ..Default::default()
    });
}

fn container(cpu: &str) -> Container {
    Container {
        name: format!("c{cpu}"),
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

type Setup = fn(&mut Vec<Node>, &mut Pod, &mut Vec<Pod>, &mut ClusterState);

/// Runs the scheduler for `pod` on nodes n1/n2 (4 cpu, 8Gi) and returns the chosen node.
fn schedule(setup: Setup) -> (Option<String>, Vec<Action>) {
    let mut nodes = vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")];
    let mut p = pod("new", "web", None);
    let mut existing = Vec::new();
    let mut st = Sim::with_nodes(vec![]).state;
    setup(&mut nodes, &mut p, &mut existing, &mut st);
    st.nodes = nodes;
    st.pods = existing;
    st.pods.push(p);
    let actions = reconcile(&st);
    let bound = actions.iter().find_map(|a| match a {
        Action::Update(v) if v["metadata"]["name"] == "new" => {
            v["spec"]["nodeName"].as_str().map(str::to_string)
        }
        _ => None,
    });
    (bound, actions)
}

#[test]
fn fit_rules() {
    let cases: Vec<(&str, Setup, Option<&str>)> = vec![
        ("tie broken by name", |_, _, _, _| {}, Some("n1")),
        (
            "least requested wins",
            |_, _, e, _| e.push(on(pod("busy", "x", Some("3")), "n1")),
            Some("n2"),
        ),
        (
            "terminal pods free resources",
            |_, p, e, _| {
                let mut done = on(pod("done", "x", Some("4")), "n1");
                done.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
                e.push(done);
                e.push(on(pod("busy", "x", Some("1")), "n2"));
                *p = pod("new", "web", Some("3"));
            },
            Some("n1"),
        ),
        (
            "NotReady node skipped",
            |n, _, _, _| {
                if let Some(c) = n[0].status.as_mut().and_then(|s| s.conditions.as_mut()) {
                    c[0].status = "False".into();
                }
            },
            Some("n2"),
        ),
        (
            "node without conditions skipped",
            |n, _, _, _| n[0].status = None,
            Some("n2"),
        ),
        (
            "stopped node skipped",
            |_, _, _, s| s.config.stopped_nodes = vec!["n1".into()],
            Some("n2"),
        ),
        (
            "unschedulable skipped",
            |n, _, _, _| n[0].spec.get_or_insert_with(Default::default).unschedulable = Some(true),
            Some("n2"),
        ),
        (
            "unschedulable tolerated",
            |n, p, _, _| {
                n[0].spec.get_or_insert_with(Default::default).unschedulable = Some(true);
                tolerate(
                    p,
                    Some("node.kubernetes.io/unschedulable"),
                    Some("Exists"),
                    None,
                    Some("NoSchedule"),
                );
            },
            Some("n1"),
        ),
        (
            "NoSchedule taint blocks",
            |n, _, _, _| taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule"),
            Some("n2"),
        ),
        (
            "NoExecute taint blocks",
            |n, _, _, _| taint(&mut n[0], "dedicated", Some("gpu"), "NoExecute"),
            Some("n2"),
        ),
        (
            "PreferNoSchedule does not block",
            |n, _, _, _| taint(&mut n[0], "dedicated", Some("gpu"), "PreferNoSchedule"),
            Some("n1"),
        ),
        (
            "Equal toleration (empty operator)",
            |n, p, _, _| {
                taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule");
                taint(&mut n[1], "other", None, "NoSchedule");
                tolerate(p, Some("dedicated"), None, Some("gpu"), Some("NoSchedule"));
            },
            Some("n1"),
        ),
        (
            "Equal toleration wrong value",
            |n, p, _, _| {
                taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule");
                tolerate(p, Some("dedicated"), Some("Equal"), Some("cpu"), None);
            },
            Some("n2"),
        ),
        (
            "toleration for another effect",
            |n, p, _, _| {
                taint(&mut n[0], "dedicated", Some("gpu"), "NoExecute");
                tolerate(
                    p,
                    Some("dedicated"),
                    Some("Exists"),
                    None,
                    Some("NoSchedule"),
                );
            },
            Some("n2"),
        ),
        (
            "Exists with empty key tolerates all",
            |n, p, _, _| {
                taint(&mut n[0], "a", Some("1"), "NoSchedule");
                taint(&mut n[0], "b", None, "NoExecute");
                taint(&mut n[1], "a", Some("1"), "NoSchedule");
                tolerate(p, None, Some("Exists"), None, None);
            },
            Some("n1"),
        ),
        (
            "nodeSelector",
            |n, p, _, _| {
                label(&mut n[1], "disk", "ssd");
                p.spec.get_or_insert_with(Default::default).node_selector =
                    Some([("disk".to_string(), "ssd".to_string())].into());
            },
            Some("n2"),
        ),
        (
            "nodeSelector unmatched",
            |_, p, _, _| {
                p.spec.get_or_insert_with(Default::default).node_selector =
                    Some([("disk".to_string(), "ssd".to_string())].into());
            },
            None,
        ),
        (
            "affinity In",
            |n, p, _, _| {
                label(&mut n[0], "zone", "a");
                label(&mut n[1], "zone", "b");
                node_affinity(p, vec![expr("zone", "In", &["b", "c"])]);
            },
            Some("n2"),
        ),
        (
            "affinity NotIn",
            |n, p, _, _| {
                label(&mut n[0], "zone", "a");
                node_affinity(p, vec![expr("zone", "NotIn", &["a"])]);
            },
            Some("n2"),
        ),
        (
            "affinity Exists",
            |n, p, _, _| {
                label(&mut n[1], "gpu", "");
                node_affinity(p, vec![expr("gpu", "Exists", &[])]);
            },
            Some("n2"),
        ),
        (
            "affinity DoesNotExist",
            |n, p, _, _| {
                label(&mut n[0], "gpu", "");
                node_affinity(p, vec![expr("gpu", "DoesNotExist", &[])]);
            },
            Some("n2"),
        ),
        (
            "affinity Gt",
            |n, p, _, _| {
                label(&mut n[0], "cores", "4");
                label(&mut n[1], "cores", "16");
                node_affinity(p, vec![expr("cores", "Gt", &["8"])]);
            },
            Some("n2"),
        ),
        (
            "affinity Lt",
            |n, p, _, _| {
                label(&mut n[0], "cores", "16");
                label(&mut n[1], "cores", "4");
                node_affinity(p, vec![expr("cores", "Lt", &["8"])]);
            },
            Some("n2"),
        ),
        (
            "affinity Gt with non-integer label",
            |n, p, _, _| {
                label(&mut n[0], "cores", "many");
                label(&mut n[1], "cores", "many");
                node_affinity(p, vec![expr("cores", "Gt", &["8"])]);
            },
            None,
        ),
        (
            "affinity terms are ORed",
            |n, p, _, _| {
                label(&mut n[1], "zone", "b");
                node_affinity(
                    p,
                    vec![expr("zone", "In", &["x"]), expr("zone", "In", &["b"])],
                );
            },
            Some("n2"),
        ),
        (
            "affinity matchFields metadata.name",
            |_, p, _, _| {
                node_affinity(
                    p,
                    vec![NodeSelectorTerm {
                        match_expressions: None,
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".into(),
                            operator: "In".into(),
                            values: Some(vec!["n2".into()]),
                        }]),
                    }],
                );
            },
            Some("n2"),
        ),
        (
            "empty affinity term matches nothing",
            |_, p, _, _| node_affinity(p, vec![NodeSelectorTerm::default()]),
            None,
        ),
        (
            "insufficient cpu",
            |_, p, _, _| *p = pod("new", "web", Some("5")),
            None,
        ),
        (
            "requests fill exactly",
            |_, p, e, _| {
                e.push(on(pod("a", "x", Some("1500m")), "n1"));
                e.push(on(pod("b", "x", Some("1500m")), "n2"));
                *p = pod("new", "web", Some("2.5"));
            },
            Some("n1"),
        ),
        (
            "limits stand in for requests",
            |_, p, e, _| {
                e.push(on(pod("a", "x", Some("2")), "n1"));
                e.push(on(pod("b", "x", Some("2")), "n2"));
                if let Some(c) = p.spec.as_mut().map(|s| &mut s.containers[0]) {
                    c.resources = Some(ResourceRequirements {
                        limits: Some([("cpu".to_string(), Quantity("3".into()))].into()),
                        ..Default::default()
                    });
                }
            },
            None,
        ),
        (
            "init container max counts",
            |_, p, e, _| {
                e.push(on(pod("a", "x", Some("2")), "n1"));
                e.push(on(pod("b", "x", Some("2")), "n2"));
                if let Some(s) = p.spec.as_mut() {
                    s.containers = vec![container("1")];
                    s.init_containers = Some(vec![container("3")]);
                }
            },
            None,
        ),
        (
            "init container below sum",
            |_, p, e, _| {
                e.push(on(pod("a", "x", Some("2")), "n1"));
                e.push(on(pod("b", "x", Some("2")), "n2"));
                if let Some(s) = p.spec.as_mut() {
                    s.containers = vec![container("1"), container("1")];
                    s.init_containers = Some(vec![container("1500m")]);
                }
            },
            Some("n1"),
        ),
        (
            "overhead counts",
            |_, p, e, _| {
                e.push(on(pod("a", "x", Some("2")), "n1"));
                e.push(on(pod("b", "x", Some("2")), "n2"));
                if let Some(s) = p.spec.as_mut() {
                    s.containers = vec![container("1500m")];
                    s.overhead = Some([("cpu".to_string(), Quantity("600m".into()))].into());
                }
            },
            None,
        ),
        (
            "unknown extended resource",
            |_, p, _, _| {
                if let Some(c) = p.spec.as_mut().map(|s| &mut s.containers[0]) {
                    c.resources = Some(ResourceRequirements {
                        requests: Some(
                            [("nvidia.com/gpu".to_string(), Quantity("1".into()))].into(),
                        ),
                        ..Default::default()
                    });
                }
            },
            None,
        ),
        (
            "pod count limit",
            |n, _, e, _| {
                for node in n.iter_mut() {
                    if let Some(a) = node.status.as_mut().and_then(|s| s.allocatable.as_mut()) {
                        a.insert("pods".into(), Quantity("1".into()));
                    }
                }
                e.push(on(pod("a", "x", None), "n1"));
            },
            Some("n2"),
        ),
        (
            "pod anti-affinity by hostname",
            |_, p, e, _| {
                e.push(on(pod("old", "web", None), "n1"));
                anti_affinity(p, "web");
            },
            Some("n2"),
        ),
        (
            "pod anti-affinity everywhere",
            |_, p, e, _| {
                e.push(on(pod("old1", "web", None), "n1"));
                e.push(on(pod("old2", "web", None), "n2"));
                anti_affinity(p, "web");
            },
            None,
        ),
        (
            "pod anti-affinity other namespace ignored",
            |_, p, e, _| {
                let mut other = on(pod("old", "web", None), "n1");
                other.metadata.namespace = Some("elsewhere".into());
                e.push(other);
                anti_affinity(p, "web");
            },
            Some("n1"),
        ),
        (
            "existing pod's anti-affinity is symmetric",
            |_, _, e, _| {
                let mut guard = on(pod("guard", "db", None), "n1");
                anti_affinity(&mut guard, "web");
                e.push(guard);
            },
            Some("n2"),
        ),
        (
            "pod affinity",
            |_, p, e, _| {
                e.push(on(pod("cache", "cache", None), "n2"));
                p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
                    pod_affinity: Some(PodAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![term(
                            "cache",
                        )]),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            },
            Some("n2"),
        ),
        (
            "other scheduler's pod ignored",
            |_, p, _, _| {
                p.spec.get_or_insert_with(Default::default).scheduler_name = Some("custom".into());
            },
            None,
        ),
    ];
    for (desc, setup, want) in cases {
        let (got, _) = schedule(setup);
        assert_eq!(got.as_deref(), want, "{desc}");
    }
}

#[test]
fn binding_sets_pod_scheduled_and_failure_reports_reasons() {
    let (got, actions) = schedule(|_, _, _, _| {});
    assert_eq!(got.as_deref(), Some("n1"));
    let Some(Action::Update(v)) = actions.first() else {
        panic!("expected an update");
    };
    let conds = v["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "PodScheduled" && c["status"] == "True")
    );

    let (got, actions) = schedule(|n, p, _, _| {
        taint(&mut n[0], "dedicated", Some("gpu"), "NoSchedule");
        *p = pod("new", "web", Some("5"));
    });
    assert_eq!(got, None);
    let Some(Action::Update(v)) = actions.first() else {
        panic!("expected a status update");
    };
    let cond = v["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled").cloned())
        .unwrap_or_default();
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "Unschedulable");
    assert_eq!(
        cond["message"],
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}."
    );
}

#[test]
fn bindings_within_a_tick_are_accounted_and_idempotent() {
    let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
    sim.state.pods.push(pod("a", "web", Some("3")));
    sim.state.pods.push(pod("b", "web", Some("3")));
    sim.state.pods.push(pod("c", "web", Some("3")));
    let mut sim = Sim::new(sim.state);
    let actions = reconcile(&sim.state);
    sim.apply(actions);
    let nodes: Vec<Option<String>> = sim
        .state
        .pods
        .iter()
        .map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    assert_eq!(nodes, vec![Some("n1".into()), Some("n2".into()), None]);
    // The unschedulable pod's condition is written once.
    assert!(reconcile(&sim.state).is_empty());
}

#[test]
fn pod_requests_formula() {
    let mut p = pod("p", "x", None);
    if let Some(s) = p.spec.as_mut() {
        s.containers = vec![container("1"), container("500m")];
        let mut sidecar = container("200m");
        sidecar.restart_policy = Some("Always".into());
        s.init_containers = Some(vec![sidecar, container("2")]);
        s.overhead = Some([("cpu".to_string(), Quantity("100m".into()))].into());
    }
    // max(1.5 + 0.2 sidecar, 0.2 + 2 init step) + 0.1 overhead = 2.3
    assert_eq!(pod_requests(&p).get("cpu"), Some(&2300));
    assert!(pod_requests(&Pod::default()).is_empty());
}

#[test]
fn tolerations_table() {
    let t = |key: &str, value: Option<&str>, effect: &str| Taint {
        key: key.into(),
        value: value.map(str::to_string),
        effect: effect.into(),
        time_added: None,
    };
    let tol = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
        Toleration {
            key: key.map(str::to_string),
            operator: op.map(str::to_string),
            value: value.map(str::to_string),
            effect: effect.map(str::to_string),
            toleration_seconds: None,
        }
    };
    let cases = [
        (
            tol(Some("k"), None, Some("v"), None),
            t("k", Some("v"), "NoSchedule"),
            true,
        ),
        (
            tol(Some("k"), Some("Equal"), Some("v"), Some("NoSchedule")),
            t("k", Some("v"), "NoExecute"),
            false,
        ),
        (
            tol(Some("k"), Some("Exists"), None, None),
            t("k", Some("v"), "NoExecute"),
            true,
        ),
        (
            tol(None, Some("Exists"), None, None),
            t("any", None, "NoSchedule"),
            true,
        ),
        (
            tol(None, Some("Equal"), None, None),
            t("any", None, "NoSchedule"),
            false,
        ),
        (
            tol(Some("k"), None, None, None),
            t("k", None, "NoSchedule"),
            true,
        ),
        (
            tol(Some("k"), Some("Bogus"), None, None),
            t("k", None, "NoSchedule"),
            false,
        ),
    ];
    for (i, (tol, taint, want)) in cases.iter().enumerate() {
        assert_eq!(tolerates(tol, taint), *want, "case {i}");
    }
}

#[test]
fn odd_pods_do_not_panic() {
    let mut st = Sim::with_nodes(vec![node("n1", "4", "8Gi"), Node::default()]).state;
    st.pods.push(Pod::default());
    let mut weird = pod("w", "x", None);
    if let Some(c) = weird.spec.as_mut().map(|s| &mut s.containers[0]) {
        c.resources = Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity("lots".into()))].into()),
            ..Default::default()
        });
    }
    st.pods.push(weird);
    let _ = reconcile(&st);
    let _ = PodSpec::default();
}

#[test]
fn feasible_node_share_follows_upstream_adaptive_percentage() {
    // Below 100 nodes every node; 50 % minus 1 % per 125 nodes, at least 5 %, at least 100.
    assert_eq!(feasible_nodes_to_find(0), 0);
    assert_eq!(feasible_nodes_to_find(99), 99);
    assert_eq!(feasible_nodes_to_find(100), 100);
    assert_eq!(feasible_nodes_to_find(250), 120);
    assert_eq!(feasible_nodes_to_find(1000), 420);
    assert_eq!(feasible_nodes_to_find(5000), 500);
    assert_eq!(feasible_nodes_to_find(10000), 500);
}
