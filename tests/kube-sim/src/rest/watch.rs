//! Watch streams: newline-delimited `{"type": …, "object": …}` JSON events.
use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};

use super::Req;
use crate::SimState;
use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Event, EventType, Store, WatchFrom, objects};
use crate::versions;

/// Initial events are sent in chunks of about this many bytes.
const CHUNK: usize = 64 * 1024;

/// Whether a watch asks for its initial events (`sendInitialEvents=true`, client-go's
/// WatchList), checked as kube-apiserver's `validateWatchOptions` does: it needs
/// `resourceVersionMatch=NotOlderThan`, `resourceVersionMatch` needs `sendInitialEvents`, and
/// with the `WatchList` feature gate off ([`crate::SimHandle::set_watch_list`]) it is forbidden.
/// Every violation is listed in one 422 Invalid. The initial events end with an annotated
/// BOOKMARK only when the watch also allows bookmarks.
pub fn initial_events(st: &SimState, r: &Req) -> ApiResult<bool> {
    let send = r.q("sendInitialEvents").map(|v| v == "true" || v == "1");
    let matching = r.q("resourceVersionMatch").filter(|m| !m.is_empty());
    let mut errors: Vec<(&str, String)> = Vec::new();
    if send.is_some() {
        if matching != Some("NotOlderThan") {
            errors.push((
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                    .into(),
            ));
        }
        if !st.watch_list.load(std::sync::atomic::Ordering::Relaxed) {
            errors.push((
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".into(),
            ));
        }
    }
    if let Some(m) = matching {
        if send.is_none() {
            errors.push((
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".into(),
            ));
        }
        if m != "NotOlderThan" {
            errors.push((
                "resourceVersionMatch",
                format!("Unsupported value: \"{m}\": supported values: \"NotOlderThan\""),
            ));
        }
        if r.q("continue").is_some_and(|c| !c.is_empty()) {
            errors.push((
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided".into(),
            ));
        }
    }
    list_options_invalid(&errors)?;
    Ok(send == Some(true))
}

/// The `ListOptions` checks of a LIST (`validateListOptions` without watch).
pub fn list_options(r: &Req) -> ApiResult<()> {
    let mut errors: Vec<(&str, String)> = Vec::new();
    if let Some(m) = r.q("resourceVersionMatch").filter(|m| !m.is_empty()) {
        let rv = r.q("resourceVersion").unwrap_or("");
        if rv.is_empty() {
            errors.push((
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
                    .into(),
            ));
        }
        if r.q("continue").is_some_and(|c| !c.is_empty()) {
            errors.push((
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided".into(),
            ));
        }
        if m != "Exact" && m != "NotOlderThan" {
            errors.push((
                "resourceVersionMatch",
                format!(
                    "Unsupported value: \"{m}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
                ),
            ));
        }
        if m == "Exact" && rv == "0" {
            errors.push((
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
                    .into(),
            ));
        }
    }
    if r.q("sendInitialEvents").is_some() {
        errors.push((
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for list".into(),
        ));
    }
    list_options_invalid(&errors)
}

fn list_options_invalid(errors: &[(&str, String)]) -> ApiResult<()> {
    if errors.is_empty() {
        return Ok(());
    }
    let causes: Vec<(&str, &str)> = errors.iter().map(|(f, w)| (*f, w.as_str())).collect();
    Err(ApiError::invalid_fields(
        "ListOptions.meta.k8s.io",
        "",
        &causes,
    ))
}

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
        let ns = crate::store::meta_str(obj, "namespace");
        let name = crate::store::meta_str(obj, "name");
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

    /// Whether every object passes the filters, so the stored bytes can be sent as they are.
    fn unfiltered(&self) -> bool {
        self.table.is_none()
            && self.name.is_none()
            && self.labels.is_empty()
            && self.fields.0.is_empty()
            && !versions::is_converted(self.def)
    }

    /// Appends the synthetic ADDED event of a stored object (namespace already matched).
    fn push_added(&self, stored: &[u8], out: &mut Vec<u8>) {
        if self.unfiltered() {
            out.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":");
            out.extend_from_slice(stored);
            out.extend_from_slice(b"}\n");
            return;
        }
        let ev = Event {
            rv: 0,
            gr: Store::watch_key(self.def),
            kind: EventType::Added,
            object: Arc::new(objects::decode(stored)),
            old: None,
        };
        if let Some(b) = self.render(&ev) {
            out.extend_from_slice(&b);
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

/// What a watch sends before its live events.
enum Initial {
    /// Replayed history (a watch from a resourceVersion).
    Events(Vec<Arc<Event>>),
    /// The current objects as stored (a watch from the current state): synthetic ADDED events.
    Stored(Vec<objects::Bytes>),
}

/// Starts the stream. Ends on `timeoutSeconds`, [`crate::SimHandle::drop_watches`],
/// shutdown, or a lagging receiver (then an ERROR 410 event is sent first).
pub fn respond(st: Arc<SimState>, spec: WatchSpec) -> Response {
    let started = start(&st, &spec);
    let stops = Stops {
        drop_rx: st.drop_watches_rx(),
        shutdown: st.shutdown_rx(),
    };
    let bookmark_every = st.bookmark_interval.max(Duration::from_millis(100));
    let stream = async_stream::stream! {
        let (initial, rx, last_rv) = match started {
            Ok(x) => x,
            Err(e) => {
                // Like the watch cache: HTTP 200 and an ERROR event carrying a 410 Status.
                yield Ok::<Bytes, std::convert::Infallible>(error_line(&e));
                return;
            }
        };
        let mut initial_told = 0;
        for await (b, rv) in replay(&spec, &initial) {
            initial_told = initial_told.max(rv);
            yield Ok(b);
        }
        drop(initial);
        if spec.initial_events_end && let Some(b) = spec.bookmark(last_rv, true) {
            yield Ok(b);
        }
        let told = match spec.from {
            WatchFrom::After(n) => n.max(initial_told),
            WatchFrom::Current => last_rv,
        };
        for await b in live(&spec, rx, last_rv, told, stops, bookmark_every) {
            yield Ok(b);
        }
    };
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// The watch's initial events, its live receiver and the resourceVersion it starts at. From
/// the current state, the initial ADDED events come from the stored bytes (a watch list of
/// 150,000 pods decodes nothing); from a resourceVersion, from the history.
fn start(
    st: &SimState,
    spec: &WatchSpec,
) -> ApiResult<(Initial, broadcast::Receiver<Arc<Event>>, u64)> {
    match spec.from {
        WatchFrom::Current => {
            let (objects, rx, rv) = st
                .store
                .watch_current_raw(spec.def, spec.namespace.as_deref());
            Ok((Initial::Stored(objects), rx, rv))
        }
        from => st
            .store
            .watch(spec.def, from)
            .map(|(events, rx, rv)| (Initial::Events(events), rx, rv)),
    }
}

/// The initial events as sent, each with the resourceVersion it tells the client (0 for the
/// stored objects, sent in chunks of about [`CHUNK`] bytes).
fn replay<'a>(
    spec: &'a WatchSpec,
    initial: &'a Initial,
) -> impl futures::Stream<Item = (Bytes, u64)> + 'a {
    async_stream::stream! {
        match initial {
            Initial::Events(events) => {
                for ev in events {
                    if let Some(b) = spec.render(ev) {
                        yield (b, ev.rv);
                    }
                }
            }
            Initial::Stored(stored) => {
                let mut buf = Vec::with_capacity(CHUNK + 4096);
                for obj in stored {
                    spec.push_added(obj, &mut buf);
                    if buf.len() >= CHUNK {
                        yield (Bytes::from(std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 4096))), 0);
                    }
                }
                if !buf.is_empty() {
                    yield (Bytes::from(buf), 0);
                }
            }
        }
    }
}

/// What ends a watch besides its timeout: [`crate::SimHandle::drop_watches`] and shutdown.
struct Stops {
    drop_rx: watch::Receiver<u64>,
    shutdown: watch::Receiver<bool>,
}

/// The live part of a watch: its resource's events as they come, and bookmarks as the watch
/// cache sends them, until the deadline, a stop, or a lagging receiver (an ERROR 410 event).
/// `last_rv` is the store's version, `told` the one the client was last given.
fn live<'a>(
    spec: &'a WatchSpec,
    mut rx: broadcast::Receiver<Arc<Event>>,
    mut last_rv: u64,
    mut told: u64,
    mut stops: Stops,
    bookmark_every: Duration,
) -> impl futures::Stream<Item = Bytes> + 'a {
    async_stream::stream! {
        let deadline = tokio::time::Instant::now() + spec.timeout;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
        // As the watch cache: a bookmark only when the store moved past the version the client
        // was last given, periodically and once 2 s before the deadline.
        let pre_deadline = deadline.checked_sub(Duration::from_secs(2));
        let mut pre_deadline_due = spec.bookmarks && pre_deadline.is_some();
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                _ = stops.drop_rx.changed() => break,
                _ = stops.shutdown.changed() => break,
                _ = tick.tick(), if spec.bookmarks => {
                    if last_rv > told && let Some(b) = spec.bookmark(last_rv, false) {
                        told = last_rv;
                        yield b;
                    }
                }
                _ = tokio::time::sleep_until(pre_deadline.unwrap_or(deadline)), if pre_deadline_due => {
                    pre_deadline_due = false;
                    if last_rv > told && let Some(b) = spec.bookmark(last_rv, false) {
                        told = last_rv;
                        yield b;
                    }
                }
                r = rx.recv() => match r {
                    Ok(ev) => {
                        // The watch cache's version follows the whole store (etcd's progress
                        // notifications), so other resources' writes make a bookmark due too.
                        last_rv = last_rv.max(ev.rv);
                        if ev.gr != Store::watch_key(spec.def) {
                            continue;
                        }
                        if let Some(b) = spec.render(&ev) {
                            told = told.max(ev.rv);
                            yield b;
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        yield error_line(&ApiError::expired(format!(
                            "too old resource version: {last_rv} (watcher fell behind)")));
                        break;
                    }
                    Err(RecvError::Closed) => break,
                },
            }
        }
    }
}
