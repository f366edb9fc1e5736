//! List+watch of one kind into the [`ClusterState`], as client-go's reflector does it.
//!
//! With [`WatchConfig::watch_list`] the initial list is a streaming list first (client-go's WatchList: a watch with
//! `sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan`; the
//! server sends every object as an ADDED event, then a BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"` carrying the list's resourceVersion, and the same stream
//! goes on as the watch). A server that rejects it (kube-apiserver with the `WatchList` feature
//! gate off answers 422), or one that ignores it (a BOOKMARK before the end marker, or silence
//! before it), is listed in pages from then on (`limit`/`continue`; the next page is fetched while
//! the current one is converted), and then watched from the list's resourceVersion with
//! bookmarks. A streaming list's objects are converted in batches of 500, several at once on
//! blocking threads while the stream is read on, each by a builder of its own, and put into the
//! state in order (one lock per batch); a page of a paged list under one lock; watch events one
//! by one. A watch that ends is resumed from the last resourceVersion seen; `410 Gone`
//! (HTTP status or ERROR event) relists. Failures are retried with capped exponential backoff,
//! one log line per kind per backoff step.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{ListParams, WatchParams};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::task::JoinHandle;

use super::kinds::{self, Kind};
use super::state::ClusterState;

mod batch;

use batch::{Batch, Line};

/// Tuning of the list+watch tasks.
#[derive(Debug, Clone, Copy)]
pub struct WatchConfig {
    /// Items per list page (paginated lists).
    pub page_size: u32,
    /// First retry delay after a failure.
    pub backoff_initial: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Server-side timeout of one watch request (kube-apiserver closes it then; it is resumed).
    pub watch_timeout_seconds: u32,
    /// Try a streaming list (WatchList) before a paginated one.
    pub watch_list: bool,
    /// How long a streaming list may stay silent before its end marker: then the server is
    /// taken not to serve streaming lists, and the kind is listed in pages.
    pub watch_list_silence: Duration,
}

impl Default for WatchConfig {
    /// client-go's values; the streaming list is on unless `KUBE_FEATURE_WatchListClient=false`
    /// (client-go's environment switch for the same feature, on by default since client-go 1.35).
    fn default() -> Self {
        WatchConfig {
            page_size: 500,
            backoff_initial: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            watch_timeout_seconds: 290,
            watch_list: !std::env::var("KUBE_FEATURE_WatchListClient")
                .is_ok_and(|v| v.eq_ignore_ascii_case("false")),
            watch_list_silence: Duration::from_secs(30),
        }
    }
}

/// How a kind's last completed list was fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListProtocol {
    /// A streaming list (`sendInitialEvents=true`).
    WatchList,
    /// A paginated LIST (`limit`/`continue`).
    Paged,
}

/// The last list protocol per kind (0: none yet).
#[derive(Default)]
struct Protocols([AtomicU8; Kind::ALL.len()]);

impl Protocols {
    fn set(&self, kind: Kind, p: ListProtocol) {
        let v = match p {
            ListProtocol::WatchList => 1,
            ListProtocol::Paged => 2,
        };
        self.0[kind.index()].store(v, Ordering::Relaxed);
    }

    fn get(&self, kind: Kind) -> Option<ListProtocol> {
        match self.0[kind.index()].load(Ordering::Relaxed) {
            1 => Some(ListProtocol::WatchList),
            2 => Some(ListProtocol::Paged),
            _ => None,
        }
    }
}

/// The list+watch tasks; aborted when dropped.
pub struct WatchTasks {
    tasks: Vec<JoinHandle<()>>,
    protocols: Arc<Protocols>,
}

impl WatchTasks {
    /// How `kind`'s last completed list was fetched (None before its first list).
    pub fn list_protocol(&self, kind: Kind) -> Option<ListProtocol> {
        self.protocols.get(kind)
    }
}

impl Drop for WatchTasks {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts one list+watch task per kind, feeding `state`.
pub fn start(client: &Client, state: Arc<ClusterState>, cfg: WatchConfig) -> WatchTasks {
    spawn(client, state, cfg, false)
}

/// Starts one task per kind that lists it into `state` once — the same streaming or paged
/// list as [`start`] — and then ends: no watch follows (`plan --kubeconfig`). A failed list is
/// retried with backoff like [`start`]'s, logged at debug level only (the caller bounds the
/// time and reports [`ClusterState::unsynced`] once); wait with [`ClusterState::wait_synced`].
pub fn list_once(client: &Client, state: Arc<ClusterState>, cfg: WatchConfig) -> WatchTasks {
    spawn(client, state, cfg, true)
}

fn spawn(
    client: &Client,
    state: Arc<ClusterState>,
    cfg: WatchConfig,
    list_only: bool,
) -> WatchTasks {
    let protocols = Arc::new(Protocols::default());
    WatchTasks {
        tasks: Kind::ALL
            .iter()
            .map(|&kind| {
                tokio::spawn(run_kind(Feed {
                    client: client.clone(),
                    kind,
                    state: state.clone(),
                    cfg,
                    protocols: protocols.clone(),
                    list_only,
                }))
            })
            .collect(),
        protocols,
    }
}

#[derive(Deserialize)]
struct ListMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

#[derive(Deserialize)]
struct Page<'a> {
    metadata: Option<ListMeta>,
    #[serde(borrow, default)]
    items: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct VersionOnly {
    #[serde(default)]
    metadata: Option<VersionMeta>,
}

#[derive(Deserialize)]
struct VersionMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct StatusOnly {
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    message: Option<String>,
}

/// The annotation of the BOOKMARK that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

fn version_of(raw: &str) -> Option<String> {
    serde_json::from_str::<VersionOnly>(raw)
        .ok()?
        .metadata?
        .resource_version
        .filter(|v| !v.is_empty())
}

/// Whether a BOOKMARK object ends the initial events of a streaming list.
fn ends_initial_events(raw: &str) -> bool {
    serde_json::from_str::<VersionOnly>(raw)
        .ok()
        .and_then(|v| v.metadata?.annotations)
        .is_some_and(|a| a.get(INITIAL_EVENTS_END).is_some_and(|v| v == "true"))
}

/// How a watch ended.
enum WatchEnd {
    /// The server closed it (timeout): resume from the last resourceVersion.
    Closed,
    /// 410 Gone: the resourceVersion is too old; relist.
    Gone,
}

/// Why a list or watch failed.
enum Failure {
    /// The server does not serve streaming lists: list in pages from now on.
    NoWatchList(String),
    /// Anything else: retried with backoff.
    Other(String),
}

fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
}

/// A status that means "this request is not served" rather than "try again": every 4xx but 410
/// Gone and 429 Too Many Requests (kube-apiserver answers a streaming list with 422 when its
/// `WatchList` feature gate is off).
fn is_refusal(code: u16) -> bool {
    (400..500).contains(&code) && code != 410 && code != 429
}

async fn fetch_page(
    client: Client,
    kind: Kind,
    limit: u32,
    cont: Option<String>,
) -> Result<String, String> {
    let mut lp = ListParams::default().limit(limit);
    if let Some(c) = &cont {
        lp = lp.continue_token(c);
    }
    let req = kube::core::Request::new(kind.path())
        .list(&lp)
        .map_err(|e| e.to_string())?;
    client.request_text(req).await.map_err(|e| e.to_string())
}

/// What the list and watch of one kind work with.
struct Feed {
    client: Client,
    kind: Kind,
    state: Arc<ClusterState>,
    cfg: WatchConfig,
    protocols: Arc<Protocols>,
    /// List once, then stop (see [`list_once`]).
    list_only: bool,
}

/// Lists `kind` in pages into `state`; returns the resourceVersion to watch from (the first
/// page's: kube-apiserver serves every page at it, so events after it are all seen).
async fn list(feed: &Feed) -> Result<String, String> {
    let (client, kind, state) = (&feed.client, feed.kind, &*feed.state);
    let (cfg, protocols) = (&feed.cfg, &*feed.protocols);
    let started = Instant::now();
    let (mut waiting, mut pages, mut items) = (Duration::ZERO, 0u32, 0usize);
    tracing::debug!(kind = kind.resource(), "paginated list started");
    state.begin_list(kind);
    let mut next = Some(tokio::spawn(fetch_page(
        client.clone(),
        kind,
        cfg.page_size,
        None,
    )));
    let mut version: Option<String> = None;
    while let Some(fetching) = next.take() {
        let t0 = Instant::now();
        let text = fetching.await.map_err(|e| e.to_string())??;
        waiting += t0.elapsed();
        let page: Page = serde_json::from_str(&text)
            .map_err(|e| format!("the {} list is not valid: {e}", kind.resource()))?;
        let meta = page.metadata.unwrap_or(ListMeta {
            resource_version: None,
            continue_: None,
        });
        if version.is_none() {
            version = meta.resource_version.filter(|v| !v.is_empty());
        }
        if let Some(c) = meta.continue_.filter(|c| !c.is_empty()) {
            // The next page is fetched while this one is converted.
            next = Some(tokio::spawn(fetch_page(
                client.clone(),
                kind,
                cfg.page_size,
                Some(c),
            )));
        }
        state.upsert(kind, page.items.iter().map(|r| r.get()));
        pages += 1;
        items += page.items.len();
    }
    protocols.set(kind, ListProtocol::Paged);
    state.end_list(kind);
    tracing::debug!(
        kind = kind.resource(),
        pages,
        items,
        seconds = started.elapsed().as_secs_f64(),
        waiting_seconds = waiting.as_secs_f64(),
        "paginated list done"
    );
    version.ok_or_else(|| {
        format!(
            "the {} list has no metadata.resourceVersion",
            kind.resource()
        )
    })
}

/// Watches `kind` into `state`. With `version` None this is a streaming list: the ADDED events
/// up to the BOOKMARK annotated `k8s.io/initial-events-end` are the list (converted in batches,
/// objects they do not name are dropped), the bookmark's resourceVersion is where the watch
/// stands, and the same stream goes on as the watch. `version` advances as events arrive.
async fn watch(feed: &Feed, version: &mut Option<String>) -> Result<WatchEnd, Failure> {
    let mut batch = Batch::new();
    let result = watch_into(feed, version, &mut batch).await;
    // Nothing read may be converted after the caller goes on (e.g. to a relist).
    batch.settle().await;
    result
}

/// [`watch`]'s loop; listed objects wait in `batch`.
async fn watch_into(
    feed: &Feed,
    version: &mut Option<String>,
    batch: &mut Batch,
) -> Result<WatchEnd, Failure> {
    let &Feed {
        ref client,
        kind,
        ref state,
        ref cfg,
        ..
    } = feed;
    let mut listing = version.is_none();
    let started = Instant::now();
    let mut body = match open_watch(client, kind, cfg, version.as_deref()).await? {
        Ok(body) => body,
        Err(end) => return Ok(end),
    };
    if listing {
        tracing::debug!(kind = kind.resource(), "streaming list started");
        state.begin_list(kind);
    } else {
        state.watch_established(kind);
    }
    let mut items = 0usize;
    loop {
        let line = match next_line(batch, &mut body, cfg, listing, items).await? {
            Line::End => break,
            Line::Blank => continue,
            Line::Added => {
                items += 1;
                if batch.is_full() {
                    batch.flush(kind, state).await;
                }
                continue;
            }
            Line::Other(line) => line,
        };
        let ev: Event = serde_json::from_str(&line)
            .map_err(|e| Failure::Other(format!("a watch event is not valid: {e}")))?;
        let raw = ev.object.get();
        if listing && ev.type_ == "ADDED" {
            // `raw` lies inside `line`; keep the line and where the object is in it.
            let at = raw.as_ptr() as usize - line.as_ptr() as usize;
            batch.push(&line, at..at + raw.len());
            items += 1;
            if batch.is_full() {
                batch.flush(kind, state).await;
            }
            continue;
        }
        batch.finish(kind, state).await;
        let seen = Seen { items, started };
        if let Some(end) = apply_event(feed, &ev, &mut listing, version, seen)? {
            return Ok(end);
        }
    }
    if listing {
        return Err(Failure::Other(format!(
            "the streaming list ended after {items} objects, before the end of its initial events"
        )));
    }
    Ok(WatchEnd::Closed)
}

/// Reads the next line of the stream. While listing, a silence longer than
/// `watch_list_silence` fails: a server that ignores `sendInitialEvents` never sends the end
/// marker (`items`: the objects listed so far, for the message).
async fn next_line<R: futures::AsyncBufRead + Unpin>(
    batch: &mut Batch,
    body: &mut R,
    cfg: &WatchConfig,
    listing: bool,
    items: usize,
) -> Result<Line, Failure> {
    let next = if listing {
        match tokio::time::timeout(cfg.watch_list_silence, batch.read_line(body, true)).await {
            Ok(n) => n,
            Err(_) => {
                return Err(Failure::NoWatchList(format!(
                    "no end of the initial events after {items} objects and {:.0} s of silence",
                    cfg.watch_list_silence.as_secs_f64()
                )));
            }
        }
    } else {
        batch.read_line(body, false).await
    };
    next.map_err(|e| Failure::Other(format!("watch stream: {e}")))
}

/// How far a streaming list has come: objects listed and when it started (for its log line).
#[derive(Clone, Copy)]
struct Seen {
    items: usize,
    started: Instant,
}

/// Applies one event other than a listed ADDED to the state and advances `version`. The
/// bookmark that ends the initial events ends `listing`. `Some(end)`: the watch ends here (an
/// ERROR event, or the list is complete and the feed lists only).
fn apply_event(
    feed: &Feed,
    ev: &Event<'_>,
    listing: &mut bool,
    version: &mut Option<String>,
    seen: Seen,
) -> Result<Option<WatchEnd>, Failure> {
    let Feed {
        kind,
        state,
        protocols,
        list_only,
        ..
    } = feed;
    let kind = *kind;
    let raw = ev.object.get();
    match ev.type_ {
        "ADDED" | "MODIFIED" => state.upsert(kind, [raw]),
        "DELETED" => match kinds::key_of_json(raw) {
            Ok(key) => state.remove(kind, &key),
            Err(e) => {
                tracing::warn!(kind = kind.resource(), error = %e, "DELETED event without a name; ignored")
            }
        },
        "BOOKMARK" if *listing => {
            let v = initial_events_end(raw)?;
            protocols.set(kind, ListProtocol::WatchList);
            state.end_list(kind);
            tracing::debug!(
                kind = kind.resource(),
                items = seen.items,
                seconds = seen.started.elapsed().as_secs_f64(),
                "streaming list done"
            );
            *listing = false;
            *version = Some(v);
            // With `list_only` the list is complete; the rest of the stream would be the watch.
            return Ok(list_only.then_some(WatchEnd::Closed));
        }
        "BOOKMARK" => {}
        "ERROR" => return error_event(raw, *listing).map(Some),
        other => {
            tracing::debug!(
                kind = kind.resource(),
                event = other,
                "unknown watch event type; ignored"
            )
        }
    }
    if !*listing && let Some(v) = version_of(raw) {
        *version = Some(v);
    }
    Ok(None)
}

/// Opens the watch of `kind`: a streaming list when there is no `version` yet, else a watch from
/// it. `Ok(Err(end))`: the watch ended before it began (`410 Gone`: relist).
async fn open_watch(
    client: &Client,
    kind: Kind,
    cfg: &WatchConfig,
    version: Option<&str>,
) -> Result<Result<impl futures::AsyncBufRead + Unpin + use<>, WatchEnd>, Failure> {
    let listing = version.is_none();
    let req = match version {
        None => {
            let wp = WatchParams::streaming_lists().timeout(cfg.watch_timeout_seconds);
            kube::core::Request::new(kind.path()).watch(&wp, "")
        }
        Some(v) => {
            let wp = WatchParams::default().timeout(cfg.watch_timeout_seconds);
            kube::core::Request::new(kind.path()).watch(&wp, v)
        }
    }
    .map_err(|e| Failure::Other(e.to_string()))?;
    match client.request_stream(req).await {
        Ok(b) => Ok(Ok(b)),
        Err(e) if is_gone(&e) => Ok(Err(WatchEnd::Gone)),
        Err(kube::Error::Api(s)) if listing && is_refusal(s.code) => {
            Err(Failure::NoWatchList(format!("{} {}", s.code, s.message)))
        }
        Err(e) => Err(Failure::Other(e.to_string())),
    }
}

/// The resourceVersion of the BOOKMARK that ends a streaming list's initial events.
fn initial_events_end(raw: &str) -> Result<String, Failure> {
    if !ends_initial_events(raw) {
        return Err(Failure::NoWatchList(
            "a BOOKMARK without the end-of-initial-events annotation".into(),
        ));
    }
    version_of(raw).ok_or_else(|| {
        Failure::Other("the end of the initial events has no resourceVersion".into())
    })
}

/// How an ERROR event ends the watch: `410 Gone` relists; a refusal while listing means the
/// server does not do streaming lists.
fn error_event(raw: &str, listing: bool) -> Result<WatchEnd, Failure> {
    let status: StatusOnly = serde_json::from_str(raw).unwrap_or(StatusOnly {
        code: None,
        message: None,
    });
    let code = status.code.unwrap_or(0);
    if code == 410 {
        return Ok(WatchEnd::Gone);
    }
    let msg = format!("watch error {code}: {}", status.message.unwrap_or_default());
    Err(if listing && is_refusal(code) {
        Failure::NoWatchList(msg)
    } else {
        Failure::Other(msg)
    })
}

/// Lists and watches `kind` until aborted.
async fn run_kind(feed: Feed) {
    let &Feed {
        kind,
        ref state,
        ref cfg,
        list_only,
        ..
    } = &feed;
    let mut delay = cfg.backoff_initial;
    let mut version: Option<String> = None;
    let mut watch_list = cfg.watch_list;
    loop {
        if list_only && state.lists_completed(kind) > 0 {
            return;
        }
        let started = tokio::time::Instant::now();
        let listing = version.is_none();
        let result = if listing && !watch_list {
            list(&feed)
                .await
                .map(|v| {
                    version = Some(v);
                    None
                })
                .map_err(Failure::Other)
        } else {
            let r = watch(&feed, &mut version).await;
            if listing && version.is_some() {
                delay = cfg.backoff_initial;
            }
            r.map(Some)
        };
        match result {
            Ok(None) => delay = cfg.backoff_initial,
            Ok(Some(WatchEnd::Closed)) => {
                // A server that keeps closing watches at once must not make this a busy loop.
                if started.elapsed() < Duration::from_secs(1) {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(cfg.backoff_max);
                } else {
                    delay = cfg.backoff_initial;
                }
            }
            Ok(Some(WatchEnd::Gone)) => {
                tracing::info!(
                    kind = kind.resource(),
                    "resourceVersion too old (410 Gone); relisting"
                );
                state.expired(kind);
                version = None;
            }
            Err(Failure::NoWatchList(why)) => {
                let text =
                    "the API server does not serve streaming lists (WatchList); listing in pages";
                if list_only {
                    tracing::debug!(kind = kind.resource(), reason = %why, "{text}");
                } else {
                    tracing::info!(kind = kind.resource(), reason = %why, "{text}");
                }
                watch_list = false;
                version = None;
            }
            Err(Failure::Other(e)) => {
                if list_only {
                    tracing::debug!(kind = kind.resource(), error = %e, retry_in_seconds = delay.as_secs_f64(), "list failed; retrying");
                } else {
                    tracing::warn!(
                    kind = kind.resource(),
                    error = %e,
                    retry_in_seconds = delay.as_secs_f64(),
                    "list/watch failed; retrying"
                    );
                }
                state.set_error(kind, e);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(cfg.backoff_max);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_annotated_bookmark_ends_the_initial_events() {
        let end = r#"{"kind":"Pod","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}"#;
        assert!(ends_initial_events(end));
        assert_eq!(version_of(end).as_deref(), Some("7"));
        assert!(!ends_initial_events(
            r#"{"metadata":{"resourceVersion":"7"}}"#
        ));
        assert!(!ends_initial_events(
            r#"{"metadata":{"annotations":{"k8s.io/initial-events-end":"false"}}}"#
        ));
    }

    #[test]
    fn only_requests_the_server_will_never_serve_fall_back_to_paged_lists() {
        for code in [400, 403, 404, 405, 422] {
            assert!(is_refusal(code), "{code}");
        }
        for code in [410, 429, 500, 503] {
            assert!(!is_refusal(code), "{code}");
        }
    }
}
