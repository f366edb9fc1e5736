//! `plan --kubeconfig`: the wiring between the command line and the live cluster — the client
//! configuration, the cluster read once ([`crate::cluster::read_once`]) and, when the policy measures
//! usage with metrics.k8s.io and no `--metrics` file is given, one list of NodeMetrics and
//! PodMetrics from the same API server.

use std::time::Duration;

use crate::cluster::client::{self as kubeconfig, Source};
use k8s_openapi::apimachinery::pkg::version::Info;
use kube_descheduler_engine::snapshot::Snapshot;
use kube_descheduler_engine::usage::metrics_api::RawSamples;

/// The flag bounding the read, named in the error when it runs out.
pub const TIMEOUT_FLAG: &str = "--request-timeout";

/// What `plan` reads from a live cluster.
pub struct LiveRead {
    /// The cluster as the engine sees it.
    pub snapshot: Snapshot,
    /// The API server's URL and its metrics.k8s.io samples (None: not asked for).
    pub metrics: Option<(String, Result<RawSamples, String>)>,
    /// The API server's `/version` answer (None: not asked for).
    pub server_version: Option<Result<Info, String>>,
}

/// Reads the cluster `source` names once. Every list must complete within `timeout` (else one
/// error line naming the server, exit code 1); `kubernetes_metrics`: also list metrics.k8s.io
/// (bounded by the same `timeout`); `version`: also ask `/version`.
pub fn read(
    source: &Source,
    timeout: Duration,
    kubernetes_metrics: bool,
    version: bool,
) -> anyhow::Result<LiveRead> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let config = kubeconfig::load_source(source).await?;
        let server = config.cluster_url.to_string();
        let client = crate::cluster::client::client(config)?;
        let snapshot =
            crate::cluster::read_once::read_cluster(&client, &server, timeout, TIMEOUT_FLAG)
                .await?;
        let metrics = if kubernetes_metrics {
            let samples =
                tokio::time::timeout(timeout, crate::usage::kube_source::collect(&client))
                    .await
                    .unwrap_or_else(|_| {
                        Err(format!(
                            "no answer within {}s ({TIMEOUT_FLAG})",
                            timeout.as_secs_f64()
                        ))
                    });
            Some((server, samples))
        } else {
            None
        };
        let server_version = if version {
            Some(super::scheduler_version::ask(&client, timeout).await)
        } else {
            None
        };
        anyhow::Ok(LiveRead {
            snapshot,
            metrics,
            server_version,
        })
    });
    // Nothing is left running; no need to wait for idle worker threads.
    rt.shutdown_background();
    result
}
