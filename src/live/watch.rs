//! List+watch of one kind into the [`ClusterState`], as client-go's reflector does it: a list in
//! pages (`limit`/`continue`; the next page is fetched while the current one is converted), then a
//! watch from the list's resourceVersion with bookmarks; events are applied one by one; a watch
//! that ends is resumed from the last resourceVersion seen; `410 Gone` (HTTP status or ERROR
//! event) relists. Failures are retried with capped exponential backoff, one log line per kind per
//! backoff step.

use std::sync::Arc;
use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt};
use kube::Client;
use kube::api::{ListParams, WatchParams};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::task::JoinHandle;

use super::kinds::{self, Kind};
use super::state::ClusterState;

/// Tuning of the list+watch tasks.
#[derive(Debug, Clone, Copy)]
pub struct WatchConfig {
    /// Items per list page.
    pub page_size: u32,
    /// First retry delay after a failure.
    pub backoff_initial: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Server-side timeout of one watch request (kube-apiserver closes it then; it is resumed).
    pub watch_timeout_seconds: u32,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            page_size: 500,
            backoff_initial: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            watch_timeout_seconds: 290,
        }
    }
}

/// The list+watch tasks; aborted when dropped.
pub struct WatchTasks(Vec<JoinHandle<()>>);

impl Drop for WatchTasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Starts one list+watch task per kind, feeding `state`.
pub fn start(client: &Client, state: Arc<ClusterState>, cfg: WatchConfig) -> WatchTasks {
    WatchTasks(
        Kind::ALL
            .iter()
            .map(|&kind| tokio::spawn(run_kind(client.clone(), kind, state.clone(), cfg)))
            .collect(),
    )
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
}

#[derive(Deserialize)]
struct StatusOnly {
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    message: Option<String>,
}

fn version_of(raw: &str) -> Option<String> {
    serde_json::from_str::<VersionOnly>(raw)
        .ok()?
        .metadata?
        .resource_version
        .filter(|v| !v.is_empty())
}

/// How a watch ended.
enum WatchEnd {
    /// The server closed it (timeout): resume from the last resourceVersion.
    Closed,
    /// 410 Gone: the resourceVersion is too old; relist.
    Gone,
}

fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
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

/// Lists `kind` in pages into `state`; returns the resourceVersion to watch from (the first
/// page's: kube-apiserver serves every page at it, so events after it are all seen).
async fn list(
    client: &Client,
    kind: Kind,
    state: &ClusterState,
    cfg: &WatchConfig,
) -> Result<String, String> {
    state.begin_list(kind);
    let mut next = Some(tokio::spawn(fetch_page(
        client.clone(),
        kind,
        cfg.page_size,
        None,
    )));
    let mut version: Option<String> = None;
    while let Some(fetching) = next.take() {
        let text = fetching.await.map_err(|e| e.to_string())??;
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
    }
    state.end_list(kind);
    version.ok_or_else(|| {
        format!(
            "the {} list has no metadata.resourceVersion",
            kind.resource()
        )
    })
}

/// Watches `kind` from `version` into `state`, advancing `version` as events arrive.
async fn watch(
    client: &Client,
    kind: Kind,
    state: &ClusterState,
    cfg: &WatchConfig,
    version: &mut String,
) -> Result<WatchEnd, String> {
    let wp = WatchParams::default().timeout(cfg.watch_timeout_seconds);
    let req = kube::core::Request::new(kind.path())
        .watch(&wp, version)
        .map_err(|e| e.to_string())?;
    let body = match client.request_stream(req).await {
        Ok(b) => {
            state.watch_established(kind);
            b
        }
        Err(e) if is_gone(&e) => return Ok(WatchEnd::Gone),
        Err(e) => return Err(e.to_string()),
    };
    let mut lines = body.lines();
    while let Some(line) = lines.next().await {
        let line = line.map_err(|e| format!("watch stream: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let ev: Event =
            serde_json::from_str(&line).map_err(|e| format!("a watch event is not valid: {e}"))?;
        let raw = ev.object.get();
        match ev.type_ {
            "ADDED" | "MODIFIED" => state.upsert(kind, [raw]),
            "DELETED" => match kinds::key_of_json(raw) {
                Ok(key) => state.remove(kind, &key),
                Err(e) => {
                    tracing::warn!(kind = kind.resource(), error = %e, "DELETED event without a name; ignored")
                }
            },
            "BOOKMARK" => {}
            "ERROR" => {
                let status: StatusOnly = serde_json::from_str(raw).unwrap_or(StatusOnly {
                    code: None,
                    message: None,
                });
                if status.code == Some(410) {
                    return Ok(WatchEnd::Gone);
                }
                return Err(format!(
                    "watch error {}: {}",
                    status.code.unwrap_or(0),
                    status.message.unwrap_or_default()
                ));
            }
            other => {
                tracing::debug!(
                    kind = kind.resource(),
                    event = other,
                    "unknown watch event type; ignored"
                )
            }
        }
        if let Some(v) = version_of(raw) {
            *version = v;
        }
    }
    Ok(WatchEnd::Closed)
}

/// Lists and watches `kind` until aborted.
pub async fn run_kind(client: Client, kind: Kind, state: Arc<ClusterState>, cfg: WatchConfig) {
    let mut delay = cfg.backoff_initial;
    let mut version: Option<String> = None;
    loop {
        let started = tokio::time::Instant::now();
        let result = match version.as_mut() {
            None => list(&client, kind, &state, &cfg).await.map(|v| {
                version = Some(v);
                None
            }),
            Some(v) => watch(&client, kind, &state, &cfg, v).await.map(Some),
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
            Err(e) => {
                tracing::warn!(
                    kind = kind.resource(),
                    error = %e,
                    retry_in_seconds = delay.as_secs_f64(),
                    "list/watch failed; retrying"
                );
                state.set_error(kind, e);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(cfg.backoff_max);
            }
        }
    }
}
