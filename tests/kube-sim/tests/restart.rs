//! `SimHandle::restart`: the API server goes away (connections reset, watches broken), nothing
//! listens for a while, then the same address serves the same store, certificate and tokens, with
//! the watch history compacted (old resourceVersions → 410 Gone), and the controllers still run.
mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}})
}

/// How a watch stream ended.
#[derive(Debug, PartialEq)]
enum End {
    /// The server closed the response cleanly.
    Clean,
    /// The transport failed (reset, broken pipe).
    Error,
    /// Still open after the bound.
    Open,
}

/// Reads a watch response until it ends or `max` passes; returns the lines read and how it ended.
async fn read_watch(resp: reqwest::Response, max: Duration) -> (Vec<Value>, End) {
    let mut resp = resp;
    let deadline = tokio::time::Instant::now() + max;
    let mut buf = Vec::new();
    let mut events = Vec::new();
    loop {
        let end = match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Err(_) => End::Open,
            Ok(Ok(Some(c))) => {
                buf.extend_from_slice(&c);
                take_events(&mut buf, &mut events);
                continue;
            }
            Ok(Ok(None)) => End::Clean,
            Ok(Err(_)) => End::Error,
        };
        return (events, end);
    }
}

async fn open_watch(c: &Client, path: &str) -> reqwest::Response {
    c.http
        .get(format!("{}{path}", c.base))
        .bearer_auth(&c.token)
        .send()
        .await
        .expect("watch request answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_resets_connections_keeps_the_store_and_expires_old_resource_versions() {
    let sim = kube_sim::Sim::start(kube_sim::SimOptions {
        objects: vec![node("n1")],
        ..Default::default()
    })
    .await
    .expect("sim starts");
    let c = Client::new(&sim);
    let url_before = sim.url().to_string();
    let created = c
        .post("/api/v1/namespaces/default/configmaps", configmap("a"))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let rv1 = created.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_string();

    // A watch from rv1 receives a live event, then the restart breaks it with a transport error.
    let w = open_watch(
        &c,
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv1}"),
    )
    .await;
    assert_eq!(w.status(), 200);
    let watcher = tokio::spawn(read_watch(w, Duration::from_secs(20)));
    let b = c
        .post("/api/v1/namespaces/default/configmaps", configmap("b"))
        .await;
    assert_eq!(b.status, 201);
    // Give the watch time to deliver "b" before the server goes away.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let s = sim.clone();
    let restart = tokio::spawn(async move { s.restart(Duration::from_millis(1500)).await });
    let (events, end) = watcher.await.expect("watch task");
    assert_eq!(
        end,
        End::Error,
        "the watch breaks with an error, not a clean end: {events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "ADDED" && e["object"]["metadata"]["name"] == "b"),
        "{events:?}"
    );

    // While down, nothing answers on the address.
    let start = Instant::now();
    let mut refused = false;
    while !restart.is_finished() && start.elapsed() < Duration::from_secs(5) {
        if c.http
            .get(format!("{}/version", c.base))
            .send()
            .await
            .is_err()
        {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "requests fail while the server is down");
    restart
        .await
        .expect("restart task")
        .expect("restart succeeds");

    // Back on the same URL, same CA and token (the client built before the restart works), with
    // the store intact.
    assert_eq!(sim.url(), url_before);
    let got = c.get("/api/v1/namespaces/default/configmaps/a").await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body["metadata"]["resourceVersion"], rv1.as_str());
    let list = c.get("/api/v1/namespaces/default/configmaps").await;
    assert_eq!(list.status, 200);
    let names: Vec<&str> = list.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let list_rv = list.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("list resourceVersion")
        .to_string();

    // Resuming from the old resourceVersion: 410 Expired, as a kube-apiserver whose watch cache
    // started at the current revision answers.
    let (evs, ended) = c
        .watch(
            &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv1}"),
            5,
            Duration::from_secs(5),
        )
        .await;
    assert!(ended, "the stream ends after the error: {evs:?}");
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["type"], "ERROR", "{evs:?}");
    assert_eq!(evs[0]["object"]["code"], 410);
    assert_eq!(evs[0]["object"]["reason"], "Expired");

    // A watch from the fresh LIST's resourceVersion works.
    let c2 = Client::new(&sim);
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={list_rv}");
    let task = tokio::spawn(async move { c2.watch(&path, 1, Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        c.post("/api/v1/namespaces/default/configmaps", configmap("c"))
            .await
            .status,
        201
    );
    let (evs, _) = task.await.expect("watch task");
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["type"], "ADDED");
    assert_eq!(evs[0]["object"]["metadata"]["name"], "c");

    // The controllers survived: a pod bound after the restart is started by the kubelet.
    let p = c
        .post(
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "after", "namespace": "default"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "img:1"}]}}),
        )
        .await;
    assert_eq!(p.status, 201, "{:?}", p.body);
    let start = Instant::now();
    loop {
        let phase = sim
            .get("v1", "Pod", "default", "after")
            .and_then(|p| p.pointer("/status/phase").cloned());
        if phase == Some(json!("Running")) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the kubelet never started the pod: {phase:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sim.shutdown().await;
}
