//! Watch streams: newline-delimited `{"type": …, "object": …}` JSON events.
use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

use crate::SimState;
use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Event, EventType, Store, WatchFrom};
use crate::versions;

/// What a watch selects.
pub struct WatchSpec {
    pub def: &'static ResourceDef,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub from: WatchFrom,
    pub timeout: Duration,
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: end the initial events with an annotated BOOKMARK.
    pub initial_events_end: bool,
    /// Name filter for `fieldSelector=metadata.name=…` on a single-object watch.
    pub name: Option<String>,
    /// `Accept: …;as=Table`: each event carries a one-row Table (kubectl get -w), printed
    /// at this clock's time.
    pub table: Option<crate::clock::SimClock>,
}

impl WatchSpec {
    fn selects(&self, obj: &Value) -> bool {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.namespace.as_deref().is_none_or(|n| n == ns)
            && self.name.as_deref().is_none_or(|n| n == name)
            && self.labels.matches_object(obj)
            && self.fields.matches(obj)
    }

    /// The event as this filtered watch sees it (MODIFIED can become ADDED/DELETED).
    /// Events arrive in the stored form and are converted to the watched group version.
    fn render(&self, ev: &Event) -> Option<Bytes> {
        if ev.gr != Store::watch_key(self.def) {
            return None;
        }
        let converted = versions::is_converted(self.def);
        let object = if converted {
            Arc::new(versions::present(self.def, (*ev.object).clone()))
        } else {
            ev.object.clone()
        };
        let now = self.selects(&object);
        let kind = match (ev.kind, &ev.old) {
            (EventType::Modified, Some(old)) => {
                let was = if converted {
                    self.selects(&versions::present(self.def, (**old).clone()))
                } else {
                    self.selects(old)
                };
                match (was, now) {
                    (true, true) => EventType::Modified,
                    (false, true) => EventType::Added,
                    (true, false) => EventType::Deleted,
                    (false, false) => return None,
                }
            }
            (k, _) if now => k,
            _ => return None,
        };
        match &self.table {
            Some(clock) => {
                let rv = object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let t =
                    super::table::table(self.def, std::slice::from_ref(&*object), rv, clock.now());
                line(json!({"type": kind.as_str(), "object": t}))
            }
            None => line(json!({"type": kind.as_str(), "object": &*object})),
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Option<Bytes> {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(json!({"type": "BOOKMARK", "object": {
            "kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta}}))
    }
}

fn line(v: Value) -> Option<Bytes> {
    let mut s = serde_json::to_vec(&v).ok()?;
    s.push(b'\n');
    Some(Bytes::from(s))
}

fn error_line(e: &ApiError) -> Bytes {
    line(json!({"type": "ERROR", "object": e.to_status()})).unwrap_or_default()
}

/// Starts the stream. Ends on `timeoutSeconds`, [`crate::SimHandle::drop_watches`],
/// shutdown, or a lagging receiver (then an ERROR 410 event is sent first).
pub fn respond(st: Arc<SimState>, spec: WatchSpec) -> Response {
    let started = st.store.watch(spec.def, spec.from);
    let mut drop_rx = st.drop_watches_rx();
    let mut shutdown = st.shutdown_rx();
    let bookmark_every = st.bookmark_interval.max(Duration::from_millis(100));
    let stream = async_stream::stream! {
        let (initial, mut rx, mut last_rv) = match started {
            Ok(x) => x,
            Err(e) => {
                // Like the watch cache: HTTP 200 and an ERROR event carrying a 410 Status.
                yield Ok::<Bytes, std::convert::Infallible>(error_line(&e));
                return;
            }
        };
        for ev in &initial {
            if let Some(b) = spec.render(ev) {
                yield Ok(b);
            }
        }
        if spec.initial_events_end && let Some(b) = spec.bookmark(last_rv, true) {
            yield Ok(b);
        }
        let deadline = tokio::time::Instant::now() + spec.timeout;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                _ = drop_rx.changed() => break,
                _ = shutdown.changed() => break,
                _ = tick.tick(), if spec.bookmarks => {
                    if let Some(b) = spec.bookmark(last_rv, false) {
                        yield Ok(b);
                    }
                }
                r = rx.recv() => match r {
                    Ok(ev) => {
                        if ev.gr != Store::watch_key(spec.def) {
                            continue;
                        }
                        last_rv = last_rv.max(ev.rv);
                        if let Some(b) = spec.render(&ev) {
                            yield Ok(b);
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        yield Ok(error_line(&ApiError::expired(format!(
                            "too old resource version: {last_rv} (watcher fell behind)"))));
                        break;
                    }
                    Err(RecvError::Closed) => break,
                },
            }
        }
    };
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}
