//! Loading an initial cluster from a `List` (YAML or JSON, multi-document).
use serde_json::{Value, json};

use crate::resources::{by_gvr, by_kind};
use crate::store::Store;

/// Flattens `List`s and multi-document YAML/JSON into single objects.
pub fn parse(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> =
        if text.trim_start().starts_with('{') || text.trim_start().starts_with('[') {
            let mut out = Vec::new();
            for v in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
                out.push(v.map_err(|e| format!("JSON: {e}"))?);
            }
            out
        } else {
            serde_saphyr::from_multiple::<Value>(text).map_err(|e| format!("YAML: {e}"))?
        };
    let mut out = Vec::new();
    let mut stack: Vec<Value> = docs.into_iter().rev().collect();
    while let Some(d) = stack.pop() {
        match d {
            Value::Null => {}
            Value::Array(a) => stack.extend(a.into_iter().rev()),
            Value::Object(ref m)
                if m.get("items").is_some_and(Value::is_array)
                    && m.get("kind")
                        .and_then(Value::as_str)
                        .is_none_or(|k| k.ends_with("List")) =>
            {
                if let Some(Value::Array(items)) = m.get("items") {
                    stack.extend(items.iter().cloned().rev());
                }
            }
            obj @ Value::Object(_) => out.push(obj),
            other => return Err(format!("not an object: {other}")),
        }
    }
    Ok(out)
}

/// `Pod kube-system/kube-proxy-1x` (`Node n1` when cluster-scoped): the object an error names.
fn describe(def: &crate::resources::ResourceDef, o: &Value) -> String {
    let meta = |f: &str| {
        o.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let name = meta("name");
    let name = if name.is_empty() {
        format!("(generateName {:?})", meta("generateName"))
    } else {
        name
    };
    if def.namespaced {
        format!("{} {}/{}", def.kind, meta("namespace"), name)
    } else {
        format!("{} {}", def.kind, name)
    }
}

/// Creates a namespace if it does not exist.
pub fn ensure_namespace(store: &Store, ns: &str) {
    if let Some(def) = by_gvr("", "v1", "namespaces")
        && store.get(def, "", ns).is_none()
    {
        let _ = store.create(def, json!({"metadata": {"name": ns}}), false, false);
    }
}

/// Loads objects into an empty store: the standard namespaces, then namespaces, then the
/// rest. uid and creationTimestamp are kept (ownerReferences point at uids);
/// resourceVersions are reassigned.
pub fn load(store: &Store, objects: Vec<Value>) -> Result<(), String> {
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        ensure_namespace(store, ns);
    }
    let (nss, rest): (Vec<Value>, Vec<Value>) = objects
        .into_iter()
        .partition(|o| o.get("kind").and_then(Value::as_str) == Some("Namespace"));
    for o in nss.into_iter().chain(rest) {
        let av = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
        let def = by_kind(av, kind).ok_or_else(|| format!("unsupported kind {av} {kind}"))?;
        let ns = o
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut o = o;
        if def.namespaced {
            let ns = if ns.is_empty() {
                "default".to_string()
            } else {
                ns
            };
            ensure_namespace(store, &ns);
            o["metadata"]["namespace"] = json!(ns);
        }
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        if def.is("", "namespaces") {
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if store.get(def, "", &name).is_some() {
                continue;
            }
        }
        let what = describe(def, &o);
        store
            .create(def, o, false, true)
            .map_err(|e| format!("{what}: {}", e.message))?;
    }
    Ok(())
}
