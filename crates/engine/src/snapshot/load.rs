//! Loading a snapshot from a Kubernetes `List` file (JSON or YAML, single or multi-document),
//! such as `kubectl get nodes,pods,rs,deploy,sts,pdb,pc,ns,pvc -A -o yaml` prints.
//!
//! JSON is streamed item by item (each item is converted to the lean model before the next is
//! parsed), so a 150,000-pod file never exists as a tree of full Kubernetes objects.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::decode::{add_json_object, item_kind_from_list};
use super::{Snapshot, SnapshotBuilder};
use crate::error::ConfigError;

/// Loads a snapshot file. Errors name the document / item index, kind and name. A JSON `List` is
/// streamed from the mapped file (see [`super::stream`]); anything else is loaded from the whole
/// text at once. Pipes (e.g. `--snapshot <(kubectl get ... -o json)`) are read into memory first.
pub fn load_file(path: &std::path::Path) -> Result<Snapshot, ConfigError> {
    let bytes = std::fs::File::open(path)
        .and_then(super::stream::FileBytes::open)
        .map_err(|e| ConfigError::new(format!("cannot read snapshot {}: {e}", path.display())))?;
    let in_file =
        |e: ConfigError| ConfigError::new(format!("snapshot {}: {}", path.display(), e.0));
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && let Some(builder) = super::stream::load_json_list(&bytes).map_err(in_file)?
    {
        return Ok(builder.build());
    }
    load_bytes(&bytes).map_err(in_file)
}

/// Loads a snapshot from bytes (JSON if it starts with `{` or `[`, else YAML). Objects of each kind
/// are put in the order the API lists them, whatever their order in the file.
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
    builder.order_as_listed();
    Ok(builder.build())
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
