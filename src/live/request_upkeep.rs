//! The upkeep of `run`'s EvictionRequests around a cycle: before it, the tracker takes our
//! requests as the API server has them; after it, the requests of pods no plugin chose again are
//! withdrawn.

use kube_descheduler_engine::evictor::EvictOutcome;
use kube_descheduler_engine::framework::cycle::CycleReport;
use kube_descheduler_engine::snapshot::{PodId, Snapshot};

use super::evictor::ApiEvictorConfig;
use super::evreq::{INTENT_WITHDRAWN, list_outstanding, set_intent};

/// Before a cycle: brings the tracker's requests in line with the API server's (a request someone
/// else deleted or withdrew is asked for anew when a plugin chooses the pod again). A failed list
/// keeps the tracker as it is.
pub fn resync(cfg: &ApiEvictorConfig, rt: &tokio::runtime::Handle) {
    let Some(tracker) = cfg.background.as_deref() else {
        return;
    };
    let listed = rt.block_on(async {
        cfg.limiter.acquire().await;
        tokio::time::timeout(cfg.call_timeout, list_outstanding(&cfg.client)).await
    });
    match listed {
        Ok(Ok(outstanding)) => tracker.sync_requests(&outstanding),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "listing our EvictionRequests failed; the tracker keeps the requests it knows")
        }
        Err(_) => tracing::warn!(
            "listing our EvictionRequests timed out; the tracker keeps the requests it knows"
        ),
    }
}

/// After a cycle that ran every plugin to the end: withdraws our requests (`requested`, the pods
/// that had one when the cycle began) for the pods no plugin chose again. Not after a cycle in
/// which a limit refused an eviction: a plugin stops at a limit, so it may not have reached every
/// pod it still wants. A failed withdrawal is logged and tried again next cycle.
pub fn withdraw_unwanted(
    cfg: &ApiEvictorConfig,
    snapshot: &Snapshot,
    requested: &[PodId],
    report: &CycleReport,
    rt: &tokio::runtime::Handle,
) {
    let Some(tracker) = cfg.background.as_deref() else {
        return;
    };
    if requested.is_empty() {
        return;
    }
    if report.skipped.is_some()
        || !report.plugin_failures.is_empty()
        || !report.limit_hits.is_empty()
    {
        tracing::debug!(
            "the cycle was skipped, a plugin failed or a limit stopped one; no EvictionRequest withdrawn"
        );
        return;
    }
    let wanted: std::collections::HashSet<PodId> = report
        .records
        .iter()
        .filter(|r| matches!(r.outcome, EvictOutcome::Requested { .. }))
        .map(|r| r.pod)
        .collect();
    for &id in requested.iter().filter(|id| !wanted.contains(id)) {
        let pod = snapshot.pod(id);
        let Some(name) = tracker.request_of(&pod.uid) else {
            continue;
        };
        let key = format!("{}/{}", pod.namespace, pod.name);
        let done = rt.block_on(async {
            cfg.limiter.acquire().await;
            tokio::time::timeout(
                cfg.call_timeout,
                set_intent(&cfg.client, &pod.namespace, &name, INTENT_WITHDRAWN),
            )
            .await
            .unwrap_or_else(|_| Err(format!("withdrawing EvictionRequest {name:?}: no answer")))
        });
        match done {
            Ok(()) => {
                tracker.forget(&pod.uid);
                tracing::info!(pod = %key, request = %name, "Eviction request withdrawn: no plugin chose the pod this cycle");
            }
            Err(error) => {
                tracing::warn!(pod = %key, request = %name, %error, "withdrawing the eviction request failed; trying again next cycle");
            }
        }
    }
}
