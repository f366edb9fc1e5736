//! kube-sim against the real API server (`tests/control-plane/up`, 1.37 or 1.34 by
//! `K8S_VERSION`): the requests this project sends — evictions under PDBs, of missing pods, with
//! preconditions and dry runs, Lease writes, the guard's patches, streaming lists, a compacted
//! watch, TokenReviews — go to both, and their status codes, Status bodies and the fields the
//! project reads must agree once what legitimately differs (names, uids, resourceVersions,
//! timestamps) is masked. The AdmissionReview each server sends a webhook for `pods/eviction`
//! is recorded and compared too. Every probe's answer from both servers is printed on failure.

mod real_common;
mod real_sim_common;

use std::time::Duration;

use real_sim_common::workload::{
    NS, REVIEW_NS, WAIT, evict_path, eviction, mask_volatile, pod_of, seen, set_up,
};
use real_sim_common::{ReviewRecorder, Server, pick, replace_all, start_sim};
use serde_json::{Value, json};

/// The answers of one server, by probe name.
type Answers = Vec<(&'static str, Value)>;

/// One eviction request: probe name, namespace, pod (`web`, `duo`, `solo` stand for their
/// pods), name in the body, body apiVersion, deleteOptions, query.
type EvictionCase = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<Value>,
    &'static str,
);

#[rustfmt::skip]
fn eviction_cases() -> Vec<EvictionCase> {
    let v1 = "policy/v1";
    let uid = json!({"preconditions": {"uid": "other"}});
    let rv = json!({"preconditions": {"resourceVersion": "1"}});
    vec![
        ("eviction blocked by a PDB", NS, "web", "web", v1, None, ""),
        ("eviction under two PDBs", NS, "duo", "duo", v1, None, ""),
        ("eviction of a missing pod", NS, "nope", "nope", v1, None, ""),
        ("eviction in a missing namespace", "parity-gone", "x", "x", v1, None, ""),
        ("eviction whose name differs", NS, "solo", "other", v1, None, ""),
        ("eviction as policy/v2", NS, "solo", "solo", "policy/v2", None, ""),
        ("eviction with a stale uid", NS, "solo", "solo", v1, Some(uid), ""),
        ("eviction with a stale resourceVersion", NS, "solo", "solo", v1, Some(rv), ""),
        ("eviction with non-matching dry runs", NS, "solo", "solo", v1,
            Some(json!({"dryRun": ["x"]})), "?dryRun=All"),
        ("eviction dry run (query)", NS, "solo", "solo", v1, None, "?dryRun=All"),
        ("eviction dry run (body)", NS, "solo", "solo", v1, Some(json!({"dryRun": ["All"]})), ""),
        ("eviction of a Pending pod under a blocking PDB", NS, "pend", "pend", v1, None, ""),
    ]
}

async fn eviction_probes(s: &Server, out: &mut Answers) {
    let mut pods = Vec::new();
    for app in ["web", "duo", "solo"] {
        pods.push((app, pod_of(s, NS, app).await));
    }
    let real_name = |key: &str| {
        pods.iter()
            .find(|(app, _)| *app == key)
            .map_or(key.to_string(), |(_, (name, _))| name.clone())
    };
    let solo = real_name("solo");
    let pod_path = format!("/api/v1/namespaces/{NS}/pods/{solo}");
    let solo_rv = s.get(&pod_path).await.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut subs = vec![(
        format!("in record ({solo_rv})"),
        "in record (<rv>)".to_string(),
    )];
    for (app, (name, uid)) in &pods {
        subs.push((uid.clone(), "<uid>".to_string()));
        subs.push((name.clone(), format!("<{app}>")));
    }
    for (probe, ns, pod, body_name, api_version, options, query) in eviction_cases() {
        let body = eviction(ns, &real_name(body_name), api_version, options);
        let r = s
            .post(
                &format!("{}{query}", evict_path(ns, &real_name(pod))),
                &body,
            )
            .await;
        let mut v = seen(&r, &subs);
        mask_volatile(&mut v);
        out.push((probe, v));
    }
    let pending = s.get(&format!("/api/v1/namespaces/{NS}/pods/pend")).await;
    out.push((
        "pending pod after its eviction",
        json!({"code": pending.status}),
    ));
    // After all of the above the pod is untouched: no DisruptionTarget condition, not deleted.
    let pod = s.get(&pod_path).await;
    let conditions = condition_list(&pod.body, false);
    out.push((
        "pod after refused and dry-run evictions",
        json!({"code": pod.status, "deleting": pod.body["metadata"].get("deletionTimestamp").is_some(),
            "disruptionTarget": conditions.iter().any(|c| c.starts_with("DisruptionTarget="))}),
    ));
}

async fn lease_probes(s: &Server, out: &mut Answers) {
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases");
    let lease = |name: &str, rv: Option<&str>| {
        let mut l = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"holderIdentity": "parity", "leaseDurationSeconds": 15}});
        if let Some(v) = rv {
            l["metadata"]["resourceVersion"] = json!(v);
        }
        l
    };
    let created = s.post(&leases, &lease("l", None)).await;
    let uid = created.body["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let subs = vec![(uid, "<uid>".to_string())];
    let stale_uid = json!({"preconditions": {"uid": "x"}});
    let cases = [
        ("lease create", created.clone()),
        (
            "lease create again",
            s.post(&leases, &lease("l", None)).await,
        ),
        (
            "lease update with a stale resourceVersion",
            s.send("PUT", &format!("{leases}/l"), Some(&lease("l", Some("1"))))
                .await,
        ),
        (
            "lease update of a missing lease",
            s.send("PUT", &format!("{leases}/m"), Some(&lease("m", Some("1"))))
                .await,
        ),
        (
            "lease delete with a stale uid",
            s.send("DELETE", &format!("{leases}/l"), Some(&stale_uid))
                .await,
        ),
    ];
    for (name, r) in &cases {
        let mut v = seen(r, &subs);
        if r.status == 201 {
            v["body"] = pick(
                &r.body,
                &["/kind", "/metadata/name", "/spec/holderIdentity"],
            );
        }
        mask_volatile(&mut v);
        out.push((name, v));
    }
}

/// The guard's JSON patch (a `test` of the resourceVersion first), an annotation merge patch and
/// `kubectl rollout restart`'s strategic merge patch of `restartedAt`.
async fn patch_probes(s: &Server, out: &mut Answers) {
    let dep = format!("/apis/apps/v1/namespaces/{NS}/deployments/roll");
    let generation = |v: &Value| {
        v.pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let gen0 = generation(&s.get(&dep).await.body);
    let json_patch = "application/json-patch+json";
    let stale = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/annotations", "value": {}}]);
    let r = s.send_ct("PATCH", &dep, json_patch, Some(&stale)).await;
    out.push(("json patch whose test fails", seen(&r, &[])));
    let missing = format!("/apis/apps/v1/namespaces/{NS}/deployments/nope");
    let r = s.send_ct("PATCH", &missing, json_patch, Some(&stale)).await;
    out.push(("json patch of a missing deployment", seen(&r, &[])));
    let annotate = json!({"metadata": {"annotations": {"parity/x": "1"}}});
    let r = s
        .send_ct(
            "PATCH",
            &dep,
            "application/merge-patch+json",
            Some(&annotate),
        )
        .await;
    let restart = json!({"spec": {"template": {"metadata": {"annotations":
        {"kubectl.kubernetes.io/restartedAt": "2030-01-01T00:00:00Z"}}}}});
    let smp = "application/strategic-merge-patch+json";
    let r2 = s.send_ct("PATCH", &dep, smp, Some(&restart)).await;
    let (gen1, gen2) = (generation(&r.body), generation(&r2.body));
    let at = "/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt";
    out.push((
        "deployment annotation merge patch, then restartedAt strategic merge patch",
        json!({"codes": [r.status, r2.status], "generation steps": [gen1 - gen0, gen2 - gen1],
            "restartedAt": r2.body.pointer(at)}),
    ));
}

async fn watch_probes(s: &Server, out: &mut Answers) {
    let pods = format!("/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dweb&watch=true");
    let end = |e: &Value| e["type"] == "BOOKMARK";
    let (code, events) = s
        .watch(&format!("{pods}&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"), 10, Duration::from_secs(10), end)
        .await;
    let types: Vec<&Value> = events.iter().map(|e| &e["type"]).collect();
    let last = events.last().map(|e| {
        pick(
            e,
            &[
                "/object/kind",
                "/object/apiVersion",
                "/object/metadata/annotations",
            ],
        )
    });
    out.push((
        "streaming list",
        json!({"code": code, "types": types, "end": last}),
    ));
    let (code, events) = s
        .watch(
            &format!("{pods}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
            10,
            Duration::from_secs(3),
            end,
        )
        .await;
    let types: Vec<&Value> = events.iter().map(|e| &e["type"]).collect();
    out.push((
        "streaming list without bookmarks",
        json!({"code": code, "types": types}),
    ));
    for (name, path) in [
        (
            "list with sendInitialEvents",
            "/api/v1/pods?sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        ),
        (
            "watch with sendInitialEvents, no resourceVersionMatch",
            "/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
        ),
        (
            "watch with resourceVersionMatch, no sendInitialEvents",
            "/api/v1/pods?watch=true&resourceVersionMatch=NotOlderThan",
        ),
    ] {
        let r = s.get(path).await;
        out.push((name, seen(&r, &[])));
    }
    let r = s
        .get(&format!("/api/v1/namespaces/{NS}/pods?limit=1"))
        .await;
    let item = &r.body["items"][0];
    out.push((
        "paged list",
        json!({"code": r.status, "kind": r.body["kind"], "continues": r.body["metadata"]["continue"].is_string(),
            "item kind": item.get("kind"), "item apiVersion": item.get("apiVersion")}),
    ));
}

/// Bookmarks of a watch from the current resourceVersion that times out after 6 s: none while
/// no pod changes anywhere, one (about 2 s before the deadline) once a pod elsewhere changed.
async fn bookmark_probe(s: &Server, out: &mut Answers) {
    let list = s.get(&format!("/api/v1/namespaces/{NS}/pods")).await.body;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let path = format!(
        "/api/v1/namespaces/{NS}/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=6&resourceVersion={rv}"
    );
    let types = |events: &[Value]| {
        let mut t: Vec<Value> = events.iter().map(|e| e["type"].clone()).collect();
        t.dedup();
        t
    };
    let (_, quiet) = s.watch(&path, 10, Duration::from_secs(12), |_| false).await;
    let elsewhere = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "elsewhere", "namespace": REVIEW_NS},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
    let pods = format!("/api/v1/namespaces/{REVIEW_NS}/pods");
    let (watched, created) = tokio::join!(
        s.watch(&path, 10, Duration::from_secs(12), |_| false),
        async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            s.post(&pods, &elsewhere).await.status
        }
    );
    out.push((
        "bookmarks of a 6 s watch, quiet and with a change elsewhere",
        json!({"quiet": types(&quiet), "created": created, "changed": types(&watched.1)}),
    ));
}

/// A watch from a resourceVersion the server no longer has. kube-apiserver's watch cache of a
/// resource starts when the resource is served, so a CustomResource's watch from version 1 is too
/// old; kube-sim gets there by dropping its watch history.
async fn gone_probe(s: &Server, sim: Option<&kube_sim::SimHandle>, out: &mut Answers) {
    let path = match sim {
        Some(h) => {
            h.compact_watch_history();
            "/api/v1/nodes?watch=true&resourceVersion=1".to_string()
        }
        None => {
            let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.parity.example.com"},
                "spec": {"group": "parity.example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
            let r = s
                .post(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    &crd,
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.body);
            s.wait_for(
                "the Widget resource",
                "/apis/parity.example.com/v1/widgets",
                WAIT,
                |_| true,
            )
            .await;
            "/apis/parity.example.com/v1/widgets?watch=true&resourceVersion=1".to_string()
        }
    };
    let (code, mut events) = s.watch(&path, 1, Duration::from_secs(10), |_| true).await;
    events.iter_mut().for_each(mask_volatile);
    out.push((
        "watch from a compacted resourceVersion",
        json!({"code": code, "events": events}),
    ));
}

/// What the project reads of a pod the ReplicaSet controller created (its defaults and
/// admission) — fields a kubelet writes are left to the kubelets (kwok, kube-sim's own).
const POD_FIELDS: [&str; 22] = [
    "/metadata/ownerReferences/0/apiVersion",
    "/metadata/ownerReferences/0/kind",
    "/metadata/ownerReferences/0/controller",
    "/metadata/ownerReferences/0/blockOwnerDeletion",
    "/spec/priority",
    "/spec/preemptionPolicy",
    "/spec/serviceAccountName",
    "/spec/serviceAccount",
    "/spec/enableServiceLinks",
    "/spec/tolerations",
    "/spec/schedulerName",
    "/spec/restartPolicy",
    "/spec/dnsPolicy",
    "/spec/terminationGracePeriodSeconds",
    "/spec/securityContext",
    "/spec/containers/0/imagePullPolicy",
    "/spec/containers/0/terminationMessagePath",
    "/spec/containers/0/terminationMessagePolicy",
    "/status/phase",
    "/status/qosClass",
    "/status/containerStatuses/0/ready",
    "/status/containerStatuses/0/restartCount",
];

const DEPLOYMENT_FIELDS: [&str; 13] = [
    "/metadata/generation",
    "/spec/replicas",
    "/spec/strategy",
    "/spec/revisionHistoryLimit",
    "/spec/progressDeadlineSeconds",
    "/spec/template/spec/schedulerName",
    "/spec/template/spec/restartPolicy",
    "/status/observedGeneration",
    "/status/replicas",
    "/status/readyReplicas",
    "/status/availableReplicas",
    "/status/updatedReplicas",
    "/status/unavailableReplicas",
];

const PDB_FIELDS: [&str; 8] = [
    "/status/disruptionsAllowed",
    "/status/currentHealthy",
    "/status/desiredHealthy",
    "/status/expectedPods",
    "/status/conditions/0/type",
    "/status/conditions/0/status",
    "/status/conditions/0/reason",
    "/status/conditions/0/message",
];

/// `type=status` (and ` reason`) of each of `obj`'s conditions, sorted.
fn condition_list(obj: &Value, with_reason: bool) -> Vec<String> {
    let mut list: Vec<String> = obj["status"]["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let text = |k: &str| c[k].as_str().unwrap_or("").to_string();
                    let mut t = format!("{}={}", text("type"), text("status"));
                    if with_reason {
                        t = format!("{t} {}", text("reason"));
                    }
                    t
                })
                .collect()
        })
        .unwrap_or_default();
    list.sort();
    list
}

/// The `fields` of the object at `path`, and its conditions ([`condition_list`], with reasons
/// when `reasons`).
async fn fields_with_conditions(s: &Server, path: &str, fields: &[&str], reasons: bool) -> Value {
    let object = s.get(path).await.body;
    let mut picked = pick(&object, fields);
    picked["conditions"] = json!(condition_list(&object, reasons));
    picked
}

async fn defaults_probe(s: &Server, out: &mut Answers) {
    let (solo, _) = pod_of(s, NS, "solo").await;
    let pod_path = format!("/api/v1/namespaces/{NS}/pods/{solo}");
    let fields = fields_with_conditions(s, &pod_path, &POD_FIELDS, false).await;
    out.push(("pod created by the ReplicaSet controller", fields));
    let dep_path = format!("/apis/apps/v1/namespaces/{NS}/deployments/solo");
    let fields = fields_with_conditions(s, &dep_path, &DEPLOYMENT_FIELDS, true).await;
    out.push(("deployment", fields));
    let path = format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web");
    let pdb = s.get(&path).await.body;
    let mut fields = pick(&pdb, &PDB_FIELDS);
    fields["observed"] =
        json!(pdb.pointer("/status/observedGeneration") == pdb.pointer("/metadata/generation"));
    out.push(("pod disruption budget", fields));
}

async fn auth_probe(s: &Server, out: &mut Answers) {
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let review = |t: &str| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": t}});
    let r = s.post(path, &review("garbage")).await;
    out.push((
        "token review of a bad token",
        json!({"code": r.status, "status": r.body["status"]}),
    ));
    let r = s.post(path, &review("")).await;
    out.push(("token review without a token", seen(&r, &[])));
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "system:serviceaccount:parity:nobody", "groups": ["system:serviceaccounts"],
            "resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction", "namespace": NS}}});
    let r = s
        .post("/apis/authorization.k8s.io/v1/subjectaccessreviews", &sar)
        .await;
    out.push((
        "subject access review denied",
        json!({"code": r.status, "status": r.body["status"]}),
    ));
}

/// A recorded AdmissionReview as compared: without its uid, with `subs` masked and only the
/// keys of `userInfo` but `extra`. Who asked differs (kube-sim's admin token, the real
/// cluster-admin certificate, whose credential id kube-apiserver puts in `extra`; kube-sim's
/// users are static-token users, who have none).
fn normalized_review(review: Option<&Value>, subs: &[(String, String)]) -> Value {
    let mut v = review.cloned().unwrap_or(Value::Null);
    if let Some(req) = v.get_mut("request").and_then(Value::as_object_mut) {
        req.remove("uid");
        let keys: Vec<String> = req
            .get("userInfo")
            .and_then(Value::as_object)
            .map(|u| u.keys().filter(|k| *k != "extra").cloned().collect())
            .unwrap_or_default();
        req.insert("userInfo".into(), json!(keys));
    }
    replace_all(&mut v, subs);
    mask_volatile(&mut v);
    v
}

/// Registers a webhook for `CREATE pods/eviction` in [`REVIEW_NS`] on `s`, sends a dry-run
/// eviction with delete options and a policy/v1beta1 one, and returns the two reviews.
async fn admission_probe(s: &Server, out: &mut Answers) {
    let rec = ReviewRecorder::start().await;
    // k8s-openapi's ByteString serializes as base64, as caBundle wants.
    let ca_bundle = serde_json::to_value(k8s_openapi::ByteString(rec.ca_pem.clone().into_bytes()))
        .unwrap_or(Value::Null);
    let vwc = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "parity-review"},
        "webhooks": [{"name": "review.parity.example.com", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"url": rec.url, "caBundle": ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/eviction"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": REVIEW_NS}}}]});
    let r = s
        .post(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            &vwc,
        )
        .await;
    assert_eq!(r.status, 201, "{}: {}", s.name, r.body);
    let (pod, uid) = pod_of(s, REVIEW_NS, "rev").await;
    let dry = eviction(
        REVIEW_NS,
        &pod,
        "policy/v1",
        Some(json!({"gracePeriodSeconds": 5, "preconditions": {"uid": "u"}})),
    );
    let path = evict_path(REVIEW_NS, &pod);
    // kube-apiserver picks a new webhook configuration up within a second or so.
    let start = std::time::Instant::now();
    while rec.reviews().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}: the webhook was never called",
            s.name
        );
        s.post(&format!("{path}?dryRun=All"), &dry).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let first = rec.reviews().len();
    let old = eviction(
        REVIEW_NS,
        &pod,
        "policy/v1beta1",
        Some(json!({"preconditions": {"uid": "u"}})),
    );
    let r = s.post(&path, &old).await;
    let reviews = rec.reviews();
    rec.stop().await;
    s.send(
        "DELETE",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/parity-review",
        None,
    )
    .await;
    let subs = vec![
        (pod.clone(), "<pod>".to_string()),
        (uid, "<uid>".to_string()),
    ];
    for (name, review) in [
        ("review of a dry-run eviction", reviews.first()),
        ("review of a policy/v1beta1 eviction", reviews.get(first)),
    ] {
        out.push((name, normalized_review(review, &subs)));
    }
    out.push((
        "eviction with a stale uid behind a webhook",
        json!({"code": r.status, "reason": r.body["reason"]}),
    ));
}

/// Every probe on `s`.
async fn answers(s: &Server, sim: Option<&kube_sim::SimHandle>) -> Answers {
    set_up(s).await;
    let mut out = Answers::new();
    eviction_probes(s, &mut out).await;
    lease_probes(s, &mut out).await;
    watch_probes(s, &mut out).await;
    bookmark_probe(s, &mut out).await;
    patch_probes(s, &mut out).await;
    defaults_probe(s, &mut out).await;
    auth_probe(s, &mut out).await;
    admission_probe(s, &mut out).await;
    gone_probe(s, sim, &mut out).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_sim_answers_as_the_real_api_server() {
    let cluster = tokio::task::spawn_blocking(real_common::shared)
        .await
        .expect("control plane");
    let real = Server::new("real", &cluster.kubeconfig).await;
    let sim = start_sim().await;
    let simulated = Server::new("kube-sim", sim.kubeconfig_path()).await;
    let (want, got) = tokio::join!(answers(&real, None), answers(&simulated, Some(&sim)));
    let mut differences = Vec::new();
    for ((name, w), (_, g)) in want.iter().zip(&got) {
        if w != g {
            differences.push(format!("{name}:\n  real:     {w}\n  kube-sim: {g}"));
        }
    }
    sim.shutdown().await;
    assert_eq!(want.len(), got.len());
    assert!(
        differences.is_empty(),
        "kube-sim differs from kube-apiserver {} in {} of {} probes:\n{}",
        cluster.version,
        differences.len(),
        want.len(),
        differences.join("\n")
    );
}
