//! The per-cycle log of a dry run's attempts and of limit refusals, kept readable at any size.
//!
//! Upstream logs one line per dry-run eviction ("Evicted pod in dry run mode", klog V(1)). At
//! 150,000 pods a cycle makes tens of thousands of attempts and refusals, and writing a line for
//! each was most of a dry-run cycle's CPU. So the first [`LINES_AT_INFO`] of each kind per cycle are
//! logged at info, the rest at debug (`-v 2` shows them all), and one summary line per
//! profile/plugin (attempts by outcome) and per profile/plugin/limit (refusals) is logged at info.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::evictor::{EvictOutcome, EvictionRecord, LimitHit};

/// Per-item lines logged at info level per cycle, for each of attempts and refusals.
pub const LINES_AT_INFO: usize = 100;

/// Attempts of one profile/plugin, by outcome.
#[derive(Default)]
struct Outcomes {
    evicted: usize,
    deflected: usize,
    skipped: usize,
    errors: usize,
}

/// Logs a dry run's attempts (`records`, already filtered to those that were attempted).
pub fn dry_run_attempts<'a>(records: impl IntoIterator<Item = &'a EvictionRecord>) {
    let mut by_plugin: BTreeMap<(Arc<str>, Arc<str>), Outcomes> = BTreeMap::new();
    let mut n = 0usize;
    for r in records {
        if n < LINES_AT_INFO {
            tracing::info!(pod = %format!("{}/{}", r.namespace, r.name), node = %r.node, strategy = %r.plugin, profile = %r.profile, reason = %r.reason, outcome = r.outcome.as_str(), "Evicted pod in dry run mode");
        } else {
            tracing::debug!(pod = %format!("{}/{}", r.namespace, r.name), node = %r.node, strategy = %r.plugin, profile = %r.profile, reason = %r.reason, outcome = r.outcome.as_str(), "Evicted pod in dry run mode");
        }
        n += 1;
        let o = by_plugin
            .entry((r.profile.clone(), r.plugin.clone()))
            .or_default();
        match &r.outcome {
            EvictOutcome::Evicted => o.evicted += 1,
            EvictOutcome::Deflected { .. } => o.deflected += 1,
            EvictOutcome::Denied { .. } => o.skipped += 1,
            EvictOutcome::Failed { .. } => o.errors += 1,
        }
    }
    if n > LINES_AT_INFO {
        tracing::info!(
            logged = LINES_AT_INFO,
            not_logged = n - LINES_AT_INFO,
            "more dry-run evictions than logged at info level; -v 2 logs each"
        );
    }
    for ((profile, plugin), o) in by_plugin {
        tracing::info!(%profile, strategy = %plugin, evicted = o.evicted, deflected = o.deflected, skipped = o.skipped, errors = o.errors, "Dry-run evictions of a plugin");
    }
}

/// Profile, plugin, limit kind and upstream's result text of a refusal.
type LimitKey = (Arc<str>, Arc<str>, &'static str, &'static str);

/// Logs the evictions refused by a limit (`maxNoOfPodsToEvictPerNode` and the others).
pub fn limit_refusals(hits: &[LimitHit]) {
    let mut by_limit: BTreeMap<LimitKey, usize> = BTreeMap::new();
    for (n, h) in hits.iter().enumerate() {
        if n < LINES_AT_INFO {
            tracing::info!(pod = %format!("{}/{}", h.namespace, h.name), node = %h.node, strategy = %h.plugin, profile = %h.profile, limit = h.limit.limit(), kind = h.limit.kind(), error = %h.limit.result_label(), message = %h.limit, "Eviction refused by a limit");
        } else {
            tracing::debug!(pod = %format!("{}/{}", h.namespace, h.name), node = %h.node, strategy = %h.plugin, profile = %h.profile, limit = h.limit.limit(), kind = h.limit.kind(), error = %h.limit.result_label(), message = %h.limit, "Eviction refused by a limit");
        }
        *by_limit
            .entry((
                h.profile.clone(),
                h.plugin.clone(),
                h.limit.kind(),
                h.limit.result_label(),
            ))
            .or_default() += 1;
    }
    if hits.len() > LINES_AT_INFO {
        tracing::info!(
            logged = LINES_AT_INFO,
            not_logged = hits.len() - LINES_AT_INFO,
            "more limit refusals than logged at info level; -v 2 logs each"
        );
    }
    for ((profile, plugin, kind, error), count) in by_limit {
        tracing::info!(%profile, strategy = %plugin, kind, %error, count, "Evictions refused by a limit");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evictor::EvictionReason;
    use crate::evictor::limits::LimitError;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The log lines at `level` and above of `f`.
    fn logged(level: tracing::Level, f: impl FnOnce()) -> Vec<String> {
        let cap = Capture::default();
        let writer = cap.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(sub, f);
        let text =
            String::from_utf8_lossy(&cap.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
        text.lines().map(str::to_string).collect()
    }

    fn record(i: usize, plugin: &str, outcome: EvictOutcome) -> EvictionRecord {
        EvictionRecord {
            placement: None,
            pod: i as u32,
            namespace: "ns".into(),
            name: format!("p{i}"),
            node: "n1".into(),
            profile: "prof".into(),
            plugin: plugin.into(),
            reason: Arc::new(EvictionReason::new("Test", "because")),
            outcome,
        }
    }

    fn count(lines: &[String], needle: &str) -> usize {
        lines.iter().filter(|l| l.contains(needle)).count()
    }

    #[test]
    fn attempts_past_the_first_hundred_go_to_debug_with_a_summary_per_plugin() {
        let records: Vec<EvictionRecord> = (0..150)
            .map(|i| {
                let denied = EvictOutcome::Denied {
                    reason: "budget".into(),
                };
                match i % 3 {
                    0 => record(i, "A", EvictOutcome::Evicted),
                    1 => record(i, "A", denied),
                    _ => record(i, "B", EvictOutcome::Evicted),
                }
            })
            .collect();
        let info = logged(tracing::Level::INFO, || dry_run_attempts(&records));
        assert_eq!(count(&info, "Evicted pod in dry run mode"), LINES_AT_INFO);
        assert_eq!(count(&info, "not_logged=50"), 1, "{info:?}");
        let summaries: Vec<&String> = info
            .iter()
            .filter(|l| l.contains("Dry-run evictions of a plugin"))
            .collect();
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        assert!(summaries[0].contains("strategy=A") && summaries[0].contains("evicted=50"));
        assert!(summaries[0].contains("skipped=50"), "{summaries:?}");
        assert!(summaries[1].contains("strategy=B") && summaries[1].contains("evicted=50"));
        let debug = logged(tracing::Level::DEBUG, || dry_run_attempts(&records));
        assert_eq!(count(&debug, "Evicted pod in dry run mode"), 150);
        assert!(count(&debug, "ns/p149") == 1);
    }

    #[test]
    fn refusals_are_summarised_per_plugin_and_limit() {
        let hit = |i: usize, limit| LimitHit {
            namespace: "ns".into(),
            name: format!("p{i}"),
            node: "n1".into(),
            profile: "prof".into(),
            plugin: "A".into(),
            limit,
        };
        let hits: Vec<LimitHit> = (0..120)
            .map(|i| {
                if i < 20 {
                    hit(i, LimitError::Node { limit: 5 })
                } else {
                    hit(i, LimitError::Total { limit: 100 })
                }
            })
            .collect();
        let info = logged(tracing::Level::INFO, || limit_refusals(&hits));
        assert_eq!(count(&info, "Eviction refused by a limit"), LINES_AT_INFO);
        let summaries: Vec<&String> = info
            .iter()
            .filter(|l| l.contains("Evictions refused by a limit"))
            .collect();
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        assert!(
            summaries
                .iter()
                .any(|l| l.contains("kind=\"node\"") || l.contains("kind=node"))
        );
        assert!(summaries.iter().any(|l| l.contains("count=20")));
        assert!(summaries.iter().any(|l| l.contains("count=100")));
        let none = logged(tracing::Level::INFO, || limit_refusals(&[]));
        assert!(none.is_empty(), "{none:?}");
    }
}
