//! The per-cycle log of a dry run's attempts and of limit refusals, kept readable at any size.
//!
//! Upstream logs one line per dry-run eviction ("Evicted pod in dry run mode", klog V(1)). At
//! 150,000 pods a cycle makes tens of thousands of attempts and refusals, and writing a line for
//! each was most of a dry-run cycle's CPU. So the first [`LINES_AT_INFO`] of each kind per cycle are
//! logged at info, the rest at debug (`-v 2` shows them all), and one summary line per
//! profile/plugin (attempts by outcome) and per profile/plugin/limit (refusals) is logged at info.
//! Evictions `placement: Enforce` refused are logged the same way (first lines at info with the
//! sentence, then one summary line per profile/plugin/code).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube_descheduler_engine::evictor::{EvictOutcome, EvictionRecord, LimitHit, PlacementHit};

/// Per-item lines logged at info level per cycle, for each of attempts and refusals.
pub const LINES_AT_INFO: usize = 100;

/// Attempts of one profile/plugin, by outcome.
#[derive(Default)]
struct Outcomes {
    evicted: usize,
    deflected: usize,
    skipped: usize,
    errors: usize,
    requested: usize,
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
            EvictOutcome::Deflected { .. } | EvictOutcome::Background { .. } => o.deflected += 1,
            EvictOutcome::Denied { .. } | EvictOutcome::BackedOff { .. } => o.skipped += 1,
            EvictOutcome::Failed { .. } | EvictOutcome::NotAttempted { .. } => o.errors += 1,
            EvictOutcome::Requested { .. } => o.requested += 1,
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
        tracing::info!(%profile, strategy = %plugin, evicted = o.evicted, deflected = o.deflected, skipped = o.skipped, errors = o.errors, requested = o.requested, "Dry-run evictions of a plugin");
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

/// Logs the prediction of every attempted eviction whose profile predicts placement (`Report` or
/// `Enforce`): "Eviction placement", with the predicted node, its ties and scores, and the refusal
/// `Enforce` makes (with `Report`: would make). Nothing for profiles with placement `Off`.
pub fn placement_predictions<'a>(records: impl IntoIterator<Item = &'a EvictionRecord>) {
    let mut n = 0usize;
    for r in records {
        let Some(p) = &r.placement else { continue };
        let verdict = p
            .refusal
            .as_ref()
            .map(|v| format!("{}: {}", v.code.as_str(), v.message))
            .unwrap_or_default();
        let predicted = p.predicted_node.as_deref().unwrap_or("none");
        if n < LINES_AT_INFO {
            tracing::info!(pod = %format!("{}/{}", r.namespace, r.name), node = %r.node, strategy = %r.plugin, profile = %r.profile, outcome = r.outcome.as_str(), predicted, ties = p.ties.len(), may_return = p.may_return, placement = %p.summary(), verdict = %verdict, "Eviction placement");
        } else {
            tracing::debug!(pod = %format!("{}/{}", r.namespace, r.name), node = %r.node, strategy = %r.plugin, profile = %r.profile, outcome = r.outcome.as_str(), predicted, ties = p.ties.len(), may_return = p.may_return, placement = %p.summary(), verdict = %verdict, "Eviction placement");
        }
        n += 1;
    }
    if n > LINES_AT_INFO {
        tracing::info!(
            logged = LINES_AT_INFO,
            not_logged = n - LINES_AT_INFO,
            "more placement predictions than logged at info level; -v 2 logs each"
        );
    }
}

/// Logs the evictions `placement: Enforce` refused ("Eviction refused by placement", with the
/// code, the sentence and the predicted node).
pub fn placement_refusals(hits: &[PlacementHit]) {
    let mut by_code: BTreeMap<(Arc<str>, Arc<str>, &'static str), usize> = BTreeMap::new();
    for (n, h) in hits.iter().enumerate() {
        let predicted = h.placement.predicted_node.as_deref().unwrap_or("none");
        if n < LINES_AT_INFO {
            tracing::info!(pod = %format!("{}/{}", h.namespace, h.name), node = %h.node, strategy = %h.plugin, profile = %h.profile, code = h.code(), predicted, message = %h.message(), "Eviction refused by placement");
        } else {
            tracing::debug!(pod = %format!("{}/{}", h.namespace, h.name), node = %h.node, strategy = %h.plugin, profile = %h.profile, code = h.code(), predicted, message = %h.message(), "Eviction refused by placement");
        }
        *by_code
            .entry((h.profile.clone(), h.plugin.clone(), h.code()))
            .or_default() += 1;
    }
    if hits.len() > LINES_AT_INFO {
        tracing::info!(
            logged = LINES_AT_INFO,
            not_logged = hits.len() - LINES_AT_INFO,
            "more placement refusals than logged at info level; -v 2 logs each"
        );
    }
    for ((profile, plugin, code), count) in by_code {
        tracing::info!(%profile, strategy = %plugin, code, count, "Evictions refused by placement");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_descheduler_engine::evictor::EvictionReason;
    use kube_descheduler_engine::evictor::limits::LimitError;
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

    #[test]
    fn placement_refusals_are_logged_with_their_sentence_and_summarised_per_code() {
        let refusal = |code, message: &str| {
            Some(kube_descheduler_engine::placement::Refusal {
                code,
                message: message.into(),
            })
        };
        let hit = |i: usize, r| PlacementHit {
            namespace: "ns".into(),
            name: format!("p{i}"),
            node: "n5".into(),
            profile: "pack".into(),
            plugin: "HighNodeUtilization".into(),
            reason: Arc::new(EvictionReason::plugin("HighNodeUtilization")),
            placement: Arc::new(kube_descheduler_engine::placement::PlacementReport {
                predicted_node: Some("n5".into()),
                refusal: r,
                ..Default::default()
            }),
        };
        use kube_descheduler_engine::placement::RefusalCode::*;
        let hits: Vec<PlacementHit> = (0..103)
            .map(|i| {
                if i < 3 {
                    hit(i, refusal(PlacementNoFit, "it would stay Pending"))
                } else {
                    hit(
                        i,
                        refusal(PlacementReturn, "would be scheduled back onto n5: score 97"),
                    )
                }
            })
            .collect();
        let info = logged(tracing::Level::INFO, || placement_refusals(&hits));
        assert_eq!(count(&info, "Eviction refused by placement"), LINES_AT_INFO);
        assert!(
            info[3].contains("would be scheduled back onto n5: score 97")
                && info[3].contains("PlacementReturn")
                && (info[3].contains("predicted=\"n5\"") || info[3].contains("predicted=n5"))
                && info[3].contains("ns/p3"),
            "{info:?}"
        );
        assert_eq!(count(&info, "not_logged=3"), 1, "{info:?}");
        let summaries: Vec<&String> = info
            .iter()
            .filter(|l| l.contains("Evictions refused by placement"))
            .collect();
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        assert!(
            summaries
                .iter()
                .any(|l| l.contains("PlacementNoFit") && l.contains("count=3"))
        );
        assert!(
            summaries
                .iter()
                .any(|l| l.contains("PlacementReturn") && l.contains("count=100"))
        );
        assert!(logged(tracing::Level::INFO, || placement_refusals(&[])).is_empty());
    }

    #[test]
    fn predictions_are_logged_for_records_that_carry_one() {
        let mut with = record(1, "HighNodeUtilization", EvictOutcome::Evicted);
        with.placement = Some(Arc::new(
            kube_descheduler_engine::placement::PlacementReport {
                predicted_node: Some("n2".into()),
                ties: vec!["n2".into(), "n3".into()],
                refusal: Some(kube_descheduler_engine::placement::Refusal {
                    code: kube_descheduler_engine::placement::RefusalCode::PlacementTargetEmptied,
                    message: "would be scheduled onto n3, a node this cycle is emptying".into(),
                }),
                ..Default::default()
            },
        ));
        let without = record(2, "PodLifeTime", EvictOutcome::Evicted);
        let info = logged(tracing::Level::INFO, || {
            placement_predictions([&with, &without])
        });
        assert_eq!(info.len(), 1, "{info:?}");
        assert!(
            info[0].contains("Eviction placement")
                && info[0].contains("ns/p1")
                && (info[0].contains("predicted=\"n2\"") || info[0].contains("predicted=n2"))
                && info[0].contains("ties=2")
                && info[0].contains("PlacementTargetEmptied: would be scheduled onto n3"),
            "{info:?}"
        );
    }
}
