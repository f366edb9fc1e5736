use super::*;
use crate::testing::synthetic_snapshot;

/// A synthetic cluster with every seventh pod evicted, and the given nodes: every third node,
/// the first one twice (a node given twice holds its pods twice in the table).
fn fixture() -> (Snapshot, Vec<NodeId>) {
    let mut s = synthetic_snapshot(60, 1500, 7);
    for p in (0..s.pods.len() as PodId).step_by(7) {
        s.mark_evicted(p);
    }
    let mut nodes: Vec<NodeId> = (0..s.nodes.len() as NodeId).step_by(3).collect();
    nodes.push(nodes[0]);
    (s, nodes)
}

#[test]
fn the_full_table_holds_the_given_nodes_pods_node_by_node_then_the_rest_without_evicted_pods() {
    let (s, nodes) = fixture();
    let table = CallTable::new(&nodes);
    let full = table.full(Some(&s));
    let mut want: Vec<(PodId, i32)> = Vec::new();
    for (j, &n) in nodes.iter().enumerate() {
        for &p in s.pods_on_node_at_start(n) {
            if !s.is_evicted(p) {
                want.push((p, j as i32));
            }
        }
    }
    let given: std::collections::HashSet<PodId> = want.iter().map(|w| w.0).collect();
    for p in 0..s.pods.len() as PodId {
        if !s.is_evicted(p) && !given.contains(&p) {
            want.push((p, -1));
        }
    }
    let got: Vec<(PodId, i32)> = full
        .pods
        .iter()
        .copied()
        .zip(full.pod_node.iter().copied())
        .collect();
    assert_eq!(got, want);
    assert!(full.pods.iter().all(|&p| !s.is_evicted(p)));
    assert!(
        want.iter().any(|w| w.1 == -1),
        "some pods are on no given node"
    );
    for (i, &p) in full.pods.iter().enumerate() {
        let ns = &full.namespaces[full.pod_namespace[i] as usize];
        assert_eq!(**ns, *s.pod(p).namespace);
    }
}

#[test]
fn offsets_and_node_pods_match_the_full_tables_order() {
    let (s, nodes) = fixture();
    let lazy = CallTable::new(&nodes);
    let offsets = lazy.offsets(Some(&s)).to_vec();
    for j in 0..nodes.len() {
        let _ = lazy.node_pods(Some(&s), j);
    }
    assert!(
        !lazy.is_full_built(),
        "offsets and node pods need no whole table"
    );
    let full = CallTable::new(&nodes);
    let full = full.full(Some(&s));
    assert_eq!(offsets.len(), nodes.len() + 1);
    assert_eq!(offsets[0], 0);
    for j in 0..nodes.len() {
        let range = offsets[j] as usize..offsets[j + 1] as usize;
        assert_eq!(
            lazy.node_pods(Some(&s), j).unwrap(),
            &full.pods[range.clone()],
            "node {j}"
        );
        assert!(
            full.pod_node[range].iter().all(|&n| n == j as i32),
            "node {j}"
        );
    }
    let on_given = lazy.on_given_nodes(Some(&s));
    assert!(full.pod_node[on_given..].iter().all(|&n| n == -1));
    assert!(lazy.node_pods(Some(&s), nodes.len()).is_none());
}

#[test]
fn pod_ids_and_indexes_are_read_lazily_and_agree_with_the_full_table() {
    let (s, nodes) = fixture();
    let reference = CallTable::new(&nodes);
    let full = reference.full(Some(&s));
    let lazy = CallTable::new(&nodes);
    let on_given = lazy.on_given_nodes(Some(&s));
    for (i, &p) in full.pods[..on_given].iter().enumerate() {
        assert_eq!(lazy.pod_id(Some(&s), i), Some(p), "index {i}");
        assert_eq!(
            lazy.given_node_of(Some(&s), i),
            Some(full.pod_node[i] as usize)
        );
        let first = full.pods.iter().position(|&q| q == p);
        assert_eq!(lazy.index_of(&s, p), Some(first), "pod {p}");
    }
    assert!(
        !lazy.is_full_built(),
        "pods on given nodes need no whole table"
    );
    for (i, &p) in full.pods.iter().enumerate().skip(on_given) {
        assert_eq!(
            lazy.index_of(&s, p),
            Some(None),
            "pod {p} is on no given node"
        );
        assert_eq!(lazy.pod_id(Some(&s), i), Some(p), "index {i}");
    }
    assert!(lazy.is_full_built());
    assert_eq!(lazy.pod_id(Some(&s), full.pods.len()), None);
    assert_eq!(lazy.given_node_of(Some(&s), full.pods.len()), None);
    assert_eq!(
        lazy.index_of(&s, 0),
        None,
        "pod 0 was evicted: not in the table"
    );
}

#[test]
fn without_a_snapshot_the_table_is_empty() {
    let table = CallTable::new(&[0, 1]);
    assert_eq!(table.offsets(None), [0, 0, 0]);
    assert_eq!(table.node_pods(None, 1), Some(&[][..]));
    assert_eq!(table.pod_id(None, 0), None);
    assert!(table.full(None).pods.is_empty());
}
