//! The binary, the controller-action plumbing, the sim clock and generic admission.
mod common;

use common::*;
use kube_sim::controllers::Action;
use kube_sim::runner::apply_action;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn binary_prints_ready_and_serves_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.json");
    std::fs::write(
        &snap,
        serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": [
        node("bin-node"), pod("team", "bin-pod", "bin-node", json!({"a": "b"}), true)]}))
        .unwrap(),
    )
    .unwrap();
    let kc = dir.path().join("kubeconfig");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args([
            "--snapshot",
            snap.to_str().unwrap(),
            "--kubeconfig-out",
            kc.to_str().unwrap(),
            "--port",
            "0",
            "--time-scale",
            "2",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert!(line.starts_with("ready https://127.0.0.1:"), "{line}");
    let config = std::fs::read_to_string(&kc).unwrap();
    assert!(config.contains(line.trim().trim_start_matches("ready ")));
    assert!(config.contains("token: "));
    if let Ok(out) = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["get", "pods", "-n", "team", "-o", "name"])
        .output()
    {
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "pod/bin-pod");
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn controller_actions_apply_through_the_store() {
    let sim = start(vec![node("n1")]).await;
    let st = sim.state().clone();
    apply_action(
        &st,
        Action::Create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-", "namespace": "default"}, "spec": {"containers": []}})),
    );
    let pods = sim.list("v1", "Pod", Some("default"));
    assert_eq!(pods.len(), 1);
    let name = pods[0]["metadata"]["name"].as_str().unwrap().to_string();
    let uid = pods[0]["metadata"]["uid"].as_str().unwrap().to_string();
    assert!(name.starts_with("web-"));
    // Update with the current rv applies spec and status; a stale one is dropped.
    let mut upd = pods[0].clone();
    upd["spec"]["nodeName"] = json!("n1");
    upd["status"] = json!({"phase": "Running"});
    apply_action(&st, Action::Update(upd.clone()));
    let now = sim.get("v1", "Pod", "default", &name).unwrap();
    assert_eq!(now["status"]["phase"], "Running");
    assert_eq!(now["spec"]["nodeName"], "n1");
    upd["status"] = json!({"phase": "Failed"});
    apply_action(&st, Action::Update(upd));
    assert_eq!(
        sim.get("v1", "Pod", "default", &name).unwrap()["status"]["phase"],
        "Running"
    );
    // Delete with a uid precondition.
    let delete_pod = |uid: String| Action::Delete {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("default".into()),
        name: name.clone(),
        uid,
    };
    apply_action(&st, delete_pod("wrong".into()));
    assert!(sim.get("v1", "Pod", "default", &name).is_some());
    apply_action(&st, delete_pod(uid));
    assert!(sim.get("v1", "Pod", "default", &name).is_none());
    // SimConfig changes are visible to the controllers' snapshot.
    sim.update_config(|c| {
        c.stopped_nodes.push("n1".into());
        c.crashing_images.push("bad:1".into());
    });
    let state = kube_sim::runner::cluster_state(&st);
    assert_eq!(state.config.stopped_nodes, ["n1"]);
    assert_eq!(state.nodes.len(), 1);
    sim.shutdown().await;
}

/// A controller's graceful pod deletion (an update setting `deletionTimestamp`, as the
/// ReplicaSet controller emits when it scales down) reaches the store as a graceful DELETE.
#[tokio::test]
async fn controller_graceful_pod_deletion_marks_the_pod_terminating() {
    let sim = start(vec![
        node("n1"),
        pod("default", "old", "n1", json!({"app": "web"}), true),
    ])
    .await;
    let st = sim.state().clone();
    let mut upd = sim.get("v1", "Pod", "default", "old").unwrap();
    upd["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    upd["metadata"]["deletionGracePeriodSeconds"] = json!(7);
    apply_action(&st, Action::Update(upd));
    let p = sim.get("v1", "Pod", "default", "old").unwrap();
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 7);
    let ts: jiff::Timestamp = p["metadata"]["deletionTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let left = ts.duration_since(sim.now()).as_secs_f64();
    assert!(
        (5.0..=8.0).contains(&left),
        "now + grace period, got {left}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn sim_clock_scales_timestamps() {
    let sim = kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        time_scale: 100.0,
        ..Default::default()
    })
    .await
    .unwrap();
    let t0 = sim.now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let dt = sim.now().duration_since(t0).as_secs_f64();
    assert!(
        (15.0..40.0).contains(&dt),
        "≈20 simulated seconds, got {dt}"
    );
    let c = Client::new(&sim);
    let r = c
        .post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "x"}}),
        )
        .await;
    let created: jiff::Timestamp = r.body["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(created.duration_since(t0).as_secs() >= 15);
    sim.shutdown().await;
}

#[tokio::test]
async fn webhooks_also_guard_ordinary_writes() {
    let sim = start(vec![]).await;
    let wh = FakeWebhook::start(
        "v",
        "sys",
        Arc::new(|req: &Value| {
            let name = req
                .pointer("/request/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let allowed = name != "forbidden";
            (
                Duration::ZERO,
                review_response(
                    req,
                    allowed,
                    Some(json!({"code": 403, "reason": "Forbidden", "message": "no"})),
                    &[],
                ),
            )
        }),
    )
    .await;
    sim.set_service_override("sys", "v", wh.addr);
    let mut cfg = eviction_webhook("cm", "v", "sys", &wh.ca_pem, "Fail", "None", 5);
    cfg["webhooks"][0]["rules"] = json!([{"operations": ["CREATE", "DELETE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["configmaps"]}]);
    sim.apply(cfg).unwrap();
    let c = Client::new(&sim);
    let create = |resource: &str, name: &str| {
        let (c, path) = (&c, format!("/api/v1/namespaces/default/{resource}"));
        let body = json!({"metadata": {"name": name}});
        async move { c.post(&path, body).await }
    };
    assert_eq!(create("configmaps", "ok").await.status, 201);
    let r = create("configmaps", "forbidden").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.body["message"],
        "admission webhook \"cm.example.com\" denied the request: no"
    );
    assert_eq!(
        c.delete("/api/v1/namespaces/default/configmaps/ok", None)
            .await
            .status,
        200
    );
    let ops: Vec<String> = wh
        .requests()
        .iter()
        .map(|r| r["request"]["operation"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops, ["CREATE", "CREATE", "DELETE"]);
    assert!(wh.requests()[2]["request"]["oldObject"].is_object());
    // Not matched: other resources.
    assert_eq!(create("secrets", "forbidden").await.status, 201);
    sim.shutdown().await;
}

#[tokio::test]
async fn tables_for_kubectl_get_and_get_watch() {
    let sim = start(vec![node("n1"), pod("default", "p", "n1", json!({}), true)]).await;
    let c = Client::new(&sim);
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let get_table = |path: &str| {
        let request = c.http.get(format!("{}{path}", c.base));
        request
            .bearer_auth(&c.token)
            .header("accept", accept)
            .send()
    };
    let t: Value = get_table("/api/v1/pods")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["columnDefinitions"][0]["name"], "Name");
    assert_eq!(t["rows"][0]["cells"][0], "p");
    assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "default");
    let mut resp = get_table("/api/v1/nodes?watch=1&timeoutSeconds=1")
        .await
        .unwrap();
    let chunk = tokio::time::timeout(Duration::from_secs(3), resp.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let ev: Value = serde_json::from_slice(chunk.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Table");
    assert_eq!(ev["object"]["rows"][0]["cells"][1], "Ready");
    sim.shutdown().await;
}
