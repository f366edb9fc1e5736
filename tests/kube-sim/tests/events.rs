//! core `v1` Events and `events.k8s.io/v1` Events are one stored resource: written through
//! either group version, read, listed, watched and deleted through both, with the fields
//! converted (`pkg/apis/events/v1` conversion).
mod common;

use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

const CORE: &str = "/api/v1/namespaces/shop/events";
const V1: &str = "/apis/events.k8s.io/v1/namespaces/shop/events";

fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
}

/// An events.k8s.io/v1 Event as a client-go events recorder writes it, plus series and the
/// deprecated fields.
fn v1_event(name: &str) -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "shop"},
        "eventTime": "2026-11-23T00:00:00.000000Z",
        "series": {"count": 2, "lastObservedTime": "2026-11-23T00:00:05.000000Z"},
        "reportingController": "sigs.k8s.io/descheduler",
        "reportingInstance": "sigs.k8s.io/descheduler-node-a",
        "action": "Descheduled", "reason": "Descheduled", "type": "Normal",
        "note": "pod evicted from node-a by sigs.k8s.io/descheduler",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web-1", "uid": "u-1"},
        "related": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        "deprecatedSource": {"component": "legacy", "host": "node-a"},
        "deprecatedFirstTimestamp": "2026-11-23T00:00:00Z",
        "deprecatedLastTimestamp": "2026-11-23T00:00:05Z",
        "deprecatedCount": 2})
}

fn core_event(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "shop"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "db-1"},
        "related": {"kind": "Node", "name": "node-b"},
        "reason": "Killing", "message": "Stopping container db", "type": "Warning",
        "source": {"component": "kubelet", "host": "node-b"},
        "firstTimestamp": "2026-11-23T00:01:00Z", "lastTimestamp": "2026-11-23T00:02:00Z",
        "count": 3, "action": "Killing",
        "eventTime": "2026-11-23T00:01:00.000000Z",
        "reportingComponent": "kubelet", "reportingInstance": "node-b"})
}

#[tokio::test]
async fn created_through_events_k8s_io_read_through_core() {
    let sim = start(vec![namespace()]).await;
    let c = Client::new(&sim);
    let created = c.post(V1, v1_event("ev-a")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["apiVersion"], "events.k8s.io/v1");
    assert_eq!(created.body["note"], v1_event("ev-a")["note"]);

    let got = c.get(&format!("{CORE}/ev-a")).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    let e = &got.body;
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["kind"], "Event");
    assert_eq!(
        e["message"],
        "pod evicted from node-a by sigs.k8s.io/descheduler"
    );
    assert_eq!(e["involvedObject"]["name"], "web-1");
    assert_eq!(e["involvedObject"]["uid"], "u-1");
    assert_eq!(e["related"]["name"], "node-a");
    assert_eq!(e["reportingComponent"], "sigs.k8s.io/descheduler");
    assert_eq!(e["reportingInstance"], "sigs.k8s.io/descheduler-node-a");
    assert_eq!(
        e["source"],
        json!({"component": "legacy", "host": "node-a"})
    );
    assert_eq!(e["firstTimestamp"], "2026-11-23T00:00:00Z");
    assert_eq!(e["lastTimestamp"], "2026-11-23T00:00:05Z");
    assert_eq!(e["count"], 2);
    assert_eq!(e["series"]["count"], 2);
    assert_eq!(
        e["series"]["lastObservedTime"],
        "2026-11-23T00:00:05.000000Z"
    );
    assert_eq!(e["eventTime"], "2026-11-23T00:00:00.000000Z");
    assert_eq!(
        (&e["action"], &e["reason"], &e["type"]),
        (
            &json!("Descheduled"),
            &json!("Descheduled"),
            &json!("Normal")
        )
    );
    for f in [
        "note",
        "regarding",
        "reportingController",
        "deprecatedSource",
    ] {
        assert!(e.get(f).is_none(), "core form has no {f}: {e}");
    }
    // Same object: one uid and resourceVersion through both versions.
    assert_eq!(e["metadata"]["uid"], created.body["metadata"]["uid"]);
    assert_eq!(
        e["metadata"]["resourceVersion"],
        created.body["metadata"]["resourceVersion"]
    );

    let list = c.get(CORE).await;
    let names: Vec<&str> = list.body["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["ev-a"]);
    assert_eq!(list.body["items"][0]["message"], e["message"]);
}

#[tokio::test]
async fn created_through_core_read_through_events_k8s_io() {
    let sim = start(vec![namespace()]).await;
    let c = Client::new(&sim);
    let created = c.post(CORE, core_event("ev-b")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);

    let got = c.get(&format!("{V1}/ev-b")).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    let e = &got.body;
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["note"], "Stopping container db");
    assert_eq!(e["regarding"]["name"], "db-1");
    assert_eq!(e["related"]["name"], "node-b");
    assert_eq!(e["reportingController"], "kubelet");
    assert_eq!(e["reportingInstance"], "node-b");
    assert_eq!(
        e["deprecatedSource"],
        json!({"component": "kubelet", "host": "node-b"})
    );
    assert_eq!(e["deprecatedFirstTimestamp"], "2026-11-23T00:01:00Z");
    assert_eq!(e["deprecatedLastTimestamp"], "2026-11-23T00:02:00Z");
    assert_eq!(e["deprecatedCount"], 3);
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["reason"], "Killing");
    assert_eq!(e["action"], "Killing");
    for f in [
        "message",
        "involvedObject",
        "reportingComponent",
        "source",
        "count",
    ] {
        assert!(e.get(f).is_none(), "events.k8s.io form has no {f}: {e}");
    }
    let list = c.get(V1).await;
    assert_eq!(list.body["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(list.body["items"][0]["note"], "Stopping container db");

    // A name taken through one version is taken through the other.
    let dup = c.post(V1, v1_event("ev-b")).await;
    assert_eq!(dup.status, 409, "{:?}", dup.body);
    assert_eq!(
        dup.body["message"],
        "events.events.k8s.io \"ev-b\" already exists"
    );
}

#[tokio::test]
async fn updates_and_deletes_through_either_version() {
    let sim = start(vec![namespace()]).await;
    let c = Client::new(&sim);
    assert_eq!(c.post(V1, v1_event("ev-c")).await.status, 201);

    // Merge patch through events.k8s.io in its own field names; core sees the mapped field.
    let p = c
        .patch(
            &format!("{V1}/ev-c"),
            "application/merge-patch+json",
            json!({"series": {"count": 5}, "note": "again"}),
        )
        .await;
    assert_eq!(p.status, 200, "{:?}", p.body);
    assert_eq!(p.body["note"], "again");
    assert_eq!(p.body["series"]["count"], 5);
    let core = c.get(&format!("{CORE}/ev-c")).await.body;
    assert_eq!(core["message"], "again");
    assert_eq!(core["series"]["count"], 5);

    // Update through core with the events.k8s.io resourceVersion (one object, one version).
    let mut upd = core.clone();
    upd["message"] = json!("from core");
    let put = c.put(&format!("{CORE}/ev-c"), upd).await;
    assert_eq!(put.status, 200, "{:?}", put.body);
    assert_eq!(c.get(&format!("{V1}/ev-c")).await.body["note"], "from core");

    // Stale resourceVersion through events.k8s.io conflicts.
    let mut stale = p.body.clone();
    stale["note"] = json!("stale");
    let conflict = c.put(&format!("{V1}/ev-c"), stale).await;
    assert_eq!(conflict.status, 409, "{:?}", conflict.body);

    let del = c.delete(&format!("{V1}/ev-c"), None).await;
    assert_eq!(del.status, 200, "{:?}", del.body);
    assert_eq!(c.get(&format!("{CORE}/ev-c")).await.status, 404);
    let gone = c.get(&format!("{V1}/ev-c")).await;
    assert_eq!(gone.status, 404);
    assert_eq!(
        gone.body["message"],
        "events.events.k8s.io \"ev-c\" not found"
    );

    assert_eq!(c.post(CORE, core_event("ev-d")).await.status, 201);
    assert_eq!(c.delete(&format!("{CORE}/ev-d"), None).await.status, 200);
    assert_eq!(c.get(&format!("{V1}/ev-d")).await.status, 404);
}

#[tokio::test]
async fn bad_events_k8s_io_field_is_rejected_in_its_own_terms() {
    let sim = start(vec![namespace()]).await;
    let c = Client::new(&sim);
    let mut bad = v1_event("ev-bad");
    bad["deprecatedCount"] = json!("two");
    let r = c.post(V1, bad).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("Event in version \"v1\" cannot be handled")),
        "{:?}",
        r.body
    );
    assert_eq!(c.get(&format!("{CORE}/ev-bad")).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_watch_sees_events_k8s_io_writes_and_the_reverse() {
    let sim = start(vec![namespace()]).await;
    let c = Client::new(&sim);
    let rv = c.get(CORE).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(!rv.is_empty());

    let core_watch = {
        let c = Client::new(&sim);
        let path = format!("{CORE}?watch=1&resourceVersion={rv}");
        tokio::spawn(async move { c.watch(&path, 3, Duration::from_secs(10)).await })
    };
    let v1_watch = {
        let c = Client::new(&sim);
        let path = format!("{V1}?watch=1&resourceVersion={rv}");
        tokio::spawn(async move { c.watch(&path, 3, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c.post(V1, v1_event("ev-w")).await.status, 201);
    assert_eq!(c.post(CORE, core_event("ev-x")).await.status, 201);
    assert_eq!(c.delete(&format!("{V1}/ev-x"), None).await.status, 200);

    let (core_events, _) = core_watch.await.unwrap_or_default();
    let kinds: Vec<(&str, &str)> = core_events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or(""),
                e.pointer("/object/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [("ADDED", "ev-w"), ("ADDED", "ev-x"), ("DELETED", "ev-x")]
    );
    assert_eq!(core_events[0]["object"]["apiVersion"], "v1");
    assert_eq!(
        core_events[0]["object"]["message"],
        "pod evicted from node-a by sigs.k8s.io/descheduler"
    );
    assert_eq!(core_events[0]["object"]["involvedObject"]["name"], "web-1");

    let (v1_events, _) = v1_watch.await.unwrap_or_default();
    assert_eq!(v1_events.len(), 3, "{v1_events:?}");
    assert_eq!(v1_events[1]["type"], "ADDED");
    assert_eq!(v1_events[1]["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(v1_events[1]["object"]["note"], "Stopping container db");
    assert_eq!(v1_events[1]["object"]["regarding"]["name"], "db-1");
    assert_eq!(v1_events[2]["type"], "DELETED");

    // A watch from "now" replays the current state converted too.
    let (initial, _) = c
        .watch(&format!("{V1}?watch=1"), 1, Duration::from_secs(5))
        .await;
    assert_eq!(initial.len(), 1);
    assert_eq!(initial[0]["object"]["note"], v1_event("ev-w")["note"]);
}

fn kubectl() -> Option<PathBuf> {
    on_path("kubectl")
}

async fn kubectl_out(bin: &std::path::Path, kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = kubectl_run(bin, kubeconfig, args).await;
    assert!(ok, "kubectl {args:?}: {stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_events_lists_events_k8s_io_events() {
    let Some(bin) = kubectl() else {
        assert!(std::env::var("CI").is_err(), "kubectl is required in CI");
        eprintln!("kubectl not found; skipping");
        return;
    };
    let sim = start(vec![namespace()]).await;
    let c = Client::new(&sim);
    assert_eq!(c.post(V1, v1_event("ev-k")).await.status, 201);
    let kc = sim.kubeconfig_path().to_path_buf();

    let table = kubectl_out(&bin, &kc, &["get", "events", "-n", "shop"]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{table}"
    );
    assert!(
        lines[1].contains("Normal")
            && lines[1].contains("Descheduled")
            && lines[1].contains("pod/web-1")
            && lines[1].contains("pod evicted from node-a by sigs.k8s.io/descheduler"),
        "{table}"
    );

    // The command docs/zero-downtime-drain.md uses.
    let cols = kubectl_out(
        &bin,
        &kc,
        &[
            "get",
            "events",
            "-n",
            "shop",
            "-o",
            "custom-columns=REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message",
        ],
    )
    .await;
    let rows: Vec<Vec<&str>> = cols
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{cols}");
    assert_eq!(rows[0], ["REASON", "OBJECT", "MESSAGE"]);
    assert_eq!(rows[1][..2], ["Descheduled", "web-1"]);
    assert!(cols.contains("pod evicted from node-a by sigs.k8s.io/descheduler"));

    // And the events.k8s.io resource through kubectl shows the same object.
    let v1 = kubectl_out(
        &bin,
        &kc,
        &[
            "get",
            "events.events.k8s.io",
            "-n",
            "shop",
            "-o",
            "jsonpath={.items[*].note}",
        ],
    )
    .await;
    assert_eq!(v1, "pod evicted from node-a by sigs.k8s.io/descheduler");
}
