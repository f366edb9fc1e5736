//! Legacy (unaggregated) discovery documents.
//!
//! Aggregated discovery (`Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,…`)
//! is not served: we always answer the legacy document with `Content-Type: application/json`,
//! and client-go (`discovery/aggregated_discovery.go`, `discovery_client.go` `ServerGroupsAndResources`)
//! falls back to legacy parsing whenever the response content type is not the aggregated one.
use serde_json::{Value, json};

use crate::resources::{RESOURCES, ResourceDef, groups};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-kube-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(server_addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_addr}]
    })
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": gvs, "preferredVersion": preferred})
}

/// Groups and their versions: the built-in ones, then those served from CRDs (`custom`).
fn all_groups(custom: &[&'static ResourceDef]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> =
        groups().into_iter().map(|(g, v)| (g, vec![v])).collect();
    for d in custom {
        match out.iter_mut().find(|(g, _)| *g == d.group) {
            Some((_, versions)) if !versions.contains(&d.version) => versions.push(d.version),
            Some(_) => {}
            None => out.push((d.group, vec![d.version])),
        }
    }
    out
}

/// `/apis`.
pub fn group_list() -> Value {
    group_list_with(&[])
}

/// `/apis`, with the groups of kinds served from CRDs.
pub fn group_list_with(custom: &[&'static ResourceDef]) -> Value {
    let groups: Vec<Value> = all_groups(custom)
        .into_iter()
        .map(|(g, v)| group_doc(g, &v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(name: &str) -> Option<Value> {
    group_with(name, &[])
}

/// `/apis/<group>`, with the groups of kinds served from CRDs.
pub fn group_with(name: &str, custom: &[&'static ResourceDef]) -> Option<Value> {
    let (g, v) = all_groups(custom).into_iter().find(|(g, _)| *g == name)?;
    let mut doc = group_doc(g, &v);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn sub_entry(d: &ResourceDef, sub: &str) -> Value {
    let name = format!("{}/{}", d.resource, sub);
    match sub {
        "eviction" => json!({"name": name, "singularName": "", "namespaced": d.namespaced,
            "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}),
        "binding" => json!({"name": name, "singularName": "", "namespaced": d.namespaced,
            "kind": "Binding", "verbs": ["create"]}),
        "scale" => json!({"name": name, "singularName": "", "namespaced": d.namespaced,
            "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}),
        "finalize" => json!({"name": name, "singularName": "", "namespaced": d.namespaced,
            "kind": d.kind, "verbs": ["update"]}),
        _ => json!({"name": name, "singularName": "", "namespaced": d.namespaced,
            "kind": d.kind, "verbs": ["get", "patch", "update"]}),
    }
}

/// `/api/v1` and `/apis/<group>/<version>`.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    resource_list_with(group, version, &[])
}

/// `/api/v1` and `/apis/<group>/<version>`, with the kinds served from CRDs.
pub fn resource_list_with(
    group: &str,
    version: &str,
    custom: &[&'static ResourceDef],
) -> Option<Value> {
    let defs: Vec<&ResourceDef> = RESOURCES
        .iter()
        .chain(custom.iter().copied())
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in defs {
        let mut e = json!({
            "name": d.resource,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            e["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            e["categories"] = json!(d.categories);
        }
        resources.push(e);
        for s in d.subresources {
            resources.push(sub_entry(d, s));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}
