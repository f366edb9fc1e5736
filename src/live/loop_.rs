//! The cycle loop: one-shot, interval (non-sliding, as upstream) and on-demand (trigger API),
//! gated by leadership, stopped by shutdown.
//!
//! At most one cycle runs at a time. A trigger is refused (`Busy`) while a cycle runs or another
//! trigger is queued; a queued trigger is answered with `ShuttingDown` on shutdown. Accounting
//! (metrics, logs) happens in the [`CycleExec`], so a trigger whose caller went away is still
//! accounted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::state::NodeChange;

/// What started a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--descheduling-interval=0`: the single cycle.
    Once,
    /// The interval timer.
    Interval,
    /// `POST /api/v1/descheduler/run`.
    Trigger,
    /// `--cycle-on-events`: a node joined, became Ready, was uncordoned or lost a
    /// NoSchedule/NoExecute taint.
    Event,
}

impl Source {
    /// Metric label value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Once => "once",
            Source::Interval => "interval",
            Source::Trigger => "trigger",
            Source::Event => "event",
        }
    }
}

/// What a cycle did (the trigger API's JSON body).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleSummary {
    /// `completed`, `skipped` (fewer than 2 Ready nodes), `aborted` (stopped early) or `failed`.
    pub status: String,
    /// Pods evicted.
    pub evicted: u64,
    /// Evictions deflected into a rolling restart.
    pub deflected: u64,
    /// Evictions refused with 429 (PDB, guard health rule).
    pub skipped: u64,
    /// Failed evictions.
    pub errors: u64,
    /// Wall time of the cycle.
    pub duration_seconds: f64,
    /// Why the cycle was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Runs one cycle and accounts it. `stop` is cancelled on shutdown or lost leadership: the
/// eviction in flight finishes, no further eviction is attempted.
pub trait CycleExec: Send + Sync + 'static {
    /// Runs one cycle.
    fn run(&self, source: Source, stop: CancellationToken) -> BoxFuture<'static, CycleSummary>;
}

/// Why a trigger was not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    /// A cycle is running or another trigger is queued (HTTP 429).
    #[error("a descheduling cycle is already running or queued")]
    Busy,
    /// The process is shutting down (HTTP 503).
    #[error("the descheduler is shutting down")]
    ShuttingDown,
    /// This replica is not the leader (HTTP 503).
    #[error("this replica is not the leader")]
    NotLeader,
}

type Reply = oneshot::Sender<Result<CycleSummary, TriggerError>>;

#[derive(Debug, Default)]
struct TriggerState {
    running: bool,
    queued: bool,
    closed: bool,
}

/// The handle the trigger API uses to request a cycle.
#[derive(Clone)]
pub struct Trigger {
    state: Arc<Mutex<TriggerState>>,
    tx: mpsc::Sender<Reply>,
}

/// The loop's end of the trigger channel.
pub struct TriggerQueue {
    state: Arc<Mutex<TriggerState>>,
    rx: mpsc::Receiver<Reply>,
}

/// A connected trigger handle and queue.
pub fn trigger_channel() -> (Trigger, TriggerQueue) {
    let state = Arc::new(Mutex::new(TriggerState::default()));
    let (tx, rx) = mpsc::channel(1);
    (
        Trigger {
            state: state.clone(),
            tx,
        },
        TriggerQueue { state, rx },
    )
}

fn lock(m: &Mutex<TriggerState>) -> std::sync::MutexGuard<'_, TriggerState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Trigger {
    /// Queues a cycle; the receiver gets its summary. Refused when a cycle runs or is queued.
    pub fn request(
        &self,
    ) -> Result<oneshot::Receiver<Result<CycleSummary, TriggerError>>, TriggerError> {
        let mut st = lock(&self.state);
        if st.closed {
            return Err(TriggerError::ShuttingDown);
        }
        if st.running || st.queued {
            return Err(TriggerError::Busy);
        }
        let (tx, rx) = oneshot::channel();
        match self.tx.try_send(tx) {
            Ok(()) => {
                st.queued = true;
                Ok(rx)
            }
            Err(mpsc::error::TrySendError::Full(_)) => Err(TriggerError::Busy),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(TriggerError::ShuttingDown),
        }
    }

    /// Whether a cycle is running right now.
    pub fn is_running(&self) -> bool {
        lock(&self.state).running
    }
}

/// Loop settings.
#[derive(Debug, Clone, Copy)]
pub struct LoopConfig {
    /// `--descheduling-interval` (zero: one cycle).
    pub interval: Duration,
    /// `--enable-trigger-api`: with a zero interval, stay up serving triggers.
    pub trigger_enabled: bool,
    /// How long node changes are collected before the cycle they ask for starts.
    pub event_debounce: Duration,
}

struct Runner<'a, E: CycleExec> {
    exec: &'a E,
    state: Arc<Mutex<TriggerState>>,
    leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
}

impl<E: CycleExec> Runner<'_, E> {
    /// Runs one cycle; `stop` fires on shutdown or when leadership is lost.
    async fn cycle(&self, source: Source) -> CycleSummary {
        {
            let mut st = lock(&self.state);
            st.running = true;
            if source == Source::Trigger {
                st.queued = false;
            }
        }
        let stop = self.shutdown.child_token();
        let mut leading = self.leading.clone();
        let watcher_stop = stop.clone();
        let watcher = tokio::spawn(async move {
            tokio::select! {
                _ = watcher_stop.cancelled() => {}
                r = leading.wait_for(|l| !*l) => {
                    if r.is_ok() {
                        tracing::warn!("leadership lost during a cycle; stopping evictions");
                    }
                    watcher_stop.cancel();
                }
            }
        });
        let summary = self.exec.run(source, stop.clone()).await;
        stop.cancel();
        let _ = watcher.await;
        lock(&self.state).running = false;
        summary
    }
}

/// Runs cycles until shutdown (or, in one-shot mode without the trigger API, after one cycle).
/// Returns the summary of the last cycle.
pub async fn run_loop<E: CycleExec>(
    exec: &E,
    cfg: LoopConfig,
    queue: TriggerQueue,
    leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
) -> Option<CycleSummary> {
    run_loop_with_events(exec, cfg, queue, leading, shutdown, None).await
}

async fn next_change(rx: &mut Option<mpsc::Receiver<NodeChange>>) -> Option<NodeChange> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// [`run_loop`], plus a cycle (source `event`) after node changes arrive on `changes`: the
/// first change starts a debounce of [`LoopConfig::event_debounce`] that absorbs the changes
/// after it, then one cycle runs. The channel holds at most one change, so while a cycle runs at
/// most one more is queued.
pub async fn run_loop_with_events<E: CycleExec>(
    exec: &E,
    cfg: LoopConfig,
    mut queue: TriggerQueue,
    leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
    mut changes: Option<mpsc::Receiver<NodeChange>>,
) -> Option<CycleSummary> {
    let runner = Runner {
        exec,
        state: queue.state.clone(),
        leading: leading.clone(),
        shutdown: shutdown.clone(),
    };
    let mut leading = leading;
    let mut last = None;
    'outer: loop {
        // Wait for leadership; triggers meanwhile are refused.
        while !*leading.borrow_and_update() {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break 'outer,
                Some(reply) = queue.rx.recv() => {
                    lock(&queue.state).queued = false;
                    let _ = reply.send(Err(TriggerError::NotLeader));
                }
                r = leading.changed() => if r.is_err() { break 'outer },
            }
        }
        if cfg.interval.is_zero() {
            if last.is_none() {
                last = Some(runner.cycle(Source::Once).await);
            }
            if !cfg.trigger_enabled {
                break;
            }
        }
        let mut ticker = (!cfg.interval.is_zero()).then(|| {
            let mut t = tokio::time::interval_at(Instant::now(), cfg.interval);
            t.set_missed_tick_behavior(MissedTickBehavior::Delay);
            t
        });
        loop {
            let tick = async {
                match ticker.as_mut() {
                    Some(t) => {
                        t.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break 'outer,
                r = leading.changed() => {
                    if r.is_err() { break 'outer }
                    if !*leading.borrow_and_update() {
                        tracing::info!("not the leader; pausing descheduling");
                        continue 'outer;
                    }
                }
                Some(reply) = queue.rx.recv() => {
                    let summary = runner.cycle(Source::Trigger).await;
                    let _ = reply.send(Ok(summary.clone()));
                    last = Some(summary);
                }
                _ = tick => {
                    last = Some(runner.cycle(Source::Interval).await);
                }
                Some(change) = next_change(&mut changes) => {
                    tracing::info!(change = change.as_str(), debounce_seconds = cfg.event_debounce.as_secs_f64(), "node change; a cycle follows");
                    let until = Instant::now() + cfg.event_debounce;
                    loop {
                        tokio::select! {
                            _ = shutdown.cancelled() => break 'outer,
                            _ = tokio::time::sleep_until(until) => break,
                            Some(_) = next_change(&mut changes) => {}
                        }
                    }
                    if !*leading.borrow() {
                        continue 'outer;
                    }
                    last = Some(runner.cycle(Source::Event).await);
                }
            }
            if shutdown.is_cancelled() {
                break 'outer;
            }
        }
    }
    // Refuse anything still queued and anything that arrives from now on.
    lock(&queue.state).closed = true;
    queue.rx.close();
    while let Ok(reply) = queue.rx.try_recv() {
        let _ = reply.send(Err(TriggerError::ShuttingDown));
    }
    lock(&queue.state).queued = false;
    last
}
