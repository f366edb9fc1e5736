//! The simulator and the pod spec fields it reads besides resources and affinity: the pod's
//! `schedulerName` selects the profile (kube-scheduler runs one profile per `schedulerName`), and
//! host ports are kept off nodes where they are taken (NodePorts).

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;

use super::profile::SchedulerProfiles;
use super::*;
use crate::snapshot::Snapshot;
use crate::testing::{node, pod, snapshot};

fn pod_id(s: &Snapshot, name: &str) -> PodId {
    (0..s.pods.len() as PodId)
        .find(|&p| s.pod(p).name == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

fn names(s: &Snapshot, ids: &[NodeId]) -> Vec<String> {
    ids.iter().map(|&n| s.node(n).name.clone()).collect()
}

/// A scheduler configuration with two profiles, as kube-scheduler reads it.
const TWO_PROFILES: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
  - schedulerName: bin-packer
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
"#;

/// n1 busy (3 of 4 CPU), n2 and n3 empty; the candidates sit on n3.
fn cluster(scheduler: Option<&str>) -> Snapshot {
    let nodes = vec![node("n1").build(), node("n2").build(), node("n3").build()];
    let with_scheduler = |name: &str| {
        let scheduler = scheduler.map(str::to_string);
        pod("ns", name, "n3")
            .requests("500m", "256Mi")
            .with(move |p| {
                if let Some(spec) = &mut p.spec {
                    spec.scheduler_name = scheduler;
                }
            })
            .build()
    };
    let pods = vec![
        pod("ns", "busy", "n1").requests("3", "1Gi").build(),
        with_scheduler("candidate"),
    ];
    snapshot(nodes, pods)
}

fn profiles(yaml: &str) -> Arc<SchedulerProfiles> {
    Arc::new(config::load_str(yaml).expect("valid scheduler configuration"))
}

#[test]
fn the_pods_scheduler_name_selects_the_profile() {
    // Default scheduler (schedulerName unset, and set to default-scheduler): LeastAllocated
    // prefers the empty n2 (n3 still holds the terminating candidate).
    for name in [None, Some("default-scheduler")] {
        let s = cluster(name);
        let candidate = pod_id(&s, "candidate");
        assert_eq!(s.pod(candidate).scheduler_name(), "default-scheduler");
        assert!(
            s.pod(candidate).scheduling.is_none(),
            "the default scheduler's pods carry nothing extra"
        );
        let mut sim = Simulator::new(&s, &Default::default(), profiles(TWO_PROFILES));
        let p = sim
            .evaluate(&s, candidate)
            .expect("default-scheduler serves it");
        assert_eq!(names(&s, &p.ties), vec!["n2"], "{name:?}");
        assert_eq!(p.strategy, "LeastAllocated");
    }
    // schedulerName bin-packer: its MostAllocated profile sends the pod to the busy node.
    let s = cluster(Some("bin-packer"));
    let candidate = pod_id(&s, "candidate");
    assert_eq!(s.pod(candidate).scheduler_name(), "bin-packer");
    let mut sim = Simulator::new(&s, &Default::default(), profiles(TWO_PROFILES));
    let p = sim.evaluate(&s, candidate).expect("bin-packer serves it");
    assert_eq!(names(&s, &p.ties), vec!["n1"]);
    assert_eq!(p.strategy, "MostAllocated");
    // Without a configuration (kube-scheduler's single default profile) nobody serves it.
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    let why = sim
        .evaluate(&s, candidate)
        .expect_err("no bin-packer profile");
    assert_eq!(
        why,
        "no profile of the scheduler configuration serves schedulerName \"bin-packer\""
    );
}

#[test]
fn a_pod_of_an_unknown_scheduler_is_not_predicted() {
    let s = cluster(Some("gpu-scheduler"));
    let candidate = pod_id(&s, "candidate");
    let mut sim = Simulator::new(&s, &Default::default(), profiles(TWO_PROFILES));
    let result = sim.evaluate(&s, candidate);
    let report = judge(
        &s,
        candidate,
        "LowNodeUtilization",
        result,
        &Default::default(),
    );
    assert_eq!(
        report.not_predicted.as_deref(),
        Some("no profile of the scheduler configuration serves schedulerName \"gpu-scheduler\"")
    );
    assert_eq!(report.predicted_node, None);
    assert_eq!(report.refusal, None, "not predicted is no refusal");
    assert!(report.summary().starts_with("not predicted: no profile"));
    // Evaluating took nothing off n3 (the eviction's outcome decides: commit or abandon).
    assert_eq!(sim.state.loads[2].pods, 1);
}

fn host_port(port: i32, protocol: Option<&str>, ip: Option<&str>) -> core::ContainerPort {
    core::ContainerPort {
        container_port: port,
        host_port: Some(port),
        protocol: protocol.map(str::to_string),
        host_ip: ip.map(str::to_string),
        ..Default::default()
    }
}

/// A pod binding `ports` on `node`.
fn with_ports(name: &str, node: &str, ports: Vec<core::ContainerPort>) -> core::Pod {
    pod("ns", name, node)
        .with(move |p| {
            if let Some(spec) = &mut p.spec {
                spec.containers[0].ports = Some(ports);
            }
        })
        .build()
}

#[test]
fn node_ports_keeps_the_replacement_off_nodes_where_its_host_port_is_taken() {
    let nodes = vec![node("n1").build(), node("n2").build(), node("n3").build()];
    let pods = vec![
        // The candidate binds TCP 8080 on every address (hostIP and protocol defaulted).
        with_ports("candidate", "n3", vec![host_port(8080, None, None)]),
        // n1: 8080 taken on one address, which 0.0.0.0 covers.
        with_ports(
            "n1-user",
            "n1",
            vec![host_port(8080, Some("TCP"), Some("10.0.0.1"))],
        ),
        // n2: 8080 over UDP only, and a container port without host port.
        with_ports(
            "n2-user",
            "n2",
            vec![
                host_port(8080, Some("UDP"), None),
                core::ContainerPort {
                    container_port: 9090,
                    ..Default::default()
                },
            ],
        ),
    ];
    let s = snapshot(nodes, pods);
    let candidate = pod_id(&s, "candidate");
    let kept = s.pod(candidate).host_ports();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        (
            kept[0].host_ip.as_str(),
            kept[0].protocol.as_str(),
            kept[0].port
        ),
        ("0.0.0.0", "TCP", 8080)
    );
    assert_eq!(
        s.pod(pod_id(&s, "n2-user")).host_ports().len(),
        1,
        "a port without hostPort is not kept"
    );
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    let p = sim.evaluate(&s, candidate).expect("predicted");
    // n1 is filtered by NodePorts, and so is n3: the terminating candidate still binds 8080 there
    // (kube-scheduler's NodeInfo keeps it until it is gone). n2 (UDP only) is left.
    assert_eq!(p.feasible, 1);
    assert_eq!(names(&s, &p.ties), vec!["n2"]);
    assert_eq!(p.current_filtered, Some("NodePorts"));
    // Its replacement placed on n2 takes 0.0.0.0:8080 there: n1-user (10.0.0.1:8080) fits
    // nowhere — n1 is held by itself while it terminates, n2 by the replacement, n3 by the
    // terminating candidate.
    sim.commit(&s, candidate, p.best);
    let n1_user = pod_id(&s, "n1-user");
    let p = sim.evaluate(&s, n1_user).expect("predicted");
    assert_eq!((p.feasible, p.best), (0, None));
    sim.abandon(&s, n1_user);
    // A UDP 8080 pod conflicts with none of the TCP bindings, only with itself terminating on n2.
    let p = sim.evaluate(&s, pod_id(&s, "n2-user")).expect("predicted");
    assert_eq!(
        (p.feasible, p.current_filtered),
        (2, Some("NodePorts")),
        "n2-user's ports are UDP and conflict with no TCP binding"
    );
}

#[test]
fn node_ports_can_be_disabled_and_reports_the_current_node() {
    let nodes = vec![node("n1").build(), node("n2").build()];
    let pods = vec![
        with_ports("candidate", "n1", vec![host_port(53, Some("UDP"), None)]),
        with_ports(
            "dns",
            "n2",
            vec![host_port(53, Some("UDP"), Some("127.0.0.1"))],
        ),
    ];
    let s = snapshot(nodes, pods);
    let candidate = pod_id(&s, "candidate");
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    let p = sim.evaluate(&s, candidate).expect("predicted");
    // n2's UDP 53 is taken, and the terminating candidate still binds it on n1.
    assert_eq!((p.feasible, p.best), (0, None));
    assert_eq!(p.current_filtered, Some("NodePorts"));
    sim.abandon(&s, candidate);
    // The other way round: dns's replacement cannot go to n1, where the candidate binds 0.0.0.0,
    // and n2 is held by dns itself while it terminates.
    let dns = pod_id(&s, "dns");
    let p = sim.evaluate(&s, dns).expect("predicted");
    assert_eq!((p.feasible, p.current_filtered), (0, Some("NodePorts")));
    sim.abandon(&s, dns);
    // With NodePorts disabled in the configuration, both nodes fit.
    let disabled = profiles(
        r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - plugins:
      filter:
        disabled: [{name: NodePorts}]
"#,
    );
    assert!(!disabled.0[0].filters.node_ports);
    let mut sim = Simulator::new(&s, &Default::default(), disabled);
    let p = sim.evaluate(&s, candidate).expect("predicted");
    assert_eq!(p.feasible, 2);
}
