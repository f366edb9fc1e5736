//! Streaming lists (client-go's WatchList): a watch with `sendInitialEvents=true` sends every
//! object as an ADDED event, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"` at the
//! list's resourceVersion, then live events on the same stream — and the request validation
//! kube-apiserver applies to it.
mod common;

use common::{Client, start};
use serde_json::{Value, json};
use std::time::Duration;

const STREAM: &str = "watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=10";

fn cm(ns: &str, name: &str, w: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"w": w}}, "data": {"k": name}})
}

fn names(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {}/{}",
                e["type"].as_str().unwrap_or(""),
                e["object"]["metadata"]["namespace"].as_str().unwrap_or(""),
                e["object"]["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_events_end_with_an_annotated_bookmark_then_live_events_follow() {
    let ns2 = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "two"}});
    let sim = start(vec![
        ns2,
        cm("default", "b", "1"),
        cm("default", "a", "0"),
        cm("two", "c", "1"),
    ])
    .await;
    let c = Client::new(&sim);
    let list = c.get("/api/v1/configmaps").await;
    let list_rv = list.body["metadata"]["resourceVersion"].clone();
    let listed: Vec<Value> = list.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["metadata"]["namespace"] != "kube-system")
        .cloned()
        .collect();

    // Cluster-wide: every object in the LIST's order and form, then the end marker.
    let c2 = Client::new(&sim);
    let task = tokio::spawn(async move {
        c2.watch(
            &format!("/api/v1/configmaps?{STREAM}"),
            usize::MAX,
            Duration::from_secs(3),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.post(
        "/api/v1/namespaces/default/configmaps",
        cm("default", "d", "1"),
    )
    .await;
    let (events, _) = task.await.unwrap();
    let end = events
        .iter()
        .position(|e| e["type"] == "BOOKMARK")
        .expect("a BOOKMARK ends the initial events");
    let initial: Vec<Value> = events[..end]
        .iter()
        .filter(|e| e["object"]["metadata"]["namespace"] != "kube-system")
        .cloned()
        .collect();
    assert!(initial.iter().all(|e| e["type"] == "ADDED"), "{events:?}");
    // Watch events carry each object's type; list items do not (the list names it once).
    let initial_objects: Vec<Value> = initial
        .iter()
        .map(|e| {
            let mut o = e["object"].clone();
            if let Some(m) = o.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
            o
        })
        .collect();
    assert_eq!(initial_objects, listed, "the initial events are the list");
    let bookmark = &events[end];
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(bookmark["object"]["metadata"]["resourceVersion"], list_rv);
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    let live: Vec<String> = names(&events[end + 1..])
        .into_iter()
        .filter(|n| !n.starts_with("BOOKMARK"))
        .collect();
    assert_eq!(live, vec!["ADDED default/d"], "{events:?}");

    // Namespaced and filtered by labels: only the matching objects, still ended by the marker.
    let (events, _) = c
        .watch(
            &format!("/api/v1/namespaces/default/configmaps?{STREAM}&labelSelector=w%3D1"),
            3,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(
        names(&events),
        vec!["ADDED default/b", "ADDED default/d", "BOOKMARK /"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_requests_are_validated_like_kube_apiserver() {
    let sim = start(vec![cm("default", "a", "0")]).await;
    let c = Client::new(&sim);
    let cases = [
        (
            "watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=1&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
    ];
    for (query, message) in cases {
        let r = c.get(&format!("/api/v1/configmaps?{query}")).await;
        assert_eq!(r.status, 422, "{query}: {:?}", r.body);
        assert_eq!(r.body["reason"], "Invalid");
        let m = r.body["message"].as_str().unwrap_or("");
        assert!(m.contains(message), "{query}: {m}");
    }

    // A server with the WatchList feature gate off refuses streaming lists, nothing else.
    sim.set_watch_list(false);
    let r = c.get(&format!("/api/v1/configmaps?{STREAM}")).await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    let m = r.body["message"].as_str().unwrap_or("");
    assert!(
        m.contains(
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        ),
        "{m}"
    );
    let (events, ended) = c
        .watch(
            "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
            10,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(names(&events), vec!["ADDED default/a"]);
    assert!(ended);
    sim.set_watch_list(true);
    let (events, _) = c
        .watch(
            &format!("/api/v1/namespaces/default/configmaps?{STREAM}"),
            2,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(names(&events), vec!["ADDED default/a", "BOOKMARK /"]);
}
