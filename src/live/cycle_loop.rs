//! The cycle loop: one-shot, interval (non-sliding, as upstream) and on-demand (trigger API),
//! gated by leadership, stopped by shutdown.
//!
//! At most one cycle runs at a time. A trigger is refused (`Busy`) while a cycle runs or another
//! trigger is queued; a queued trigger is answered with `ShuttingDown` on shutdown. Accounting
//! (metrics, logs) happens in the [`CycleExec`], so a trigger whose caller went away is still
//! accounted. The trigger interface itself ([`crate::serving::trigger`]) belongs to serving; this
//! loop is its consumer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::cluster::state::NodeChange;
use crate::serving::trigger::{CycleSummary, TriggerError, TriggerQueue, TriggerState, lock};

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

/// Runs one cycle and accounts it. `stop` is cancelled on shutdown or lost leadership: the
/// eviction in flight finishes, no further eviction is attempted.
pub trait CycleExec: Send + Sync + 'static {
    /// Runs one cycle.
    fn run(&self, source: Source, stop: CancellationToken) -> BoxFuture<'static, CycleSummary>;
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
        if !wait_for_leadership(&mut queue, &mut leading, &shutdown).await {
            break;
        }
        if cfg.interval.is_zero() {
            if last.is_none() {
                last = Some(runner.cycle(Source::Once).await);
            }
            if !cfg.trigger_enabled {
                break;
            }
        }
        let mut ticker = interval_ticker(cfg.interval);
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
                    if !absorb_changes(&mut changes, cfg.event_debounce, &shutdown).await {
                        break 'outer;
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
    close_queue(&mut queue);
    last
}

/// Waits until this replica leads, refusing the triggers that arrive meanwhile. `false`: stop
/// (shutdown, or the leadership channel closed).
async fn wait_for_leadership(
    queue: &mut TriggerQueue,
    leading: &mut watch::Receiver<bool>,
    shutdown: &CancellationToken,
) -> bool {
    while !*leading.borrow_and_update() {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return false,
            Some(reply) = queue.rx.recv() => {
                lock(&queue.state).queued = false;
                let _ = reply.send(Err(TriggerError::NotLeader));
            }
            r = leading.changed() => if r.is_err() { return false },
        }
    }
    true
}

/// The interval timer (non-sliding: a late tick delays the next ones); `None` without an
/// interval.
fn interval_ticker(interval: Duration) -> Option<tokio::time::Interval> {
    (!interval.is_zero()).then(|| {
        let mut t = tokio::time::interval_at(Instant::now(), interval);
        t.set_missed_tick_behavior(MissedTickBehavior::Delay);
        t
    })
}

/// Absorbs the node changes that arrive within `debounce`. `false`: shutdown came first.
async fn absorb_changes(
    changes: &mut Option<mpsc::Receiver<NodeChange>>,
    debounce: Duration,
    shutdown: &CancellationToken,
) -> bool {
    let until = Instant::now() + debounce;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep_until(until) => return true,
            Some(_) = next_change(changes) => {}
        }
    }
}

/// Refuses anything still queued and anything that arrives from now on.
fn close_queue(queue: &mut TriggerQueue) {
    lock(&queue.state).closed = true;
    queue.rx.close();
    while let Ok(reply) = queue.rx.try_recv() {
        let _ = reply.send(Err(TriggerError::ShuttingDown));
    }
    lock(&queue.state).queued = false;
}
