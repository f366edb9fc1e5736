//! Writes: create, update and status with their conflicts, the patches kubectl sends, graceful
//! deletion with preconditions, and the owner-reference cascade.

use super::*;

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
