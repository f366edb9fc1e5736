//! Per-object decoding of snapshot files: one Kubernetes object (as JSON text) is converted into
//! the lean model by its `kind`; nested `List`s are streamed item by item.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::SnapshotBuilder;
use super::json::{decode_json, peek_kind};
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
    "HorizontalPodAutoscaler",
];

/// The `kind` of a list item, inferred from the list kind (`PodList` → `Pod`) when items omit it.
pub(super) fn item_kind_from_list(list_kind: &str) -> Option<&str> {
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
pub(super) fn add_json_object(
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
            .add_node(&super::nodes::lean_node(raw).map_err(ctx)?)
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
        "HorizontalPodAutoscaler" => {
            if let Some(t) = super::autoscalers::hpa_target(raw).map_err(ctx)? {
                b.add_hpa_target(t)
            }
        }
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
