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

/// Whether the pod has condition `type_` with status True.
fn condition_true(pod: &Value, type_: &str) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(type_)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn pod_ready(pod: &Value) -> bool {
    condition_true(pod, "Ready")
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
        if !condition_true(&pod, "DisruptionTarget") {
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
                opts.resource_version = resource_version(&updated);
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
    let mut eviction = eviction_object(body, name)?;
    let original = propagate_dry_run(&mut eviction, query_dry_run)?;
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

    let Some(pod) = pod_under_budget(st, pods, namespace, name, &base)? else {
        return Ok(ok(warnings));
    };

    // PDB checks.
    let matching = matching_pdbs(st, pdbs, namespace, &pod);
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
        pdb_name = name_of(&first);
        update_deletion_options = !pod_ready(&pod) && unhealthy_pod_may_go(&first);
        if !update_deletion_options {
            check_and_decrement(st, pdbs, namespace, first, name, base.dry_run)?;
        }
    }

    // The delete (no admission: `rest.ValidateAllObjectFunc`).
    let mut opts = base.clone();
    if update_deletion_options {
        opts.resource_version = resource_version(&pod);
    }
    match add_condition_and_delete(st, pods, namespace, name, opts) {
        Ok(_) => Ok(ok(warnings)),
        Err(e) if e.reason == "Conflict" && update_deletion_options && !user_set_rv => {
            Err(still_processing(&pdb_name))
        }
        Err(e) => Err(e),
    }
}

/// The Eviction body as policy/v1, after checking its kind, version and name against the URL.
/// Both policy/v1 and policy/v1beta1 bodies are accepted (`AcceptsGroupVersion`).
fn eviction_object(body: Value, name: &str) -> ApiResult<Value> {
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
    Ok(eviction)
}

/// `propagateDryRun`: merges the query's dry-run into the body's `deleteOptions` (rewriting
/// `eviction` as the server stores it) and returns the delete options the eviction acts on.
fn propagate_dry_run(eviction: &mut Value, query_dry_run: bool) -> ApiResult<Value> {
    let query: Vec<String> = if query_dry_run {
        vec!["All".into()]
    } else {
        Vec::new()
    };
    let Some(mut d) = eviction
        .get("deleteOptions")
        .filter(|v| v.is_object())
        .cloned()
    else {
        return Ok(json!({"dryRun": query}));
    };
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
    Ok(d)
}

/// GETs the pod for the budget checks; a pod that can ignore its budget is deleted at once
/// instead (`None`), retried on conflicts unless the caller set a resourceVersion.
fn pod_under_budget(
    st: &SimState,
    pods: &'static crate::resources::ResourceDef,
    namespace: &str,
    name: &str,
    base: &DeleteOpts,
) -> ApiResult<Option<Value>> {
    let user_set_rv = base.resource_version.is_some();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let pod = st
            .store
            .get(pods, namespace, name)
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        if !can_ignore_pdb(&pod) {
            return Ok(Some(pod));
        }
        let mut opts = base.clone();
        if should_enforce_rv(&pod) && !user_set_rv {
            opts.resource_version = resource_version(&pod);
        }
        match add_condition_and_delete(st, pods, namespace, name, opts) {
            Ok(_) => return Ok(None),
            Err(e) if e.reason == "Conflict" && !user_set_rv && attempts < RETRIES => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The namespace's budgets whose selector matches the pod; a nil/empty or invalid selector
/// matches nothing.
fn matching_pdbs(
    st: &SimState,
    pdbs: &'static crate::resources::ResourceDef,
    namespace: &str,
    pod: &Value,
) -> Vec<Value> {
    let labels = crate::selectors::labels_of(pod);
    st.store
        .list(pdbs, Some(namespace))
        .0
        .into_iter()
        .filter(|p| {
            p.pointer("/spec/selector")
                .and_then(LabelSelector::from_json)
                .is_some_and(|s| !s.is_empty() && s.matches(&labels))
        })
        .collect()
}

/// Whether an unready pod may be deleted without touching its budget: `AlwaysAllow`, or
/// `IfHealthyBudget` (the default) with enough healthy pods.
fn unhealthy_pod_may_go(pdb: &Value) -> bool {
    let policy = pdb
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str);
    policy == Some("AlwaysAllow")
        || (int(pdb, "/status/currentHealthy") >= int(pdb, "/status/desiredHealthy")
            && int(pdb, "/status/desiredHealthy") > 0)
}

/// `checkAndDecrement`, retried on conflicts: refuses the eviction when the budget forbids it,
/// else (unless dry-run) takes one disruption from the budget's status and notes the pod.
fn check_and_decrement(
    st: &SimState,
    pdbs: &'static crate::resources::ResourceDef,
    namespace: &str,
    mut pdb: Value,
    pod_name: &str,
    dry_run: bool,
) -> ApiResult<()> {
    let pdb_name = name_of(&pdb);
    let mut tries = 0;
    loop {
        tries += 1;
        let allowed = disruptions_allowed(&pdb, &pdb_name)?;
        if dry_run {
            return Ok(());
        }
        let now = format_time(st.store.clock().now());
        let new = decremented(&pdb, allowed, pod_name, &now);
        match st.store.update(pdbs, new, UpdateMode::Status, false) {
            Ok(_) => return Ok(()),
            Err(e) if e.reason == "Conflict" && tries < RETRIES => {
                pdb = st.store.get(pdbs, namespace, &pdb_name).ok_or_else(|| {
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

/// The budget's `disruptionsAllowed` when it lets one more pod go; the refusal otherwise (status
/// not yet observed, a negative count, too many unconfirmed evictions, or none left).
fn disruptions_allowed(pdb: &Value, pdb_name: &str) -> ApiResult<i64> {
    if int(pdb, "/status/observedGeneration") < int(pdb, "/metadata/generation") {
        return Err(still_processing(pdb_name));
    }
    let allowed = int(pdb, "/status/disruptionsAllowed");
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
            int(pdb, "/status/desiredHealthy"), int(pdb, "/status/currentHealthy"))}]}),
        );
        return Err(e);
    }
    Ok(allowed)
}

/// The budget with one disruption taken (and, at zero left, the `DisruptionAllowed=False`
/// condition of `pdbhelper.UpdateDisruptionAllowedCondition`) and `pod_name` in `disruptedPods`.
fn decremented(pdb: &Value, allowed: i64, pod_name: &str, now: &str) -> Value {
    let mut new = pdb.clone();
    new["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        let cond = json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
            "message": "", "lastTransitionTime": now,
            "observedGeneration": int(pdb, "/metadata/generation")});
        let mut conds: Vec<Value> = new
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        conds.retain(|c| c.get("type").and_then(Value::as_str) != Some("DisruptionAllowed"));
        conds.push(cond);
        new["status"]["conditions"] = json!(conds);
    }
    if !new["status"]["disruptedPods"].is_object() {
        new["status"]["disruptedPods"] = json!({});
    }
    new["status"]["disruptedPods"][pod_name] = json!(now);
    new
}

/// The integer at `ptr`, 0 when absent.
fn int(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn resource_version(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(String::from)
}
