//! get / list / watch / create / update / patch / delete / deletecollection and the
//! subresources (status, scale, eviction, binding).
use axum::response::Response;
use base64::Engine;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

use super::{Req, Target, error_response, json_response, list_stream, table, watch};
use crate::SimState;
use crate::admission::{self, Attrs};
use crate::error::{ApiError, ApiResult, qualified};
use crate::eviction;
use crate::patch::{self, PatchType};
use crate::resources::{ResourceDef, by_gvr};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{DeleteOpts, UpdateMode, WatchFrom};

/// Attempts of the read-patch-write loop before giving up (GuaranteedUpdate retries).
const PATCH_RETRIES: usize = 5;

fn decode(r: &Req) -> ApiResult<Value> {
    if r.body.is_empty() {
        return Err(ApiError::bad_request("request body required"));
    }
    if r.content_type().contains("yaml") {
        let text =
            std::str::from_utf8(&r.body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    } else {
        serde_json::from_slice(&r.body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode request body: {e}")))
    }
}

use crate::store::meta_str as meta;

fn kind_of(def: &ResourceDef) -> (&'static str, &'static str, &'static str) {
    (def.group, def.version, def.kind)
}

/// Dispatches a resource request.
pub async fn serve(st: Arc<SimState>, r: Req, t: Target, verb: &str) -> ApiResult<Response> {
    let def = t.def;
    if def.create_only && verb != "create" {
        return Err(ApiError::method_not_allowed(def.group, def.resource, verb));
    }
    if let Some(ns) = &t.namespace
        && !def.namespaced
    {
        let _ = ns;
        return Err(ApiError::no_route());
    }
    let sub = t.sub.clone().unwrap_or_default();
    if !sub.is_empty() && !def.subresources.contains(&sub.as_str()) {
        return Err(ApiError::no_route());
    }
    match verb {
        "get" => get(&st, &r, &t, &sub),
        "list" => list(&st, &r, &t),
        "watch" => watch_req(st, &r, &t),
        "create" => match sub.as_str() {
            "eviction" => evict(&st, &r, &t).await,
            "binding" => binding(&st, &r, &t).await,
            "" if t.name.is_none() => create(&st, &r, &t).await,
            _ => Err(ApiError::method_not_allowed(
                def.group,
                def.resource,
                "create",
            )),
        },
        "update" if matches!(sub.as_str(), "" | "status" | "scale" | "finalize") => {
            update(&st, &r, &t, &sub).await
        }
        "patch" if matches!(sub.as_str(), "" | "status" | "scale") => {
            patch_req(&st, &r, &t, &sub).await
        }
        "delete" if sub.is_empty() => delete(&st, &r, &t).await,
        "deletecollection" => delete_collection(&st, &r, &t).await,
        _ => Err(ApiError::method_not_allowed(def.group, def.resource, verb)),
    }
}

fn ns_of(t: &Target) -> String {
    t.namespace.clone().unwrap_or_default()
}

fn fetch(st: &SimState, t: &Target) -> ApiResult<Value> {
    let name = t.name.as_deref().unwrap_or("");
    st.store
        .get(t.def, &ns_of(t), name)
        .ok_or_else(|| ApiError::not_found(t.def.group, t.def.resource, name))
}

fn get(st: &SimState, r: &Req, t: &Target, sub: &str) -> ApiResult<Response> {
    let obj = fetch(st, t)?;
    let body = match sub {
        "scale" => scale_of(&obj),
        _ => obj,
    };
    if table::wants_table(&r.headers) && sub.is_empty() {
        let rv = meta(&body, "resourceVersion").to_string();
        return Ok(json_response(
            200,
            &table::table(t.def, &[body], &rv, st.store.clock().now()),
            &[],
        ));
    }
    Ok(json_response(200, &body, &[]))
}

fn selectors(r: &Req) -> ApiResult<(LabelSelector, FieldSelector)> {
    Ok((
        LabelSelector::parse(r.q("labelSelector").unwrap_or(""))?,
        FieldSelector::parse(r.q("fieldSelector").unwrap_or(""))?,
    ))
}

fn list(st: &SimState, r: &Req, t: &Target) -> ApiResult<Response> {
    watch::list_options(r)?;
    let (ls, fs) = selectors(r)?;
    // limit/continue: the token is the base64 of the last returned "namespace/name"; only the
    // requested page is read from the store (a paginated list of a big cluster stays linear).
    let after = match r.q("continue").filter(|c| !c.is_empty()) {
        Some(c) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(c)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|k| {
                    k.split_once('/')
                        .map(|(ns, name)| (ns.to_string(), name.to_string()))
                })
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?,
        ),
        None => None,
    };
    let limit = r
        .q("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(0);
    if !table::wants_table(&r.headers) {
        // Streamed from the stored bytes, never built in memory.
        let keep: Option<list_stream::Keep> = if ls.is_empty() && fs.0.is_empty() {
            None
        } else {
            Some(Box::new(move |o: &Value| {
                ls.matches_object(o) && fs.matches(o)
            }))
        };
        if limit == 0 && after.is_none() {
            let (raw, rv) = st.store.list_raw(t.def, t.namespace.as_deref());
            return Ok(list_stream::respond(t.def, rv, raw, keep, None));
        }
        let (raw, last, more, rv) =
            st.store
                .list_page_raw(t.def, t.namespace.as_deref(), after, limit, keep.as_deref());
        let cont = last.filter(|_| more).map(|(ns, name)| {
            base64::engine::general_purpose::STANDARD.encode(format!("{ns}/{name}"))
        });
        return Ok(list_stream::respond(t.def, rv, raw, None, cont));
    }
    let (items, more, rv) = st
        .store
        .list_page(t.def, t.namespace.as_deref(), after, limit, |o| {
            ls.matches_object(o) && fs.matches(o)
        });
    let cont = items.last().filter(|_| more).map(|last| {
        let key = format!("{}/{}", meta(last, "namespace"), meta(last, "name"));
        base64::engine::general_purpose::STANDARD.encode(key)
    });
    let mut tbl = table::table(t.def, &items, &rv.to_string(), st.store.clock().now());
    if let Some(c) = cont {
        tbl["metadata"]["continue"] = json!(c);
    }
    Ok(json_response(200, &tbl, &[]))
}

fn watch_req(st: Arc<SimState>, r: &Req, t: &Target) -> ApiResult<Response> {
    let (labels, fields) = selectors(r)?;
    let initial = watch::initial_events(&st, r)?;
    let from = match r.q("resourceVersion").unwrap_or("") {
        _ if initial => WatchFrom::Current,
        "" | "0" => WatchFrom::Current,
        v => WatchFrom::After(
            v.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {v:?}")))?,
        ),
    };
    // kube-apiserver picks a random timeout in [minRequestTimeout, 2×) (1800 s default).
    let timeout = r
        .q("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1800)
        .min(3600);
    let spec_st = st.clone();
    Ok(watch::respond(
        spec_st,
        watch::WatchSpec {
            def: t.def,
            namespace: t.namespace.clone(),
            labels,
            fields,
            from,
            timeout: Duration::from_secs(timeout),
            bookmarks: r.q_bool("allowWatchBookmarks"),
            initial_events_end: initial && r.q_bool("allowWatchBookmarks"),
            name: None,
            table: table::wants_table(&r.headers).then(|| st.store.clock().clone()),
        },
    ))
}

fn namespace_exists(st: &SimState, ns: &str) -> bool {
    by_gvr("", "v1", "namespaces").is_some_and(|d| st.store.get(d, "", ns).is_some())
}

fn check_namespace(st: &SimState, def: &ResourceDef, ns: &str) -> ApiResult<()> {
    // NamespaceLifecycle admission: creating in a missing namespace is 404.
    if def.namespaced && !namespace_exists(st, ns) {
        return Err(ApiError::not_found("", "namespaces", ns));
    }
    Ok(())
}

fn check_kind(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    if !kind.is_empty() && kind != def.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the request body ({kind}) does not match the resource {}",
            qualified(def.group, def.resource)
        )));
    }
    Ok(())
}

fn set_namespace(obj: &mut Value, t: &Target) -> ApiResult<()> {
    if !t.def.namespaced {
        return Ok(());
    }
    let ns = ns_of(t);
    let body_ns = meta(obj, "namespace");
    if !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"]["namespace"] = json!(ns);
    Ok(())
}

async fn create(st: &SimState, r: &Req, t: &Target) -> ApiResult<Response> {
    let def = t.def;
    let dry = r.dry_run()?;
    let mut obj = decode(r)?;
    check_kind(def, &obj)?;
    match (def.group, def.resource) {
        ("authentication.k8s.io", "tokenreviews") => {
            if obj
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::bad_request(
                    "token is required for TokenReview in authentication",
                ));
            }
            return Ok(json_response(
                201,
                &with_type(def, st.auth.token_review(obj)),
                &[],
            ));
        }
        ("authorization.k8s.io", "subjectaccessreviews") => {
            return Ok(json_response(
                201,
                &with_type(def, st.auth.subject_access_review(obj, None)),
                &[],
            ));
        }
        ("authorization.k8s.io", "selfsubjectaccessreviews") => {
            return Ok(json_response(
                201,
                &with_type(def, st.auth.subject_access_review(obj, Some(&r.user))),
                &[],
            ));
        }
        _ => {}
    }
    if def.namespaced && t.namespace.is_none() {
        return Err(ApiError::method_not_allowed(
            def.group,
            def.resource,
            "create",
        ));
    }
    set_namespace(&mut obj, t)?;
    admit_and_create(st, r, t, obj, dry).await
}

/// The end of a create: NamespaceLifecycle, validating admission, the store; 201.
async fn admit_and_create(
    st: &SimState,
    r: &Req,
    t: &Target,
    obj: Value,
    dry: bool,
) -> ApiResult<Response> {
    let def = t.def;
    check_namespace(st, def, &ns_of(t))?;
    let warnings = admission::validate(
        st,
        &Attrs {
            def,
            subresource: "",
            operation: "CREATE",
            kind: kind_of(def),
            namespace: &ns_of(t),
            name: meta(&obj, "name"),
            object: Some(&obj),
            old_object: None,
            dry_run: dry,
            options: json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
            user: &r.user,
        },
    )
    .await?;
    let created = st.store.create(def, obj, dry, false)?;
    Ok(json_response(201, &created, &warnings))
}

fn with_type(def: &ResourceDef, mut v: Value) -> Value {
    v["apiVersion"] = json!(def.api_version());
    v["kind"] = json!(def.kind);
    v
}

/// `autoscaling/v1` Scale view of a workload.
fn scale_of(obj: &Value) -> Value {
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta(obj, "name"), "namespace": meta(obj, "namespace"), "uid": meta(obj, "uid"),
            "resourceVersion": meta(obj, "resourceVersion"), "creationTimestamp": meta(obj, "creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)), "selector": selector},
    })
}

/// Writes `new` (the full object, or a Scale for the scale subresource) with admission.
async fn write(
    st: &SimState,
    r: &Req,
    t: &Target,
    sub: &str,
    current: &Value,
    new: Value,
    dry: bool,
) -> ApiResult<(Value, Vec<String>)> {
    let def = t.def;
    let name = t.name.as_deref().unwrap_or("");
    let (mode, obj, kind) = match sub {
        "status" => (UpdateMode::Status, new, kind_of(def)),
        "scale" => {
            let replicas = new.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
            let mut full = current.clone();
            full["spec"]["replicas"] = replicas;
            let rv = meta(&new, "resourceVersion");
            full["metadata"]["resourceVersion"] = json!(rv);
            (UpdateMode::Main, full, ("autoscaling", "v1", "Scale"))
        }
        _ => (UpdateMode::Main, new, kind_of(def)),
    };
    let warnings = admission::validate(
        st,
        &Attrs {
            def,
            subresource: sub,
            operation: "UPDATE",
            kind,
            namespace: &ns_of(t),
            name,
            object: Some(&obj),
            old_object: Some(current),
            dry_run: dry,
            options: json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}),
            user: &r.user,
        },
    )
    .await?;
    let out = st.store.update(def, obj, mode, dry)?;
    Ok((if sub == "scale" { scale_of(&out) } else { out }, warnings))
}

async fn update(st: &SimState, r: &Req, t: &Target, sub: &str) -> ApiResult<Response> {
    let dry = r.dry_run()?;
    let mut obj = decode(r)?;
    let name = t.name.as_deref().unwrap_or("");
    if sub != "scale" {
        check_kind(t.def, &obj)?;
        set_namespace(&mut obj, t)?;
    }
    let body_name = meta(&obj, "name");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let current = match fetch(st, t) {
        Err(e) if e.code == 404 && sub.is_empty() && t.def.creates_on_update() => {
            return create_on_update(st, r, t, obj, dry).await;
        }
        other => other?,
    };
    let (out, warnings) = write(st, r, t, sub, &current, obj, dry).await?;
    Ok(json_response(200, &out, &warnings))
}

/// A PUT of a missing object of a kind whose strategy has `AllowCreateOnUpdate`: created as
/// a POST would create it (201), its resourceVersion ignored.
async fn create_on_update(
    st: &SimState,
    r: &Req,
    t: &Target,
    mut obj: Value,
    dry: bool,
) -> ApiResult<Response> {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    admit_and_create(st, r, t, obj, dry).await
}

async fn patch_req(st: &SimState, r: &Req, t: &Target, sub: &str) -> ApiResult<Response> {
    let dry = r.dry_run()?;
    let kind = PatchType::from_content_type(r.content_type()).ok_or_else(|| {
        ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {:?})", r.content_type()))
    })?;
    let name = t.name.as_deref().unwrap_or("");
    for attempt in 0..PATCH_RETRIES {
        let current = match st.store.get(t.def, &ns_of(t), name) {
            Some(c) => c,
            None if kind == PatchType::Apply && sub.is_empty() => {
                // Server-side apply creates (approximated: the applied object is created as is).
                let mut obj = patch::apply(&json!({}), &r.body, kind)?;
                check_kind(t.def, &obj)?;
                set_namespace(&mut obj, t)?;
                obj["metadata"]["name"] = json!(name);
                return admit_and_create(st, r, t, obj, dry).await;
            }
            None => return Err(ApiError::not_found(t.def.group, t.def.resource, name)),
        };
        let base = if sub == "scale" {
            scale_of(&current)
        } else {
            current.clone()
        };
        let mut patched = patch::apply(&base, &r.body, kind)?;
        if !patched.is_object() {
            return Err(ApiError::bad_request("patched object is not a JSON object"));
        }
        // A resourceVersion set by the patch is a precondition; otherwise CAS on what we read.
        let user_rv = meta(&patched, "resourceVersion") != meta(&base, "resourceVersion");
        if !user_rv {
            patched["metadata"]["resourceVersion"] = json!(meta(&current, "resourceVersion"));
        }
        if meta(&patched, "name") != name && sub != "scale" {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta(&patched, "name")
            )));
        }
        match write(st, r, t, sub, &current, patched, dry).await {
            Err(e) if e.reason == "Conflict" && !user_rv && attempt + 1 < PATCH_RETRIES => continue,
            Err(e) => return Err(e),
            Ok((out, warnings)) => return Ok(json_response(200, &out, &warnings)),
        }
    }
    Err(ApiError::stale(t.def.group, t.def.resource, name))
}

fn delete_options(r: &Req) -> ApiResult<DeleteOpts> {
    let body: Value = if r.body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(&r.body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode DeleteOptions: {e}")))?
    };
    let dry_body = body
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v == "All"));
    Ok(DeleteOpts {
        grace_period_seconds: body
            .get("gracePeriodSeconds")
            .and_then(Value::as_i64)
            .or_else(|| r.q("gracePeriodSeconds").and_then(|s| s.parse().ok())),
        uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run: dry_body || r.dry_run()?,
        propagation: body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .or_else(|| r.q("propagationPolicy"))
            .map(String::from),
    })
}

async fn delete(st: &SimState, r: &Req, t: &Target) -> ApiResult<Response> {
    let opts = delete_options(r)?;
    let current = fetch(st, t)?;
    let warnings = admission::validate(
        st,
        &Attrs {
            def: t.def,
            subresource: "",
            operation: "DELETE",
            kind: kind_of(t.def),
            namespace: &ns_of(t),
            name: t.name.as_deref().unwrap_or(""),
            object: None,
            old_object: Some(&current),
            dry_run: opts.dry_run,
            options: json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}),
            user: &r.user,
        },
    )
    .await?;
    let out = st
        .store
        .delete(t.def, &ns_of(t), t.name.as_deref().unwrap_or(""), &opts)?;
    Ok(json_response(200, &out, &warnings))
}

async fn delete_collection(st: &SimState, r: &Req, t: &Target) -> ApiResult<Response> {
    let (ls, fs) = selectors(r)?;
    let opts = delete_options(r)?;
    let (items, _) = st.store.list(t.def, t.namespace.as_deref());
    let mut deleted = Vec::new();
    for o in items
        .into_iter()
        .filter(|o| ls.matches_object(o) && fs.matches(o))
    {
        if let Ok(d) = st
            .store
            .delete(t.def, meta(&o, "namespace"), meta(&o, "name"), &opts)
        {
            deleted.push(d);
        }
    }
    let body = json!({"kind": format!("{}List", t.def.kind), "apiVersion": t.def.api_version(),
        "metadata": {"resourceVersion": st.store.current_rv().to_string()}, "items": deleted});
    Ok(json_response(200, &body, &[]))
}

async fn evict(st: &SimState, r: &Req, t: &Target) -> ApiResult<Response> {
    let dry = r.dry_run()?;
    let body = decode(r)?;
    let name = t.name.as_deref().unwrap_or("");
    // NamespaceLifecycle (a mutating admission plugin) runs before the eviction's own checks.
    check_namespace(st, t.def, &ns_of(t))?;
    match eviction::evict(st, &ns_of(t), name, body, dry, &r.user).await {
        Ok(ev) => Ok(json_response(ev.code, &ev.body, &ev.warnings)),
        Err(e) => Ok(error_response(&e)),
    }
}

async fn binding(st: &SimState, r: &Req, t: &Target) -> ApiResult<Response> {
    let body = decode(r)?;
    let name = t.name.as_deref().unwrap_or("");
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            name,
            "target.name",
            "Required value",
        ));
    }
    let mut pod = fetch(st, t)?;
    let assigned = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !assigned.is_empty() {
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            name,
            &format!("pod {name} is already assigned to node {assigned:?}"),
        ));
    }
    pod["spec"]["nodeName"] = json!(node);
    st.store
        .update(t.def, pod, UpdateMode::Main, r.dry_run()?)?;
    Ok(json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        &[],
    ))
}
