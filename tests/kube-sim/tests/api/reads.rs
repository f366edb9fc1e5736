//! Reads: label and field selectors, paginated lists, and watch semantics.

use super::*;

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
