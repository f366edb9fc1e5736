//! `workloadEvictionWindow`: at most `maxEvictions` (a count or a percentage of the workload's
//! desired replicas) of one workload's pods moved within `duration`, across cycles. The history
//! is kept in memory by the process that runs the cycles (`run`); `plan` runs one cycle with no
//! history and does not apply the window.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use rustc_hash::FxHashMap as HashMap;
use serde::Deserialize;

use super::limit_value::LimitValue;

/// The policy's `workloadEvictionWindow` block.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WindowSpec {
    /// How far back evictions count (a Go duration such as `"1h"`; must be > 0).
    pub duration: String,
    /// At most this many (or this percentage of the desired replicas) within `duration`.
    pub max_evictions: LimitValue,
}

/// A validated window plus (when the cycles run in one process) the history it counts.
#[derive(Debug, Clone)]
pub struct WindowLimit {
    /// `duration` as written (for messages).
    pub duration_text: String,
    /// `duration`.
    pub duration: Duration,
    /// `maxEvictions`.
    pub max: LimitValue,
    /// The evictions of earlier cycles; `None` (as in `plan`): the window is not applied.
    pub history: Option<Arc<Mutex<WindowHistory>>>,
}

impl WindowLimit {
    /// Validates `spec`; the error names the field.
    pub fn from_spec(spec: &WindowSpec) -> Result<Self, String> {
        let duration = crate::duration::parse_go_duration(&spec.duration)
            .map_err(|e| format!("workloadEvictionWindow.duration: {e}"))?;
        if duration.is_zero() {
            return Err("workloadEvictionWindow.duration: must be greater than 0".into());
        }
        Ok(WindowLimit {
            duration_text: spec.duration.clone(),
            duration,
            max: spec.max_evictions,
            history: None,
        })
    }

    /// The window with an empty history of its own (what `run` installs once at start).
    pub fn with_history(mut self) -> Self {
        self.history = Some(Arc::default());
        self
    }
}

/// When each workload's pods were moved (by workload uid), oldest first.
#[derive(Debug, Default)]
pub struct WindowHistory {
    by_workload: HashMap<String, VecDeque<Timestamp>>,
}

impl WindowHistory {
    /// Forgets evictions at or before `now − window`.
    pub fn prune(&mut self, now: Timestamp, window: Duration) {
        let Some(cutoff) = cutoff(now, window) else {
            return;
        };
        self.by_workload.retain(|_, times| {
            while times.front().is_some_and(|&t| t <= cutoff) {
                times.pop_front();
            }
            !times.is_empty()
        });
    }

    /// Evictions of workload `uid` after `now − window`.
    pub fn count(&self, uid: &str, now: Timestamp, window: Duration) -> u32 {
        let Some(times) = self.by_workload.get(uid) else {
            return 0;
        };
        let n = match cutoff(now, window) {
            Some(c) => times.iter().rev().take_while(|&&t| t > c).count(),
            None => times.len(),
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Records an eviction of workload `uid` at `at`.
    pub fn record(&mut self, uid: &str, at: Timestamp) {
        match self.by_workload.get_mut(uid) {
            Some(times) => times.push_back(at),
            None => {
                self.by_workload
                    .insert(uid.to_string(), VecDeque::from([at]));
            }
        }
    }
}

/// `now − window` (`None` when it is before the earliest timestamp: nothing is old enough).
fn cutoff(now: Timestamp, window: Duration) -> Option<Timestamp> {
    let span = jiff::SignedDuration::try_from(window).ok()?;
    now.checked_sub(span).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    #[test]
    fn counts_only_inside_the_window_and_prunes_the_rest() {
        let mut h = WindowHistory::default();
        let hour = Duration::from_secs(3600);
        h.record("w", at("2026-01-10T00:00:00Z"));
        h.record("w", at("2026-01-10T00:30:00Z"));
        h.record("other", at("2026-01-10T00:30:00Z"));
        assert_eq!(h.count("w", at("2026-01-10T00:45:00Z"), hour), 2);
        // Exactly one hour later the first eviction has left the window.
        assert_eq!(h.count("w", at("2026-01-10T01:00:00Z"), hour), 1);
        assert_eq!(h.count("w", at("2026-01-10T01:31:00Z"), hour), 0);
        h.prune(at("2026-01-10T01:00:00Z"), hour);
        assert_eq!(h.by_workload.get("w").map(VecDeque::len), Some(1));
        h.prune(at("2026-01-10T02:00:00Z"), hour);
        assert!(h.by_workload.is_empty());
    }

    #[test]
    fn spec_is_validated() {
        let ok = WindowSpec {
            duration: "1h".into(),
            max_evictions: LimitValue::Percent(50),
        };
        let w = WindowLimit::from_spec(&ok).expect("valid");
        assert_eq!(w.duration, Duration::from_secs(3600));
        assert!(w.history.is_none());
        for (d, needle) in [("0s", "greater than 0"), ("soon", "invalid duration")] {
            let e = WindowLimit::from_spec(&WindowSpec {
                duration: d.into(),
                ..ok.clone()
            })
            .expect_err(d);
            assert!(e.starts_with("workloadEvictionWindow.duration: "), "{e}");
            assert!(e.contains(needle), "{e}");
        }
    }
}
