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

/// Loads a snapshot file. Errors name the document / item index, kind and name. A JSON `List` is
/// streamed (see [`super::stream`]); anything else is read into memory first.
pub fn load_file(path: &std::path::Path) -> Result<Snapshot, ConfigError> {
    let mut head = [0u8; 64];
    let starts_with_brace = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head).map(|n| head[..n].to_vec()))
        .ok()
        .and_then(|h| h.into_iter().find(|b| !b.is_ascii_whitespace()))
        == Some(b'{');
    if starts_with_brace {
        match super::stream::load_json_list_file(path) {
            Ok(Some(builder)) => return Ok(builder.build()),
            Ok(None) => {}
            Err(e) => {
                return Err(ConfigError::new(format!(
                    "snapshot {}: {}",
                    path.display(),
                    e.0
                )));
            }
        }
    }
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

/// Decodes `raw` without path tracking (it costs a third of the decoding time); only when that
/// fails, decodes again with it so the error names the field.
pub(super) fn decode_json<'a, T: Deserialize<'a>>(raw: &'a str) -> Result<T, String> {
    serde_json::from_str::<T>(raw).map_err(|plain| {
        let de = &mut serde_json::Deserializer::from_str(raw);
        match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(_) => plain.to_string(),
            Err(e) => format!("field `{}`: {}", e.path(), e.inner()),
        }
    })
}

/// Finds the value of the top-level `"kind"` key of a JSON object without parsing the rest
/// (kubectl prints `apiVersion` and `kind` first, so this usually stops after a few bytes).
pub(super) fn peek_kind(raw: &str) -> Option<&str> {
    let b = raw.as_bytes();
    let (mut i, mut depth) = (0usize, 0i32);
    let mut expect_key = false;
    while i < b.len() {
        match b[i] {
            b'{' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' if depth == 1 => expect_key = true,
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                let text = raw.get(start..i.min(b.len()))?;
                if depth == 1 && expect_key {
                    expect_key = false;
                    if text == "kind" {
                        // Skip `:` and whitespace, then read the string value.
                        let rest = raw
                            .get(i + 1..)?
                            .trim_start()
                            .strip_prefix(':')?
                            .trim_start();
                        let value = rest.strip_prefix('"')?;
                        let end = value.find(['"', '\\'])?;
                        return (value.as_bytes().get(end) == Some(&b'"')).then(|| &value[..end]);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `namespace/name` of a JSON object, for error messages.
fn object_name(raw: &str) -> String {
    serde_json::from_str::<TypeMeta>(raw)
        .ok()
        .and_then(|m| m.metadata)
        .map(|m| match (&m.namespace, &m.name) {
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => n.clone(),
            _ => "<unnamed>".to_string(),
        })
        .unwrap_or_else(|| "<unnamed>".to_string())
}

/// Adds one object (given as JSON text) to the builder.
fn add_json_object(
    raw: &str,
    where_: &dyn Fn() -> String,
    default_kind: Option<&str>,
    b: &mut SnapshotBuilder,
) -> Result<(), ConfigError> {
    add_peeked_json_object(raw, peek_kind(raw), where_, default_kind, b)
}

/// Adds one object (given as JSON text) to the builder, with its kind as [`peek_kind`] found it
/// (the streaming loader peeks once per item).
pub(super) fn add_peeked_json_object(
    raw: &str,
    peeked: Option<&str>,
    where_: &dyn Fn() -> String,
    default_kind: Option<&str>,
    b: &mut SnapshotBuilder,
) -> Result<(), ConfigError> {
    let kind = match peeked {
        Some(k) => k,
        None => {
            // Escaped or absent: parse properly.
            let meta: TypeMeta = serde_json::from_str(raw).map_err(|e| {
                ConfigError::new(format!("{}: not a Kubernetes object: {e}", where_()))
            })?;
            match meta.kind {
                Some(k) => return add_json_object_of_kind(raw, &k, where_, b),
                None => default_kind.unwrap_or(""),
            }
        }
    };
    add_json_object_of_kind(raw, kind, where_, b)
}

fn add_json_object_of_kind(
    raw: &str,
    kind: &str,
    where_: &dyn Fn() -> String,
    b: &mut SnapshotBuilder,
) -> Result<(), ConfigError> {
    if kind.is_empty() {
        return Err(ConfigError::new(format!(
            "{} ({}): missing field `kind`",
            where_(),
            object_name(raw)
        )));
    }
    if kind == "List" || kind.ends_with("List") {
        // A nested list (e.g. a multi-document file of lists).
        let mut de = serde_json::Deserializer::from_str(raw);
        return ListVisitor {
            where_: where_(),
            builder: b,
        }
        .deserialize(&mut de)
        .map_err(|e| ConfigError::new(e.to_string()));
    }
    if !KNOWN_KINDS.contains(&kind) {
        b.warn(format!(
            "{}: skipping {kind} {}: kind not used by the engine",
            where_(),
            object_name(raw)
        ));
        return Ok(());
    }
    let ctx =
        |e: String| ConfigError::new(format!("{} ({kind} {}): {e}", where_(), object_name(raw)));
    macro_rules! typed {
        ($t:ty) => {
            decode_json::<$t>(raw).map_err(ctx)?
        };
    }
    use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
    match kind {
        "Node" => b
            .add_node(&typed!(core::Node))
            .map_err(|e| ctx(e.to_string()))?,
        "Pod" => {
            let mut view = super::view::PodView::default();
            if !view.fill_from_json(raw) {
                view = typed!(super::view::PodView);
            }
            b.add_pod_view(&view).map_err(|e| ctx(e.to_string()))?
        }
        "Namespace" => b.add_namespace(&typed!(core::Namespace)),
        "PriorityClass" => {
            b.add_priority_class(&typed!(k8s_openapi::api::scheduling::v1::PriorityClass))
        }
        "PodDisruptionBudget" => {
            b.add_pdb_owned(typed!(k8s_openapi::api::policy::v1::PodDisruptionBudget))
        }
        "ReplicaSet" => {
            b.add_replica_set_facts(super::workloads::replica_set_facts(raw).map_err(ctx)?)
        }
        "Deployment" => {
            b.add_deployment_facts(super::workloads::deployment_facts(raw).map_err(ctx)?)
        }
        "StatefulSet" => b.add_stateful_set_owned(typed!(apps::StatefulSet)),
        "Job" => b.add_job_owned(typed!(batch::Job)),
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
            let parent = self.where_;
            let where_ = || {
                if parent.is_empty() {
                    format!("items[{i}]")
                } else {
                    format!("{parent}.items[{i}]")
                }
            };
            add_json_object(raw.get(), &where_, self.default_kind, self.builder)
                .map_err(|e| serde::de::Error::custom(e.0))?;
            i += 1;
        }
        Ok(())
    }
}

/// A `List` document with its items as raw JSON slices.
#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    kind: Option<String>,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

/// Converts the items of one `List` on up to two threads, keeping file order.
fn load_list_parallel(list: RawList<'_>, b: &mut SnapshotBuilder) -> Result<(), ConfigError> {
    let items = list.items.unwrap_or_default();
    let default_kind = list.kind.as_deref().and_then(item_kind_from_list);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let chunk = items.len().div_ceil(threads).max(1);
    let results: Vec<Result<SnapshotBuilder, ConfigError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                scope.spawn(move || {
                    let mut local = SnapshotBuilder::new();
                    for (i, item) in part.iter().enumerate() {
                        let where_ = || format!("items[{}]", c * chunk + i);
                        add_json_object(item.get(), &where_, default_kind, &mut local)?;
                    }
                    Ok(local)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ConfigError::new("a snapshot loader thread panicked")))
            })
            .collect()
    });
    for r in results {
        b.merge(r?);
    }
    Ok(())
}

fn load_json(bytes: &[u8], b: &mut SnapshotBuilder) -> Result<(), ConfigError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ConfigError::new(format!("the snapshot is not UTF-8: {e}")))?;
    // The common case, one `List` object: convert its items in parallel.
    if let Ok(list) = serde_json::from_str::<RawList>(text)
        && list.items.is_some()
        && list.kind.as_deref().is_some_and(|k| k.ends_with("List"))
    {
        return load_list_parallel(list, b);
    }
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
                add_json_object(item.get(), &|| format!("[{i}]"), None, b)?;
            }
        } else {
            let label = if where_.is_empty() {
                "object".to_string()
            } else {
                where_
            };
            add_json_object(raw.get(), &|| label.clone(), None, b)
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
        add_json_object(&raw, &|| where_.clone(), None, b)
            .map_err(|e| ConfigError::new(e.0.replace("object.items", "items")))?;
    }
    Ok(())
}
