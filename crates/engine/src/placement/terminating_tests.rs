//! An evicted pod terminating on its node while its replacement is scheduled, as kube-scheduler
//! sees it: its requests, pod slot and host ports still count there, and InterPodAffinity still
//! counts it; PodTopologySpread does not.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;

use super::Simulator;
use crate::snapshot::{NodeId, PodId, Snapshot};
use crate::testing::{node, pod, snapshot};

fn names(s: &Snapshot, ids: &[NodeId]) -> Vec<String> {
    ids.iter().map(|&n| s.node(n).name.clone()).collect()
}

fn pod_id(s: &Snapshot, name: &str) -> PodId {
    (0..s.pods.len() as PodId)
        .find(|&p| s.pod(p).name == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

/// Required anti-affinity to pods labelled `app=value` on the same node.
fn apart_from(value: &str) -> core::Affinity {
    let term = crate::testing::affinity_term(&[("app", value)], "kubernetes.io/hostname");
    crate::testing::required_anti_affinity(vec![term])
}

/// kube-scheduler keeps an evicted pod in its node's NodeInfo until the pod is gone: its requests
/// still count there for its own replacement and for those of the pods evicted after it.
#[test]
fn evicted_pods_hold_their_nodes_while_they_terminate() {
    let nodes = (1..=3).map(|i| node(&format!("n{i}")).build()).collect();
    let big = |name: &str, on: &str| {
        pod("default", name, on)
            .owner("ReplicaSet", name)
            .requests("3", "1Gi")
            .build()
    };
    let s = snapshot(nodes, vec![big("a", "n1"), big("b", "n2")]);
    let (a, b) = (pod_id(&s, "a"), pod_id(&s, "b"));
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    // a's replacement does not fit next to a (3 + 3 cpu of 4), nor next to b: n3.
    let p = sim.evaluate(&s, a).expect("predicted");
    assert_eq!(p.current_filtered, Some("NodeResourcesFit"));
    assert_eq!(names(&s, &p.ties), vec!["n3"]);
    sim.commit(&s, a, p.best);
    // b's: n1 still holds the terminating a, n2 b itself, n3 a's replacement.
    let p = sim.evaluate(&s, b).expect("predicted");
    assert_eq!((p.feasible, p.best), (0, None));
    sim.abandon(&s, b);
    // A pod moved earlier in the cycle (marked evicted in the snapshot) holds its node too.
    let mut s = s;
    s.mark_evicted(a);
    let moved = [a].into_iter().collect();
    let mut sim = Simulator::new(&s, &moved, Arc::default());
    assert_eq!(sim.state.loads[0].pods, 1);
    assert_eq!(sim.state.loads[0].requested.cpu_milli, 3000);
    let p = sim.evaluate(&s, b).expect("predicted");
    assert_eq!(names(&s, &p.ties), vec!["n3"]);
}

/// kube-scheduler's InterPodAffinity does not look at `deletionTimestamp`: a terminating pod's
/// required anti-affinity still forbids its node, and a terminating pod still counts for the
/// incoming pod's terms.
#[test]
fn inter_pod_affinity_counts_terminating_pods() {
    let nodes = || {
        (1..=3)
            .map(|i| {
                let name = format!("n{i}");
                node(&name).label("kubernetes.io/hostname", &name).build()
            })
            .collect()
    };
    let web = |name: &str, on: &str| {
        pod("default", name, on)
            .owner("ReplicaSet", "web")
            .label("app", "web")
            .affinity(apart_from("web"))
            .build()
    };
    let s = snapshot(nodes(), vec![web("web-1", "n1"), web("web-2", "n2")]);
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    // web-1's replacement: n1 still holds the terminating web-1, n2 web-2: only n3.
    let p = sim.evaluate(&s, pod_id(&s, "web-1")).expect("predicted");
    assert_eq!(p.current_filtered, Some("InterPodAffinity"));
    assert_eq!(names(&s, &p.ties), vec!["n3"]);
    // A pod kept apart from db pods: db-old, terminating in the snapshot, still forbids n3.
    let s = snapshot(
        nodes(),
        vec![
            pod("default", "api", "n1")
                .owner("ReplicaSet", "api")
                .affinity(apart_from("db"))
                .build(),
            pod("default", "db-old", "n3")
                .label("app", "db")
                .terminating()
                .build(),
        ],
    );
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    let p = sim.evaluate(&s, pod_id(&s, "api")).expect("predicted");
    assert_eq!(p.feasible, 2, "n1 (api itself, no db pod) and n2");
    assert_eq!(names(&s, &p.ties), vec!["n2"]);
}
