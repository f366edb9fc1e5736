//! A minimal OpenAPI v3 (`/openapi/v3`, `/openapi/v3/<gv>`).
//!
//! kubectl ≥ 1.27 `apply`/`create` with the default `--validate=strict` asks the OpenAPI v3
//! document whether the PATCH operation of the kind accepts the `fieldValidation` query
//! parameter (k8s.io/cli-runtime `resource/query_param_verifier_v3.go`); if it does, kubectl
//! leaves validation to the server and needs no schema. So each document lists, per kind, a
//! PATCH operation with `x-kubernetes-group-version-kind` and that parameter, and nothing
//! else: no schemas, no request bodies (kubectl then builds strategic merge patches from its
//! compiled-in types, `apply/patcher.go`). `/openapi/v2` stays 404. The server ignores
//! `fieldValidation` (no strict decoding).
use serde_json::{Map, Value, json};

use crate::resources::{RESOURCES, ResourceDef, groups};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of group-version documents.
pub fn root() -> Value {
    root_with(&[])
}

/// `/openapi/v3`, with the group-versions of kinds served from CRDs.
pub fn root_with(custom: &[&'static ResourceDef]) -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![("", "v1")];
    gvs.extend(groups());
    for d in custom {
        if !gvs.contains(&(d.group, d.version)) {
            gvs.push((d.group, d.version));
        }
    }
    for (g, v) in gvs {
        let p = gv_path(g, v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=kube-sim")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<api/v1 | apis/g/v>`.
pub fn group_version(path: &str) -> Option<Value> {
    group_version_with(path, &[])
}

/// `/openapi/v3/<api/v1 | apis/g/v>`, with the kinds served from CRDs.
pub fn group_version_with(path: &str, custom: &[&'static ResourceDef]) -> Option<Value> {
    let segs: Vec<&str> = path.split('/').collect();
    let (group, version) = match segs.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let mut paths = Map::new();
    for d in RESOURCES
        .iter()
        .chain(custom.iter().copied())
        .filter(|d| d.group == group && d.version == version && !d.create_only)
    {
        let prefix = format!("/{}", gv_path(group, version));
        let p = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.resource)
        } else {
            format!("{prefix}/{}/{{name}}", d.resource)
        };
        paths.insert(p, json!({"patch": {
            "operationId": format!("patch{}", d.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": d.group, "version": d.version, "kind": d.kind},
            "parameters": [
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
            ],
            "responses": {"200": {"description": "OK"}}
        }}));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}}
    }))
}
