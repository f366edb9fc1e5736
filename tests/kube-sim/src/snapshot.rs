//! Loading an initial cluster from a `List` (YAML or JSON, multi-document).
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};
use std::path::Path;

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
    for d in docs {
        flatten(d, &mut |o| {
            out.push(o);
            Ok(())
        })?;
    }
    Ok(out)
}

/// Calls `f` with every object of a document, `List`s and arrays flattened in order.
fn flatten(doc: Value, f: &mut dyn FnMut(Value) -> Result<(), String>) -> Result<(), String> {
    let mut stack: Vec<Value> = vec![doc];
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
            obj @ Value::Object(_) => f(obj)?,
            other => return Err(format!("not an object: {other}")),
        }
    }
    Ok(())
}

/// Streams the objects of JSON text (one or more documents; `List`s and arrays flattened)
/// to `f` one at a time: the items of a `List` are parsed and handed over one by one, so a
/// large snapshot is never held as one tree of values.
pub fn for_each_json(
    text: &str,
    f: &mut dyn FnMut(Value) -> Result<(), String>,
) -> Result<(), String> {
    let mut failed: Option<String> = None;
    let mut de = serde_json::Deserializer::from_str(text);
    loop {
        if de.end().is_ok() {
            return Ok(());
        }
        let seed = Stream {
            f: &mut *f,
            failed: &mut failed,
        };
        if let Err(e) = seed.deserialize(&mut de) {
            return Err(failed.take().unwrap_or_else(|| format!("JSON: {e}")));
        }
    }
}

/// A document: objects other than `List`s go to `f`; a `List`'s items are streamed.
struct Stream<'a> {
    f: &'a mut dyn FnMut(Value) -> Result<(), String>,
    /// The callback's error (serde's error type would add a position to it).
    failed: &'a mut Option<String>,
}

impl Stream<'_> {
    fn emit<E: serde::de::Error>(&mut self, v: Value) -> Result<(), E> {
        flatten(v, self.f).map_err(|msg| {
            let e = E::custom(&msg);
            *self.failed = Some(msg);
            e
        })
    }
}

impl<'de> DeserializeSeed<'de> for Stream<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// The elements of a `List`'s `items`, each flattened and handed to `f`.
struct Items<'s, 'a>(&'s mut Stream<'a>);

impl<'de> DeserializeSeed<'de> for Items<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element::<Value>()? {
            self.0.emit(v)?;
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for Stream<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object, List or array")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element::<Value>()? {
            self.emit(v)?;
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut fields = serde_json::Map::new();
        let mut streamed = false;
        while let Some(k) = map.next_key::<String>()? {
            if k == "items" && !streamed {
                map.next_value_seed(Items(&mut self))?;
                streamed = true;
            } else {
                let v: Value = map.next_value()?;
                fields.insert(k, v);
            }
        }
        if !streamed {
            return self.emit(Value::Object(fields));
        }
        match fields.get("kind").and_then(Value::as_str) {
            Some(kind) if !kind.ends_with("List") => Err(serde::de::Error::custom(format!(
                "an object of kind {kind} has an items array; only Lists may"
            ))),
            _ => Ok(()),
        }
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        Err(E::custom(format!("not an object: {v}")))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        Err(E::custom(format!("not an object: {v}")))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        Err(E::custom(format!("not an object: {v}")))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        Err(E::custom(format!("not an object: {v}")))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        Err(E::custom(format!("not an object: {v:?}")))
    }
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
    standard_namespaces(store);
    let (nss, rest): (Vec<Value>, Vec<Value>) = objects.into_iter().partition(is_namespace);
    for o in nss.into_iter().chain(rest) {
        load_one(store, o)?;
    }
    Ok(())
}

fn standard_namespaces(store: &Store) {
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        ensure_namespace(store, ns);
    }
}

fn is_namespace(o: &Value) -> bool {
    o.get("kind").and_then(Value::as_str) == Some("Namespace")
}

/// [`load`] from a file: JSON is streamed in two passes (namespaces, then the rest) so the
/// file's objects are never all decoded at once; YAML is parsed whole.
pub fn load_file(store: &Store, path: &Path) -> Result<(), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return load(store, parse(&text)?);
    }
    standard_namespaces(store);
    for namespaces in [true, false] {
        for_each_json(&text, &mut |o| {
            if is_namespace(&o) == namespaces {
                load_one(store, o)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Creates one snapshot object (see [`load`]).
fn load_one(store: &Store, o: Value) -> Result<(), String> {
    {
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
            match o.get_mut("metadata") {
                Some(Value::Object(m)) => {
                    m.insert("namespace".into(), json!(ns));
                }
                None | Some(Value::Null) => {
                    o["metadata"] = json!({"namespace": ns});
                }
                Some(_) => return Err(format!("{}: metadata is not an object", def.kind)),
            }
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
                return Ok(());
            }
        }
        let what = describe(def, &o);
        store
            .create(def, o, false, true)
            .map_err(|e| format!("{what}: {}", e.message))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streamed(text: &str) -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        for_each_json(text, &mut |o| {
            out.push(o);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn streaming_gives_the_objects_parse_gives() {
        let texts = [
            // kubectl's key order: items before kind.
            r#"{"apiVersion":"v1","items":[{"kind":"Pod","metadata":{"name":"a"}},
                {"kind":"List","items":[{"kind":"Node","metadata":{"name":"n"}}]}],"kind":"List"}"#,
            r#"[{"kind":"Pod","metadata":{"name":"a"}}, null, {"kind":"Pod","metadata":{"name":"b"}}]"#,
            "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}\n{\"kind\":\"PodList\",\"items\":[]}\n{\"kind\":\"Node\"}",
        ];
        for t in texts {
            assert_eq!(streamed(t), parse(t), "{t}");
            assert!(!streamed(t).unwrap_or_default().is_empty());
        }
    }

    #[test]
    fn streaming_refuses_what_is_not_objects() {
        assert!(streamed(r#"{"items":[1]}"#).is_err_and(|e| e.contains("not an object: 1")));
        assert!(streamed(r#"{"items":[{}]"#).is_err_and(|e| e.starts_with("JSON: ")));
        assert!(
            streamed(r#"{"kind":"ConfigMap","items":[]}"#)
                .is_err_and(|e| e.contains("kind ConfigMap has an items array"))
        );
        assert!(streamed("5").is_err_and(|e| e.contains("not an object: 5")));
    }

    #[test]
    fn a_callback_error_is_reported_as_is() {
        let mut n = 0;
        let r = for_each_json(r#"{"items":[{"a":1},{"a":2}]}"#, &mut |_| {
            n += 1;
            if n == 2 {
                Err("second refused".to_string())
            } else {
                Ok(())
            }
        });
        assert_eq!(r, Err("second refused".to_string()));
    }

    #[test]
    fn a_snapshot_file_loads_namespaces_first_and_keeps_their_labels() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.json");
        std::fs::write(
            &path,
            r#"{"items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"shop"},
                "spec":{"containers":[{"name":"c","image":"i"}]}},
              {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","labels":{"team":"a"}}}],
              "kind":"List"}"#,
        )
        .expect("write");
        let store = Store::new(crate::clock::SimClock::new(1.0), 10);
        load_file(&store, &path).expect("loads");
        let ns = by_gvr("", "v1", "namespaces").and_then(|d| store.get(d, "", "shop"));
        assert_eq!(
            ns.and_then(|n| n.pointer("/metadata/labels/team").cloned()),
            Some(json!("a"))
        );
        let pod = by_gvr("", "v1", "pods").and_then(|d| store.get(d, "shop", "p"));
        assert!(pod.is_some());
    }
}
