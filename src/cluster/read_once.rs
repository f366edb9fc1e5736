//! The cluster read once into a snapshot — every kind listed as `run` lists it (streaming or
//! paged lists, compact decoding), no watch afterwards, nothing written — for `plan --kubeconfig`.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use super::state::ClusterState;
use super::watch::{self as lister, WatchConfig};
use kube_descheduler_engine::snapshot::Snapshot;

/// Lists every kind [`super::kinds::Kind::ALL`] once from `client` and returns the engine's
/// snapshot of it. Fails after `timeout` with one line naming `api_server`, the kinds not listed
/// and the last error seen (`flag` is the option that set the timeout, named in that line).
/// Meant for a process that ends after planning: the state the snapshot was taken from is not
/// freed (its memory goes back with the process, without a tenth of a second of freeing
/// 150,000 pods one by one).
pub async fn read_cluster(
    client: &Client,
    api_server: &str,
    timeout: Duration,
    flag: &str,
) -> anyhow::Result<Snapshot> {
    let state = Arc::new(ClusterState::new(None));
    let tasks = lister::list_once(client, state.clone(), WatchConfig::default());
    let synced = tokio::time::timeout(timeout, state.wait_synced()).await;
    // Every list is complete (or given up): the tasks end or are aborted here.
    drop(tasks);
    if synced.is_err() {
        anyhow::bail!(
            "{}",
            super::state::sync_failure(api_server, timeout, flag, &state)
        );
    }
    let snapshot = state.snapshot();
    // The snapshot shares the pods, nodes and owners with the state; the rest of it is not
    // needed any more, and the process ends soon after the plan (freeing 150,000 pods object by
    // object would only delay it).
    std::mem::forget(state);
    Ok(snapshot)
}
