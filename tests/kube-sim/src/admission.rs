//! Validating admission webhooks, dispatched from stored ValidatingWebhookConfigurations the
//! way k8s.io/apiserver `pkg/admission/plugin/webhook` (generic + validating) does.
use base64::Engine;
use serde_json::{Value, json};
use std::time::Duration;

use crate::SimState;
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::resources::{ResourceDef, by_gvr};
use crate::selectors::{LabelSelector, labels_of};

/// Admission attributes of one request.
pub struct Attrs<'a> {
    /// The main resource (`pods` for `pods/eviction`).
    pub def: &'static ResourceDef,
    pub subresource: &'a str,
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub operation: &'static str,
    /// Kind of `object`: (group, version, kind).
    pub kind: (&'a str, &'a str, &'a str),
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
    /// Only the `?dryRun=All` query (`admission.Attributes.IsDryRun`).
    pub dry_run: bool,
    /// `CreateOptions` / `UpdateOptions` / `DeleteOptions`.
    pub options: Value,
    pub user: &'a UserInfo,
}

impl<'a> Attrs<'a> {
    /// The attributes of a `policy/v1` Eviction `eviction` of pod `namespace/name` (`pods`: the
    /// pods resource; `dry_run`: the `?dryRun=All` query).
    pub fn eviction(
        pods: &'static ResourceDef,
        namespace: &'a str,
        name: &'a str,
        eviction: &'a Value,
        dry_run: bool,
        user: &'a UserInfo,
    ) -> Self {
        let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"});
        if dry_run {
            options["dryRun"] = json!(["All"]);
        }
        Attrs {
            def: pods,
            subresource: "eviction",
            operation: "CREATE",
            kind: ("policy", "v1", "Eviction"),
            namespace,
            name,
            object: Some(eviction),
            old_object: None,
            dry_run,
            options,
            user,
        }
    }
}

/// The strings of a JSON array (none when absent or not an array; non-strings skipped).
pub(crate) fn str_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

/// `rules.Matcher` (`predicates/rules/rules.go`): operations, apiGroups, apiVersions,
/// resources (`res/sub` with `*` on either side; a bare `res` matches no subresource) and scope.
fn rule_matches(rule: &Value, a: &Attrs) -> bool {
    let ops = str_list(rule.get("operations"));
    let groups = str_list(rule.get("apiGroups"));
    let versions = str_list(rule.get("apiVersions"));
    let resources = str_list(rule.get("resources"));
    let scope = rule.get("scope").and_then(Value::as_str).unwrap_or("*");
    let scope_ok = match scope {
        "Cluster" => a.namespace.is_empty(),
        "Namespaced" => !a.namespace.is_empty(),
        _ => true,
    };
    let res_ok = resources.iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
        (res == "*" || res == a.def.resource) && (sub == "*" || sub == a.subresource)
    });
    has(&ops, a.operation)
        && has(&groups, a.def.group)
        && has(&versions, a.def.version)
        && res_ok
        && scope_ok
}

/// Whether a webhook applies: rules, then namespaceSelector (against the namespace's labels),
/// then objectSelector (against `object` or `oldObject` labels — for `pods/eviction` that is
/// the Eviction object, not the pod, exactly as kube-apiserver does).
fn webhook_matches(st: &SimState, wh: &Value, a: &Attrs) -> bool {
    let rules = wh
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !rules.iter().any(|r| rule_matches(r, a)) {
        return false;
    }
    if let Some(sel) = wh.get("namespaceSelector") {
        let Some(sel) = LabelSelector::from_json(sel) else {
            return false;
        };
        if !sel.is_empty() {
            let labels = if a.def.is("", "namespaces") {
                a.object.or(a.old_object).map(labels_of).unwrap_or_default()
            } else if a.namespace.is_empty() {
                // Cluster-scoped objects are not subject to namespaceSelector.
                return objsel_matches(wh, a);
            } else {
                match by_gvr("", "v1", "namespaces").and_then(|d| st.store.get(d, "", a.namespace))
                {
                    Some(ns) => labels_of(&ns),
                    None => [(
                        "kubernetes.io/metadata.name".to_string(),
                        a.namespace.to_string(),
                    )]
                    .into(),
                }
            };
            if !sel.matches(&labels) {
                return false;
            }
        }
    }
    objsel_matches(wh, a)
}

fn objsel_matches(wh: &Value, a: &Attrs) -> bool {
    let Some(sel) = wh.get("objectSelector") else {
        return true;
    };
    let Some(sel) = LabelSelector::from_json(sel) else {
        return false;
    };
    sel.is_empty()
        || [a.object, a.old_object]
            .into_iter()
            .flatten()
            .any(|o| sel.matches(&labels_of(o)))
}

/// Runs every matching validating webhook (in configuration-name order; kube-apiserver runs
/// them in parallel, which only changes which denial wins). Returns the warnings.
pub async fn validate(st: &SimState, a: &Attrs<'_>) -> Result<Vec<String>, ApiError> {
    let Some(def) = by_gvr(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
    ) else {
        return Ok(Vec::new());
    };
    let (configs, _) = st.store.list(def, None);
    let mut warnings = Vec::new();
    for cfg in configs {
        let hooks = cfg
            .get("webhooks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for wh in hooks {
            if !webhook_matches(st, &wh, a) {
                continue;
            }
            let name = wh
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let side = wh
                .get("sideEffects")
                .and_then(Value::as_str)
                .unwrap_or("Unknown");
            // generic/webhook.go: dry-run requests to webhooks with side effects fail with 400.
            if a.dry_run && side != "None" && side != "NoneOnDryRun" {
                return Err(ApiError::bad_request(format!(
                    "admission webhook {name:?} does not support dry run"
                )));
            }
            let ignore = wh.get("failurePolicy").and_then(Value::as_str) == Some("Ignore");
            match call(st, &wh, a).await {
                Ok(resp) => {
                    warnings.extend(str_list(resp.get("warnings")));
                    if resp.get("allowed").and_then(Value::as_bool) != Some(true) {
                        return Err(denial(&name, resp.get("status")));
                    }
                }
                Err(msg) => {
                    if ignore {
                        tracing::warn!(
                            "failed calling webhook {name:?}: {msg}; failurePolicy=Ignore"
                        );
                        continue;
                    }
                    // validating/dispatcher.go: ErrCallingWebhook → apierrors.NewInternalError.
                    return Err(ApiError::internal(format!(
                        "failed calling webhook {name:?}: {msg}"
                    )));
                }
            }
        }
    }
    Ok(warnings)
}

/// `webhookerrors.ToStatusErr`: codes < 400 become 400, status forced to Failure, message
/// prefixed; reason and details pass through.
fn denial(name: &str, status: Option<&Value>) -> ApiError {
    let status = status.cloned().unwrap_or_else(|| json!({}));
    let code = status.get("code").and_then(Value::as_u64).unwrap_or(0);
    let code = if code < 400 {
        400
    } else {
        code.min(599) as u16
    };
    let reason = status
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let msg = status.get("message").and_then(Value::as_str).unwrap_or("");
    let denied = format!("admission webhook {name:?} denied the request");
    let message = if !msg.is_empty() {
        format!("{denied}: {msg}")
    } else if !reason.is_empty() {
        format!("{denied}: {reason}")
    } else {
        format!("{denied} without explanation")
    };
    ApiError {
        code,
        reason,
        message,
        details: status.get("details").cloned(),
    }
}

/// The `admission.k8s.io/v1` AdmissionReview this stand-in sends a webhook for a `policy/v1`
/// Eviction of pod `namespace/name` with a UID precondition (no query dry-run), as `user` — the
/// same request the eviction path builds, for tests and benchmarks that call a webhook directly.
pub fn eviction_review(
    review_uid: &str,
    namespace: &str,
    name: &str,
    pod_uid: &str,
    user: &UserInfo,
) -> Value {
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": pod_uid}}});
    let pods = by_gvr("", "v1", "pods").expect("pods are a built-in resource");
    let attrs = Attrs::eviction(pods, namespace, name, &eviction, false, user);
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": review_request(&attrs, review_uid)})
}

fn review_request(a: &Attrs, uid: &str) -> Value {
    let (kg, kv, kk) = a.kind;
    let kind = json!({"group": kg, "version": kv, "kind": kk});
    let resource =
        json!({"group": a.def.group, "version": a.def.version, "resource": a.def.resource});
    let mut req = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": a.name,
        "operation": a.operation,
        "userInfo": a.user.to_json(),
        "object": a.object.cloned().unwrap_or(Value::Null),
        "oldObject": a.old_object.cloned().unwrap_or(Value::Null),
        "dryRun": a.dry_run,
        "options": a.options,
    });
    if !a.subresource.is_empty() {
        req["subResource"] = json!(a.subresource);
        req["requestSubResource"] = json!(a.subresource);
    }
    if !a.namespace.is_empty() {
        req["namespace"] = json!(a.namespace);
    }
    req
}

/// Adds the client certificate the webhook kubeconfig gives `target`, if any.
fn with_client_cert(
    builder: reqwest::ClientBuilder,
    st: &SimState,
    target: &str,
) -> Result<reqwest::ClientBuilder, String> {
    match st.webhook_auth.for_target(target) {
        Some(cert) => Ok(builder.identity(cert.identity()?)),
        None => Ok(builder),
    }
}

/// One HTTPS call. `Err` is a call failure (subject to failurePolicy); `Ok` is the
/// validated `response` object.
async fn call(st: &SimState, wh: &Value, a: &Attrs<'_>) -> Result<Value, String> {
    let api_version = review_version(wh)?;
    let (client, url) = webhook_client(st, wh)?;
    let uid = st.store.new_uid();
    let body = json!({"apiVersion": api_version, "kind": "AdmissionReview", "request": review_request(a, &uid)});
    let resp = client.post(&url).json(&body).send().await.map_err(|e| {
        if e.is_timeout() {
            format!("failed to call webhook: Post \"{url}\": context deadline exceeded")
        } else {
            format!("failed to call webhook: Post \"{url}\": {e}")
        }
    })?;
    let status = resp.status();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| format!("failed to call webhook: reading response: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "failed to call webhook: the server responded with the status code {}",
            status.as_u16()
        ));
    }
    let review: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("received invalid webhook response: {e}"))?;
    verified_response(&review, api_version, &uid)
}

/// The AdmissionReview version to send: v1 when the webhook accepts it, else v1beta1.
fn review_version(wh: &Value) -> Result<&'static str, String> {
    let versions = str_list(wh.get("admissionReviewVersions"));
    if versions.iter().any(|v| v == "v1") {
        Ok("admission.k8s.io/v1")
    } else if versions.iter().any(|v| v == "v1beta1") {
        Ok("admission.k8s.io/v1beta1")
    } else {
        Err(format!(
            "webhook does not accept known AdmissionReview versions: {versions:?}"
        ))
    }
}

/// The HTTPS client for a webhook (its timeout, CA bundle and client certificate) and the URL
/// to post to.
fn webhook_client(st: &SimState, wh: &Value) -> Result<(reqwest::Client, String), String> {
    let timeout = wh
        .get("timeoutSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(10)
        .clamp(1, 30);
    let cc = wh.get("clientConfig").cloned().unwrap_or_else(|| json!({}));
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(timeout));
    if let Some(b64) = cc.get("caBundle").and_then(Value::as_str) {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| format!("invalid caBundle: {e}"))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("invalid caBundle: {e}"))?;
        for c in certs {
            builder = builder.add_root_certificate(c);
        }
    }
    let (builder, url) = endpoint(builder, st, &cc)?;
    let client = builder
        .build()
        .map_err(|e| format!("failed to build client: {e}"))?;
    Ok((client, url))
}

/// The webhook's URL from `clientConfig` (a `url`, or a `service` reached through its host
/// override), with the client certificate the webhook kubeconfig gives that host.
fn endpoint(
    builder: reqwest::ClientBuilder,
    st: &SimState,
    cc: &Value,
) -> Result<(reqwest::ClientBuilder, String), String> {
    if let Some(u) = cc.get("url").and_then(Value::as_str) {
        // ClientConfigFor(u.Host), with :443 when the URL names no port.
        let parsed = reqwest::Url::parse(u).map_err(|e| format!("invalid webhook url: {e}"))?;
        let target = format!(
            "{}:{}",
            parsed.host_str().unwrap_or(""),
            parsed.port().unwrap_or(443)
        );
        return Ok((with_client_cert(builder, st, &target)?, u.to_string()));
    }
    let Some(svc) = cc.get("service") else {
        return Err("webhook clientConfig has neither url nor service".into());
    };
    let ns = svc.get("namespace").and_then(Value::as_str).unwrap_or("");
    let name = svc.get("name").and_then(Value::as_str).unwrap_or("");
    let port = svc.get("port").and_then(Value::as_u64).unwrap_or(443);
    let path = svc.get("path").and_then(Value::as_str).unwrap_or("/");
    let host = format!("{name}.{ns}.svc");
    let addr = st
        .service_override(ns, name)
        .ok_or_else(|| format!("failed to call webhook: service \"{ns}/{name}\" has no host override (no cluster DNS in kube-sim)"))?;
    let builder = builder.resolve(&host, addr);
    // ClientConfigForService: name.namespace.svc:port.
    let builder = with_client_cert(builder, st, &format!("{host}:{port}"))?;
    Ok((builder, format!("https://{host}:{port}{path}")))
}

/// The review's `response`, checked as request/admissionreview.go `VerifyAdmissionResponse`
/// does: v1 must echo apiVersion, kind and uid; a validating webhook may not patch.
fn verified_response(review: &Value, api_version: &str, uid: &str) -> Result<Value, String> {
    let got_av = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let got_kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
    let response = review
        .get("response")
        .cloned()
        .ok_or("webhook response was absent")?;
    let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
    if api_version == "admission.k8s.io/v1" {
        if got_av != api_version || got_kind != "AdmissionReview" {
            return Err(format!(
                "expected webhook response of {api_version}, Kind=AdmissionReview, got {got_av}, Kind={got_kind}"
            ));
        }
        if got_uid != uid {
            return Err(format!(
                "expected response.uid=\"{uid}\", got \"{got_uid}\""
            ));
        }
    } else if !got_uid.is_empty() && got_uid != uid {
        return Err(format!(
            "expected response.uid=\"{uid}\", got \"{got_uid}\""
        ));
    }
    if response.get("patch").is_some_and(|p| !p.is_null()) {
        return Err("validating webhook may not return a patch".into());
    }
    Ok(response)
}
