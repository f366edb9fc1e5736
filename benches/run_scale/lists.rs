//! How long kube-sim takes to serve the initial list `run` reads, to a bare client (one that
//! only reads the responses): the bar `run`'s first cycle is held to.

use std::time::Instant;

use kube_sim::SimHandle;
use serde_json::Value;

use super::fail;

/// How long kube-sim takes to serve the initial list to a bare client (one that only reads the
/// responses: no conversion, no state).
pub struct InitialList {
    /// Nodes, then pods, paginated (pages of 500), each page parsed to find its continue token —
    /// the figure earlier versions of this bench printed.
    pub nodes_pods_paged: f64,
    /// Everything `run` lists before its first cycle (all 11 kinds, concurrently, as `run`
    /// does), paginated (pages of 500; only each page's metadata is decoded).
    pub all_kinds_paged: f64,
    /// The same as streaming lists (`sendInitialEvents=true`, read up to each kind's
    /// end-of-initial-events bookmark).
    pub all_kinds_streaming: f64,
}

pub async fn bare_client(sim: &SimHandle) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml())
            .unwrap_or_else(|e| fail(format!("kubeconfig: {e}"))),
        &Default::default(),
    )
    .await
    .unwrap_or_else(|e| fail(format!("kubeconfig: {e}")));
    kube::Client::try_from(config).unwrap_or_else(|e| fail(format!("client: {e}")))
}

/// Lists `path` in pages of 500; `full` parses each page whole (the old baseline), otherwise
/// only its metadata.
async fn list_paged(client: &kube::Client, path: &str, full: bool) {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        metadata: Value,
    }
    let mut cont: Option<String> = None;
    loop {
        let mut lp = kube::api::ListParams::default().limit(500);
        if let Some(c) = &cont {
            lp = lp.continue_token(c);
        }
        let req = kube::core::Request::new(path)
            .list(&lp)
            .unwrap_or_else(|e| fail(format!("request: {e}")));
        let text = client
            .request_text(req)
            .await
            .unwrap_or_else(|e| fail(format!("list {path}: {e}")));
        let meta = if full {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            v["metadata"].clone()
        } else {
            serde_json::from_str::<Meta>(&text).map_or(Value::Null, |m| m.metadata)
        };
        cont = meta["continue"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        if cont.is_none() {
            break;
        }
    }
}

/// Reads a streaming list of `path` up to its end-of-initial-events bookmark.
async fn list_streaming(client: &kube::Client, path: &str) {
    use futures::{AsyncBufReadExt, StreamExt};
    let wp = kube::api::WatchParams::streaming_lists().timeout(600);
    let req = kube::core::Request::new(path)
        .watch(&wp, "")
        .unwrap_or_else(|e| fail(format!("request: {e}")));
    let body = client
        .request_stream(req)
        .await
        .unwrap_or_else(|e| fail(format!("streaming list {path}: {e}")));
    let mut lines = body.lines();
    while let Some(line) = lines.next().await {
        let line = line.unwrap_or_else(|e| fail(format!("streaming list {path}: {e}")));
        if line.contains("\"BOOKMARK\"") && line.contains("initial-events-end") {
            return;
        }
    }
    fail(format!(
        "streaming list {path} ended before its initial events did"
    ));
}

/// Everything `run` lists, as streaming lists read concurrently by a bare client.
pub async fn streaming_list_seconds(client: &kube::Client) -> f64 {
    use kube_descheduler::cluster::kinds::Kind;
    let started = Instant::now();
    futures::future::join_all(Kind::ALL.iter().map(|k| {
        let client = client.clone();
        tokio::spawn(async move { list_streaming(&client, k.path()).await })
    }))
    .await;
    started.elapsed().as_secs_f64()
}

/// [`InitialList`]: the three ways of listing, one after the other.
pub async fn initial_list_seconds(sim: &SimHandle) -> InitialList {
    use kube_descheduler::cluster::kinds::Kind;
    let client = bare_client(sim).await;
    let started = Instant::now();
    for path in ["/api/v1/nodes", "/api/v1/pods"] {
        list_paged(&client, path, true).await;
    }
    let nodes_pods_paged = started.elapsed().as_secs_f64();
    let started = Instant::now();
    futures::future::join_all(Kind::ALL.iter().map(|k| {
        let client = client.clone();
        tokio::spawn(async move { list_paged(&client, k.path(), false).await })
    }))
    .await;
    let all_kinds_paged = started.elapsed().as_secs_f64();
    let all_kinds_streaming = streaming_list_seconds(&client).await;
    InitialList {
        nodes_pods_paged,
        all_kinds_paged,
        all_kinds_streaming,
    }
}
