//! Evictions this webhook replica has seen recently, by pod: a pod whose eviction was asked for
//! within [`EvictionLog::window`] counts as "being evicted" by rule A (kubectl drain retries a
//! refused eviction every 5 s, so a pod it is draining is asked for again well inside it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// How long an eviction request marks its pod as being evicted.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(20);

/// Entries kept at most; older ones are dropped first when it is reached.
const MAX_ENTRIES: usize = 65_536;

/// Recent eviction requests by `namespace/name`.
#[derive(Debug)]
pub struct EvictionLog {
    seen: Mutex<HashMap<String, Timestamp>>,
    window: SignedDuration,
}

impl Default for EvictionLog {
    fn default() -> Self {
        Self::new(DEFAULT_WINDOW)
    }
}

impl EvictionLog {
    /// A log whose entries count for `window`.
    pub fn new(window: Duration) -> Self {
        EvictionLog {
            seen: Mutex::new(HashMap::new()),
            window: SignedDuration::try_from(window).unwrap_or(SignedDuration::MAX),
        }
    }

    /// How long an entry counts.
    pub fn window(&self) -> SignedDuration {
        self.window
    }

    /// Notes an eviction request of `namespace/name` at `now`.
    pub fn note(&self, namespace: &str, name: &str, now: Timestamp) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_ENTRIES {
            let window = self.window;
            seen.retain(|_, t| now.duration_since(*t) < window);
            if seen.len() >= MAX_ENTRIES {
                seen.clear();
            }
        }
        seen.insert(format!("{namespace}/{name}"), now);
    }

    /// An eviction of `namespace/name` was requested within the window before `now`.
    pub fn recent(&self, namespace: &str, name: &str, now: Timestamp) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(&format!("{namespace}/{name}"))
            .is_some_and(|t| now.duration_since(*t) < self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_count_within_the_window_only() {
        let log = EvictionLog::new(Duration::from_secs(20));
        let t0: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
        let at = |s: i64| t0.checked_add(SignedDuration::from_secs(s)).unwrap();
        assert!(!log.recent("shop", "web-1", t0));
        log.note("shop", "web-1", t0);
        assert!(log.recent("shop", "web-1", at(19)));
        assert!(!log.recent("shop", "web-1", at(20)));
        assert!(!log.recent("other", "web-1", at(1)), "keyed by namespace");
        log.note("shop", "web-1", at(30));
        assert!(log.recent("shop", "web-1", at(45)), "a retry renews it");
    }
}
