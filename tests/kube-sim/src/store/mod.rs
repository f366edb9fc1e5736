//! Generic object store: JSON objects keyed by group/resource + namespace + name, a global
//! resourceVersion counter, and a bounded per-resource event history for watches.
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

use crate::clock::SimClock;
use crate::error::ApiResult;
use crate::resources::ResourceDef;
use crate::versions;

mod delete;
pub use delete::precondition_failure;
pub mod objects;
mod watch;
mod write;

use objects::Objects;

/// `(group, resource)`.
pub type GrKey = (&'static str, &'static str);

/// Watch event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as stored in the history and broadcast to watchers.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub gr: GrKey,
    pub kind: EventType,
    pub object: Arc<Value>,
    /// The previous state (for MODIFIED), so filtered watches can emit ADDED/DELETED transitions.
    pub old: Option<Arc<Value>>,
}

#[derive(Default)]
struct History {
    events: VecDeque<Arc<Event>>,
    /// Highest resourceVersion dropped from the window; watches from older versions get 410.
    compacted: u64,
}

#[derive(Default)]
struct Inner {
    rv: u64,
    objects: Objects,
    history: HashMap<GrKey, History>,
}

/// How an update treats `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Main resource: `status` changes are ignored when the kind has a status subresource.
    Main,
    /// `/status` subresource: only `status` changes are taken.
    Status,
    /// Controllers: spec and status are both taken.
    Full,
}

/// Delete options (`metav1.DeleteOptions` subset).
#[derive(Clone, Debug, Default)]
pub struct DeleteOpts {
    pub grace_period_seconds: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
    /// `Orphan`, `Background`, `Foreground`; anything but Orphan deletes dependents now.
    pub propagation: Option<String>,
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFrom {
    /// `resourceVersion` "" or "0": synthetic ADDED events for the current state, then live.
    Current,
    /// Events strictly after this resourceVersion, or 410 if they left the window.
    After(u64),
}

/// Replay events, the live receiver, and the resourceVersion the watch starts at.
pub type WatchStart = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>, u64);

/// The object store.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    clock: SimClock,
    history_limit: usize,
    seed: AtomicU64,
}

/// The string `metadata.<field>` of `obj` ("" when absent).
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The stored bytes of `def`'s objects (in `ns`, or all), in key order.
fn stored_items(inner: &Inner, def: &'static ResourceDef, ns: Option<&str>) -> Vec<objects::Bytes> {
    inner
        .objects
        .map(&stored_gr(def))
        .map(|m| match ns {
            Some(want) => m
                .range((want.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == want)
                .map(|(_, b)| b.clone())
                .collect(),
            None => m.values().cloned().collect(),
        })
        .unwrap_or_default()
}

fn meta_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let map = obj.as_object_mut().expect("object ensured above");
    let m = map.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut().expect("object ensured above")
}

fn finalizers_empty(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|a| a.is_empty())
}

/// Everything in metadata except the resourceVersion and managedFields, plus the rest.
fn same_ignoring_rv(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    };
    strip(a) == strip(b)
}

/// The key `def`'s objects are stored under (shared by group versions of one resource).
fn stored_gr(def: &'static ResourceDef) -> GrKey {
    let s = versions::storage_def(def);
    (s.group, s.resource)
}

/// Sets `apiVersion`/`kind` to `def`'s.
fn set_type(def: &ResourceDef, obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(def.api_version()));
        map.insert("kind".into(), json!(def.kind));
    }
}

/// An object written through `def`, type-checked in `def`'s form and converted to the stored
/// form, with the definition of that form.
fn into_storage(
    def: &'static ResourceDef,
    mut obj: Value,
) -> ApiResult<(&'static ResourceDef, Value)> {
    if !versions::is_converted(def) {
        return Ok((def, obj));
    }
    set_type(def, &mut obj);
    crate::schema::canonicalize_bytes(def, &mut obj);
    crate::schema::validate(def, &obj)?;
    Ok((versions::storage_def(def), versions::to_storage(def, obj)))
}

impl Store {
    pub fn new(clock: SimClock, history_limit: usize) -> Self {
        let (tx, _) = broadcast::channel(16384);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(42);
        Store {
            inner: Mutex::new(Inner::default()),
            tx,
            clock,
            history_limit: history_limit.max(1),
            seed: AtomicU64::new(seed),
        }
    }

    pub fn clock(&self) -> &SimClock {
        &self.clock
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn random(&self) -> u64 {
        // splitmix64
        let mut z = self
            .seed
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A random RFC 4122 v4 UID.
    pub fn new_uid(&self) -> String {
        let a = self.random();
        let b = self.random();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    /// 5-character suffix from the alphabet of `k8s.io/apiserver/pkg/storage/names`.
    fn name_suffix(&self) -> String {
        const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = self.random();
        (0..5)
            .map(|_| {
                let c = ALPHA[(r % ALPHA.len() as u64) as usize] as char;
                r /= ALPHA.len() as u64;
                c
            })
            .collect()
    }

    /// Subscribes to every future event (all resources).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    pub fn get(&self, def: &'static ResourceDef, ns: &str, name: &str) -> Option<Value> {
        let inner = self.lock();
        let raw = inner
            .objects
            .raw(&stored_gr(def), &(ns.to_string(), name.to_string()))
            .cloned();
        drop(inner);
        raw.map(|b| versions::present(def, objects::decode(&b)))
    }

    /// Objects of a resource (all namespaces when `ns` is None), sorted by namespace/name,
    /// with the current global resourceVersion.
    pub fn list(&self, def: &'static ResourceDef, ns: Option<&str>) -> (Vec<Value>, u64) {
        let (raw, rv) = self.list_raw(def, ns);
        let items = raw
            .iter()
            .map(|b| versions::present(def, objects::decode(b)))
            .collect();
        (items, rv)
    }

    /// The stored bytes of a resource's objects (all namespaces when `ns` is None), sorted by
    /// namespace/name, with the current global resourceVersion. Only reference counts are
    /// taken under the lock; callers decode or copy the bytes after it is released.
    pub fn list_raw(
        &self,
        def: &'static ResourceDef,
        ns: Option<&str>,
    ) -> (Vec<objects::Bytes>, u64) {
        let inner = self.lock();
        (stored_items(&inner, def, ns), inner.rv)
    }

    /// [`Store::list_page`] as stored bytes (the form a client gets when `def` is not a
    /// converted version), with the key of the page's last object. References are taken
    /// under the lock; `keep` runs on decoded objects after it is released.
    pub fn list_page_raw(
        &self,
        def: &'static ResourceDef,
        ns: Option<&str>,
        after: Option<(String, String)>,
        limit: usize,
        keep: Option<&(dyn Fn(&Value) -> bool + Send + Sync)>,
    ) -> (Vec<objects::Bytes>, Option<(String, String)>, bool, u64) {
        use std::ops::Bound;
        let (refs, rv) = {
            let inner = self.lock();
            let Some(m) = inner.objects.map(&stored_gr(def)) else {
                return (Vec::new(), None, false, inner.rv);
            };
            let start = match after {
                Some(k) => Bound::Excluded(k),
                None => Bound::Unbounded,
            };
            let in_range = m
                .range((start, Bound::Unbounded))
                .filter(|((n, _), _)| ns.is_none_or(|want| want == n))
                .map(|(k, b)| (k.clone(), b.clone()));
            let refs: Vec<_> = if keep.is_none() && limit > 0 {
                in_range.take(limit + 1).collect()
            } else {
                in_range.collect()
            };
            (refs, inner.rv)
        };
        let converted = versions::is_converted(def);
        let mut matching = refs.into_iter().filter(|(_, b)| {
            keep.is_none_or(|k| {
                let v = objects::decode(b);
                k(&if converted {
                    versions::present(def, v)
                } else {
                    v
                })
            })
        });
        let limit = if limit == 0 { usize::MAX } else { limit };
        let page: Vec<_> = matching.by_ref().take(limit).collect();
        let more = matching.next().is_some();
        let last = page.last().map(|(k, _)| k.clone());
        (page.into_iter().map(|(_, b)| b).collect(), last, more, rv)
    }

    /// One page of a list: objects after the key `after` (exclusive) in namespace/name order that
    /// are in `ns` (all when None) and pass `keep`, at most `limit` of them (0 = no limit); also
    /// whether more remain, and the current resourceVersion. Only the page is cloned.
    pub fn list_page(
        &self,
        def: &'static ResourceDef,
        ns: Option<&str>,
        after: Option<(String, String)>,
        limit: usize,
        keep: impl Fn(&Value) -> bool,
    ) -> (Vec<Value>, bool, u64) {
        use std::ops::Bound;
        let inner = self.lock();
        // Group versions of one resource share storage (e.g. core/v1 and events.k8s.io/v1
        // Events); selectors see the object in the form asked for.
        let Some(m) = inner.objects.map(&stored_gr(def)) else {
            return (Vec::new(), false, inner.rv);
        };
        let converted = versions::is_converted(def);
        let start = match after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        };
        let mut matching = m
            .range((start, Bound::Unbounded))
            .filter(|((n, _), _)| ns.is_none_or(|want| want == n))
            .filter_map(|(_, b)| {
                let v = objects::decode(b);
                let shown = if converted {
                    versions::present(def, v)
                } else {
                    v
                };
                keep(&shown).then_some(shown)
            });
        let limit = if limit == 0 { usize::MAX } else { limit };
        let items: Vec<Value> = matching.by_ref().take(limit).collect();
        let more = matching.next().is_some();
        (items, more, inner.rv)
    }

    /// Keys (namespace, name) of a resource's objects, in order.
    pub fn keys(&self, def: &'static ResourceDef) -> Vec<(String, String)> {
        let inner = self.lock();
        inner
            .objects
            .map(&stored_gr(def))
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Several resources read under one lock (a consistent snapshot).
    pub fn snapshot(&self, defs: &[&'static ResourceDef]) -> Vec<Vec<Value>> {
        let inner = self.lock();
        defs.iter()
            .map(|d| {
                inner
                    .objects
                    .map(&stored_gr(d))
                    .map(|m| {
                        m.values()
                            .map(|b| versions::present(d, objects::decode(b)))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Stores `new` in place of `old` and records the Modified event.
    fn put_modified(
        &self,
        inner: &mut Inner,
        gr: GrKey,
        key: objects::Key,
        new: Value,
        old: Value,
    ) {
        inner.objects.put(gr, key, &new);
        self.push(inner, gr, EventType::Modified, new, Some(old));
    }

    fn push(
        &self,
        inner: &mut Inner,
        gr: GrKey,
        kind: EventType,
        object: Value,
        old: Option<Value>,
    ) {
        let ev = Arc::new(Event {
            rv: inner.rv,
            gr,
            kind,
            object: Arc::new(object),
            old: old.map(Arc::new),
        });
        let h = inner.history.entry(gr).or_default();
        h.events.push_back(ev.clone());
        while h.events.len() > self.history_limit {
            if let Some(e) = h.events.pop_front() {
                h.compacted = e.rv;
            }
        }
        let _ = self.tx.send(ev);
    }
}
