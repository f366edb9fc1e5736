//! The compact object table: each object is kept as its serialized JSON (shared, immutable
//! bytes) and decoded on demand, plus an index of dependents by owner uid for garbage
//! collection. A 150,000-pod cluster holds about the size of its JSON instead of the
//! 10–25× a tree of `serde_json::Value`s takes.
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::GrKey;

/// `(namespace, name)` (`""` namespace for cluster-scoped objects).
pub type Key = (String, String);

/// Serialized JSON of one stored object.
pub type Bytes = Arc<[u8]>;

/// Decodes stored bytes (they were encoded by [`Objects::put`], so this does not fail in
/// practice; a damaged entry reads as `null` rather than panicking).
pub fn decode(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .filter(|u| !u.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// All stored objects.
#[derive(Default)]
pub struct Objects {
    by_gr: HashMap<GrKey, BTreeMap<Key, Bytes>>,
    /// Owner uid → objects naming it in `metadata.ownerReferences`.
    dependents: HashMap<String, BTreeSet<(GrKey, Key)>>,
}

impl Objects {
    /// The objects of one resource, by key.
    pub fn map(&self, gr: &GrKey) -> Option<&BTreeMap<Key, Bytes>> {
        self.by_gr.get(gr)
    }

    pub fn contains(&self, gr: &GrKey, key: &Key) -> bool {
        self.by_gr.get(gr).is_some_and(|m| m.contains_key(key))
    }

    /// The stored bytes of an object.
    pub fn raw(&self, gr: &GrKey, key: &Key) -> Option<&Bytes> {
        self.by_gr.get(gr)?.get(key)
    }

    /// The objects at `keys` that are still stored, with their keys.
    pub fn get_all(&self, keys: Vec<(GrKey, Key)>) -> Vec<(GrKey, Key, Value)> {
        let stored = |(gr, key): (GrKey, Key)| {
            let object = self.get(&gr, &key)?;
            Some((gr, key, object))
        };
        keys.into_iter().filter_map(stored).collect()
    }

    /// An object, decoded.
    pub fn get(&self, gr: &GrKey, key: &Key) -> Option<Value> {
        self.raw(gr, key).map(|b| decode(b))
    }

    /// Stores (or replaces) an object.
    pub fn put(&mut self, gr: GrKey, key: Key, obj: &Value) {
        let bytes: Bytes = match serde_json::to_vec(obj) {
            Ok(v) => Arc::from(v),
            Err(e) => {
                tracing::error!("kube-sim cannot encode {key:?}: {e}");
                return;
            }
        };
        self.unlink(gr, &key);
        for uid in owner_uids(obj) {
            self.dependents
                .entry(uid)
                .or_default()
                .insert((gr, key.clone()));
        }
        self.by_gr.entry(gr).or_default().insert(key, bytes);
    }

    /// Removes an object; returns it decoded.
    pub fn take(&mut self, gr: GrKey, key: &Key) -> Option<Value> {
        let old = self.unlink(gr, key)?;
        self.by_gr.get_mut(&gr).and_then(|m| m.remove(key));
        Some(old)
    }

    /// Drops the dependents entries of the stored object at `key`; returns it decoded.
    fn unlink(&mut self, gr: GrKey, key: &Key) -> Option<Value> {
        let old = self.get(&gr, key)?;
        for uid in owner_uids(&old) {
            if let Some(set) = self.dependents.get_mut(&uid) {
                set.remove(&(gr, key.clone()));
                if set.is_empty() {
                    self.dependents.remove(&uid);
                }
            }
        }
        Some(old)
    }

    /// Objects whose ownerReferences name `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(GrKey, Key)> {
        self.dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every object in namespace `ns` (all resources).
    pub fn in_namespace(&self, ns: &str) -> Vec<(GrKey, Key)> {
        let mut out = Vec::new();
        for (gr, m) in &self.by_gr {
            let from = (ns.to_string(), String::new());
            out.extend(
                m.range(from..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(k, _)| (*gr, k.clone())),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PODS: GrKey = ("", "pods");
    const RS: GrKey = ("apps", "replicasets");

    fn key(ns: &str, name: &str) -> Key {
        (ns.to_string(), name.to_string())
    }

    #[test]
    fn stores_decodes_and_indexes_dependents() {
        let mut o = Objects::default();
        let pod = json!({"metadata": {"name": "p", "namespace": "a",
            "ownerReferences": [{"uid": "rs-1"}, {"uid": "x"}]}, "spec": {"n": 1.5}});
        o.put(PODS, key("a", "p"), &pod);
        o.put(
            RS,
            key("a", "r"),
            &json!({"metadata": {"name": "r", "namespace": "a"}}),
        );
        o.put(
            PODS,
            key("b", "q"),
            &json!({"metadata": {"name": "q", "namespace": "b"}}),
        );
        assert_eq!(o.get(&PODS, &key("a", "p")), Some(pod.clone()));
        assert_eq!(o.dependents_of("rs-1"), vec![(PODS, key("a", "p"))]);
        let mut in_a = o.in_namespace("a");
        in_a.sort();
        assert_eq!(in_a, vec![(PODS, key("a", "p")), (RS, key("a", "r"))]);

        // Replacing drops the old owners; taking removes the object and its index entries.
        o.put(
            PODS,
            key("a", "p"),
            &json!({"metadata": {"name": "p", "namespace": "a",
            "ownerReferences": [{"uid": "rs-2"}]}}),
        );
        assert!(o.dependents_of("rs-1").is_empty());
        assert_eq!(o.dependents_of("rs-2").len(), 1);
        assert!(o.take(PODS, &key("a", "p")).is_some());
        assert!(o.dependents_of("rs-2").is_empty());
        assert!(!o.contains(&PODS, &key("a", "p")));
        assert!(o.take(PODS, &key("a", "p")).is_none());
    }
}
