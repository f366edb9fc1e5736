//! The cycle loop under a paused tokio clock: interval timing, one-shot exit, trigger queueing,
//! shutdown, leadership.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kube_descheduler::cluster::state::NodeChange;
use kube_descheduler::live::cycle_loop::{
    CycleExec, LoopConfig, Source, run_loop, run_loop_with_events,
};
use kube_descheduler::serving::trigger::{CycleSummary, TriggerError, trigger_channel};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Records every cycle (start time, source); each takes `length`, or ends early when stopped.
#[derive(Clone)]
struct FakeExec {
    length: Duration,
    runs: Arc<Mutex<Vec<(Duration, Source, bool)>>>,
    origin: Instant,
}

impl FakeExec {
    fn new(length: Duration) -> Self {
        FakeExec {
            length,
            runs: Arc::default(),
            origin: Instant::now(),
        }
    }
    fn runs(&self) -> Vec<(Duration, Source, bool)> {
        self.runs.lock().unwrap().clone()
    }
}

impl CycleExec for FakeExec {
    fn run(&self, source: Source, stop: CancellationToken) -> BoxFuture<'static, CycleSummary> {
        let this = self.clone();
        Box::pin(async move {
            let start = this.origin.elapsed();
            let stopped = tokio::select! {
                _ = tokio::time::sleep(this.length) => false,
                _ = stop.cancelled() => true,
            };
            this.runs.lock().unwrap().push((start, source, stopped));
            CycleSummary {
                status: if stopped { "aborted" } else { "completed" }.into(),
                evicted: 1,
                ..Default::default()
            }
        })
    }
}

/// A loop every `interval_secs` seconds (0: one shot), the trigger API on or off, cycles not
/// started by cluster events.
fn config(interval_secs: u64, trigger_enabled: bool) -> LoopConfig {
    LoopConfig {
        interval: Duration::from_secs(interval_secs),
        trigger_enabled,
        event_debounce: Duration::ZERO,
    }
}

fn leader() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    watch::channel(true)
}

#[tokio::test(start_paused = true)]
async fn interval_cycles_are_non_sliding() {
    let exec = FakeExec::new(Duration::from_secs(2));
    let (_trigger, queue) = trigger_channel();
    let (_l, rx) = leader();
    let shutdown = CancellationToken::new();
    let s = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(35)).await;
        s.cancel();
    });
    let cfg = config(10, false);
    run_loop(&exec, cfg, queue, rx, shutdown).await;
    let starts: Vec<u64> = exec.runs().iter().map(|r| r.0.as_secs()).collect();
    assert_eq!(starts, vec![0, 10, 20, 30]);
    assert!(exec.runs().iter().all(|r| r.1 == Source::Interval));
}

#[tokio::test(start_paused = true)]
async fn one_shot_runs_once_and_returns() {
    let exec = FakeExec::new(Duration::from_secs(3));
    let (trigger, queue) = trigger_channel();
    let (_l, rx) = leader();
    let cfg = config(0, false);
    let last = run_loop(&exec, cfg, queue, rx, CancellationToken::new()).await;
    assert_eq!(last.map(|s| s.status), Some("completed".to_string()));
    assert_eq!(exec.runs().len(), 1);
    assert_eq!(exec.runs()[0].1, Source::Once);
    // The loop is gone: triggers are refused.
    assert_eq!(trigger.request().err(), Some(TriggerError::ShuttingDown));
}

#[tokio::test(start_paused = true)]
async fn trigger_is_refused_while_running_or_queued() {
    let exec = FakeExec::new(Duration::from_secs(5));
    let (trigger, queue) = trigger_channel();
    let (_l, rx) = leader();
    let shutdown = CancellationToken::new();
    let cfg = config(0, true);
    let e = exec.clone();
    let sd = shutdown.clone();
    let lp = tokio::spawn(async move { run_loop(&e, cfg, queue, rx, sd).await });
    // During the one-shot cycle: busy.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(trigger.request().err(), Some(TriggerError::Busy));
    // After it: the process stays up and accepts one trigger.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let rx1 = trigger.request().expect("accepted");
    // Queued or running: refused.
    assert_eq!(trigger.request().err(), Some(TriggerError::Busy));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(trigger.is_running());
    assert_eq!(trigger.request().err(), Some(TriggerError::Busy));
    let summary = rx1.await.expect("reply").expect("ran");
    assert_eq!(summary.status, "completed");
    assert_eq!(summary.evicted, 1);
    // Free again.
    let rx2 = trigger.request().expect("accepted again");
    assert!(rx2.await.expect("reply").is_ok());
    shutdown.cancel();
    lp.await.expect("loop");
    let sources: Vec<Source> = exec.runs().iter().map(|r| r.1).collect();
    assert_eq!(
        sources,
        vec![Source::Once, Source::Trigger, Source::Trigger]
    );
}

#[tokio::test(start_paused = true)]
async fn dropped_trigger_caller_still_completes_and_is_accounted() {
    let exec = FakeExec::new(Duration::from_secs(5));
    let (trigger, queue) = trigger_channel();
    let (_l, rx) = leader();
    let shutdown = CancellationToken::new();
    let cfg = config(0, true);
    let e = exec.clone();
    let sd = shutdown.clone();
    let lp = tokio::spawn(async move { run_loop(&e, cfg, queue, rx, sd).await });
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rx1 = trigger.request().expect("accepted");
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(rx1); // the client went away
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(exec.runs().len(), 2);
    assert!(!exec.runs()[1].2, "the triggered cycle ran to completion");
    assert!(!trigger.is_running());
    shutdown.cancel();
    lp.await.expect("loop");
}

#[tokio::test(start_paused = true)]
async fn shutdown_fails_a_queued_trigger() {
    let exec = FakeExec::new(Duration::from_secs(5));
    let (trigger, queue) = trigger_channel();
    let (_l, rx) = leader();
    let shutdown = CancellationToken::new();
    // Queued before the loop gets to it (e.g. caches still syncing).
    let queued = trigger.request().expect("queued");
    assert_eq!(trigger.request().err(), Some(TriggerError::Busy));
    shutdown.cancel();
    let cfg = config(60, true);
    run_loop(&exec, cfg, queue, rx, shutdown).await;
    assert_eq!(
        queued.await.expect("answered"),
        Err(TriggerError::ShuttingDown)
    );
    assert_eq!(trigger.request().err(), Some(TriggerError::ShuttingDown));
    assert!(exec.runs().is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_a_running_cycle() {
    let exec = FakeExec::new(Duration::from_secs(100));
    let (_trigger, queue) = trigger_channel();
    let (_l, rx) = leader();
    let shutdown = CancellationToken::new();
    let s = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        s.cancel();
    });
    let cfg = config(300, false);
    let start = Instant::now();
    let last = run_loop(&exec, cfg, queue, rx, shutdown).await;
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert_eq!(last.map(|s| s.status), Some("aborted".to_string()));
}

#[tokio::test(start_paused = true)]
async fn cycles_wait_for_leadership_and_stop_when_it_is_lost() {
    let exec = FakeExec::new(Duration::from_secs(50));
    let (trigger, queue) = trigger_channel();
    let (lead_tx, lead_rx) = watch::channel(false);
    let shutdown = CancellationToken::new();
    let cfg = config(60, true);
    let e = exec.clone();
    let sd = shutdown.clone();
    let lp = tokio::spawn(async move { run_loop(&e, cfg, queue, lead_rx, sd).await });
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(exec.runs().is_empty());
    // Not the leader: a trigger is answered at once.
    let rx = trigger.request().expect("queued");
    assert_eq!(rx.await.expect("answered"), Err(TriggerError::NotLeader));
    lead_tx.send_replace(true);
    tokio::time::sleep(Duration::from_secs(20)).await;
    lead_tx.send_replace(false); // lost mid-cycle
    tokio::time::sleep(Duration::from_secs(100)).await;
    let runs = exec.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].0.as_secs(), 10);
    assert!(runs[0].2, "the cycle was stopped");
    shutdown.cancel();
    lp.await.expect("loop");
}

#[tokio::test(start_paused = true)]
async fn node_changes_start_one_debounced_cycle_and_queue_at_most_one_more() {
    let exec = FakeExec::new(Duration::from_secs(4));
    let (_trigger, queue) = trigger_channel();
    let (_l, rx) = leader();
    let shutdown = CancellationToken::new();
    let (tx, changes) = tokio::sync::mpsc::channel(1);
    let s = shutdown.clone();
    tokio::spawn(async move {
        // t=20: a burst of changes; t=26.5 (during the event cycle that runs 25–29): more.
        tokio::time::sleep(Duration::from_secs(20)).await;
        for _ in 0..5 {
            let _ = tx.try_send(NodeChange::BecameReady);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(6)).await;
        for _ in 0..5 {
            let _ = tx.try_send(NodeChange::Uncordoned);
        }
        tokio::time::sleep(Duration::from_secs(20)).await;
        s.cancel();
    });
    let cfg = LoopConfig {
        interval: Duration::from_secs(1000),
        trigger_enabled: false,
        event_debounce: Duration::from_secs(5),
    };
    run_loop_with_events(&exec, cfg, queue, rx, shutdown, Some(changes)).await;
    let runs: Vec<(u64, Source)> = exec.runs().iter().map(|r| (r.0.as_secs(), r.1)).collect();
    // The interval's first cycle at 0; the burst at 20–20.4 → one cycle 5 s after its first
    // change; the changes during that cycle → exactly one more, debounced after it ends.
    assert_eq!(
        runs,
        vec![
            (0, Source::Interval),
            (25, Source::Event),
            (34, Source::Event)
        ]
    );
}
