//! The choice among the scored nodes: the best node, its ties and the runner-up (the best node
//! other than the pod's current one, which explanations compare with).

use std::sync::Arc;

use super::Simulator;
use crate::snapshot::{PodId, Snapshot};
use crate::testing::{node, pod, snapshot};

fn names(s: &Snapshot, ids: &[crate::snapshot::NodeId]) -> Vec<String> {
    ids.iter().map(|&n| s.node(n).name.clone()).collect()
}

fn pod_id(s: &Snapshot, name: &str) -> PodId {
    (0..s.pods.len() as PodId)
        .find(|&p| s.pod(p).name == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

#[test]
fn the_runner_up_is_the_best_other_node_first_by_order() {
    // Four 4-CPU nodes; `p` (100m) on `at`, where it still counts while it terminates; loaded:
    // n1 and n3 carry 1 CPU, n4 2 CPU, n2 nothing; else every other node carries a pod of p's size.
    let runner_up = |at: &str, loaded: bool| {
        let mut pods = vec![
            pod("default", "p", at)
                .owner("ReplicaSet", "p")
                .requests("100m", "128Mi")
                .build(),
        ];
        if !loaded {
            for n in ["n1", "n2", "n3", "n4"].into_iter().filter(|&n| n != at) {
                pods.push(
                    pod("default", &format!("twin-{n}"), n)
                        .owner("ReplicaSet", &format!("twin-{n}"))
                        .requests("100m", "128Mi")
                        .build(),
                );
            }
        } else {
            for (i, (n, cpu)) in [("n1", "1"), ("n3", "1"), ("n4", "2")].iter().enumerate() {
                pods.push(
                    pod("default", &format!("load-{i}"), n)
                        .owner("ReplicaSet", &format!("load-{i}"))
                        .requests(cpu, "4Gi")
                        .build(),
                );
            }
        }
        let nodes = (1..=4).map(|i| node(&format!("n{i}")).build()).collect();
        let s = snapshot(nodes, pods);
        let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
        let p = sim.evaluate(&s, pod_id(&s, "p")).expect("predicted");
        let (other, score) = p.runner_up.clone().expect("another node fits");
        (names(&s, &p.ties), s.node(other).name.clone(), score, p)
    };
    // The current node is the only best: the best of the others, the first of their ties.
    let (ties, other, score, p) = runner_up("n2", true);
    assert_eq!((ties, other.as_str()), (vec!["n2".to_string()], "n1"));
    assert!(p.best_score.expect("best").total > score.total);
    // The current node is the first of several best: the next tie.
    let (ties, other, score, p) = runner_up("n1", false);
    assert_eq!(ties, vec!["n1", "n2", "n3", "n4"]);
    assert_eq!(other, "n2");
    assert_eq!(Some(score.total), p.best_score.map(|b| b.total));
    // The current node is not the best: the best node.
    let (ties, other, _, p) = runner_up("n4", true);
    assert_eq!((ties, other.as_str()), (vec!["n2".to_string()], "n2"));
    assert!(p.current_score.expect("n4 fits").total < p.best_score.expect("best").total);
}
