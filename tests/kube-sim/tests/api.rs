//! REST behaviour: discovery, CRUD, conflicts, selectors, watch, patches, delete, auth, faults.
mod common;

use common::*;
use kube_sim::{FaultRule, Permission, UserInfo};
use serde_json::{Value, json};
use std::time::Duration;

#[path = "api/access.rs"]
mod access;
#[path = "api/reads.rs"]
mod reads;
#[path = "api/writes.rs"]
mod writes;

#[tokio::test]
async fn discovery_documents() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let v = c.get("/version").await;
    assert_eq!(v.body["major"], "1");
    let api = c.get("/api").await;
    assert_eq!(api.body["versions"], json!(["v1"]));
    let core = c.get("/api/v1").await;
    let names: Vec<&str> = core.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for n in [
        "pods",
        "pods/eviction",
        "pods/status",
        "nodes",
        "namespaces",
        "persistentvolumeclaims",
        "events",
    ] {
        assert!(names.contains(&n), "{n} missing");
    }
    let ev = core.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/eviction")
        .unwrap();
    assert_eq!(
        (
            ev["group"].as_str(),
            ev["version"].as_str(),
            ev["kind"].as_str()
        ),
        (Some("policy"), Some("v1"), Some("Eviction"))
    );
    let po = core.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods")
        .unwrap();
    assert_eq!(po["shortNames"], json!(["po"]));
    let groups = c.get("/apis").await;
    let gnames: Vec<&str> = groups.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apps",
        "policy",
        "scheduling.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "admissionregistration.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
    ] {
        assert!(gnames.contains(&g), "{g} missing");
    }
    let apps = c.get("/apis/apps/v1").await;
    let d = apps.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "deployments/scale")
        .unwrap();
    assert_eq!(d["kind"], "Scale");
    // Aggregated discovery is answered with the legacy document and a plain JSON type.
    let resp = c
        .http
        .get(format!("{}/apis", c.base))
        .bearer_auth(&c.token)
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(c.get("/apis/nope/v1").await.status, 404);
    assert_eq!(c.get("/openapi/v2").await.status, 404);
    assert!(c.get("/openapi/v3").await.body["paths"]["apis/apps/v1"].is_object());
    sim.shutdown().await;
}

/// Go's base64 decoder (kube-apiserver's, for `[]byte` fields) skips `\r` and `\n`, so a Secret
/// whose data is wrapped (kustomize's secretGenerator wraps at 70 characters) is accepted and
/// served back canonical; a really invalid value is still a 400.
#[tokio::test]
async fn wrapped_base64_bytes_are_accepted_and_served_canonical() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let canonical =
        "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5emFiY2RlZmdo";
    let wrapped = format!("{}\n{}\r\n", &canonical[..70], &canonical[70..]);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                        "type": "Opaque", "data": {"k": wrapped}});
    let r = c.post("/api/v1/namespaces/default/secrets", secret).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["k"], canonical);
    let got = c.get("/api/v1/namespaces/default/secrets/s").await;
    assert_eq!(got.body["data"]["k"], canonical);
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"},
                     "data": {"k": "not base64!"}});
    let r = c.post("/api/v1/namespaces/default/secrets", bad).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot be handled as a Secret")),
        "{}",
        r.body
    );
}
