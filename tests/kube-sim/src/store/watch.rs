//! Watching: the events a watch replays first (the current objects, or the history after a
//! resourceVersion, 410 when it was compacted away), the live receiver, and compaction.
use std::sync::Arc;

use tokio::sync::broadcast;

use super::{
    Event, EventType, GrKey, Store, WatchFrom, WatchStart, meta_str, objects, stored_gr,
    stored_items,
};
use crate::error::{ApiError, ApiResult};
use crate::resources::{RESOURCES, ResourceDef};

impl Store {
    /// Drops the watch history of every resource (tests use it to provoke 410).
    pub fn compact(&self) {
        let mut inner = self.lock();
        let rv = inner.rv;
        for h in inner.history.values_mut() {
            h.events.clear();
            h.compacted = rv;
        }
    }

    /// Starts a watch: returns the events to replay first and a live receiver. Events carry
    /// the stored key and form (see [`Store::watch_key`], [`versions::present`]).
    pub fn watch(&self, def: &'static ResourceDef, from: WatchFrom) -> ApiResult<WatchStart> {
        let inner = self.lock();
        let gr = stored_gr(def);
        let rx = self.tx.subscribe();
        let initial = match from {
            WatchFrom::Current => inner
                .objects
                .map(&gr)
                .map(|m| {
                    m.values()
                        .map(|b| {
                            let v = &objects::decode(b);
                            Arc::new(Event {
                                rv: meta_str(v, "resourceVersion").parse().unwrap_or(0),
                                gr,
                                kind: EventType::Added,
                                object: Arc::new(v.clone()),
                                old: None,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
            WatchFrom::After(n) => {
                let (compacted, events) = inner
                    .history
                    .get(&gr)
                    .map(|h| {
                        (
                            h.compacted,
                            h.events.iter().filter(|e| e.rv > n).cloned().collect(),
                        )
                    })
                    .unwrap_or((0, Vec::new()));
                if n < compacted {
                    // The watch cache's message: the oldest version it can still start from.
                    return Err(ApiError::expired(format!(
                        "too old resource version: {n} ({compacted})"
                    )));
                }
                events
            }
        };
        Ok((initial, rx, inner.rv))
    }

    /// Starts a watch at the current state: the objects now stored (in `ns`, all when None), as
    /// stored bytes in namespace/name order, a live receiver subscribed under the same lock (no
    /// event is missed or seen twice), and the resourceVersion the watch starts at. The initial
    /// objects are rendered without being decoded ([`Store::watch`] decodes each one).
    pub fn watch_current_raw(
        &self,
        def: &'static ResourceDef,
        ns: Option<&str>,
    ) -> (Vec<objects::Bytes>, broadcast::Receiver<Arc<Event>>, u64) {
        let inner = self.lock();
        let rx = self.tx.subscribe();
        let items = stored_items(&inner, def, ns);
        (items, rx, inner.rv)
    }

    /// The key of the events a watch on `def` receives.
    pub fn watch_key(def: &'static ResourceDef) -> GrKey {
        stored_gr(def)
    }

    /// Definition for a `GrKey` (events carry only the key).
    pub fn def_of(gr: GrKey) -> Option<&'static ResourceDef> {
        RESOURCES
            .iter()
            .find(|d| d.group == gr.0 && d.resource == gr.1)
            .or_else(|| crate::crds::interned(gr))
    }
}
