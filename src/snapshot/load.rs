//! Loading a snapshot from a Kubernetes `List` file (JSON or YAML, single or multi-document),
//! such as `kubectl get nodes,pods,rs,deploy,sts,pdb,pc,ns,pvc -A -o yaml` prints.
//!
//! JSON is streamed item by item (each item is converted to the lean model before the next is
//! parsed), so a 150,000-pod file never exists as a tree of full Kubernetes objects.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{Snapshot, SnapshotBuilder};
use crate::error::ConfigError;

/// Kinds the snapshot understands.
const KNOWN_KINDS: &[&str] = &[
    "Node",
    "Pod",
    "Namespace",
    "PriorityClass",
    "PodDisruptionBudget",
    "ReplicaSet",
    "Deployment",
    "StatefulSet",
    "Job",
    "PersistentVolumeClaim",
];

/// Loads a snapshot file. Errors name the document / item index, kind and name.
pub fn load_file(path: &std::path::Path) -> Result<Snapshot, ConfigError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ConfigError::new(format!("cannot read snapshot {}: {e}", path.display())))?;
    load_bytes(&bytes)
        .map_err(|e| ConfigError::new(format!("snapshot {}: {}", path.display(), e.0)))
}

/// Loads a snapshot from bytes (JSON if it starts with `{` or `[`, else YAML).
pub fn load_bytes(bytes: &[u8]) -> Result<Snapshot, ConfigError> {
    let mut builder = SnapshotBuilder::new();
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        None => {
            return Err(ConfigError::new(
                "the snapshot is empty (expected a Kubernetes List)",
            ));
        }
        Some(b'{') | Some(b'[') => load_json(bytes, &mut builder)?,
        Some(_) => load_yaml(bytes, &mut builder)?,
    }
    Ok(builder.build())
}

/// The `kind` of a list item, inferred from the list kind (`PodList` → `Pod`) when items omit it.
fn item_kind_from_list(list_kind: &str) -> Option<&str> {
    list_kind.strip_suffix("List").filter(|k| !k.is_empty())
}

#[derive(Deserialize)]
struct TypeMeta<'a> {
    #[serde(default, borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    metadata: Option<NameOnly>,
}

#[derive(Deserialize)]
struct NameOnly {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

/// Adds one object (given as JSON text) to the builder.
fn add_json_object(
    raw: &str,
    where_: &str,
    default_kind: Option<&str>,
    b: &mut SnapshotBuilder,
) -> Result<(), ConfigError> {
    let meta: TypeMeta = serde_json::from_str(raw)
        .map_err(|e| ConfigError::new(format!("{where_}: not a Kubernetes object: {e}")))?;
    let kind = meta.kind.as_deref().or(default_kind).unwrap_or("");
    let name = meta
        .metadata
        .as_ref()
        .map(|m| match (&m.namespace, &m.name) {
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => n.clone(),
            _ => "<unnamed>".to_string(),
        })
        .unwrap_or_else(|| "<unnamed>".to_string());
    if kind.is_empty() {
        return Err(ConfigError::new(format!(
            "{where_} ({name}): missing field `kind`"
        )));
    }
    if kind == "List" || kind.ends_with("List") {
        // A nested list (e.g. a multi-document file of lists).
        let mut de = serde_json::Deserializer::from_str(raw);
        return ListVisitor {
            where_: where_.to_string(),
            builder: b,
        }
        .deserialize(&mut de)
        .map_err(|e| ConfigError::new(e.to_string()));
    }
    if !KNOWN_KINDS.contains(&kind) {
        b.warn(format!(
            "{where_}: skipping {kind} {name}: kind not used by the engine"
        ));
        return Ok(());
    }
    let ctx = |e: String| ConfigError::new(format!("{where_} ({kind} {name}): {e}"));
    macro_rules! typed {
        ($t:ty) => {{
            let de = &mut serde_json::Deserializer::from_str(raw);
            let v: $t = serde_path_to_error::deserialize(de)
                .map_err(|e| ctx(format!("field `{}`: {}", e.path(), e.inner())))?;
            v
        }};
    }
    use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
    match kind {
        "Node" => b
            .add_node(&typed!(core::Node))
            .map_err(|e| ctx(e.to_string()))?,
        "Pod" => b
            .add_pod(&typed!(core::Pod))
            .map_err(|e| ctx(e.to_string()))?,
        "Namespace" => b.add_namespace(&typed!(core::Namespace)),
        "PriorityClass" => {
            b.add_priority_class(&typed!(k8s_openapi::api::scheduling::v1::PriorityClass))
        }
        "PodDisruptionBudget" => {
            b.add_pdb(&typed!(k8s_openapi::api::policy::v1::PodDisruptionBudget))
        }
        "ReplicaSet" => b.add_replica_set(&typed!(apps::ReplicaSet)),
        "Deployment" => b.add_deployment(&typed!(apps::Deployment)),
        "StatefulSet" => b.add_stateful_set(&typed!(apps::StatefulSet)),
        "Job" => b.add_job(&typed!(batch::Job)),
        "PersistentVolumeClaim" => b.add_pvc(&typed!(core::PersistentVolumeClaim)),
        _ => {}
    }
    Ok(())
}

/// Streams a `List` object: reads `kind` and `items`, converting each item as it is parsed.
struct ListVisitor<'b> {
    where_: String,
    builder: &'b mut SnapshotBuilder,
}

impl<'de, 'b> DeserializeSeed<'de> for ListVisitor<'b> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'b> Visitor<'de> for ListVisitor<'b> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes List object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut list_kind: Option<String> = None;
        let mut saw_items = false;
        // `kind` normally precedes `items` (kubectl prints it first); if not, items need their own kind.
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "kind" => list_kind = Some(map.next_value()?),
                "items" => {
                    saw_items = true;
                    let default_kind = list_kind
                        .as_deref()
                        .and_then(item_kind_from_list)
                        .map(str::to_string);
                    map.next_value_seed(ItemsSeed {
                        where_: &self.where_,
                        default_kind: default_kind.as_deref(),
                        builder: self.builder,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !saw_items {
            return Err(serde::de::Error::custom(format!(
                "{}: a List needs an `items` array",
                self.where_
            )));
        }
        Ok(())
    }
}

struct ItemsSeed<'a, 'b> {
    where_: &'a str,
    default_kind: Option<&'a str>,
    builder: &'b mut SnapshotBuilder,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of Kubernetes objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            let where_ = if self.where_.is_empty() {
                format!("items[{i}]")
            } else {
                format!("{}.items[{i}]", self.where_)
            };
            add_json_object(raw.get(), &where_, self.default_kind, self.builder)
                .map_err(|e| serde::de::Error::custom(e.0))?;
            i += 1;
        }
        Ok(())
    }
}

fn load_json(bytes: &[u8], b: &mut SnapshotBuilder) -> Result<(), ConfigError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ConfigError::new(format!("the snapshot is not UTF-8: {e}")))?;
    let stream = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
    for (doc, next) in stream.enumerate() {
        let raw = next.map_err(|e| {
            ConfigError::new(format!(
                "invalid JSON at line {}, column {}: {e}",
                e.line(),
                e.column()
            ))
        })?;
        let where_ = if doc == 0 {
            String::new()
        } else {
            format!("document {doc}")
        };
        if raw.get().trim_start().starts_with('[') {
            let items: Vec<&RawValue> = serde_json::from_str(raw.get())
                .map_err(|e| ConfigError::new(format!("invalid JSON array: {e}")))?;
            for (i, item) in items.iter().enumerate() {
                add_json_object(item.get(), &format!("[{i}]"), None, b)?;
            }
        } else {
            add_json_object(
                raw.get(),
                if where_.is_empty() { "object" } else { &where_ },
                None,
                b,
            )
            .map_err(|e| ConfigError::new(e.0.replace("object.items", "items")))?;
        }
    }
    Ok(())
}

fn load_yaml(bytes: &[u8], b: &mut SnapshotBuilder) -> Result<(), ConfigError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ConfigError::new(format!("the snapshot is not UTF-8: {e}")))?;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| ConfigError::new(format!("invalid YAML: {e}")))?;
    let multi = docs.len() > 1;
    for (d, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let raw = serde_json::to_string(&doc).map_err(|e| ConfigError::new(e.to_string()))?;
        let where_ = if multi {
            format!("document {d}")
        } else {
            "object".to_string()
        };
        add_json_object(&raw, &where_, None, b)
            .map_err(|e| ConfigError::new(e.0.replace("object.items", "items")))?;
    }
    Ok(())
}
