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
            tracing::info!(pod = %format!("{}/{}", h.namespace, h.name), node = %h.node, strategy = %h.plugin, profile = %h.profile, limit = h.limit.limit(), kind = h.limit.kind(), error = %h.limit.result_label(), "Eviction refused by a limit");
        } else {
            tracing::debug!(pod = %format!("{}/{}", h.namespace, h.name), node = %h.node, strategy = %h.plugin, profile = %h.profile, limit = h.limit.limit(), kind = h.limit.kind(), error = %h.limit.result_label(), "Eviction refused by a limit");
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
