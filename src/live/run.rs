//! Wires `run` together: serving, the watched cluster state, leader election, the loop, and an orderly shutdown
//! (SIGTERM: the eviction in flight finishes, the Lease is released, exit 0).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::auth::{Authorizer, KubeAuthorizer};
use super::cycle::{LiveCycle, Mode};
use super::cycle_loop::{LoopConfig, run_loop_with_events};
use super::events::EventSink;
use super::evictor::ApiEvictorConfig;
use super::evreq::EvictionApi;
use super::http::{AppState, router};
use super::ratelimit::RateLimiter;
use super::recent::RecentEvictions;
use super::returns::{Return, ReturnDetector};
use super::server::{TlsSource, serve_https_with};
use crate::cluster::state::{ClusterState, NodeChange};
use crate::cluster::watch::{self as lister, WatchConfig};
use crate::leader::{self, Elector, KubeLeaseApi, LeaderConfig};
use crate::serving::health::Readiness;
use crate::serving::limits::ServeLimits;
use crate::serving::metrics::Metrics;
use crate::serving::trigger::{Trigger, trigger_channel};
use kube_descheduler_engine::policy::Policy;

/// Everything `run` needs besides the client.
pub struct LiveOptions {
    /// The loaded policy.
    pub policy: Policy,
    /// `--descheduling-interval`.
    pub interval: Duration,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--eviction-api`.
    pub eviction_api: super::evreq::EvictionApi,
    /// Effective client QPS and burst for evictions and Events.
    pub qps: f64,
    /// Burst.
    pub burst: u32,
    /// Leader election (None: off).
    pub leader: Option<LeaderConfig>,
    /// Secure port address (None: `--secure-port=0`, no serving).
    pub serve: Option<(SocketAddr, TlsSource)>,
    /// Bounds on the secure port's clients.
    pub serve_limits: ServeLimits,
    /// The secure port's protocols (`--enable-http2`, `--tls-min-version`).
    pub protocols: crate::serving::tls::Protocols,
    /// `--feature-gates`.
    pub feature_gates: super::features::FeatureGates,
    /// `--disable-metrics`.
    pub disable_metrics: bool,
    /// `--metrics-unauthenticated`.
    pub metrics_unauthenticated: bool,
    /// `--enable-trigger-api`.
    pub trigger: bool,
    /// `--cache-sync-timeout`: give up when the cluster state has not synced in this time
    /// (one-shot mode only; interval mode keeps retrying).
    pub one_shot_sync_timeout: Duration,
    /// The API server's URL, named when it cannot be reached.
    pub api_server: String,
    /// `--cycle-on-events`: also run a cycle this long after a node joins, becomes Ready, is
    /// uncordoned or loses a NoSchedule/NoExecute taint (None: off).
    pub cycle_on_events: Option<Duration>,
    /// `--metrics-max-age`: measured usage older than this is not used for a cycle.
    pub metrics_max_age: Duration,
    /// List+watch tuning (page size, backoff).
    pub watch: WatchConfig,
    /// `--placement-return-window`: how long an eviction is remembered to detect its
    /// replacement scheduled back onto the same node, and how long the owner then backs off
    /// from that node (zero: the return detector is off; it is always off in dry-run).
    pub placement_return_window: Duration,
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
    let outstanding = match opts.eviction_api {
        EvictionApi::EvictionRequest => Some(super::evreq::start(&client).await?),
        EvictionApi::Eviction => None,
    };
    let metrics = (!opts.disable_metrics).then(|| Arc::new(Metrics::new()));
    if let Some(m) = &metrics {
        m.dry_run.set(i64::from(opts.dry_run));
    }
    let ready = Readiness::default();
    let (trigger, queue) = trigger_channel();
    let authz: Arc<dyn Authorizer> = Arc::new(KubeAuthorizer::new(client.clone()));

    let serving = start_serving(&opts, &metrics, &trigger, authz, &ready).await?;

    let (changes_tx, changes_rx) = node_change_channel(opts.cycle_on_events);
    let state = Arc::new(ClusterState::new(changes_tx));
    let limiter = Arc::new(RateLimiter::new(opts.qps, opts.burst));
    let returns = start_return_detector(&opts, &client, &state, &limiter, &metrics);
    let _watch_tasks = lister::start(&client, state.clone(), opts.watch);
    let one_shot = opts.interval.is_zero() && !opts.trigger;
    let synced = wait_until_synced(&opts, &state, one_shot, &shutdown).await;
    if !matches!(synced, Ok(true)) {
        stop_serving(serving).await;
        return synced.map(|_| ());
    }
    tokio::spawn(follow_sync(
        state.in_sync_rx(),
        ready.clone(),
        metrics.clone(),
    ));

    let (election, leading_rx) = Election::start(&opts, &client);
    follow_leadership(&metrics, &leading_rx);

    let mode = eviction_mode(&opts, &client, limiter, &state, outstanding);
    let usage = start_usage(&opts, &client, &shutdown).await;
    let cfg = LoopConfig {
        interval: opts.interval,
        trigger_enabled: opts.trigger,
        event_debounce: opts.cycle_on_events.unwrap_or_default(),
    };
    let exec = live_cycle(opts.policy, &state, mode, usage, metrics, returns);
    run_loop_with_events(&exec, cfg, queue, leading_rx, shutdown, changes_rx).await;

    // The loop is done (the eviction in flight finished): release the Lease, stop serving.
    election.release().await;
    stop_serving(serving).await;
    if one_shot {
        // The process exits next and the OS takes the memory back at once; freeing the cluster
        // state object by object (150,000 pods: a tenth of a second of one core) only delays
        // the exit.
        std::mem::forget(state);
    }
    Ok(())
}

/// The channel node changes reach the cycle loop on, with `--cycle-on-events` (it holds one
/// change: while a cycle runs, at most one more is queued).
fn node_change_channel(
    cycle_on_events: Option<Duration>,
) -> (
    Option<tokio::sync::mpsc::Sender<NodeChange>>,
    Option<tokio::sync::mpsc::Receiver<NodeChange>>,
) {
    match cycle_on_events {
        Some(_) => {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            (Some(tx), Some(rx))
        }
        None => (None, None),
    }
}

/// The cycle `run` repeats: `policy` over snapshots of `state`, evicting by `mode`.
fn live_cycle(
    mut policy: Policy,
    state: &Arc<ClusterState>,
    mode: Mode,
    usage: Option<Arc<crate::usage::collector::Collector>>,
    metrics: Option<Arc<Metrics>>,
    returns: Option<Arc<ReturnDetector>>,
) -> LiveCycle {
    // `workloadEvictionWindow` counts the evictions of every cycle this process runs (in memory;
    // a restart starts an empty window).
    policy.cycle.scaled.window = policy.cycle.scaled.window.take().map(|w| w.with_history());
    let snap_state = state.clone();
    LiveCycle {
        usage,
        policy: Arc::new(policy),
        snapshot: Arc::new(move || snap_state.snapshot()),
        mode,
        metrics,
        recent: Arc::new(match returns {
            Some(r) => RecentEvictions::default().with_returns(r),
            None => RecentEvictions::default(),
        }),
    }
}

/// Leader election as `run` holds it: the task (with `--leader-elect`) and the sender that tells
/// the cycle loop whether this replica leads (always, without election).
struct Election {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    leading: watch::Sender<bool>,
}

impl Election {
    /// Starts leader election with `--leader-elect`; the receiver follows who leads.
    fn start(opts: &LiveOptions, client: &Client) -> (Self, watch::Receiver<bool>) {
        let stop = CancellationToken::new();
        let (leading, leading_rx) = watch::channel(opts.leader.is_none());
        let task = start_leader_election(opts, client, &leading, &stop);
        (
            Election {
                stop,
                task,
                leading,
            },
            leading_rx,
        )
    }

    /// Stops leader election, releasing the Lease.
    async fn release(self) {
        self.stop.cancel();
        if let Some(t) = self.task {
            let _ = t.await;
        }
        drop(self.leading);
    }
}

/// Waits until every kind is listed: `Ok(false)` when `shutdown` comes first, an error naming
/// what is missing when a one-shot run's `--cache-sync-timeout` passes.
async fn wait_until_synced(
    opts: &LiveOptions,
    state: &ClusterState,
    one_shot: bool,
    shutdown: &CancellationToken,
) -> anyhow::Result<bool> {
    let sync = async {
        tokio::select! {
            _ = state.wait_synced() => Ok(()),
            _ = tokio::time::sleep(opts.one_shot_sync_timeout), if one_shot => {
                Err(anyhow::anyhow!("{}", crate::cluster::state::sync_failure(&opts.api_server, opts.one_shot_sync_timeout, "--cache-sync-timeout", state)))
            }
        }
    };
    tracing::info!(server = %opts.api_server, "listing and watching the cluster");
    tokio::select! {
        r = sync => {
            r?;
            let (nodes, pods) = state.counts();
            tracing::info!(nodes, pods, "cluster state synced");
            Ok(true)
        }
        _ = shutdown.cancelled() => Ok(false),
    }
}

/// Serves `/healthz`, `/readyz`, `/metrics` and the trigger API when `--secure-port` is set.
async fn start_serving(
    opts: &LiveOptions,
    metrics: &Option<Arc<Metrics>>,
    trigger: &Trigger,
    authz: Arc<dyn Authorizer>,
    ready: &Readiness,
) -> anyhow::Result<Option<super::server::Serving>> {
    let Some((addr, tls)) = &opts.serve else {
        return Ok(None);
    };
    let state = AppState {
        metrics: metrics.clone(),
        metrics_auth: !opts.metrics_unauthenticated,
        trigger: opts.trigger.then(|| trigger.clone()),
        authz,
        ready: ready.clone(),
    };
    let s = serve_https_with(
        router(state),
        *addr,
        tls.clone(),
        &opts.serve_limits,
        &opts.protocols,
    )
    .await?;
    tracing::info!(address = %s.addr, "serving /healthz, /readyz{}{}", if metrics.is_some() { ", /metrics" } else { "" }, if opts.trigger { ", POST /api/v1/descheduler/run" } else { "" });
    Ok(Some(s))
}

/// The return detector, shown every pod the watches see, with its Events published in the
/// background (none in dry-run: nothing is evicted, so nothing can come back).
fn start_return_detector(
    opts: &LiveOptions,
    client: &Client,
    state: &Arc<ClusterState>,
    limiter: &Arc<RateLimiter>,
    metrics: &Option<Arc<Metrics>>,
) -> Option<Arc<ReturnDetector>> {
    if opts.dry_run || opts.placement_return_window.is_zero() {
        return None;
    }
    let (tx, rx) = tokio::sync::mpsc::channel(RETURN_EVENTS_QUEUED);
    tokio::spawn(publish_returns(
        rx,
        EventSink::new(client.clone()),
        limiter.clone(),
    ));
    let d = Arc::new(ReturnDetector::new(
        opts.placement_return_window,
        metrics.clone(),
        Some(tx),
    ));
    state.watch_pods(d.clone());
    Some(d)
}

/// Runs leader election on a Lease with `--leader-elect`, telling `leading` who leads.
fn start_leader_election(
    opts: &LiveOptions,
    client: &Client,
    leading: &watch::Sender<bool>,
    stop: &CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    let cfg = opts.leader.clone()?;
    tracing::info!(identity = %cfg.identity, lease = %format!("{}/{}", cfg.namespace, cfg.name), "leader election on");
    let api = KubeLeaseApi::new(client.clone(), &cfg.namespace, &cfg.name);
    let tx = leading.clone();
    Some(tokio::spawn(leader::run(
        Elector::new(api, cfg),
        tx,
        stop.clone(),
    )))
}

/// Keeps the leader gauge equal to whether this replica leads.
fn follow_leadership(metrics: &Option<Arc<Metrics>>, leading: &watch::Receiver<bool>) {
    let Some(m) = metrics.clone() else {
        return;
    };
    let mut rx = leading.clone();
    tokio::spawn(async move {
        loop {
            m.leader.set(i64::from(*rx.borrow_and_update()));
            if rx.changed().await.is_err() {
                break;
            }
        }
    });
}

/// Dry run, or evictions through the API with Events. `outstanding`: our EvictionRequests found
/// at start (`--eviction-api EvictionRequest`), tracked from the first cycle.
fn eviction_mode(
    opts: &LiveOptions,
    client: &Client,
    limiter: Arc<RateLimiter>,
    state: &Arc<ClusterState>,
    outstanding: Option<Vec<super::evreq::Outstanding>>,
) -> Mode {
    match (opts.dry_run, opts.eviction_api) {
        (true, EvictionApi::Eviction) => return Mode::DryRun,
        (true, EvictionApi::EvictionRequest) => return Mode::DryRunRequests,
        _ => {}
    }
    let background_gate = opts.feature_gates.evictions_in_background();
    if background_gate {
        tracing::info!("feature gate EvictionsInBackground: evictions in background are tracked");
    }
    let tracker = (background_gate || outstanding.is_some()).then(|| {
        let tracker = crate::live::background::BackgroundEvictions::default();
        for o in outstanding.iter().flatten() {
            tracker.requested(o.as_assumed(), &o.name, false);
        }
        Arc::new(tracker)
    });
    if let Some(found) = &outstanding {
        tracing::info!(
            outstanding = found.len(),
            requester = super::evreq::REQUESTER,
            "--eviction-api EvictionRequest: evictions are requested with EvictionRequests"
        );
    }
    Mode::Live(Box::new(ApiEvictorConfig {
        client: client.clone(),
        limiter,
        grace_period_seconds: opts.policy.grace_period_seconds,
        failure_events: opts.policy.eviction_failure_event_notification,
        events: Some(EventSink::new(client.clone())),
        pods: Some(state.clone()),
        use_v1beta1: Arc::new(AtomicBool::new(false)),
        call_timeout: crate::live::evictor::DEFAULT_EVICTION_CALL_TIMEOUT,
        background: tracker,
        background_gate,
        eviction_api: opts.eviction_api,
    }))
}

/// The measured-usage collector when the policy needs one: a first collection before the first
/// cycle, then every 5 s in the background until `shutdown`.
async fn start_usage(
    opts: &LiveOptions,
    client: &Client,
    shutdown: &CancellationToken,
) -> Option<Arc<crate::usage::collector::Collector>> {
    if opts.policy.metrics.is_empty() {
        return None;
    }
    let sa = std::path::Path::new("/var/run/secrets/kubernetes.io/serviceaccount");
    let token_file = Some(sa.join("token")).filter(|p| p.exists());
    let ca = std::fs::read(sa.join("ca.crt")).ok();
    let c = Arc::new(crate::usage::collector::Collector::new(
        opts.policy.metrics.clone(),
        client.clone(),
        opts.metrics_max_age,
        token_file,
        ca,
    ));
    tracing::info!(
        kubernetes_metrics = opts.policy.metrics.kubernetes,
        prometheus_queries = opts.policy.metrics.prometheus_queries.len(),
        "collecting measured usage for metricsUtilization"
    );
    c.collect_once().await;
    let bg = c.clone();
    let stop = shutdown.clone();
    tokio::spawn(async move { bg.run(stop).await });
    Some(c)
}

/// Return Events waiting to be published at most (more are dropped, the returns still count).
const RETURN_EVENTS_QUEUED: usize = 64;

/// Publishes an `EvictedPodReturned` Event for each return the detector sends, within the
/// client rate limit.
async fn publish_returns(
    mut rx: tokio::sync::mpsc::Receiver<Return>,
    events: EventSink,
    limiter: Arc<RateLimiter>,
) {
    while let Some(r) = rx.recv().await {
        limiter.acquire().await;
        events.returned(&r).await;
    }
}

/// Keeps `/readyz` and `kube_descheduler_caches_synced` following the cluster state: false from
/// a broken or expired list/watch (the API server went away, restarted, compacted) until every
/// kind is re-established; one log line per transition.
async fn follow_sync(
    mut rx: watch::Receiver<bool>,
    ready: Readiness,
    metrics: Option<Arc<Metrics>>,
) {
    let mut was = None;
    loop {
        let now = *rx.borrow_and_update();
        ready.set(now);
        if let Some(m) = &metrics {
            m.caches_synced.set(i64::from(now));
        }
        match (was, now) {
            (Some(true), false) => tracing::warn!(
                "cluster state out of sync with the API server (a list or watch failed); /readyz false until it is re-established"
            ),
            (Some(false), true) => {
                tracing::info!("cluster state in sync with the API server again; /readyz true")
            }
            _ => {}
        }
        was = Some(now);
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn stop_serving(s: Option<super::server::Serving>) {
    if let Some(s) = s {
        s.shutdown(Duration::from_secs(5)).await;
    }
}
