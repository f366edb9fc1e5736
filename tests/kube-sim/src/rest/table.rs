//! Server-side printing (`meta.k8s.io/v1` Table) for `kubectl get`, with a few columns per
//! kind after `pkg/printers/internalversion/printers.go`.
use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// Whether the client asked for `as=Table` (kubectl get does).
pub fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn n(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

/// `duration.HumanDuration`, shortened.
fn age(o: &Value, now: jiff::Timestamp) -> String {
    since(s(o, "/metadata/creationTimestamp"), now)
}

/// Time since an RFC 3339 timestamp, as [`age`] prints it (`<unknown>` when unset).
fn since(ts: &str, now: jiff::Timestamp) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = now.duration_since(t).as_secs().max(0);
    match secs {
        0..120 => format!("{secs}s"),
        120..7200 => format!("{}m", secs / 60),
        7200..172_800 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

fn cond(o: &Value, ty: &str) -> Option<String> {
    o.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
        .and_then(|c| c.get("status").and_then(Value::as_str).map(String::from))
}

fn columns(def: &ResourceDef) -> Vec<&'static str> {
    match (def.group, def.resource) {
        ("", "pods") => vec!["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node"],
        ("", "nodes") => vec!["Name", "Status", "Roles", "Age", "Version"],
        ("", "namespaces") => vec!["Name", "Status", "Age"],
        ("apps", "deployments") => vec!["Name", "Ready", "Up-to-date", "Available", "Age"],
        ("apps", "replicasets") => vec!["Name", "Desired", "Current", "Ready", "Age"],
        ("apps", "statefulsets") => vec!["Name", "Ready", "Age"],
        ("", "events") | ("events.k8s.io", "events") => {
            vec!["Last Seen", "Type", "Reason", "Object", "Message"]
        }
        ("policy", "poddisruptionbudgets") => vec![
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age",
        ],
        _ => vec!["Name", "Age"],
    }
}

fn cells(def: &ResourceDef, o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let name = json!(s(o, "/metadata/name"));
    let a = json!(age(o, now));
    let or_none = |v: &Value| if v.is_null() { json!("N/A") } else { v.clone() };
    match (def.group, def.resource) {
        ("", "pods") => pod_cells(o, name, a),
        ("", "nodes") => node_cells(o, name, a),
        ("", "namespaces") => vec![name, json!(s(o, "/status/phase")), a],
        ("apps", "deployments") => vec![
            name,
            json!(format!(
                "{}/{}",
                n(o, "/status/readyReplicas"),
                n(o, "/spec/replicas")
            )),
            json!(n(o, "/status/updatedReplicas")),
            json!(n(o, "/status/availableReplicas")),
            a,
        ],
        ("apps", "replicasets") => vec![
            name,
            json!(n(o, "/spec/replicas")),
            json!(n(o, "/status/replicas")),
            json!(n(o, "/status/readyReplicas")),
            a,
        ],
        ("apps", "statefulsets") => vec![
            name,
            json!(format!(
                "{}/{}",
                n(o, "/status/readyReplicas"),
                n(o, "/spec/replicas")
            )),
            a,
        ],
        ("policy", "poddisruptionbudgets") => vec![
            name,
            or_none(o.pointer("/spec/minAvailable").unwrap_or(&Value::Null)),
            or_none(o.pointer("/spec/maxUnavailable").unwrap_or(&Value::Null)),
            json!(n(o, "/status/disruptionsAllowed")),
            a,
        ],
        ("", "events") => event_cells(o, now),
        // Both group versions print through the core printer, as kube-apiserver does.
        ("events.k8s.io", "events") => {
            event_cells(&crate::versions::to_storage(def, o.clone()), now)
        }
        _ => vec![name, a],
    }
}

/// A pod's row: ready containers, phase (or Terminating), restarts, age, IP and node.
fn pod_cells(o: &Value, name: Value, a: Value) -> Vec<Value> {
    let statuses = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = o
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses.iter().map(|c| n(c, "/restartCount")).sum();
    let status = if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating".to_string()
    } else {
        s(o, "/status/phase").to_string()
    };
    let ip = s(o, "/status/podIP");
    let node = s(o, "/spec/nodeName");
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts),
        a,
        json!(if ip.is_empty() { "<none>" } else { ip }),
        json!(if node.is_empty() { "<none>" } else { node }),
    ]
}

/// A node's row: readiness (and cordon), roles from `node-role.kubernetes.io/` labels, age,
/// kubelet version.
fn node_cells(o: &Value, name: Value, a: Value) -> Vec<Value> {
    let mut st = match cond(o, "Ready").as_deref() {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        st.push_str(",SchedulingDisabled");
    }
    let roles: Vec<String> = o
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/").map(String::from))
                .collect()
        })
        .unwrap_or_default();
    vec![
        name,
        json!(st),
        json!(if roles.is_empty() {
            "<none>".into()
        } else {
            roles.join(",")
        }),
        a,
        json!(s(o, "/status/nodeInfo/kubeletVersion")),
    ]
}

/// A core `v1` Event's row (`printEvent`): last seen falls back from `series` to
/// `lastTimestamp` to `firstTimestamp` to `eventTime`.
fn event_cells(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let first = [s(o, "/firstTimestamp"), s(o, "/eventTime")]
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or("");
    let last = [
        s(o, "/series/lastObservedTime"),
        s(o, "/lastTimestamp"),
        first,
    ]
    .into_iter()
    .find(|t| !t.is_empty())
    .unwrap_or("");
    vec![
        json!(since(last, now)),
        json!(s(o, "/type")),
        json!(s(o, "/reason")),
        json!(format!(
            "{}/{}",
            s(o, "/involvedObject/kind").to_lowercase(),
            s(o, "/involvedObject/name")
        )),
        json!(s(o, "/message")),
    ]
}

/// The Table for `items` (rows carry the full object, which kubectl accepts for
/// `includeObject=Object` and `Metadata` alike).
pub fn table(def: &ResourceDef, items: &[Value], rv: &str, now: jiff::Timestamp) -> Value {
    let cols: Vec<Value> = columns(def)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let wide = def.is("", "pods") && i >= 5;
            json!({"name": c, "type": if c == "Restarts" { "integer" } else { "string" },
                "format": if c == "Name" { "name" } else { "" }, "description": "", "priority": if wide { 1 } else { 0 }})
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| json!({"cells": cells(def, o, now), "object": o}))
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
        "columnDefinitions": cols, "rows": rows})
}
