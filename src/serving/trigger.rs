//! The trigger: the interface that asks the cycle loop for one cycle now ([`Trigger`],
//! [`TriggerQueue`], [`trigger_channel`]; the loop in `live` consumes the queue), and the HTTP
//! endpoint that serves it.
//!
//! `POST /api/v1/descheduler/run`: runs one cycle now and answers with its summary.
//!
//! - 200 `{status, evicted, deflected, skipped, errors, durationSeconds}` when the cycle ran;
//! - 429 when a cycle is running or another trigger is queued;
//! - 503 when shutting down (a queued trigger is answered so) or not the leader;
//! - 504 when the cycle outlasts `?timeoutSeconds=` (default 300): the cycle still completes and is
//!   accounted in metrics and logs; likewise when the caller disconnects.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

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
    /// Evictions asked for with an EvictionRequest (`--eviction-api EvictionRequest`); left out
    /// when zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub requested: u64,
    /// Wall time of the cycle.
    pub duration_seconds: f64,
    /// Why the cycle was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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

/// The channel a queued trigger is answered on.
pub(crate) type Reply = oneshot::Sender<Result<CycleSummary, TriggerError>>;

/// What the loop and the trigger handles share: whether a cycle runs, a trigger is queued, the
/// queue is closed.
#[derive(Debug, Default)]
pub(crate) struct TriggerState {
    pub(crate) running: bool,
    pub(crate) queued: bool,
    pub(crate) closed: bool,
}

/// The handle the trigger API uses to request a cycle.
#[derive(Clone)]
pub struct Trigger {
    state: Arc<Mutex<TriggerState>>,
    tx: mpsc::Sender<Reply>,
}

/// The loop's end of the trigger channel.
pub struct TriggerQueue {
    pub(crate) state: Arc<Mutex<TriggerState>>,
    pub(crate) rx: mpsc::Receiver<Reply>,
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

/// Locks the shared state; a poisoned lock is still usable (plain flags).
pub(crate) fn lock(m: &Mutex<TriggerState>) -> std::sync::MutexGuard<'_, TriggerState> {
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

/// Default wait for the triggered cycle.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest wait a caller may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Parses `timeoutSeconds` (absent: default; invalid: error text).
pub fn parse_timeout(raw: Option<&str>) -> Result<Duration, String> {
    match raw {
        None => Ok(DEFAULT_TIMEOUT),
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .map(|n| Duration::from_secs(n).min(MAX_TIMEOUT))
            .ok_or_else(|| format!("timeoutSeconds must be a positive integer, got {s:?}")),
    }
}

/// Runs the trigger: queues a cycle and waits for it (up to `timeout`).
pub async fn run(trigger: &Trigger, timeout: Duration) -> (StatusCode, Json<Value>) {
    let rx = match trigger.request() {
        Ok(rx) => rx,
        Err(e) => return refusal(&e),
    };
    // If this future is dropped (caller disconnected), the loop still runs and accounts the cycle.
    let guard = DisconnectLog(true);
    let result = tokio::time::timeout(timeout, rx).await;
    let mut guard = guard;
    guard.0 = false;
    match result {
        Ok(Ok(Ok(summary))) => (
            StatusCode::OK,
            Json(serde_json::to_value(&summary).unwrap_or(Value::Null)),
        ),
        Ok(Ok(Err(e))) => refusal(&e),
        Ok(Err(_)) => refusal(&TriggerError::ShuttingDown),
        Err(_) => (
            StatusCode::GATEWAY_TIMEOUT,
            Json(json!({
                "status": "timeout",
                "message": format!("the cycle did not finish within {}s; it continues and will be accounted in metrics and logs", timeout.as_secs()),
            })),
        ),
    }
}

fn refusal(e: &TriggerError) -> (StatusCode, Json<Value>) {
    let code = match e {
        TriggerError::Busy => StatusCode::TOO_MANY_REQUESTS,
        TriggerError::ShuttingDown | TriggerError::NotLeader => StatusCode::SERVICE_UNAVAILABLE,
    };
    let status = match e {
        TriggerError::Busy => "busy",
        TriggerError::ShuttingDown => "shutting-down",
        TriggerError::NotLeader => "not-leader",
    };
    (
        code,
        Json(json!({ "status": status, "message": e.to_string() })),
    )
}

struct DisconnectLog(bool);

impl Drop for DisconnectLog {
    fn drop(&mut self) {
        if self.0 {
            tracing::warn!("trigger caller went away; the cycle continues and will be accounted");
        }
    }
}
