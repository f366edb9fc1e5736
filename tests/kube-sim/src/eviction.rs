//! `POST pods/<name>/eviction`, following k8s.io/kubernetes
//! `pkg/registry/core/pod/storage/eviction.go` (`EvictionREST.Create`) step by step.
use serde_json::{Value, json};

use crate::SimState;
use crate::admission::{self, Attrs};
use crate::auth::UserInfo;
use crate::clock::format_time;
use crate::error::{ApiError, ApiResult};
use crate::resources::by_gvr;
use crate::selectors::LabelSelector;
use crate::store::{DeleteOpts, UpdateMode, precondition_failure};

/// `MaxDisruptedPodSize` in eviction.go.
const MAX_DISRUPTED_PODS: usize = 2000;
/// Bounded stand-in for `EvictionsRetry` (20 steps) on PDB status conflicts.
const RETRIES: usize = 20;

/// One eviction the API accepted (2xx, not a dry run), in the order they were accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionRecord {
    pub namespace: String,
    pub name: String,
}

/// Every accepted eviction, so tests can tell a pod evicted twice (kube-apiserver keeps no such
/// list; an audit log would show the same requests).
#[derive(Default)]
pub struct EvictionLog(std::sync::Mutex<Vec<EvictionRecord>>);

impl EvictionLog {
    /// Notes an accepted eviction of `namespace/name`.
    pub fn record(&self, namespace: &str, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(EvictionRecord {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            });
    }

    /// The accepted evictions so far.
    pub fn all(&self) -> Vec<EvictionRecord> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The outcome: status code and body (a `metav1.Status`), plus webhook warnings.
pub struct Evicted {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `canIgnorePDB`: terminal, Pending or already terminating pods.
fn can_ignore_pdb(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending")
        || pod
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
}

/// `shouldEnforceResourceVersion`.
fn should_enforce_rv(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed")
        && pod
            .pointer("/metadata/deletionTimestamp")
            .is_none_or(Value::is_null)
}

/// `createTooManyRequestsError`: 429 with retryAfterSeconds 10.
fn still_processing(pdb_name: &str) -> ApiError {
    let mut e = ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        10,
    );
    if let Some(d) = e.details.as_mut() {
        d["causes"] = json!([{"reason": "DisruptionBudget",
            "message": format!("The disruption budget {pdb_name} is still being processed by the server.")}]);
    }
    e
}

fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

fn delete_opts(opts: &Value) -> DeleteOpts {
    DeleteOpts {
        grace_period_seconds: opts.get("gracePeriodSeconds").and_then(Value::as_i64),
        uid: opts
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        resource_version: opts
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run: crate::admission::str_list(opts.get("dryRun"))
            .iter()
            .any(|d| d == "All"),
        propagation: opts
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from),
    }
}

/// eviction.go `addConditionAndDeletePod`: unless dry-run, the pod first gets the
/// `DisruptionTarget` condition (reason `EvictionByEvictionAPI`, PodDisruptionConditions, GA in
/// 1.31), and a resourceVersion precondition moves to the version that update wrote; then the
/// delete.
fn add_condition_and_delete(
    st: &SimState,
    pods: &'static crate::resources::ResourceDef,
    namespace: &str,
    name: &str,
    mut opts: DeleteOpts,
) -> ApiResult<Value> {
    // The update re-reads the pod on a conflict, as `GuaranteedUpdate` does (bounded).
    for _ in 0..RETRIES {
        if opts.dry_run {
            break;
        }
        let Some(mut pod) = st.store.get(pods, namespace, name) else {
            break;
        };
        // `getLatestPod`: the preconditions hold against the latest pod before it is touched.
        if let Some(e) = precondition_failure(pods, &pod, &opts) {
            return Err(e);
        }
        let has = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("DisruptionTarget")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            });
        if !has {
            let cond = json!({"type": "DisruptionTarget", "status": "True",
                "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
                "lastTransitionTime": format_time(st.store.clock().now())});
            if let Some(status) = pod
                .as_object_mut()
                .map(|o| o.entry("status").or_insert_with(|| json!({})))
                && let Some(obj) = status.as_object_mut()
            {
                let conds = obj.entry("conditions").or_insert_with(|| json!([]));
                if let Some(list) = conds.as_array_mut() {
                    list.retain(|c| {
                        c.get("type").and_then(Value::as_str) != Some("DisruptionTarget")
                    });
                    list.push(cond);
                }
            }
            let updated = match st.store.update(pods, pod, UpdateMode::Status, false) {
                Ok(u) => u,
                Err(e) if e.reason == "Conflict" => continue,
                Err(e) => return Err(e),
            };
            if opts.resource_version.is_some() {
                opts.resource_version = updated
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(String::from);
            }
        }
        break;
    }
    st.store.delete(pods, namespace, name, &opts)
}

/// Handles one eviction. `query_dry_run` is the `?dryRun=All` query.
pub async fn evict(
    st: &SimState,
    namespace: &str,
    name: &str,
    body: Value,
    query_dry_run: bool,
    user: &UserInfo,
) -> ApiResult<Evicted> {
    let pods = by_gvr("", "v1", "pods").ok_or_else(|| ApiError::internal("no pods resource"))?;
    let pdbs = by_gvr("policy", "v1", "poddisruptionbudgets")
        .ok_or_else(|| ApiError::internal("no pdb resource"))?;
    // Both policy/v1 and policy/v1beta1 bodies are accepted (`AcceptsGroupVersion`).
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "Eviction" || !(av == "policy/v1" || av == "policy/v1beta1") {
        // The body decoder's words (`runtime.Scheme` has no such kind at that version).
        let version = av.rsplit('/').next().unwrap_or(av);
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a Eviction: no kind \"{kind}\" is registered for version \"{av}\" in scheme \"pkg/runtime/scheme.go:111\""
        )));
    }
    let mut eviction = body;
    eviction["apiVersion"] = json!("policy/v1");
    let body_name = eviction
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_name != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    // propagateDryRun.
    let query: Vec<String> = if query_dry_run {
        vec!["All".into()]
    } else {
        Vec::new()
    };
    let original: Value = match eviction
        .get("deleteOptions")
        .filter(|v| v.is_object())
        .cloned()
    {
        None => json!({"dryRun": query}),
        Some(mut d) => {
            let body_dry = crate::admission::str_list(d.get("dryRun"));
            if body_dry.is_empty() {
                // An empty list is left out, as Go's `omitempty` leaves it.
                if query.is_empty() {
                    if let Some(m) = d.as_object_mut() {
                        m.remove("dryRun");
                    }
                } else {
                    d["dryRun"] = json!(query);
                }
                eviction["deleteOptions"] = d.clone();
            } else if !query.is_empty() && query != body_dry {
                // A bare `fmt.Errorf` becomes a 500 without reason or details.
                return Err(ApiError::new(
                    500,
                    "",
                    format!(
                        "Non-matching dry-run options in request and content: [{}] and [{}]",
                        query.join(" "),
                        body_dry.join(" ")
                    ),
                ));
            }
            d
        }
    };
    let base = delete_opts(&original);
    let user_set_rv = base.resource_version.is_some();

    // Validating admission (webhooks) on the Eviction object.
    let warnings = admission::validate(
        st,
        &Attrs::eviction(pods, namespace, name, &eviction, query_dry_run, user),
    )
    .await?;
    let ok = |w: Vec<String>| Evicted {
        code: 201,
        body: success(),
        warnings: w,
    };

    // GET pod; pods that can ignore the PDB are deleted at once.
    let mut attempts = 0;
    let pod = loop {
        attempts += 1;
        let pod = st
            .store
            .get(pods, namespace, name)
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        if !can_ignore_pdb(&pod) {
            break pod;
        }
        let mut opts = base.clone();
        if should_enforce_rv(&pod) && !user_set_rv {
            opts.resource_version = pod
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from);
        }
        match add_condition_and_delete(st, pods, namespace, name, opts) {
            Ok(_) => return Ok(ok(warnings)),
            Err(e) if e.reason == "Conflict" && !user_set_rv && attempts < RETRIES => continue,
            Err(e) => return Err(e),
        }
    };

    // PDB checks.
    let labels = crate::selectors::labels_of(&pod);
    let matching: Vec<Value> = st
        .store
        .list(pdbs, Some(namespace))
        .0
        .into_iter()
        .filter(|p| {
            // A nil/empty or invalid selector matches nothing.
            p.pointer("/spec/selector")
                .and_then(LabelSelector::from_json)
                .is_some_and(|s| !s.is_empty() && s.matches(&labels))
        })
        .collect();
    if matching.len() > 1 {
        return Ok(Evicted {
            code: 500,
            body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                "code": 500}),
            warnings,
        });
    }
    let mut update_deletion_options = false;
    let mut pdb_name = String::new();
    if let Some(first) = matching.into_iter().next() {
        let pdb_ns = namespace.to_string();
        pdb_name = first
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let i = |p: &Value, ptr: &str| p.pointer(ptr).and_then(Value::as_i64).unwrap_or(0);
        if !pod_ready(&pod) {
            let policy = first
                .pointer("/spec/unhealthyPodEvictionPolicy")
                .and_then(Value::as_str);
            // AlwaysAllow, or IfHealthyBudget (the default) with enough healthy pods: delete
            // without touching the budget.
            update_deletion_options = policy == Some("AlwaysAllow")
                || (i(&first, "/status/currentHealthy") >= i(&first, "/status/desiredHealthy")
                    && i(&first, "/status/desiredHealthy") > 0);
        }
        if !update_deletion_options {
            // checkAndDecrement, retried on conflicts.
            let mut pdb = first;
            let mut tries = 0;
            loop {
                tries += 1;
                if i(&pdb, "/status/observedGeneration") < i(&pdb, "/metadata/generation") {
                    return Err(still_processing(&pdb_name));
                }
                let allowed = i(&pdb, "/status/disruptionsAllowed");
                if allowed < 0 {
                    return Err(ApiError::new(
                        403,
                        "Forbidden",
                        format!(
                            "poddisruptionbudget.policy \"{pdb_name}\" is forbidden: pdb disruptions allowed is negative"
                        ),
                    ));
                }
                let disrupted = pdb
                    .pointer("/status/disruptedPods")
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len());
                if disrupted > MAX_DISRUPTED_PODS {
                    return Err(ApiError::new(
                        403,
                        "Forbidden",
                        format!(
                            "poddisruptionbudget.policy \"{pdb_name}\" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller"
                        ),
                    ));
                }
                if allowed == 0 {
                    let mut e = ApiError::too_many_requests(
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        0,
                    );
                    e.details = Some(
                        json!({"causes": [{"reason": "DisruptionBudget", "message": format!(
                        "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                        i(&pdb, "/status/desiredHealthy"), i(&pdb, "/status/currentHealthy"))}]}),
                    );
                    return Err(e);
                }
                if base.dry_run {
                    break;
                }
                let now = format_time(st.store.clock().now());
                let mut new = pdb.clone();
                new["status"]["disruptionsAllowed"] = json!(allowed - 1);
                if allowed - 1 == 0 {
                    // pdbhelper.UpdateDisruptionAllowedCondition.
                    let cond = json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                        "message": "", "lastTransitionTime": now,
                        "observedGeneration": i(&pdb, "/metadata/generation")});
                    let mut conds: Vec<Value> = new
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    conds.retain(|c| {
                        c.get("type").and_then(Value::as_str) != Some("DisruptionAllowed")
                    });
                    conds.push(cond);
                    new["status"]["conditions"] = json!(conds);
                }
                if !new["status"]["disruptedPods"].is_object() {
                    new["status"]["disruptedPods"] = json!({});
                }
                new["status"]["disruptedPods"][name] = json!(now);
                match st.store.update(pdbs, new, UpdateMode::Status, false) {
                    Ok(_) => break,
                    Err(e) if e.reason == "Conflict" && tries < RETRIES => {
                        pdb = st.store.get(pdbs, &pdb_ns, &pdb_name).ok_or_else(|| {
                            ApiError::not_found("policy", "poddisruptionbudgets", &pdb_name)
                        })?;
                    }
                    Err(e) if e.reason == "Conflict" => {
                        return Err(ApiError::new(
                            504,
                            "Timeout",
                            format!(
                                "Timeout: couldn't update PodDisruptionBudget {pdb_name:?} due to conflicts"
                            ),
                        ));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }

    // The delete (no admission: `rest.ValidateAllObjectFunc`).
    let mut opts = base.clone();
    if update_deletion_options {
        opts.resource_version = pod
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from);
    }
    match add_condition_and_delete(st, pods, namespace, name, opts) {
        Ok(_) => Ok(ok(warnings)),
        Err(e) if e.reason == "Conflict" && update_deletion_options && !user_set_rv => {
            Err(still_processing(&pdb_name))
        }
        Err(e) => Err(e),
    }
}
