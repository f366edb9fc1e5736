//! REST behaviour: discovery, CRUD, conflicts, selectors, watch, patches, delete, auth, faults.
mod common;

use common::*;
use kube_sim::{FaultRule, Permission, UserInfo};
use serde_json::{Value, json};
use std::time::Duration;

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

#[tokio::test]
async fn crud_conflicts_and_status_bodies() {
    let sim = start(vec![]).await;
    let c = Client::new(&sim);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let r = c
        .post("/api/v1/namespaces/default/configmaps", cm.clone())
        .await;
    assert_eq!(r.status, 201);
    let uid = r.body["metadata"]["uid"].as_str().unwrap().to_string();
    let rv1 = r.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(r.body["metadata"]["creationTimestamp"].is_string());
    let dup = c
        .post("/api/v1/namespaces/default/configmaps", cm.clone())
        .await;
    assert_eq!(dup.status, 409);
    assert_eq!(dup.body["reason"], "AlreadyExists");
    assert_eq!(dup.body["message"], "configmaps \"a\" already exists");
    assert_eq!(dup.body["kind"], "Status");
    // Missing namespace → 404 (NamespaceLifecycle).
    assert_eq!(
        c.post("/api/v1/namespaces/nope/configmaps", cm.clone())
            .await
            .status,
        404
    );
    // generateName.
    let g = c
        .post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"generateName": "gen-"}}),
        )
        .await;
    assert_eq!(g.status, 201);
    assert!(
        g.body["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("gen-")
    );
    assert_eq!(g.body["metadata"]["name"].as_str().unwrap().len(), 9);
    // Update with the current rv works, a stale one is 409 Conflict.
    let mut upd = r.body.clone();
    upd["data"]["k"] = json!("v2");
    let u = c
        .put("/api/v1/namespaces/default/configmaps/a", upd.clone())
        .await;
    assert_eq!(u.status, 200);
    assert_ne!(u.body["metadata"]["resourceVersion"].as_str().unwrap(), rv1);
    assert_eq!(u.body["metadata"]["uid"], uid.as_str());
    let stale = c.put("/api/v1/namespaces/default/configmaps/a", upd).await;
    assert_eq!(stale.status, 409);
    assert_eq!(stale.body["reason"], "Conflict");
    assert_eq!(
        stale.body["message"],
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(
        stale.body["details"],
        json!({"name": "a", "kind": "configmaps"})
    );
    // Name mismatch → 400.
    let bad = c
        .put(
            "/api/v1/namespaces/default/configmaps/b",
            json!({"metadata": {"name": "a"}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    let nf = c
        .get("/apis/apps/v1/namespaces/default/deployments/zz")
        .await;
    assert_eq!(nf.status, 404);
    assert_eq!(nf.body["message"], "deployments.apps \"zz\" not found");
    assert_eq!(nf.body["details"]["group"], "apps");
    // dryRun=All creates nothing.
    let d = c
        .post(
            "/api/v1/namespaces/default/configmaps?dryRun=All",
            json!({"metadata": {"name": "dry"}}),
        )
        .await;
    assert_eq!(d.status, 201);
    assert_eq!(
        c.get("/api/v1/namespaces/default/configmaps/dry")
            .await
            .status,
        404
    );
    // Generation bumps on spec changes only; status is ignored on the main resource.
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    let d = c
        .post("/apis/apps/v1/namespaces/default/deployments", dep)
        .await;
    assert_eq!(d.body["metadata"]["generation"], 1);
    assert_eq!(
        d.body["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
        "25%"
    );
    let mut d2 = d.body.clone();
    d2["metadata"]["labels"] = json!({"x": "y"});
    d2["status"] = json!({"replicas": 5});
    let d2 = c
        .put("/apis/apps/v1/namespaces/default/deployments/d", d2)
        .await;
    assert_eq!(d2.body["metadata"]["generation"], 1);
    assert!(d2.body.get("status").is_none());
    let mut d3 = d2.body.clone();
    d3["spec"]["replicas"] = json!(3);
    let d3 = c
        .put("/apis/apps/v1/namespaces/default/deployments/d", d3)
        .await;
    assert_eq!(d3.body["metadata"]["generation"], 2);
    let mut st = d3.body.clone();
    st["status"] = json!({"replicas": 3, "observedGeneration": 2});
    let st = c
        .put("/apis/apps/v1/namespaces/default/deployments/d/status", st)
        .await;
    assert_eq!(st.status, 200);
    assert_eq!(st.body["status"]["replicas"], 3);
    let scale = c
        .get("/apis/apps/v1/namespaces/default/deployments/d/scale")
        .await;
    assert_eq!(scale.body["kind"], "Scale");
    assert_eq!(scale.body["spec"]["replicas"], 3);
    let s2 = c
        .patch(
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "application/merge-patch+json",
            json!({"spec": {"replicas": 0}}),
        )
        .await;
    assert_eq!(s2.status, 200);
    assert_eq!(
        sim.get("apps/v1", "Deployment", "default", "d").unwrap()["spec"]["replicas"],
        0
    );
    // Objects that do not decode as their kind are rejected like kube-apiserver's decoder does.
    let bad = c.post("/api/v1/namespaces/default/pods", json!({"metadata": {"name": "x", "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "y", "uid": 1}]}, "spec": {"containers": []}})).await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body["message"]
            .as_str()
            .unwrap()
            .starts_with("Pod in version \"v1\" cannot be handled as a Pod")
    );
    // Methods the resource does not support.
    assert_eq!(
        c.get("/apis/authentication.k8s.io/v1/tokenreviews")
            .await
            .status,
        405
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn label_and_field_selectors() {
    let sim = start(vec![
        node("n1"),
        pod(
            "default",
            "a",
            "n1",
            json!({"app": "web", "tier": "fe"}),
            true,
        ),
        pod("default", "b", "n2", json!({"app": "web"}), true),
        pod("other", "c", "n1", json!({"app": "db"}), true),
    ])
    .await;
    let c = Client::new(&sim);
    let names = |r: &Resp| -> Vec<String> {
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let all = c.get("/api/v1/pods").await;
    assert_eq!(all.body["kind"], "PodList");
    assert!(all.body["metadata"]["resourceVersion"].is_string());
    assert_eq!(names(&all), ["a", "b", "c"]);
    assert_eq!(
        names(
            &c.get("/api/v1/namespaces/default/pods?labelSelector=app%3Dweb,tier")
                .await
        ),
        ["a"]
    );
    assert_eq!(
        names(
            &c.get("/api/v1/pods?labelSelector=app%20in%20(web,db),tier!%3Dfe")
                .await
        ),
        ["b", "c"]
    );
    assert_eq!(
        names(
            &c.get("/api/v1/pods?labelSelector=!tier,app%20notin%20(db)")
                .await
        ),
        ["b"]
    );
    assert_eq!(
        names(&c.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1").await),
        ["a", "c"]
    );
    assert_eq!(
        names(
            &c.get("/api/v1/pods?fieldSelector=metadata.namespace%3Dother")
                .await
        ),
        ["c"]
    );
    assert_eq!(
        names(
            &c.get("/api/v1/pods?fieldSelector=metadata.name!%3Da,status.phase%3DRunning")
                .await
        ),
        ["b", "c"]
    );
    assert_eq!(
        c.get("/api/v1/pods?labelSelector=a%20in%20b").await.status,
        400
    );
    // limit/continue.
    let p1 = c.get("/api/v1/pods?limit=2").await;
    assert_eq!(names(&p1), ["a", "b"]);
    let cont = p1.body["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        names(
            &c.get(&format!("/api/v1/pods?limit=2&continue={cont}"))
                .await
        ),
        ["c"]
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn paginated_list_returns_every_matching_object_once() {
    // Namespaces "a" and "a-b" order differently as tuples and as "ns/name" strings.
    let sim = start(vec![
        node("n1"),
        pod("a-b", "p1", "n1", json!({"app": "web"}), true),
        pod("a", "p2", "n1", json!({"app": "web"}), true),
        pod("a", "p3", "n1", json!({"app": "db"}), true),
        pod("a-b", "p4", "n1", json!({"app": "web"}), true),
        pod("b", "p5", "n1", json!({"app": "web"}), true),
    ])
    .await;
    let c = Client::new(&sim);
    let mut seen = Vec::new();
    let mut cont = String::new();
    for _ in 0..10 {
        let r = c
            .get(&format!(
                "/api/v1/pods?labelSelector=app%3Dweb&limit=1&continue={cont}"
            ))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let items = r.body["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{:?}", r.body);
        seen.push(items[0]["metadata"]["name"].as_str().unwrap().to_string());
        match r.body["metadata"]["continue"].as_str() {
            Some(c) => cont = c.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, ["p2", "p1", "p4", "p5"]);
    assert_eq!(
        c.get("/api/v1/pods?limit=1&continue=bm90LWEta2V5")
            .await
            .status,
        400,
        "a token without a namespace separator is rejected"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn watch_semantics() {
    let sim = kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        watch_history: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    let c = Client::new(&sim);
    let mk = |n: &str| json!({"metadata": {"name": n, "labels": {"w": "1"}}});
    let r1 = c
        .post("/api/v1/namespaces/default/configmaps", mk("a"))
        .await;
    let rv1: u64 = r1.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // rv "" → synthetic ADDED for current state; watches end cleanly at timeoutSeconds.
    let (evs, ended) = c
        .watch(
            "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
            10,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["type"], "ADDED");
    assert!(ended, "timeoutSeconds closes the stream");
    // Live events from an rv, filtered by label selector, with a transition out of the selector.
    let c2 = Client::new(&sim);
    let path = format!(
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv1}&labelSelector=w%3D1"
    );
    let task = tokio::spawn(async move { c2.watch(&path, 3, Duration::from_secs(5)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.post("/api/v1/namespaces/default/configmaps", mk("b"))
        .await;
    c.patch(
        "/api/v1/namespaces/default/configmaps/a",
        "application/merge-patch+json",
        json!({"data": {"x": "1"}}),
    )
    .await;
    c.patch(
        "/api/v1/namespaces/default/configmaps/a",
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"w": null}}}),
    )
    .await;
    let (evs, _) = task.await.unwrap();
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
    // History window of 3: watching from rv1 again is now too old → ERROR 410 Expired.
    c.post("/api/v1/namespaces/default/configmaps", mk("c"))
        .await;
    let (evs, ended) = c
        .watch(
            &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv1}"),
            5,
            Duration::from_secs(3),
        )
        .await;
    assert!(ended);
    assert_eq!(evs[0]["type"], "ERROR");
    assert_eq!(evs[0]["object"]["code"], 410);
    assert_eq!(evs[0]["object"]["reason"], "Expired");
    // Bookmarks, and drop_watches ends open watches.
    let sim2 = kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    })
    .await
    .unwrap();
    let c3 = Client::new(&sim2);
    let (evs, _) = c3
        .watch(
            "/api/v1/namespaces/default/pods?watch=1&allowWatchBookmarks=true&resourceVersion=1",
            1,
            Duration::from_secs(3),
        )
        .await;
    assert_eq!(evs[0]["type"], "BOOKMARK");
    assert!(evs[0]["object"]["metadata"]["resourceVersion"].is_string());
    let c4 = Client::new(&sim2);
    let task = tokio::spawn(async move {
        c4.watch("/api/v1/pods?watch=1", 100, Duration::from_secs(5))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    sim2.drop_watches();
    let (_, ended) = task.await.unwrap();
    assert!(ended, "drop_watches ends the stream");
    sim.shutdown().await;
    sim2.shutdown().await;
}

#[tokio::test]
async fn patches_kubectl_sends() {
    let sim = start(vec![node("n1")]).await;
    let c = Client::new(&sim);
    // kubectl cordon: strategic merge patch.
    let r = c
        .patch(
            "/api/v1/nodes/n1",
            "application/strategic-merge-patch+json",
            json!({"spec": {"unschedulable": true}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["spec"]["unschedulable"], true);
    assert_eq!(r.body["status"]["conditions"][0]["type"], "Ready");
    // JSON patch with a failing test op: 422 Invalid with the generic message.
    let bad = c.patch("/api/v1/nodes/n1", "application/json-patch+json",
        json!([{"op": "test", "path": "/spec/unschedulable", "value": false}, {"op": "remove", "path": "/spec/unschedulable"}])).await;
    assert_eq!(bad.status, 422);
    assert_eq!(bad.body["reason"], "Invalid");
    assert_eq!(
        bad.body["message"],
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(
        sim.get("v1", "Node", "", "n1").unwrap()["spec"]["unschedulable"],
        true
    );
    let ok = c.patch("/api/v1/nodes/n1", "application/json-patch+json",
        json!([{"op": "test", "path": "/spec/unschedulable", "value": true}, {"op": "remove", "path": "/spec/unschedulable"}])).await;
    assert_eq!(ok.status, 200);
    assert!(ok.body["spec"].get("unschedulable").is_none());
    // Stale resourceVersion in a patch is a precondition → 409.
    let stale = c
        .patch(
            "/api/v1/nodes/n1",
            "application/merge-patch+json",
            json!({"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": true}}),
        )
        .await;
    assert_eq!(stale.status, 409);
    // kubectl rollout restart: strategic merge patch of the template annotations.
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i:1"}, {"name": "s", "image": "side:1"}]}}}});
    c.post("/apis/apps/v1/namespaces/default/deployments", dep)
        .await;
    let rr = c.patch("/apis/apps/v1/namespaces/default/deployments/d?fieldManager=kubectl-rollout", "application/strategic-merge-patch+json",
        json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-22T10:00:00Z"}}}}})).await;
    assert_eq!(rr.status, 200);
    assert_eq!(
        rr.body["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
        "2026-11-22T10:00:00Z"
    );
    assert_eq!(rr.body["metadata"]["generation"], 2);
    // Containers merge by name.
    let img = c.patch("/apis/apps/v1/namespaces/default/deployments/d", "application/strategic-merge-patch+json",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "s", "image": "side:2"}]}}}})).await;
    let cs = img.body["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[1]["image"], "side:2");
    // Pod status conditions merge by type through the status subresource.
    c.post(
        "/api/v1/namespaces/default/pods",
        pod("default", "p", "n1", json!({}), false),
    )
    .await;
    let ps = c.patch("/api/v1/namespaces/default/pods/p/status", "application/strategic-merge-patch+json",
        json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {"nodeName": "elsewhere"}})).await;
    assert_eq!(ps.status, 200);
    assert_eq!(ps.body["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        ps.body["spec"]["nodeName"], "n1",
        "status patches leave spec alone"
    );
    // Unknown patch type → 415.
    assert_eq!(
        c.patch("/api/v1/nodes/n1", "text/plain", json!({}))
            .await
            .status,
        415
    );
    // Server-side apply creates.
    let ap = c.patch("/api/v1/namespaces/default/configmaps/applied?fieldManager=t", "application/apply-patch+yaml",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}})).await;
    assert_eq!(ap.status, 201);
    sim.shutdown().await;
}

#[tokio::test]
async fn graceful_delete_and_preconditions() {
    let mut unbound = pod("default", "unbound", "", json!({}), false);
    unbound["spec"].as_object_mut().unwrap().remove("nodeName");
    let mut p = pod("default", "p", "n1", json!({}), true);
    p["spec"]["terminationGracePeriodSeconds"] = json!(45);
    let sim = start(vec![node("n1"), p, unbound]).await;
    let c = Client::new(&sim);
    let uid = sim.get("v1", "Pod", "default", "p").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let wrong = c
        .delete(
            "/api/v1/namespaces/default/pods/p",
            Some(json!({"preconditions": {"uid": "nope"}})),
        )
        .await;
    assert_eq!(wrong.status, 409);
    assert!(
        wrong.body["message"]
            .as_str()
            .unwrap()
            .contains("the UID in the precondition (nope) does not match the UID in record")
    );
    let stale = c
        .delete(
            "/api/v1/namespaces/default/pods/p",
            Some(json!({"preconditions": {"resourceVersion": "1"}})),
        )
        .await;
    assert_eq!(stale.status, 409);
    let dry = c
        .delete("/api/v1/namespaces/default/pods/p?dryRun=All", None)
        .await;
    assert_eq!(dry.status, 200);
    assert!(
        sim.get("v1", "Pod", "default", "p").unwrap()["metadata"]
            .get("deletionTimestamp")
            .is_none()
    );
    let r = c
        .delete(
            "/api/v1/namespaces/default/pods/p",
            Some(json!({"preconditions": {"uid": uid}})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 45);
    let stored = sim.get("v1", "Pod", "default", "p").unwrap();
    let ts: jiff::Timestamp = stored["metadata"]["deletionTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let ahead = ts.duration_since(sim.now()).as_secs();
    assert!(
        (40..=46).contains(&ahead),
        "deletionTimestamp ≈ now + 45s, got {ahead}"
    );
    // A shorter grace period shortens it; a longer one is ignored.
    let r = c
        .delete(
            "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=5",
            None,
        )
        .await;
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 5);
    let r = c
        .delete(
            "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=50",
            None,
        )
        .await;
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 5);
    // Unbound pods and other kinds go at once.
    assert_eq!(
        c.delete("/api/v1/namespaces/default/pods/unbound", None)
            .await
            .status,
        200
    );
    assert!(sim.get("v1", "Pod", "default", "unbound").is_none());
    assert_eq!(c.delete("/api/v1/nodes/n1", None).await.status, 200);
    assert!(sim.get("v1", "Node", "", "n1").is_none());
    assert_eq!(c.delete("/api/v1/nodes/n1", None).await.status, 404);
    // Grace 0 deletes a bound pod immediately.
    c.post(
        "/api/v1/namespaces/default/pods",
        pod("default", "q", "n1", json!({}), true),
    )
    .await;
    c.delete(
        "/api/v1/namespaces/default/pods/q",
        Some(json!({"gracePeriodSeconds": 0})),
    )
    .await;
    assert!(sim.get("v1", "Pod", "default", "q").is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn owner_references_cascade() {
    let sim = start(vec![node("n1")]).await;
    let c = Client::new(&sim);
    let rs = c.post("/apis/apps/v1/namespaces/default/replicasets", json!({"metadata": {"name": "rs"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).await;
    let uid = rs.body["metadata"]["uid"].clone();
    let mut p = pod("default", "p", "n1", json!({"a": "b"}), true);
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": true}]);
    c.post("/api/v1/namespaces/default/pods", p).await;
    c.delete("/apis/apps/v1/namespaces/default/replicasets/rs", None)
        .await;
    let p = sim.get("v1", "Pod", "default", "p").unwrap();
    assert!(
        p["metadata"]["deletionTimestamp"].is_string(),
        "dependent pod is deleted gracefully"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn authentication_and_reviews() {
    let sim = start(vec![]).await;
    sim.add_token(
        "alice-token",
        UserInfo::new("alice", &["devs", "system:authenticated"]),
    );
    sim.allow(Permission::new(
        "group:devs",
        &["create"],
        &["pods/eviction"],
    ));
    sim.allow(Permission::new("alice", &["get"], &["/metrics"]));
    let anon = Client::with_token(&sim, "wrong");
    let r = anon.get("/api/v1/pods").await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["reason"], "Unauthorized");
    let c = Client::new(&sim);
    let tr = c.post("/apis/authentication.k8s.io/v1/tokenreviews", json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "alice-token"}})).await;
    assert_eq!(tr.status, 201);
    assert_eq!(tr.body["status"]["authenticated"], true);
    assert_eq!(tr.body["status"]["user"]["username"], "alice");
    assert_eq!(
        tr.body["status"]["user"]["groups"],
        json!(["devs", "system:authenticated"])
    );
    let tr = c
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": "nope"}}),
        )
        .await;
    // `authenticated: false` is omitted, as kube-apiserver serializes it.
    assert!(tr.body["status"].get("authenticated").is_none());
    assert_eq!(tr.body["status"]["error"], "invalid bearer token");
    let sar = |user: &str, groups: Value, attrs: Value| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attrs}})
    };
    let allowed = c.post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("alice", json!(["devs"]), json!({"verb": "create", "resource": "pods", "subresource": "eviction", "namespace": "x"}))).await;
    assert_eq!(allowed.body["status"]["allowed"], true);
    let denied = c
        .post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            sar(
                "alice",
                json!([]),
                json!({"verb": "delete", "resource": "pods", "namespace": "x"}),
            ),
        )
        .await;
    assert_eq!(denied.body["status"]["allowed"], false);
    let nonres = c.post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
        json!({"spec": {"user": "alice", "nonResourceAttributes": {"verb": "get", "path": "/metrics"}}})).await;
    assert_eq!(nonres.body["status"]["allowed"], true);
    let alice = Client::with_token(&sim, "alice-token");
    let ssar = alice.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction"}}})).await;
    assert_eq!(ssar.body["status"]["allowed"], true);
    sim.shutdown().await;
}

#[tokio::test]
async fn fault_injection() {
    let sim = start(vec![node("n1")]).await;
    let c = Client::new(&sim);
    sim.add_fault(FaultRule {
        verb: Some("get".into()),
        resource: Some("nodes".into()),
        status: Some(503),
        times: Some(1),
        ..Default::default()
    });
    let r = c.get("/api/v1/nodes/n1").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body["reason"], "ServiceUnavailable");
    assert_eq!(
        c.get("/api/v1/nodes/n1").await.status,
        200,
        "rule retired after one use"
    );
    let id = sim.add_fault(FaultRule {
        resource: Some("nodes".into()),
        latency: Some(Duration::from_millis(300)),
        ..Default::default()
    });
    let t = std::time::Instant::now();
    assert_eq!(c.get("/api/v1/nodes").await.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    sim.remove_fault(id);
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        status: Some(429),
        ..Default::default()
    });
    let e = c
        .post(
            "/api/v1/namespaces/default/pods/x/eviction",
            eviction("x", "default"),
        )
        .await;
    assert_eq!(e.status, 429);
    sim.clear_faults();
    assert_eq!(
        c.post(
            "/api/v1/namespaces/default/pods/x/eviction",
            eviction("x", "default")
        )
        .await
        .status,
        404
    );
    // Bounded bodies.
    let big = "x".repeat(4 * 1024 * 1024);
    let r = c
        .post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "big"}, "data": {"a": big}}),
        )
        .await;
    assert_eq!(r.status, 413);
    // Garbage bodies are 400, not panics.
    let r = c
        .send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            None,
            Some(json!("just a string")),
        )
        .await;
    assert_eq!(r.status, 400);
    sim.shutdown().await;
}
