//! `/healthz` (process up) and `/readyz` (watch caches synced and following the API server; independent of leadership).
//! Both unauthenticated.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;

/// Readiness flag shared with the cache sync.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks ready (or not).
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }
    /// Whether ready.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// `GET /healthz`.
pub async fn healthz() -> (StatusCode, &'static str) {
    (StatusCode::OK, "ok")
}

/// `GET /readyz`: 200 once the caches synced, else 503.
pub fn readyz(r: &Readiness) -> (StatusCode, &'static str) {
    if r.get() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "watch caches not synced yet",
        )
    }
}
