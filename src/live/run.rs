//! Wires `run` together: serving, caches, leader election, the loop, and an orderly shutdown
//! (SIGTERM: the eviction in flight finishes, the Lease is released, exit 0).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::auth::{Authorizer, KubeAuthorizer};
use super::caches::Caches;
use super::cycle::{LiveCycle, Mode};
use super::cycle_loop::{LoopConfig, run_loop};
use super::events::EventSink;
use super::evictor::ApiEvictorConfig;
use super::http::{AppState, router};
use super::ratelimit::RateLimiter;
use super::server::{TlsSource, serve_https};
use crate::leader::{self, Elector, KubeLeaseApi, LeaderConfig};
use crate::policy::Policy;
use crate::serving::health::Readiness;
use crate::serving::metrics::Metrics;
use crate::serving::trigger::trigger_channel;

/// Everything `run` needs besides the client.
pub struct LiveOptions {
    /// The loaded policy.
    pub policy: Policy,
    /// `--descheduling-interval`.
    pub interval: Duration,
    /// `--dry-run`.
    pub dry_run: bool,
    /// Effective client QPS and burst for evictions and Events.
    pub qps: f64,
    /// Burst.
    pub burst: u32,
    /// Leader election (None: off).
    pub leader: Option<LeaderConfig>,
    /// Secure port address (None: `--secure-port=0`, no serving).
    pub serve: Option<(SocketAddr, TlsSource)>,
    /// `--disable-metrics`.
    pub disable_metrics: bool,
    /// `--metrics-unauthenticated`.
    pub metrics_unauthenticated: bool,
    /// `--enable-trigger-api`.
    pub trigger: bool,
    /// Give up when the caches have not synced in this time (one-shot mode only).
    pub one_shot_sync_timeout: Duration,
}

/// Builds the client `run` must use: kube's default client silently retries 429/503/504 up to 15
/// times (with Retry-After), which would retry refused evictions (upstream never retries a 429
/// within a cycle) and could delay Lease renewals past the renew deadline; it is turned off here.
/// Pass clients to [`run`] built this way (any URL + CA works, e.g. the API stand-in).
pub fn client_from_config(mut config: kube::Config) -> anyhow::Result<Client> {
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}

/// Cancels `token` on SIGTERM or SIGINT.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = match signal(SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM");
                    let _ = tokio::signal::ctrl_c().await;
                    token.cancel();
                    return;
                }
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: finishing the eviction in flight, then exiting"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: finishing the eviction in flight, then exiting"),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        token.cancel();
    });
}

/// Runs until done (one-shot) or `shutdown`.
pub async fn run(
    opts: LiveOptions,
    client: Client,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let metrics = (!opts.disable_metrics).then(|| Arc::new(Metrics::new()));
    if let Some(m) = &metrics {
        m.dry_run.set(i64::from(opts.dry_run));
    }
    let ready = Readiness::default();
    let (trigger, queue) = trigger_channel();
    let authz: Arc<dyn Authorizer> = Arc::new(KubeAuthorizer::new(client.clone()));

    let serving = match &opts.serve {
        Some((addr, tls)) => {
            let state = AppState {
                metrics: metrics.clone(),
                metrics_auth: !opts.metrics_unauthenticated,
                trigger: opts.trigger.then(|| trigger.clone()),
                authz,
                ready: ready.clone(),
            };
            let s = serve_https(router(state), *addr, tls.clone()).await?;
            tracing::info!(address = %s.addr, "serving /healthz, /readyz{}{}", if metrics.is_some() { ", /metrics" } else { "" }, if opts.trigger { ", POST /api/v1/descheduler/run" } else { "" });
            Some(s)
        }
        None => None,
    };

    let (caches, _cache_tasks) = Caches::start(&client);
    let sync = async {
        tokio::select! {
            r = caches.wait_synced() => r.map_err(|e| anyhow::anyhow!("watch caches stopped before syncing: {e}")),
            _ = tokio::time::sleep(opts.one_shot_sync_timeout), if opts.interval.is_zero() && !opts.trigger => {
                Err(anyhow::anyhow!("watch caches did not sync within {}s (is the API server reachable, and may this identity list and watch nodes, pods, namespaces, poddisruptionbudgets, priorityclasses, persistentvolumeclaims, replicasets, deployments, statefulsets and jobs?)", opts.one_shot_sync_timeout.as_secs()))
            }
        }
    };
    tracing::info!("waiting for watch caches to sync");
    let synced = tokio::select! {
        r = sync => Some(r),
        _ = shutdown.cancelled() => None,
    };
    match synced {
        Some(Ok(())) => {
            ready.set(true);
            if let Some(m) = &metrics {
                m.caches_synced.set(1);
            }
            tracing::info!(
                nodes = caches.nodes.len(),
                pods = caches.pods.len(),
                "watch caches synced"
            );
        }
        Some(Err(e)) => {
            stop_serving(serving).await;
            return Err(e);
        }
        None => {
            stop_serving(serving).await;
            return Ok(());
        }
    }

    let elector_stop = CancellationToken::new();
    let (leading_tx, leading_rx) = watch::channel(opts.leader.is_none());
    let elector_task = opts.leader.clone().map(|cfg| {
        tracing::info!(identity = %cfg.identity, lease = %format!("{}/{}", cfg.namespace, cfg.name), "leader election on");
        let api = KubeLeaseApi::new(client.clone(), &cfg.namespace, &cfg.name);
        let tx = leading_tx.clone();
        tokio::spawn(leader::run(Elector::new(api, cfg), tx, elector_stop.clone()))
    });
    if let Some(m) = metrics.clone() {
        let mut rx = leading_rx.clone();
        tokio::spawn(async move {
            loop {
                m.leader.set(i64::from(*rx.borrow_and_update()));
                if rx.changed().await.is_err() {
                    break;
                }
            }
        });
    }

    let mode = if opts.dry_run {
        Mode::DryRun
    } else {
        Mode::Live(Box::new(ApiEvictorConfig {
            client: client.clone(),
            limiter: Arc::new(RateLimiter::new(opts.qps, opts.burst)),
            grace_period_seconds: opts.policy.grace_period_seconds,
            failure_events: opts.policy.eviction_failure_event_notification,
            events: Some(EventSink::new(client.clone())),
            pods: Some(caches.pods.clone()),
            use_v1beta1: Arc::new(AtomicBool::new(false)),
            call_timeout: crate::live::evictor::DEFAULT_EVICTION_CALL_TIMEOUT,
        }))
    };
    let snap_caches = caches.clone();
    let exec = LiveCycle {
        policy: Arc::new(opts.policy),
        snapshot: Arc::new(move || snap_caches.snapshot()),
        mode,
        metrics,
        recent: Arc::default(),
    };
    let cfg = LoopConfig {
        interval: opts.interval,
        trigger_enabled: opts.trigger,
    };
    run_loop(&exec, cfg, queue, leading_rx, shutdown).await;

    // The loop is done (the eviction in flight finished): release the Lease, stop serving.
    elector_stop.cancel();
    if let Some(t) = elector_task {
        let _ = t.await;
    }
    drop(leading_tx);
    stop_serving(serving).await;
    Ok(())
}

async fn stop_serving(s: Option<super::server::Serving>) {
    if let Some(s) = s {
        s.shutdown(Duration::from_secs(5)).await;
    }
}
