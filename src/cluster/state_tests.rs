use super::*;
use serde_json::json;
use std::sync::Arc;

fn node(name: &str, ready: bool, unschedulable: bool, taints: serde_json::Value) -> String {
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name},
        "spec": {"unschedulable": unschedulable, "taints": taints},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
        }
    })
    .to_string()
}

fn pod(ns: &str, name: &str, node: &str, app: &str) -> String {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
                     "labels": {"app": app},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": app, "uid": format!("rs-{app}"), "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i",
                 "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    })
    .to_string()
}

/// A whole list of `kind` returning `objects`.
fn list(state: &ClusterState, kind: Kind, objects: &[&str]) {
    state.begin_list(kind);
    state.upsert(kind, objects.iter().copied());
    state.end_list(kind);
}

/// A state whose nodes, listed, are one Ready node `name`.
fn with_ready_node(name: &str) -> ClusterState {
    let state = ClusterState::new(None);
    list(
        &state,
        Kind::Node,
        &[node(name, true, false, json!([])).as_str()],
    );
    state
}

fn names(s: &Snapshot) -> Vec<String> {
    s.pods.iter().map(|p| p.key()).collect()
}

#[test]
fn a_list_replaces_the_kind_and_events_patch_it() {
    let state = with_ready_node("n1");
    state.begin_list(Kind::Pod);
    let (a, b) = (pod("ns", "b", "n1", "x"), pod("ns", "a", "n1", "x"));
    state.upsert(Kind::Pod, [a.as_str(), b.as_str()]);
    state.end_list(Kind::Pod);
    let snap = state.snapshot();
    assert_eq!(
        names(&snap),
        ["ns/a", "ns/b"],
        "namespace/name order, as the API lists"
    );
    assert_eq!(snap.pods_on_node(0).count(), 2);
    assert!(
        Arc::ptr_eq(&snap.pods[0].labels, &snap.pods[1].labels),
        "pods of one owner share their labels"
    );

    // MODIFIED moves a pod; DELETED removes one.
    state.upsert(Kind::Pod, [pod("ns", "a", "n2", "x").as_str()]);
    state.remove(Kind::Pod, "ns/b");
    let snap = state.snapshot();
    assert_eq!(names(&snap), ["ns/a"]);
    assert_eq!(snap.pods[0].node_name.as_deref(), Some("n2"));
    assert!(
        snap.inconsistencies.iter().any(|i| i.kind
            == kube_descheduler_engine::snapshot::consistency::InconsistencyKind::PodOnUnknownNode
            && i.examples.iter().any(|e| e.contains("n2"))),
        "a pod on an unknown node is reported: {:?}",
        snap.inconsistencies
    );

    // A relist that does not return `ns/a` drops it; what it returns is kept.
    list(&state, Kind::Pod, &[pod("ns", "c", "n1", "y").as_str()]);
    assert_eq!(names(&state.snapshot()), ["ns/c"]);
    assert_eq!(state.lists_completed(Kind::Pod), 2);
}

#[test]
fn objects_that_do_not_convert_are_reported_until_fixed() {
    let state = ClusterState::new(None);
    let bad = json!({"kind": "Pod", "metadata": {"name": "bad", "namespace": "ns"},
                     "spec": {"priority": "high"}})
    .to_string();
    state.upsert(Kind::Pod, [bad.as_str()]);
    let snap = state.snapshot();
    assert!(snap.pods.is_empty());
    assert!(
        snap.warnings
            .iter()
            .any(|w| w.contains("ns/bad") && w.contains("priority")),
        "{:?}",
        snap.warnings
    );
    state.upsert(Kind::Pod, [pod("ns", "bad", "n1", "x").as_str()]);
    let snap = state.snapshot();
    assert_eq!(snap.pods.len(), 1);
    assert!(!snap.warnings.iter().any(|w| w.contains("ns/bad")));
}

#[test]
fn the_node_changes_that_ask_for_a_cycle_are_sent_after_the_first_list() {
    let (tx, mut rx) = mpsc::channel(1);
    let state = ClusterState::new(Some(tx));
    let up = |n: &str| state.upsert(Kind::Node, [n]);
    let taint = json!([{"key": "k", "effect": "NoSchedule"}]);
    state.begin_list(Kind::Node);
    up(&node("n1", false, true, taint.clone()));
    state.end_list(Kind::Node);
    assert!(rx.try_recv().is_err(), "the first list sends nothing");

    let mut next = |n: String| {
        up(&n);
        rx.try_recv().ok()
    };
    assert_eq!(
        next(node("n1", true, true, taint.clone())),
        Some(NodeChange::BecameReady)
    );
    assert_eq!(
        next(node("n1", true, false, taint.clone())),
        Some(NodeChange::Uncordoned)
    );
    let prefer = json!([{"key": "k", "effect": "PreferNoSchedule"}]);
    assert_eq!(
        next(node("n1", true, false, prefer.clone())),
        Some(NodeChange::TaintRemoved)
    );
    assert_eq!(
        next(node("n1", true, false, json!([]))),
        None,
        "PreferNoSchedule does not count"
    );
    assert_eq!(
        next(node("n1", true, true, json!([]))),
        None,
        "a cordon does not count"
    );
    assert_eq!(
        next(node("n1", false, true, json!([]))),
        None,
        "NotReady does not count"
    );
    assert_eq!(
        next(node("n2", false, false, json!([]))),
        None,
        "a NotReady node joining"
    );
    assert_eq!(
        next(node("n3", true, false, json!([]))),
        Some(NodeChange::Joined)
    );
    // At most one change is queued; the rest are dropped, not blocked on.
    up(&node("n4", true, false, json!([])));
    up(&node("n5", true, false, json!([])));
    assert_eq!(rx.try_recv().ok(), Some(NodeChange::Joined));
    assert!(rx.try_recv().is_err());
}

/// Rule B's facts reach the cycle's snapshot: a namespace's pdb-surge opt-in (and its removal),
/// and the Deployment targets of autoscalers — one whose target changes to a StatefulSet, or that
/// is deleted, leaves no stale target behind.
#[test]
fn namespace_opt_ins_and_autoscaler_targets_follow_the_watch() {
    let state = ClusterState::new(None);
    let ns = |annotations: serde_json::Value| {
        json!({"kind": "Namespace", "apiVersion": "v1",
               "metadata": {"name": "shop", "annotations": annotations}})
        .to_string()
    };
    let hpa = |name: &str, kind: &str, target: &str| {
        json!({"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
               "metadata": {"name": name, "namespace": "shop"},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
                        "maxReplicas": 4}})
        .to_string()
    };
    state.upsert(
        Kind::Namespace,
        [ns(json!({"kube-descheduler.io/pdb-surge": "enabled"})).as_str()],
    );
    state.upsert(
        Kind::HorizontalPodAutoscaler,
        [
            hpa("web", "Deployment", "web").as_str(),
            hpa("db", "StatefulSet", "db").as_str(),
            hpa("api", "Deployment", "api").as_str(),
        ],
    );
    let snap = state.snapshot();
    assert_eq!(snap.namespace_pdb_surge("shop"), Some(true));
    let targets = |s: &Snapshot| -> Vec<String> {
        s.hpas
            .iter()
            .map(|h| format!("{}/{}->{}", h.namespace, h.name, h.deployment))
            .collect()
    };
    assert_eq!(targets(&snap), ["shop/api->api", "shop/web->web"]);

    state.upsert(Kind::Namespace, [ns(json!({"other": "x"})).as_str()]);
    state.upsert(
        Kind::HorizontalPodAutoscaler,
        [hpa("web", "StatefulSet", "web").as_str()],
    );
    state.remove(Kind::HorizontalPodAutoscaler, "shop/api");
    let snap = state.snapshot();
    assert_eq!(snap.namespace_pdb_surge("shop"), None);
    assert!(snap.namespaces.contains_key("shop"));
    assert!(targets(&snap).is_empty(), "{:?}", targets(&snap));
}

/// Lists every kind (empty), as the first sync does.
fn list_all(state: &ClusterState) {
    for kind in Kind::ALL {
        state.begin_list(kind);
        state.end_list(kind);
    }
}

#[test]
fn in_sync_only_while_every_kind_is_listed_and_no_watch_is_broken() {
    let state = ClusterState::new(None);
    let mut rx = state.in_sync_rx();
    assert!(!state.in_sync(), "nothing listed yet");
    // A failure before the first list keeps it out of sync; the list brings it in.
    state.set_error(Kind::Pod, "connection refused".into());
    list_all(&state);
    assert!(state.in_sync());
    assert!(rx.has_changed().unwrap_or(false) && *rx.borrow_and_update());

    // The API server goes away: a broken watch takes the state out of sync; a watch the
    // server accepts again brings it back.
    state.set_error(Kind::Node, "watch stream: connection reset".into());
    assert!(!state.in_sync());
    assert!(!*rx.borrow_and_update());
    state.watch_established(Kind::Node);
    assert!(state.in_sync());
    assert!(*rx.borrow_and_update());

    // After a restart the old resourceVersion is too old: out of sync until the relist ends,
    // and only the kinds that broke matter.
    state.set_error(Kind::Pod, "connection refused".into());
    state.expired(Kind::Node);
    state.watch_established(Kind::Pod);
    assert!(!state.in_sync(), "nodes still relisting");
    state.begin_list(Kind::Node);
    assert!(!state.in_sync());
    state.end_list(Kind::Node);
    assert!(state.in_sync());
    assert!(
        state.unsynced().is_empty(),
        "the first sync stays done through the outage"
    );
    // No notification without a change.
    let _ = rx.borrow_and_update();
    state.watch_established(Kind::Pod);
    assert!(!rx.has_changed().unwrap_or(true));
}

#[test]
fn snapshots_share_unchanged_pods_and_follow_node_changes() {
    let state = ClusterState::new(None);
    list(
        &state,
        Kind::Node,
        &[node("n2", true, false, json!([])).as_str()],
    );
    state.begin_list(Kind::Pod);
    let (a, b) = (pod("ns", "a", "n2", "x"), pod("ns", "b", "n2", "x"));
    state.upsert(Kind::Pod, [a.as_str(), b.as_str()]);
    state.end_list(Kind::Pod);
    let first = state.snapshot();
    assert_eq!(first.pods[0].node, Some(0));

    // Another snapshot points at the same pods; a pod changed in between is a new one, and the
    // first snapshot keeps what it saw.
    state.upsert(Kind::Pod, [pod("ns", "b", "gone", "x").as_str()]);
    let second = state.snapshot();
    assert!(Arc::ptr_eq(&first.pods[0], &second.pods[0]));
    assert!(!Arc::ptr_eq(&first.pods[1], &second.pods[1]));
    assert_eq!(first.pods[1].node_name.as_deref(), Some("n2"));
    assert_eq!(second.pods[1].node, None, "on an unknown node");

    // A node sorted before n2 moves n2 to id 1: pods follow, and the older snapshot is unchanged.
    state.upsert(Kind::Node, [node("n1", true, false, json!([])).as_str()]);
    let third = state.snapshot();
    assert_eq!(third.node(1).name, "n2");
    assert_eq!(third.pods[0].node, Some(1));
    assert_eq!(third.pods_on_node(1).collect::<Vec<_>>(), [0]);
    assert_eq!(first.pods[0].node, Some(0));
    // Removing n1 moves it back.
    state.remove(Kind::Node, "n1");
    let fourth = state.snapshot();
    assert_eq!(fourth.pods[0].node, Some(0));
    assert_eq!(fourth.pods_on_node(0).collect::<Vec<_>>(), [0]);
}

#[test]
fn pods_from_watch_events_share_parts_with_the_listed_pods() {
    let state = ClusterState::new(None);
    list(&state, Kind::Pod, &[pod("ns", "a", "n1", "x").as_str()]);
    // A pod of the same owner, after the list: its labels and owners are the listed pod's.
    state.upsert(Kind::Pod, [pod("ns", "b", "n1", "x").as_str()]);
    let snap = state.snapshot();
    assert!(Arc::ptr_eq(&snap.pods[0].labels, &snap.pods[1].labels));
    assert!(Arc::ptr_eq(&snap.pods[0].owners, &snap.pods[1].owners));
}

#[test]
fn a_snapshot_shares_the_pod_list_until_a_pod_changes() {
    let state = with_ready_node("n1");
    state.upsert(Kind::Pod, [pod("ns", "a", "n1", "x").as_str()]);
    let first = state.snapshot();
    let second = state.snapshot();
    assert!(kube_descheduler_engine::snapshot::SharedList::ptr_eq(
        &first.pods,
        &second.pods
    ));
    assert!(kube_descheduler_engine::snapshot::SharedList::ptr_eq(
        &first.nodes,
        &second.nodes
    ));
    state.upsert(Kind::Pod, [pod("ns", "b", "n1", "x").as_str()]);
    let third = state.snapshot();
    assert!(!kube_descheduler_engine::snapshot::SharedList::ptr_eq(
        &second.pods,
        &third.pods
    ));
    assert_eq!(
        names(&second),
        ["ns/a"],
        "an older snapshot keeps what it saw"
    );
    assert_eq!(names(&third), ["ns/a", "ns/b"]);
    // A node event that changes nothing the engine reads keeps the node list.
    state.upsert(Kind::Node, [node("n1", true, false, json!([])).as_str()]);
    assert!(kube_descheduler_engine::snapshot::SharedList::ptr_eq(
        &third.nodes,
        &state.snapshot().nodes
    ));
}

fn replica_set(name: &str, ready: i32) -> String {
    json!({
        "kind": "ReplicaSet", "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("rs-{name}")},
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "readyReplicas": ready}
    })
    .to_string()
}

/// A change to one ReplicaSet gives the next snapshot a new list, but the ReplicaSets that did
/// not change are the same objects in both snapshots, not copies (and so are the budgets and
/// Deployments: the same kept list).
#[test]
fn a_changed_replica_set_leaves_the_others_shared_with_older_snapshots() {
    let state = with_ready_node("n1");
    let (a, b) = (replica_set("a", 1), replica_set("b", 1));
    list(&state, Kind::ReplicaSet, &[a.as_str(), b.as_str()]);
    let first = state.snapshot();
    state.upsert(Kind::ReplicaSet, [replica_set("b", 0).as_str()]);
    let second = state.snapshot();
    assert!(!kube_descheduler_engine::snapshot::SharedList::ptr_eq(
        &first.replica_sets,
        &second.replica_sets
    ));
    assert!(Arc::ptr_eq(&first.replica_sets[0], &second.replica_sets[0]));
    assert!(!Arc::ptr_eq(
        &first.replica_sets[1],
        &second.replica_sets[1]
    ));
    assert_eq!(
        (first.replica_sets[1].ready, second.replica_sets[1].ready),
        (1, 0),
        "the older snapshot keeps what it saw"
    );
}

/// Many events between snapshots, in any order: each snapshot holds exactly the pods a plain map
/// of the same events holds, in key order, with indexes that agree with the pods.
#[test]
fn snapshots_after_bursts_of_events_match_the_events() {
    let state = ClusterState::new(None);
    let nodes: Vec<String> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| node(n, true, false, json!([])))
        .collect();
    list(
        &state,
        Kind::Node,
        &nodes.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let mut model: std::collections::BTreeMap<String, (String, String)> = Default::default();
    let mut rng = kube_descheduler_engine::synth::Rng::new(7);
    for round in 0..40 {
        // Enough events in some rounds to merge before the snapshot (more than 1,024 waiting).
        let events = if round % 10 == 9 { 1500 } else { 30 };
        for _ in 0..events {
            let ns = ["a", "a-b", "b", "ns"][rng.below(4) as usize];
            // Names carry the namespace, so UIDs (`uid-<name>`) stay unique.
            let name = format!("{ns}-p{}", rng.below(400));
            let key = format!("{ns}/{name}");
            if rng.chance(30) {
                state.remove(Kind::Pod, &key);
                model.remove(&key);
            } else {
                let n = ["n1", "n2", "n3", "gone"][rng.below(4) as usize];
                let app = ["x", "y", "z"][rng.below(3) as usize];
                state.upsert(Kind::Pod, [pod(ns, &name, n, app).as_str()]);
                model.insert(key, (n.to_string(), app.to_string()));
            }
        }
        if round == 20 {
            // A node joins before the others: ids move, the pods follow.
            state.upsert(Kind::Node, [node("n0", true, false, json!([])).as_str()]);
        }
        let snap = state.snapshot();
        let keys: Vec<&String> = model.keys().collect();
        assert_eq!(
            names(&snap).iter().collect::<Vec<_>>(),
            keys,
            "round {round}"
        );
        for (id, p) in snap.pods.iter().enumerate() {
            let (n, app) = &model[&p.key()];
            assert_eq!(p.node_name.as_deref(), Some(n.as_str()));
            assert_eq!(
                p.node.map(|i| snap.node(i).name.as_str()),
                (n != "gone").then_some(n.as_str())
            );
            assert_eq!(p.labels.get("app"), Some(app));
            let id = id as kube_descheduler_engine::snapshot::PodId;
            if let Some(node) = p.node {
                assert!(snap.pods_on_node(node).any(|q| q == id));
            }
            assert!(snap.pods_in_namespace(&p.namespace).any(|q| q == id));
            assert!(snap.pods_owned_by(&format!("rs-{app}")).any(|q| q == id));
        }
        let on_nodes: usize = (0..snap.nodes.len() as u32)
            .map(|n| snap.pods_on_node(n).count())
            .sum();
        assert_eq!(
            on_nodes,
            model.values().filter(|(n, _)| n != "gone").count()
        );
        let unknown = snap
            .inconsistencies
            .iter()
            .find(|i| i.kind == kube_descheduler_engine::snapshot::consistency::InconsistencyKind::PodOnUnknownNode)
            .map_or(0, |i| i.count);
        assert_eq!(unknown, model.values().filter(|(n, _)| n == "gone").count());
    }
}

/// Pods that arrive in key order (a list) are appended at once; they get their node ids before
/// a snapshot even when their nodes were listed after them, and a pod out of order or arriving
/// while a snapshot holds the list still lands in its place.
#[test]
fn pods_listed_in_order_before_their_nodes_get_node_ids_and_keep_key_order() {
    let state = ClusterState::new(None);
    state.begin_list(Kind::Pod);
    let listed: Vec<String> = ["a", "b", "d"]
        .iter()
        .map(|n| pod("ns", n, if *n == "b" { "n2" } else { "n1" }, "x"))
        .collect();
    state.upsert(Kind::Pod, listed.iter().map(String::as_str));
    // Out of order within the list: waits for the merge.
    state.upsert(Kind::Pod, [pod("ns", "c", "n1", "x").as_str()]);
    state.end_list(Kind::Pod);
    let nodes = [
        node("n1", true, false, json!([])),
        node("n2", true, false, json!([])),
    ];
    list(&state, Kind::Node, &[nodes[0].as_str(), nodes[1].as_str()]);
    let snap = state.snapshot();
    assert_eq!(names(&snap), ["ns/a", "ns/b", "ns/c", "ns/d"]);
    let on = |n: NodeId| -> Vec<String> {
        snap.pods_on_node(n)
            .map(|p| snap.pods[p as usize].key())
            .collect()
    };
    assert_eq!(on(0), ["ns/a", "ns/c", "ns/d"], "n1");
    assert_eq!(on(1), ["ns/b"], "n2");
    // `snap` holds the list: a pod after all others is not appended to it.
    state.upsert(Kind::Pod, [pod("ns", "e", "n2", "x").as_str()]);
    assert_eq!(names(&snap).len(), 4, "a taken snapshot does not change");
    let next = state.snapshot();
    assert_eq!(names(&next), ["ns/a", "ns/b", "ns/c", "ns/d", "ns/e"]);
    assert_eq!(next.pods_on_node(1).count(), 2);
}

/// A list converted in batches by converters of their own (a streaming list) gives the state
/// what one converter would: the listed pods, a warning naming an object that could not be
/// converted, and the parts pods of one owner share — also with the pods that watch events
/// bring after the list.
#[test]
fn a_list_converted_in_batches_shares_its_parts_with_later_events() {
    let state = with_ready_node("n1");
    state.begin_list(Kind::Pod);
    let first = [pod("ns", "a", "n1", "x"), pod("ns", "b", "n1", "x")];
    let bad = r#"{"kind":"Pod","metadata":{"name":"bad","namespace":"ns"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"lots"}}}]}}"#;
    let second = [pod("ns", "c", "n1", "y"), bad.to_string()];
    for batch in [&first, &second] {
        state.upsert_converted(kinds::ConvertedBatch::convert(
            Kind::Pod,
            batch.iter().map(String::as_str),
        ));
    }
    state.end_list(Kind::Pod);
    // Watch events after the list: a new pod of each owner.
    state.upsert(Kind::Pod, [pod("ns", "d", "n1", "x").as_str()]);
    state.upsert(Kind::Pod, [pod("ns", "e", "n1", "y").as_str()]);
    let snap = state.snapshot();
    assert_eq!(names(&snap), ["ns/a", "ns/b", "ns/c", "ns/d", "ns/e"]);
    let labels = |i: usize| snap.pods[i].labels.clone();
    let owners = |i: usize| snap.pods[i].owners.clone();
    for (x, y) in [(0, 1), (0, 3), (2, 4)] {
        assert!(
            Arc::ptr_eq(&labels(x), &labels(y)),
            "labels of pods {x} and {y}"
        );
        assert!(
            Arc::ptr_eq(&owners(x), &owners(y)),
            "owners of pods {x} and {y}"
        );
        assert_eq!(
            snap.parts_class(x as u32),
            snap.parts_class(y as u32),
            "parts class of pods {x} and {y}"
        );
    }
    // Each batch interned the namespace itself; in the state every pod of it shares one `Arc`
    // (else the pods an event brings would not share a parts class with the listed ones).
    for i in 1..5 {
        assert!(
            Arc::ptr_eq(&snap.pods[0].namespace, &snap.pods[i].namespace),
            "namespace of pods 0 and {i}"
        );
    }
    assert_eq!(snap.parts_classes(), 2, "one class per owner");
    assert!(
        snap.warnings
            .iter()
            .any(|w| w.contains("ns/bad") && w.contains("cpu")),
        "the pod that could not be converted is named: {:?}",
        snap.warnings
    );
    assert_eq!(snap.pods_on_node(0).count(), 5);
}

/// Pods listed after their nodes take their node ids as they are appended, so the first
/// snapshot renumbers nothing; a node that joins later still renumbers every pod.
#[test]
fn pods_listed_after_their_nodes_take_their_node_ids_as_they_arrive() {
    let state = ClusterState::new(None);
    let nodes = [
        node("n1", true, false, json!([])),
        node("n2", true, false, json!([])),
    ];
    list(&state, Kind::Node, &[nodes[0].as_str(), nodes[1].as_str()]);
    state.begin_list(Kind::Pod);
    let listed = [
        pod("ns", "a", "n1", "x"),
        pod("ns", "b", "n2", "x"),
        pod("ns", "c", "unknown", "x"),
    ];
    state.upsert(Kind::Pod, listed.iter().map(String::as_str));
    {
        let g = state.lock();
        assert!(!g.renumber, "no renumbering pending");
        let ids: Vec<Option<NodeId>> = g.pods.shared().iter().map(|p| p.node).collect();
        assert_eq!(ids, [Some(0), Some(1), None]);
    }
    state.end_list(Kind::Pod);
    let on = |snap: &Snapshot, n: NodeId| -> Vec<String> {
        snap.pods_on_node(n)
            .map(|p| snap.pods[p as usize].key())
            .collect()
    };
    let snap = state.snapshot();
    assert_eq!(on(&snap, 0), ["ns/a"]);
    assert_eq!(on(&snap, 1), ["ns/b"]);
    drop(snap);

    // n0 sorts first: every node id moves, and the pods appended after it wait for the merge.
    state.upsert(Kind::Node, [node("n0", true, false, json!([])).as_str()]);
    state.upsert(Kind::Pod, [pod("ns", "d", "n0", "x").as_str()]);
    assert!(state.lock().renumber, "the node ids changed");
    let snap = state.snapshot();
    assert_eq!(on(&snap, 0), ["ns/d"]);
    assert_eq!(on(&snap, 1), ["ns/a"]);
    assert_eq!(on(&snap, 2), ["ns/b"]);
}

/// Whether a pod sets its own termination grace period (an eviction then keeps it) is read
/// from its spec: a value or `null` sets it; the same name elsewhere does not.
#[test]
fn a_pods_own_grace_period_is_read_from_its_spec() {
    let state = with_ready_node("n1");
    let with = |name: &str, spec_extra: serde_json::Value, annotations: serde_json::Value| {
        let mut p: serde_json::Value = serde_json::from_str(&pod("ns", name, "n1", "x")).unwrap();
        for (k, v) in spec_extra.as_object().unwrap() {
            p["spec"][k] = v.clone();
        }
        p["metadata"]["annotations"] = annotations;
        p.to_string()
    };
    let pods = [
        with("a", json!({"terminationGracePeriodSeconds": 5}), json!({})),
        with(
            "b",
            json!({"terminationGracePeriodSeconds": null}),
            json!({}),
        ),
        with(
            "c",
            json!({}),
            json!({"terminationGracePeriodSeconds": "5"}),
        ),
    ];
    list(
        &state,
        Kind::Pod,
        &pods.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(state.pod_sets_grace("ns", "a"), Some(true));
    assert_eq!(state.pod_sets_grace("ns", "b"), Some(true));
    assert_eq!(state.pod_sets_grace("ns", "c"), Some(false));
    assert_eq!(state.pod_sets_grace("ns", "d"), None);
}
