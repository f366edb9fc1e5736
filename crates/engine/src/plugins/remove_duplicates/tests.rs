use super::*;
use crate::framework::BalancePlugin;
use crate::plugins::default_evictor::DefaultEvictor;
use crate::testing::{
    balance_plugin, evicted_names, node, pod, run_balance, run_built_balance, run_profile, snapshot,
};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

fn plugin(args: Value) -> Box<dyn BalancePlugin> {
    balance_plugin(build, args)
}

fn run(args: Value, nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Vec<String> {
    run_built_balance(build, args, nodes, pods)
}

/// `count` replicas `<rs>-<i>` of ReplicaSet `rs` in `ns` on `node`.
fn replicas(ns: &str, rs: &str, node: &str, count: usize) -> Vec<core::Pod> {
    (0..count)
        .map(|i| {
            pod(ns, &format!("{rs}-{node}-{i}"), node)
                .owner("ReplicaSet", rs)
                .build()
        })
        .collect()
}

fn three_nodes() -> Vec<core::Node> {
    vec![node("n1").build(), node("n2").build(), node("n3").build()]
}

#[test]
fn evicts_above_the_upper_average() {
    // 6 pods on n1, 0 elsewhere: ceil(6 / 3) = 2 stay.
    let pods = replicas("default", "rs", "n1", 6);
    assert_eq!(
        run(json!({}), three_nodes(), pods),
        [
            "default/rs-n1-2",
            "default/rs-n1-3",
            "default/rs-n1-4",
            "default/rs-n1-5"
        ]
    );
}

#[test]
fn upper_average_counts_every_node() {
    // n1: 5, n2: 2, n3: 0 → ceil(7 / 3) = 3: n1 loses 2, n2 keeps its 2.
    let mut pods = replicas("default", "rs", "n1", 5);
    pods.extend(replicas("default", "rs", "n2", 2));
    assert_eq!(
        run(json!({}), three_nodes(), pods),
        ["default/rs-n1-3", "default/rs-n1-4"]
    );
    // n1: 2, n2: 2, n3: 2 → nothing.
    let mut pods = replicas("default", "rs", "n1", 2);
    pods.extend(replicas("default", "rs", "n2", 2));
    pods.extend(replicas("default", "rs", "n3", 2));
    assert!(run(json!({}), three_nodes(), pods).is_empty());
}

#[test]
fn different_images_or_owners_are_not_duplicates() {
    let mut pods = replicas("default", "rs", "n1", 2);
    pods[1] = pod("default", "other-image", "n1")
        .owner("ReplicaSet", "rs")
        .with(|p| {
            p.spec.as_mut().unwrap().containers[0].image = Some("redis".into());
        })
        .build();
    pods.push(
        pod("default", "other-rs", "n1")
            .owner("ReplicaSet", "rs2")
            .build(),
    );
    pods.push(
        pod("other", "other-ns", "n1")
            .owner("ReplicaSet", "rs")
            .build(),
    );
    pods.push(pod("default", "bare", "n1").bare().build());
    pods.push(pod("default", "bare2", "n1").bare().build());
    assert!(run(json!({}), three_nodes(), pods).is_empty());
}

#[test]
fn image_order_does_not_matter() {
    let two_images = |name: &str, first: &str, second: &str| {
        let (first, second) = (first.to_string(), second.to_string());
        pod("default", name, "n1")
            .owner("ReplicaSet", "rs")
            .with(move |p| {
                let spec = p.spec.as_mut().unwrap();
                spec.containers[0].image = Some(first);
                let mut c = spec.containers[0].clone();
                c.name = "sidecar".into();
                c.image = Some(second);
                spec.containers.push(c);
            })
            .build()
    };
    let pods = vec![
        two_images("a", "nginx", "envoy"),
        two_images("b", "envoy", "nginx"),
        two_images("c", "nginx", "envoy"),
    ];
    // ceil(3 / 3) = 1: both later pods are duplicates of the first.
    assert_eq!(
        run(json!({}), three_nodes(), pods),
        ["default/b", "default/c"]
    );
}

#[test]
fn exclude_owner_kinds() {
    let mut pods = replicas("default", "rs", "n1", 4);
    pods.extend((0..4).map(|i| {
        pod("default", &format!("job-{i}"), "n1")
            .owner("Job", "job")
            .build()
    }));
    assert_eq!(
        run(
            json!({"excludeOwnerKinds": ["ReplicaSet"]}),
            three_nodes(),
            pods.clone()
        ),
        ["default/job-2", "default/job-3"]
    );
    assert_eq!(run(json!({}), three_nodes(), pods).len(), 4);
}

#[test]
fn namespaces_include_and_exclude() {
    let mut pods = replicas("a", "rs", "n1", 3);
    pods.extend(replicas("b", "rs", "n1", 3));
    assert_eq!(
        run(
            json!({"namespaces": {"include": ["a"]}}),
            three_nodes(),
            pods.clone()
        ),
        ["a/rs-n1-1", "a/rs-n1-2"]
    );
    assert_eq!(
        run(
            json!({"namespaces": {"exclude": ["a"]}}),
            three_nodes(),
            pods.clone()
        ),
        ["b/rs-n1-1", "b/rs-n1-2"]
    );
    assert_eq!(
        run(json!({}), three_nodes(), pods),
        ["a/rs-n1-1", "a/rs-n1-2", "b/rs-n1-1", "b/rs-n1-2"]
    );
}

#[test]
fn infeasible_nodes_do_not_count() {
    let nodes = vec![
        node("n1").build(),
        node("n2").unschedulable().build(),
        node("n3").taint("dedicated", None, "NoSchedule").build(),
        node("n4")
            .taint("soft", None, "PreferNoSchedule")
            .label("zone", "b")
            .build(),
    ];
    let pods = replicas("default", "rs", "n1", 6);
    // n1, n2 (cordoned still counts) and n4 (PreferNoSchedule ignored): ceil(6 / 3) = 2.
    assert_eq!(run(json!({}), nodes.clone(), pods).len(), 4);
    // With a nodeSelector on zone=b only n4 matches: fewer than two targets.
    let pods: Vec<core::Pod> = (0..6)
        .map(|i| {
            pod("default", &format!("z{i}"), "n1")
                .owner("ReplicaSet", "rs")
                .node_selector("zone", "b")
                .build()
        })
        .collect();
    assert!(run(json!({}), nodes.clone(), pods).is_empty());
    // Tolerating the taint brings n3 in: 4 targets → ceil(6 / 4) = 2 stay.
    let pods: Vec<core::Pod> = (0..6)
        .map(|i| {
            pod("default", &format!("t{i}"), "n1")
                .owner("ReplicaSet", "rs")
                .toleration("dedicated", "Exists", None, None)
                .build()
        })
        .collect();
    assert_eq!(
        run(json!({}), nodes, pods),
        ["default/t2", "default/t3", "default/t4", "default/t5"]
    );
}

#[test]
fn taint_reduces_the_target_count() {
    let nodes = vec![
        node("n1").build(),
        node("n2").build(),
        node("n3").taint("dedicated", None, "NoExecute").build(),
    ];
    // Two targets: ceil(6 / 2) = 3 stay.
    assert_eq!(
        run(json!({}), nodes, replicas("default", "rs", "n1", 6)),
        ["default/rs-n1-3", "default/rs-n1-4", "default/rs-n1-5"]
    );
}

#[test]
fn fewer_than_two_targets_evicts_nothing() {
    let nodes = vec![
        node("n1").build(),
        node("n2").taint("dedicated", None, "NoSchedule").build(),
    ];
    assert!(run(json!({}), nodes, replicas("default", "rs", "n1", 4)).is_empty());
}

#[test]
fn unevictable_pods_are_neither_originals_nor_counted() {
    // The first pod has local storage (not evictable): the second is the original.
    let mut pods = replicas("default", "rs", "n1", 4);
    pods[0] = pod("default", "local", "n1")
        .owner("ReplicaSet", "rs")
        .empty_dir()
        .build();
    // 3 evictable pods over 3 nodes: 1 stays.
    assert_eq!(
        run(json!({}), three_nodes(), pods),
        ["default/rs-n1-2", "default/rs-n1-3"]
    );
}

#[test]
fn node_limit_moves_to_the_next_node() {
    let mut pods = replicas("default", "rs", "n1", 4);
    pods.extend(replicas("default", "rs", "n2", 4));
    let nodes = vec![
        node("n1").build(),
        node("n2").build(),
        node("n3").build(),
        node("n4").build(),
    ];
    let mut snap = snapshot(nodes, pods);
    let records = run_profile(
        crate::testing::profile(vec![], vec![plugin(json!({}))]),
        &crate::testing::per_node_limit(1),
        &mut snap,
    );
    // ceil(8 / 4) = 2: two to go per node, the node limit allows one each.
    assert_eq!(
        evicted_names(&records),
        ["default/rs-n1-2", "default/rs-n2-2"]
    );
}

#[test]
fn pre_eviction_filter_applies_before_counting() {
    // nodeFit: n1's first pod fits nowhere else (nodeSelector to n1), so it is neither the
    // original nor counted: 4 over 3 nodes → 2 stay (counting it, 3 would be evicted).
    let mut pods = replicas("default", "rs", "n1", 5);
    pods[0] = pod("default", "pinned", "n1")
        .owner("ReplicaSet", "rs")
        .node_selector("kubernetes.io/hostname", "n1")
        .build();
    let mut snap = snapshot(three_nodes(), pods);
    let evictor = DefaultEvictor::from_args(&json!({"nodeFit": true})).unwrap();
    let records = run_balance(plugin(json!({})), evictor, &mut snap);
    assert_eq!(
        evicted_names(&records),
        ["default/rs-n1-3", "default/rs-n1-4"]
    );
}

#[test]
fn feasible_nodes_are_the_union_over_duplicate_signatures() {
    let nodes = vec![
        node("n1").label("zone", "a").build(),
        node("n2").label("zone", "a").build(),
        node("n3").label("zone", "b").build(),
        node("n4").label("zone", "b").build(),
        node("n5").label("zone", "c").build(),
    ];
    let in_zone = |name: &str, zone: &str| {
        pod("default", name, "n1")
            .owner("ReplicaSet", "rs")
            .node_selector("zone", zone)
            .build()
    };
    // Duplicates select zone a (2 nodes) and zone b (2 nodes); zone c is never targeted.
    // 8 pods over 4 targets → 2 stay.
    let mut pods = vec![in_zone("p0", "a")];
    pods.extend((1..4).map(|i| in_zone(&format!("p{i}"), "a")));
    pods.extend((4..8).map(|i| in_zone(&format!("p{i}"), "b")));
    assert_eq!(
        run(json!({}), nodes, pods),
        [
            "default/p2",
            "default/p3",
            "default/p4",
            "default/p5",
            "default/p6",
            "default/p7"
        ]
    );
}

#[test]
fn pods_with_several_owners() {
    let two_owners = |name: &str| {
        pod("default", name, "n1")
            .with(|p| {
                let mut second = p.metadata.owner_references.as_ref().unwrap()[0].clone();
                second.kind = "Foo".into();
                second.name = "foo".into();
                second.uid = "foo".into();
                second.controller = None;
                let refs = p.metadata.owner_references.as_mut().unwrap();
                refs[0].name = "rs".into();
                refs.push(second);
            })
            .build()
    };
    // Same two owners and image: duplicates, counted under both owner keys.
    let pods = vec![two_owners("a"), two_owners("b"), two_owners("c")];
    let mut snap = snapshot(three_nodes(), pods);
    let records = run_balance(plugin(json!({})), DefaultEvictor::default(), &mut snap);
    // Both keys evict b and c; the second attempt is refused as already evicted.
    assert_eq!(evicted_names(&records), ["default/b", "default/c"]);
    // A pod with only one of those owners is not their duplicate.
    let pods = vec![
        two_owners("a"),
        pod("default", "b", "n1").owner("ReplicaSet", "rs").build(),
    ];
    assert!(run(json!({}), three_nodes(), pods).is_empty());
}

#[test]
fn validation() {
    let e = match build(&json!({"namespaces": {"include": ["a"], "exclude": ["b"]}})) {
        Err(e) => e,
        Ok(_) => panic!("should fail"),
    };
    assert_eq!(e.field, "namespaces");
    let e = match build(&json!({"excludeOwnerKind": ["Job"]})) {
        Err(e) => e,
        Ok(_) => panic!("should fail"),
    };
    assert_eq!(e.field, "excludeOwnerKind");
    assert!(build(&json!(null)).is_ok());
    assert!(
        build(&json!({"excludeOwnerKinds": ["Job"], "namespaces": {"exclude": ["x"]}})).is_ok()
    );
}

/// `--explain` for a pod RemoveDuplicates left alone gives the counts it compared.
#[test]
fn explain_gives_the_counts_against_the_per_node_bound() {
    let explain = |nodes: Vec<core::Node>, pods: Vec<core::Pod>, name: &str| {
        let s = snapshot(nodes, pods);
        let ids: Vec<NodeId> = (0..s.nodes.len() as NodeId).collect();
        let pod = s
            .pods
            .iter()
            .position(|p| p.name == name)
            .unwrap_or_else(|| panic!("no pod {name}")) as PodId;
        plugin(json!({}))
            .explain_pod(&s, pod, &ids, crate::testing::now())
            .unwrap_or_default()
    };
    // 4 on n1, 1 on n2: 5 pods over 3 feasible nodes, at most 2 each.
    let mut pods = replicas("default", "rs", "n1", 4);
    pods.extend(replicas("default", "rs", "n2", 1));
    assert_eq!(
        explain(three_nodes(), pods.clone(), "rs-n2-0"),
        "it is the only pod of ReplicaSet default/rs on n2 (5 pods of ReplicaSet default/rs (same images) over 3 feasible nodes: 1.7 per node, at most 2 each)"
    );
    assert_eq!(
        explain(three_nodes(), pods, "rs-n1-0"),
        "4 pods of ReplicaSet default/rs on n1 > at most 2 per node (5 pods of ReplicaSet default/rs (same images) over 3 feasible nodes: 1.7 per node, at most 2 each), but this one is kept: the first 2 on the node stay, and only pods passing the DefaultEvictor count"
    );
    // 2 on n1, 2 on n2: 4 over 3 nodes, at most 2 each.
    let mut pods = replicas("default", "rs", "n1", 2);
    pods.extend(replicas("default", "rs", "n2", 2));
    assert_eq!(
        explain(three_nodes(), pods.clone(), "rs-n1-1"),
        "2 pods of ReplicaSet default/rs on n1 <= at most 2 per node (4 pods of ReplicaSet default/rs (same images) over 3 feasible nodes: 1.3 per node, at most 2 each)"
    );
    // n2 and n3 tainted: one feasible node.
    let tainted = vec![
        node("n1").build(),
        node("n2")
            .taint("dedicated", Some("gpu"), "NoSchedule")
            .build(),
        node("n3")
            .taint("dedicated", Some("gpu"), "NoExecute")
            .build(),
    ];
    assert_eq!(
        explain(tainted, pods, "rs-n1-1"),
        "2 pods of ReplicaSet default/rs on n1, but fewer than two feasible nodes (1): nowhere to spread them"
    );
}
