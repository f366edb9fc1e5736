//! `POST /api/v1/descheduler/run`: runs one cycle now and answers with its summary.
//!
//! - 200 `{status, evicted, deflected, skipped, errors, durationSeconds}` when the cycle ran;
//! - 429 when a cycle is running or another trigger is queued;
//! - 503 when shutting down (a queued trigger is answered so) or not the leader;
//! - 504 when the cycle outlasts `?timeoutSeconds=` (default 300): the cycle still completes and is
//!   accounted in metrics and logs; likewise when the caller disconnects.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::live::loop_::{Trigger, TriggerError};

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
