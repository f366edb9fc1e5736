//! The watched cluster state against the API stand-in (kube-sim, controllers off): the initial
//! list as a streaming list (WatchList) and as a paged list, the fallback to paged lists when the
//! server refuses streaming lists, every watch event type, a pod moving node, a deleted node,
//! relist after 410 Gone, and snapshots taken during a burst of events. Every wait polls an observable condition with a
//! generous deadline.

use std::sync::Arc;
use std::time::Duration;

use kube_descheduler::cluster::kinds::Kind;
use kube_descheduler::cluster::state::ClusterState;
use kube_descheduler::cluster::watch::{self, ListProtocol, WatchConfig, WatchTasks};
use kube_descheduler::snapshot::Snapshot;
use kube_sim::{Sim, SimHandle, SimOptions};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    })
}

fn pod(name: &str, node: &str, app: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// Starts kube-sim and the list+watch tasks, listing in pages.
async fn start(objects: Vec<Value>) -> (SimHandle, Arc<ClusterState>, WatchTasks) {
    start_with(objects, false, true).await
}

/// Starts kube-sim (serving streaming lists or not) and the list+watch tasks (trying a
/// streaming list first or not).
async fn start_with(
    objects: Vec<Value>,
    watch_list: bool,
    server_watch_list: bool,
) -> (SimHandle, Arc<ClusterState>, WatchTasks) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut all =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})];
    all.extend(objects);
    let sim = Sim::start(SimOptions {
        objects: all,
        controllers: false,
        bookmark_interval: Duration::from_millis(100),
        ..Default::default()
    })
    .await
    .expect("kube-sim starts");
    sim.set_watch_list(server_watch_list);
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube_descheduler::cluster::client::client(config).unwrap();
    let state = Arc::new(ClusterState::new(None));
    let cfg = WatchConfig {
        // Small pages, so the lists here are paginated too.
        page_size: 2,
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        watch_timeout_seconds: 290,
        watch_list,
        watch_list_silence: Duration::from_secs(30),
    };
    let tasks = watch::start(&client, state.clone(), cfg);
    tokio::time::timeout(WAIT, state.wait_synced())
        .await
        .expect("the state syncs");
    (sim, state, tasks)
}

async fn wait_for(what: &str, state: &ClusterState, ok: impl Fn(&Snapshot) -> bool) -> Snapshot {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = state.snapshot();
        if ok(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pod_names(s: &Snapshot) -> Vec<String> {
    s.pods.iter().map(|p| p.name.clone()).collect()
}

fn delete(sim: &SimHandle, kind: &str, ns: &str, name: &str) {
    let def = kube_sim::crds::lookup_kind(sim.store(), "v1", kind).unwrap();
    let opts = kube_sim::store::DeleteOpts {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    sim.store().delete(def, ns, name, &opts).unwrap();
}

/// Moves the store's resourceVersion past the pod watch with a write of a kind it does not
/// watch, compacts the history there and breaks the watches: resuming must get 410 Gone, and
/// the pods are listed a second time (waited for).
async fn force_pod_relist(sim: &SimHandle, state: &ClusterState) {
    sim.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "unwatched", "namespace": "shop"}}))
        .unwrap();
    sim.compact_watch_history();
    sim.drop_watches();
    let deadline = tokio::time::Instant::now() + WAIT;
    while state.lists_completed(Kind::Pod) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no relist after 410"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two tests of `check`: one with paged lists, one with streaming lists (WatchList).
macro_rules! per_list_protocol {
    ($check:ident: $paged:ident, $streaming:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $paged() {
            $check(ListProtocol::Paged).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $streaming() {
            $check(ListProtocol::WatchList).await;
        }
    };
}

per_list_protocol!(every_event_type:
    every_event_type_moves_and_deletions_are_applied_after_a_paged_list,
    every_event_type_moves_and_deletions_are_applied_after_a_streaming_list);

async fn every_event_type(protocol: ListProtocol) {
    let (sim, state, tasks) = start_with(
        vec![
            node("n1"),
            node("n2"),
            node("n3"),
            pod("a", "n1", "x"),
            pod("b", "n1", "x"),
            pod("c", "n2", "x"),
        ],
        protocol == ListProtocol::WatchList,
        true,
    )
    .await;
    for kind in Kind::ALL {
        assert_eq!(tasks.list_protocol(kind), Some(protocol), "{kind:?}");
    }
    let s = state.snapshot();
    assert_eq!(
        pod_names(&s),
        ["a", "b", "c"],
        "the list is complete and ordered"
    );
    assert_eq!(s.nodes.len(), 3);

    // ADDED.
    sim.apply(pod("d", "n3", "y")).unwrap();
    wait_for("ADDED", &state, |s| pod_names(s) == ["a", "b", "c", "d"]).await;

    // MODIFIED (status).
    let mut d = pod("d", "n3", "y");
    d["status"]["conditions"][0]["status"] = json!("False");
    sim.apply(d).unwrap();
    wait_for("MODIFIED", &state, |s| {
        s.pods.iter().any(|p| p.name == "d" && !p.is_ready())
    })
    .await;

    // A pod moving node (deleted and created again elsewhere, as a StatefulSet pod does).
    delete(&sim, "Pod", "shop", "a");
    sim.apply(pod("a", "n3", "x")).unwrap();
    let s = wait_for("the pod on n3", &state, |s| {
        s.pods
            .iter()
            .any(|p| p.name == "a" && p.node_name.as_deref() == Some("n3"))
    })
    .await;
    let n1 = s.node_id("n1").unwrap();
    let on_n1: Vec<_> = s.pods_on_node(n1).map(|p| s.pod(p).name.clone()).collect();
    assert_eq!(on_n1, ["b"]);

    // DELETED.
    delete(&sim, "Pod", "shop", "b");
    wait_for("DELETED", &state, |s| {
        !pod_names(s).contains(&"b".to_string())
    })
    .await;

    // A deleted node: gone from the snapshot; its pod is reported, not placed.
    delete(&sim, "Node", "", "n2");
    let s = wait_for("the node deleted", &state, |s| s.node_id("n2").is_none()).await;
    assert_eq!(s.nodes.len(), 2);
    let c = s.pods.iter().find(|p| p.name == "c").unwrap();
    assert_eq!(c.node, None);
    assert!(
        s.inconsistencies.iter().any(|i| i.kind
            == kube_descheduler::snapshot::consistency::InconsistencyKind::PodOnUnknownNode
            && i.examples.iter().any(|e| e.contains("n2"))),
        "{:?}",
        s.inconsistencies
    );

    // BOOKMARKs (every 100 ms) keep the watch going: no relist, and later events still arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;
    sim.apply(pod("e", "n1", "x")).unwrap();
    wait_for("an event after bookmarks", &state, |s| {
        pod_names(s).contains(&"e".to_string())
    })
    .await;
    assert_eq!(
        state.lists_completed(Kind::Pod),
        1,
        "bookmarks never cause a relist"
    );
    sim.shutdown().await;
}

per_list_protocol!(a_watch_from_a_compacted_version_relists:
    a_watch_from_a_compacted_version_relists_in_pages,
    a_watch_from_a_compacted_version_relists_with_a_streaming_list);

async fn a_watch_from_a_compacted_version_relists(protocol: ListProtocol) {
    let (sim, state, tasks) = start_with(
        vec![node("n1"), pod("a", "n1", "x")],
        protocol == ListProtocol::WatchList,
        true,
    )
    .await;
    assert_eq!(state.lists_completed(Kind::Pod), 1);
    assert_eq!(tasks.list_protocol(Kind::Pod), Some(protocol));
    // The history is forgotten and the watch broken: resuming from the last resourceVersion
    // gets 410 Gone, and the kind is listed again.
    // Deterministic: the pod watch has seen `b`, then a write of a kind it does not watch moves
    // the store's resourceVersion past it, and the history is compacted there — so resuming
    // from the pod watch's last version must get 410, however fast events were delivered.
    sim.apply(pod("b", "n1", "x")).unwrap();
    wait_for("b through the watch", &state, |s| {
        pod_names(s) == ["a", "b"]
    })
    .await;
    force_pod_relist(&sim, &state).await;
    wait_for("both pods after the relist", &state, |s| {
        pod_names(s) == ["a", "b"]
    })
    .await;
    assert_eq!(tasks.list_protocol(Kind::Pod), Some(protocol));
    // And the watch after the relist works.
    sim.apply(pod("c", "n1", "x")).unwrap();
    wait_for("an event after the relist", &state, |s| {
        pod_names(s) == ["a", "b", "c"]
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refusing_streaming_lists_is_listed_in_pages() {
    // kube-sim answers streaming lists as kube-apiserver with its WatchList feature gate off
    // (422): every kind falls back to a paged list, then watches as usual.
    let (sim, state, tasks) = start_with(
        vec![node("n1"), pod("a", "n1", "x"), pod("b", "n1", "x")],
        true,
        false,
    )
    .await;
    for kind in Kind::ALL {
        assert_eq!(
            tasks.list_protocol(kind),
            Some(ListProtocol::Paged),
            "{kind:?}"
        );
        assert_eq!(state.lists_completed(kind), 1, "{kind:?}");
    }
    assert_eq!(pod_names(&state.snapshot()), ["a", "b"]);
    sim.apply(pod("c", "n1", "x")).unwrap();
    delete(&sim, "Pod", "shop", "a");
    wait_for("events after the fallback", &state, |s| {
        pod_names(s) == ["b", "c"]
    })
    .await;
    // A relist after 410 stays with paged lists (the server said no once).
    force_pod_relist(&sim, &state).await;
    assert_eq!(tasks.list_protocol(Kind::Pod), Some(ListProtocol::Paged));
    wait_for("the pods after the relist", &state, |s| {
        pod_names(s) == ["b", "c"]
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_during_a_burst_are_consistent() {
    let (sim, state, _tasks) = start(vec![node("n1"), node("n2")]).await;
    let writer = {
        let sim = sim.clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..300 {
                let node = if i % 2 == 0 { "n1" } else { "n2" };
                sim.apply(pod(&format!("q{i:03}"), node, "burst")).unwrap();
            }
        })
    };
    // Each snapshot taken meanwhile holds a prefix of the pods created (events of a kind apply
    // in order, and a snapshot is taken under the state's lock), with consistent indexes.
    loop {
        let s = state.snapshot();
        let names = pod_names(&s);
        let expected: Vec<String> = (0..names.len()).map(|i| format!("q{i:03}")).collect();
        assert_eq!(names, expected, "a snapshot is a prefix of the burst");
        let placed: usize = (0..s.nodes.len() as u32)
            .map(|n| s.pods_on_node(n).count())
            .sum();
        assert_eq!(placed, names.len(), "every pod is indexed on its node");
        if names.len() == 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    writer.await.unwrap();
    sim.shutdown().await;
}
