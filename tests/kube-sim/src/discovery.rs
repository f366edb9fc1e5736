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

fn group_doc(name: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{name}/{version}"), "version": version});
    json!({"name": name, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis`.
pub fn group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(name: &str) -> Option<Value> {
    let (g, v) = groups().into_iter().find(|(g, _)| *g == name)?;
    let mut doc = group_doc(g, v);
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
    let defs: Vec<&ResourceDef> = RESOURCES
        .iter()
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
