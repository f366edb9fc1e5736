//! pods/eviction: every branch of kube-apiserver's EvictionREST, plus webhook dispatch.
mod common;

use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const EVICT: &str = "/api/v1/namespaces/app/pods/p/eviction";

fn app_pod() -> Value {
    pod("app", "p", "n1", json!({"app": "web"}), true)
}

async fn sim_with(mut extra: Vec<Value>) -> kube_sim::SimHandle {
    let mut objs = vec![
        node("n1"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}),
    ];
    objs.append(&mut extra);
    start(objs).await
}

fn terminating(sim: &kube_sim::SimHandle) -> bool {
    sim.get("v1", "Pod", "app", "p")
        .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_string())
}

/// A webhook answering with `f`, registered as service guard/guard-system.
async fn webhook(
    sim: &kube_sim::SimHandle,
    failure: &str,
    side: &str,
    timeout: u64,
    f: Answer,
) -> FakeWebhook {
    let wh = FakeWebhook::start("guard", "guard-system", f).await;
    sim.set_service_override("guard-system", "guard", wh.addr);
    sim.apply(eviction_webhook(
        "guard",
        "guard",
        "guard-system",
        &wh.ca_pem,
        failure,
        side,
        timeout,
    ))
    .unwrap();
    wh
}

#[tokio::test]
async fn name_mismatch_and_missing_pod() {
    let sim = sim_with(vec![app_pod()]).await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("other", "app")).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["message"],
        "name in URL does not match name in Eviction object"
    );
    let r = c
        .post(
            "/api/v1/namespaces/app/pods/ghost/eviction",
            eviction("ghost", "app"),
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["message"], "pods \"ghost\" not found");
    let r = c
        .post(
            EVICT,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        )
        .await;
    assert_eq!(r.status, 400);
    sim.shutdown().await;
}

#[tokio::test]
async fn plain_eviction_without_pdb() {
    let sim = sim_with(vec![app_pod()]).await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    assert!(terminating(&sim));
    // As eviction.go's addConditionAndDeletePod (PodDisruptionConditions, GA in 1.31).
    assert_eq!(
        disruption_target(&sim).as_deref(),
        Some("EvictionByEvictionAPI")
    );
    sim.shutdown().await;
}

/// Reason of the pod's `DisruptionTarget` condition, if it has one.
fn disruption_target(sim: &kube_sim::SimHandle) -> Option<String> {
    let p = sim.get("v1", "Pod", "app", "p")?;
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "DisruptionTarget" && c["status"] == "True")
        .and_then(|c| c["reason"].as_str().map(String::from))
}

#[tokio::test]
async fn webhook_allow_sees_the_eviction_request() {
    let sim = sim_with(vec![app_pod()]).await;
    let wh = webhook(
        &sim,
        "Fail",
        "None",
        5,
        Arc::new(|req: &Value| {
            (
                Duration::ZERO,
                review_response(req, true, None, &["would restart web"]),
            )
        }),
    )
    .await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.warnings, vec!["299 - \"would restart web\"".to_string()]);
    let reqs = wh.requests();
    assert_eq!(reqs.len(), 1);
    let q = &reqs[0]["request"];
    assert_eq!(reqs[0]["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(
        q["kind"],
        json!({"group": "policy", "version": "v1", "kind": "Eviction"})
    );
    assert_eq!(
        q["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(q["subResource"], "eviction");
    assert_eq!(q["operation"], "CREATE");
    assert_eq!(
        (q["name"].as_str(), q["namespace"].as_str()),
        (Some("p"), Some("app"))
    );
    assert_eq!(q["dryRun"], false);
    assert_eq!(q["object"]["kind"], "Eviction");
    assert_eq!(q["userInfo"]["username"], "kube-sim-admin");
    assert!(q["object"].get("spec").is_none(), "the pod is not included");
    assert!(terminating(&sim));
    sim.shutdown().await;
}

#[tokio::test]
async fn webhook_denials_pass_codes_through() {
    let sim = sim_with(vec![app_pod()]).await;
    let code = Arc::new(std::sync::atomic::AtomicU64::new(429));
    let code2 = code.clone();
    webhook(&sim, "Fail", "None", 5, Arc::new(move |req: &Value| {
        let c = code2.load(std::sync::atomic::Ordering::SeqCst);
        let status = if c == 0 {
            json!({})
        } else {
            json!({"code": c, "reason": "TooManyRequests", "message": "Eviction triggered evacuation of web",
                "details": {"causes": [{"type": "Guard", "message": "restarting"}]}})
        };
        (Duration::ZERO, review_response(req, false, Some(status), &[]))
    })).await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.body["reason"], "TooManyRequests");
    assert_eq!(r.body["status"], "Failure");
    assert_eq!(
        r.body["message"],
        "admission webhook \"guard.example.com\" denied the request: Eviction triggered evacuation of web"
    );
    assert_eq!(r.body["details"]["causes"][0]["type"], "Guard");
    assert!(r.retry_after.is_none());
    assert!(!terminating(&sim));
    code.store(200, std::sync::atomic::Ordering::SeqCst);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 400, "codes below 400 are coerced to 400");
    code.store(0, std::sync::atomic::Ordering::SeqCst);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["message"],
        "admission webhook \"guard.example.com\" denied the request without explanation"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn unreachable_webhook_fail_vs_ignore() {
    let sim = sim_with(vec![app_pod()]).await;
    let wh = webhook(
        &sim,
        "Fail",
        "None",
        2,
        Arc::new(|req: &Value| (Duration::ZERO, review_response(req, true, None, &[]))),
    )
    .await;
    wh.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.body["reason"], "InternalError");
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .starts_with("Internal error occurred: failed calling webhook \"guard.example.com\""),
        "{}",
        r.body["message"]
    );
    assert!(!terminating(&sim));
    // Same with a service that has no override at all.
    sim.apply(eviction_webhook(
        "guard",
        "nowhere",
        "guard-system",
        &wh.ca_pem,
        "Ignore",
        "None",
        2,
    ))
    .unwrap();
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 201, "failurePolicy Ignore proceeds");
    assert!(terminating(&sim));
    sim.shutdown().await;
}

#[tokio::test]
async fn webhook_timeout() {
    let sim = sim_with(vec![app_pod()]).await;
    let slow: Answer = Arc::new(|req: &Value| {
        (
            Duration::from_millis(2500),
            review_response(req, false, Some(json!({"code": 429})), &[]),
        )
    });
    webhook(&sim, "Fail", "None", 1, slow.clone()).await;
    let c = Client::new(&sim);
    let t = std::time::Instant::now();
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 500);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("context deadline exceeded"),
        "{}",
        r.body["message"]
    );
    assert!(
        t.elapsed() < Duration::from_millis(2400),
        "timeoutSeconds=1 honoured"
    );
    webhook(&sim, "Ignore", "None", 1, slow).await;
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 201);
    sim.shutdown().await;
}

#[tokio::test]
async fn invalid_webhook_responses_are_call_failures() {
    let sim = sim_with(vec![app_pod()]).await;
    // uid that does not echo the request.
    webhook(&sim, "Fail", "None", 5, Arc::new(|_req: &Value| (Duration::ZERO,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "other", "allowed": true}})))).await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 500);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("expected response.uid")
    );
    // Wrong apiVersion.
    webhook(
        &sim,
        "Fail",
        "None",
        5,
        Arc::new(|req: &Value| {
            let mut r = review_response(req, true, None, &[]);
            r["apiVersion"] = json!("admission.k8s.io/v1beta1");
            (Duration::ZERO, r)
        }),
    )
    .await;
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 500);
    // A patch from a validating webhook.
    webhook(
        &sim,
        "Fail",
        "None",
        5,
        Arc::new(|req: &Value| {
            let mut r = review_response(req, true, None, &[]);
            r["response"]["patch"] = json!("W10=");
            r["response"]["patchType"] = json!("JSONPatch");
            (Duration::ZERO, r)
        }),
    )
    .await;
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 500);
    sim.shutdown().await;
}

#[tokio::test]
async fn side_effects_and_dry_run() {
    let sim = sim_with(vec![
        app_pod(),
        pdb("app", "pdb", json!({"app": "web"}), 1, 1, 0),
    ])
    .await;
    let wh = webhook(
        &sim,
        "Fail",
        "Some",
        5,
        Arc::new(|req: &Value| (Duration::ZERO, review_response(req, true, None, &[]))),
    )
    .await;
    let c = Client::new(&sim);
    let r = c
        .post(&format!("{EVICT}?dryRun=All"), eviction("p", "app"))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["message"],
        "admission webhook \"guard.example.com\" does not support dry run"
    );
    assert!(wh.requests().is_empty());
    // Body dry-run is not admission dry-run: the webhook with side effects is called.
    let mut ev = eviction("p", "app");
    ev["deleteOptions"] = json!({"dryRun": ["All"]});
    let r = c.post(EVICT, ev.clone()).await;
    assert_eq!(r.status, 201);
    assert_eq!(wh.requests()[0]["request"]["dryRun"], false);
    assert_eq!(
        wh.requests()[0]["request"]["object"]["deleteOptions"]["dryRun"],
        json!(["All"])
    );
    assert!(!terminating(&sim));
    assert_eq!(disruption_target(&sim), None, "dry-run writes no condition");
    let pdb = sim
        .get("policy/v1", "PodDisruptionBudget", "app", "pdb")
        .unwrap();
    assert_eq!(
        pdb["status"]["disruptionsAllowed"], 1,
        "dry-run writes no PDB status"
    );
    // NoneOnDryRun + query dry-run: called with dryRun true, nothing changes.
    let wh2 = webhook(
        &sim,
        "Fail",
        "NoneOnDryRun",
        5,
        Arc::new(|req: &Value| (Duration::ZERO, review_response(req, true, None, &[]))),
    )
    .await;
    let r = c
        .post(&format!("{EVICT}?dryRun=All"), eviction("p", "app"))
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(wh2.requests()[0]["request"]["dryRun"], true);
    assert!(!terminating(&sim));
    assert_eq!(
        sim.get("policy/v1", "PodDisruptionBudget", "app", "pdb")
            .unwrap()["status"]["disruptionsAllowed"],
        1
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn namespace_selector_skips_excluded_namespaces() {
    let sim = sim_with(vec![pod("kube-system", "sys", "n1", json!({}), true)]).await;
    let wh = webhook(
        &sim,
        "Fail",
        "None",
        5,
        Arc::new(|req: &Value| {
            (
                Duration::ZERO,
                review_response(req, false, Some(json!({"code": 429})), &[]),
            )
        }),
    )
    .await;
    let c = Client::new(&sim);
    let r = c
        .post(
            "/api/v1/namespaces/kube-system/pods/sys/eviction",
            eviction("sys", "kube-system"),
        )
        .await;
    assert_eq!(r.status, 201);
    assert!(wh.requests().is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn pdb_blocks_with_kube_apiserver_body() {
    let sim = sim_with(vec![
        app_pod(),
        pdb("app", "web-pdb", json!({"app": "web"}), 0, 1, 1),
    ])
    .await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.body["reason"], "TooManyRequests");
    assert_eq!(
        r.body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{"reason": "DisruptionBudget", "message": "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}])
    );
    assert!(r.retry_after.is_none());
    assert!(!terminating(&sim));
    sim.shutdown().await;
}

#[tokio::test]
async fn more_than_one_pdb_is_500() {
    let sim = sim_with(vec![
        app_pod(),
        pdb("app", "a", json!({"app": "web"}), 1, 1, 0),
        pdb("app", "b", json!({"app": "web"}), 1, 1, 0),
    ])
    .await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.body["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    assert!(!terminating(&sim));
    sim.shutdown().await;
}

#[tokio::test]
async fn stale_pdb_status_is_429_with_retry_after() {
    let mut b = pdb("app", "web-pdb", json!({"app": "web"}), 1, 1, 0);
    b["metadata"]["generation"] = json!(2);
    let sim = sim_with(vec![app_pod(), b]).await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.body["details"]["retryAfterSeconds"], 10);
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "The disruption budget web-pdb is still being processed by the server."
    );
    assert_eq!(r.retry_after.as_deref(), Some("10"));
    sim.shutdown().await;
}

#[tokio::test]
async fn successful_eviction_decrements_budget() {
    let sim = sim_with(vec![
        app_pod(),
        pdb("app", "web-pdb", json!({"app": "web"}), 1, 2, 1),
    ])
    .await;
    let c = Client::new(&sim);
    let r = c.post(EVICT, eviction("p", "app")).await;
    assert_eq!(r.status, 201);
    let b = sim
        .get("policy/v1", "PodDisruptionBudget", "app", "web-pdb")
        .unwrap();
    assert_eq!(b["status"]["disruptionsAllowed"], 0);
    assert!(b["status"]["disruptedPods"]["p"].is_string());
    assert_eq!(b["status"]["conditions"][0]["reason"], "InsufficientPods");
    assert!(terminating(&sim));
    sim.shutdown().await;
}

#[tokio::test]
async fn unhealthy_pod_eviction_policy() {
    let unready = pod("app", "p", "n1", json!({"app": "web"}), false);
    // IfHealthyBudget (default), budget satisfied: allowed without touching the PDB.
    let sim = sim_with(vec![
        unready.clone(),
        pdb("app", "b", json!({"app": "web"}), 0, 2, 2),
    ])
    .await;
    let c = Client::new(&sim);
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 201);
    assert_eq!(
        sim.get("policy/v1", "PodDisruptionBudget", "app", "b")
            .unwrap()["status"]["disruptionsAllowed"],
        0
    );
    sim.shutdown().await;
    // IfHealthyBudget, budget not satisfied and nothing allowed: 429.
    let sim = sim_with(vec![
        unready.clone(),
        pdb("app", "b", json!({"app": "web"}), 0, 1, 2),
    ])
    .await;
    let c = Client::new(&sim);
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 429);
    sim.shutdown().await;
    // AlwaysAllow: allowed even then.
    let mut b = pdb("app", "b", json!({"app": "web"}), 0, 1, 2);
    b["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
    let sim = sim_with(vec![unready, b]).await;
    let c = Client::new(&sim);
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 201);
    assert!(terminating(&sim));
    sim.shutdown().await;
}

#[tokio::test]
async fn pending_terminal_and_terminating_pods_skip_pdb() {
    let mut pending = pod("app", "p", "n1", json!({"app": "web"}), false);
    pending["status"]["phase"] = json!("Pending");
    let sim = sim_with(vec![
        pending,
        pdb("app", "b", json!({"app": "web"}), 0, 1, 1),
    ])
    .await;
    let c = Client::new(&sim);
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 201);
    assert!(terminating(&sim));
    // Already terminating: evicting again still succeeds (PDB skipped).
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 201);
    sim.shutdown().await;
    let mut done = pod("app", "p", "n1", json!({"app": "web"}), false);
    done["status"]["phase"] = json!("Succeeded");
    let sim = sim_with(vec![done, pdb("app", "b", json!({"app": "web"}), 0, 1, 1)]).await;
    let c = Client::new(&sim);
    assert_eq!(c.post(EVICT, eviction("p", "app")).await.status, 201);
    assert!(
        sim.get("v1", "Pod", "app", "p").is_none(),
        "terminal pods are deleted at once"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn dry_run_via_query_and_body() {
    let sim = sim_with(vec![
        app_pod(),
        pdb("app", "b", json!({"app": "web"}), 1, 2, 1),
    ])
    .await;
    let c = Client::new(&sim);
    assert_eq!(
        c.post(&format!("{EVICT}?dryRun=All"), eviction("p", "app"))
            .await
            .status,
        201
    );
    let mut ev = eviction("p", "app");
    ev["deleteOptions"] = json!({"dryRun": ["All"]});
    assert_eq!(c.post(EVICT, ev).await.status, 201);
    assert!(!terminating(&sim));
    let b = sim
        .get("policy/v1", "PodDisruptionBudget", "app", "b")
        .unwrap();
    assert_eq!(b["status"]["disruptionsAllowed"], 1);
    assert!(b["status"].get("disruptedPods").is_none());
    // Dry-run still reports what would happen.
    let sim2 = sim_with(vec![
        app_pod(),
        pdb("app", "b", json!({"app": "web"}), 0, 1, 1),
    ])
    .await;
    let c2 = Client::new(&sim2);
    assert_eq!(
        c2.post(&format!("{EVICT}?dryRun=All"), eviction("p", "app"))
            .await
            .status,
        429
    );
    sim.shutdown().await;
    sim2.shutdown().await;
}

#[tokio::test]
async fn v1beta1_body_and_preconditions() {
    let sim = sim_with(vec![app_pod()]).await;
    let wh = webhook(
        &sim,
        "Fail",
        "None",
        5,
        Arc::new(|req: &Value| (Duration::ZERO, review_response(req, true, None, &[]))),
    )
    .await;
    let c = Client::new(&sim);
    let mut ev = eviction("p", "app");
    ev["deleteOptions"] = json!({"preconditions": {"uid": "not-the-uid"}});
    let r = c.post(EVICT, ev).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["reason"], "Conflict");
    let mut old = eviction("p", "app");
    old["apiVersion"] = json!("policy/v1beta1");
    assert_eq!(c.post(EVICT, old).await.status, 201);
    assert_eq!(
        wh.requests()[1]["request"]["object"]["apiVersion"],
        "policy/v1"
    );
    assert!(terminating(&sim));
    sim.shutdown().await;
}
