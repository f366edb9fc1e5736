//! The workload `tests/real_sim_parity.rs` puts on both servers, the requests it sends and how
//! answers are masked before they are compared.

use std::time::Duration;

use serde_json::{Value, json};

use super::replace_all;

pub const NS: &str = "parity";
pub const REVIEW_NS: &str = "parity-review";
pub const WAIT: Duration = Duration::from_secs(120);

pub fn deployment(ns: &str, name: &str, replicas: u32, requests: bool) -> Value {
    let mut c = json!({"name": "c", "image": "registry.k8s.io/pause:3.10"});
    if requests {
        c["resources"] = json!({"requests": {"cpu": "100m", "memory": "64Mi"}});
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [c]}}}})
}

pub fn pdb(name: &str, app: &str, budget: Value) -> Value {
    let mut spec = json!({"selector": {"matchLabels": {"app": app}}});
    if let (Some(s), Some(b)) = (spec.as_object_mut(), budget.as_object()) {
        s.extend(b.clone());
    }
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS}, "spec": spec})
}

pub fn eviction(ns: &str, name: &str, api_version: &str, delete_options: Option<Value>) -> Value {
    let mut e = json!({"apiVersion": api_version, "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns}});
    if let Some(d) = delete_options {
        e["deleteOptions"] = d;
    }
    e
}

pub fn evict_path(ns: &str, pod: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods/{pod}/eviction")
}

/// Creates the workload on `s` (through the API, so admission applies) and waits until every
/// pod is Ready and every PDB's status is current.
pub async fn set_up(s: &super::Server) {
    create_available_deployments(s).await;
    create_budgets_with_current_status(s).await;
}

/// The two namespaces and their Deployments, waited on until every replica is available.
async fn create_available_deployments(s: &super::Server) {
    for ns in [NS, REVIEW_NS] {
        let r = s
            .post(
                "/api/v1/namespaces",
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .await;
        assert_eq!(r.status, 201, "{}: namespace {ns}: {}", s.name, r.body);
    }
    let deployments = [
        (NS, "web", 2, true),
        (NS, "solo", 1, false),
        (NS, "duo", 1, true),
        (NS, "roll", 1, true),
        (REVIEW_NS, "rev", 1, true),
    ];
    for (ns, name, replicas, req) in deployments {
        let r = s
            .post(
                &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
                &deployment(ns, name, replicas, req),
            )
            .await;
        assert_eq!(r.status, 201, "{}: deployment {name}: {}", s.name, r.body);
    }
    for (ns, name, replicas, _) in deployments {
        s.wait_for(
            &format!("{replicas} available replicas of {ns}/{name}"),
            &format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}"),
            WAIT,
            |d| d.pointer("/status/availableReplicas") == Some(&json!(replicas)),
        )
        .await;
    }
}

/// The budgets and a pod that stays Pending under one of them, waited on until every budget's
/// status is current.
async fn create_budgets_with_current_status(s: &super::Server) {
    // The budgets come after the pods are Ready: both duo budgets select the same pod, and the
    // disruption controller enqueues only one of them (chosen arbitrarily) on a pod's events, so
    // the other's status is computed only when the budget itself is added.
    let pdbs = [
        pdb("web", "web", json!({"minAvailable": 2})),
        pdb("duo-a", "duo", json!({"maxUnavailable": 1})),
        pdb("duo-b", "duo", json!({"maxUnavailable": 1})),
        pdb("pend", "pend", json!({"minAvailable": 1})),
    ];
    for p in &pdbs {
        let r = s
            .post(
                &format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"),
                p,
            )
            .await;
        assert_eq!(r.status, 201, "{}: pdb: {}", s.name, r.body);
    }
    // A pod no node can take stays Pending under a budget that allows nothing.
    let pending = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pend", "namespace": NS, "labels": {"app": "pend"}},
        "spec": {"nodeSelector": {"parity/nowhere": "true"},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
    let r = s
        .post(&format!("/api/v1/namespaces/{NS}/pods"), &pending)
        .await;
    assert_eq!(r.status, 201, "{}: pending pod: {}", s.name, r.body);
    let budgets = [
        ("web", "/status/currentHealthy", 2),
        ("duo-a", "/status/currentHealthy", 1),
        ("duo-b", "/status/currentHealthy", 1),
        ("pend", "/status/expectedPods", 1),
    ];
    for (name, field, pods) in budgets {
        s.wait_for(
            &format!("current status of PDB {name}"),
            &format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/{name}"),
            WAIT,
            |p| {
                p.pointer("/status/observedGeneration") == p.pointer("/metadata/generation")
                    && p.pointer(field) == Some(&json!(pods))
            },
        )
        .await;
    }
}

/// The first pod of `app` in `ns`: (name, uid).
pub async fn pod_of(s: &super::Server, ns: &str, app: &str) -> (String, String) {
    let r = s
        .get(&format!(
            "/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{app}"
        ))
        .await;
    let p = &r.body["items"][0]["metadata"];
    let name = p["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no pod of {app}: {}", s.name, r.body));
    (
        name.to_string(),
        p["uid"].as_str().unwrap_or("").to_string(),
    )
}

/// A response as compared: status code and body, with `subs` masked.
pub fn seen(r: &super::Resp, subs: &[(String, String)]) -> Value {
    let mut v = json!({"code": r.status, "body": r.body});
    replace_all(&mut v, subs);
    v
}

/// Masks the number in `text (N)` (the watch cache's oldest resourceVersion) and the line in
/// `scheme.go:N` (it moves between releases), and drops the fields no two servers share (uids,
/// resourceVersions, timestamps, managed fields).
pub fn mask_volatile(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let Some(i) = s.find("scheme.go:").map(|i| i + "scheme.go:".len()) {
                let n = s[i..].chars().take_while(char::is_ascii_digit).count();
                s.replace_range(i..i + n, "N");
            }
            if let Some(i) = s.rfind(" (")
                && s.ends_with(')')
                && s[i + 2..s.len() - 1].chars().all(|c| c.is_ascii_digit())
            {
                s.replace_range(i + 2..s.len() - 1, "N");
            }
        }
        Value::Array(a) => a.iter_mut().for_each(mask_volatile),
        Value::Object(m) => {
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "managedFields",
                "time",
            ] {
                m.remove(k);
            }
            m.values_mut().for_each(mask_volatile);
        }
        _ => {}
    }
}
