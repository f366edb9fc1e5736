//! Group versions that share one stored resource. kube-apiserver serves core `v1` Events and
//! `events.k8s.io/v1` Events from the same storage (core `v1` form), converting on the way in
//! and out (`pkg/apis/events/v1` conversion): an Event written through either is read, listed
//! and watched through both.
use serde_json::{Map, Value, json};

use crate::resources::{ResourceDef, by_gvr};

/// `events.k8s.io/v1` field → core `v1` field. `metadata`, `eventTime`, `series`, `action`,
/// `reason`, `related`, `type` and `reportingInstance` keep their names.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Fields both Event versions spell the same way.
const EVENT_SHARED: &[&str] = &[
    "metadata",
    "eventTime",
    "series",
    "action",
    "reason",
    "related",
    "type",
    "reportingInstance",
];

fn is_events_v1(def: &ResourceDef) -> bool {
    def.is("events.k8s.io", "events")
}

/// The definition whose form and key the store keeps `def`'s objects under (`def` itself
/// unless another group version owns the storage).
pub fn storage_def(def: &'static ResourceDef) -> &'static ResourceDef {
    if is_events_v1(def) {
        by_gvr("", "v1", "events").unwrap_or(def)
    } else {
        def
    }
}

/// Whether `def` is served by converting another resource's stored objects.
pub fn is_converted(def: &'static ResourceDef) -> bool {
    !std::ptr::eq(storage_def(def), def)
}

/// Copies the known fields of `from` into a new object, renaming by `pairs` (from, to).
/// Unknown fields are dropped, as decoding into a typed object does.
fn rename(from: &Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) -> Value {
    let mut out = Map::new();
    if let Some(src) = from.as_object() {
        for (a, b) in pairs {
            if let Some(v) = src.get(a)
                && !v.is_null()
            {
                out.insert(b.to_string(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn shared_and(
    renames: impl Iterator<Item = (&'static str, &'static str)>,
) -> impl Iterator<Item = (&'static str, &'static str)> {
    EVENT_SHARED.iter().map(|f| (*f, *f)).chain(renames)
}

/// An object written through `def` in the stored form.
pub fn to_storage(def: &ResourceDef, obj: Value) -> Value {
    if !is_events_v1(def) {
        return obj;
    }
    let mut out = rename(&obj, shared_and(EVENT_RENAMES.iter().copied()));
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("kind".into(), json!("Event"));
        // `regarding` is optional in events.k8s.io/v1; core `involvedObject` is a struct.
        m.entry("involvedObject").or_insert_with(|| json!({}));
    }
    out
}

/// A stored object as `def`'s group version presents it.
pub fn present(def: &ResourceDef, obj: Value) -> Value {
    if !is_events_v1(def) {
        return obj;
    }
    let mut out = rename(
        &obj,
        shared_and(EVENT_RENAMES.iter().map(|(a, b)| (*b, *a))),
    );
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
        // An empty core `involvedObject` is an absent events.k8s.io `regarding`.
        if m.get("regarding")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            m.remove("regarding");
        }
        if m.get("deprecatedSource")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            m.remove("deprecatedSource");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_v1() -> &'static ResourceDef {
        by_gvr("events.k8s.io", "v1", "events").unwrap()
    }

    #[test]
    fn events_v1_is_stored_as_core_events() {
        let def = events_v1();
        assert!(is_converted(def));
        assert!(storage_def(def).is("", "events"));
        let core = by_gvr("", "v1", "events").unwrap();
        assert!(!is_converted(core));
    }

    #[test]
    fn every_field_maps_both_ways() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
            "reportingController": "ctl", "reportingInstance": "ctl-1",
            "action": "Evicting", "reason": "Evicted", "type": "Normal", "note": "n",
            "regarding": {"kind": "Pod", "name": "p"}, "related": {"kind": "Node", "name": "x"},
            "deprecatedSource": {"component": "c", "host": "h"},
            "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
            "deprecatedLastTimestamp": "2026-01-01T00:02:00Z", "deprecatedCount": 4,
            "unknownField": 1
        });
        let core = to_storage(events_v1(), v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "n");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["related"]["kind"], "Node");
        assert_eq!(core["reportingComponent"], "ctl");
        assert_eq!(core["reportingInstance"], "ctl-1");
        assert_eq!(core["source"]["host"], "h");
        assert_eq!(core["firstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(core["lastTimestamp"], "2026-01-01T00:02:00Z");
        assert_eq!(core["count"], 4);
        assert_eq!(core["series"]["count"], 3);
        assert!(core.get("note").is_none() && core.get("unknownField").is_none());
        let mut expected = v1;
        expected.as_object_mut().unwrap().remove("unknownField");
        assert_eq!(present(events_v1(), core), expected);
    }

    #[test]
    fn missing_regarding_is_an_empty_involved_object() {
        let core = to_storage(events_v1(), json!({"metadata": {"name": "e"}}));
        assert_eq!(core["involvedObject"], json!({}));
        assert!(present(events_v1(), core).get("regarding").is_none());
    }

    #[test]
    fn other_resources_pass_through() {
        let pods = by_gvr("", "v1", "pods").unwrap();
        let obj = json!({"spec": {"x": 1}, "note": "kept"});
        assert_eq!(to_storage(pods, obj.clone()), obj);
        assert_eq!(present(pods, obj.clone()), obj);
    }
}
