//! The live [`CycleExec`]: builds the snapshot from the cluster state, runs the engine on a blocking
//! thread with the API backend (or the dry-run verdict), then logs and accounts the cycle.

use std::sync::Arc;

use futures::future::BoxFuture;
use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use super::background::InFlight;
use super::cycle_loop::{CycleExec, Source};
use super::evictor::{ApiEvictor, ApiEvictorConfig, not_attempted};
use super::recent::RecentEvictions;
use super::returns::BackoffBackend;
use crate::serving::metrics::Metrics;
use crate::serving::trigger::CycleSummary;
use kube_descheduler_engine::evictor::planner::PlanBackend;
use kube_descheduler_engine::evictor::{EvictOutcome, EvictionBackend};
use kube_descheduler_engine::framework::cycle::{CycleConfig, CycleReport, run_cycle};
use kube_descheduler_engine::policy::Policy;
use kube_descheduler_engine::snapshot::Snapshot;
use kube_descheduler_guard::answer::api_and_guard_verdict;

/// How evictions are carried out.
#[derive(Clone)]
pub enum Mode {
    /// `--dry-run`: no API writes; outcomes predicted by [`api_and_guard_verdict`].
    DryRun,
    /// `--dry-run --eviction-api EvictionRequest`: no API writes; every eviction the cycle decides
    /// is predicted as requested.
    DryRunRequests,
    /// Evictions through the API.
    Live(Box<ApiEvictorConfig>),
}

/// Builds a snapshot (from the watched cluster state in production).
pub type SnapshotSource = Arc<dyn Fn() -> Snapshot + Send + Sync>;

/// Runs cycles against the cluster.
#[derive(Clone)]
pub struct LiveCycle {
    /// The loaded policy.
    pub policy: Arc<Policy>,
    /// Snapshot source.
    pub snapshot: SnapshotSource,
    /// Eviction mode.
    pub mode: Mode,
    /// Metrics (None: disabled).
    pub metrics: Option<Arc<Metrics>>,
    /// Evictions accepted by earlier cycles that the pod cache may not show yet.
    pub recent: Arc<RecentEvictions>,
    /// Measured usage for `metricsUtilization` (None: the policy measures nothing).
    pub usage: Option<Arc<crate::usage::collector::Collector>>,
}

fn stopped() -> EvictOutcome {
    EvictOutcome::NotAttempted {
        reason: "descheduling was stopped".into(),
    }
}

impl LiveCycle {
    fn run_blocking(
        &self,
        stop: CancellationToken,
        rt: tokio::runtime::Handle,
    ) -> (CycleReport, std::time::Duration) {
        let taken = std::time::Instant::now();
        let mut snapshot = (self.snapshot)();
        let snapshot_time = taken.elapsed();
        let live = matches!(self.mode, Mode::Live(_));
        let in_flight = self.in_flight(&mut snapshot, &rt);
        if live {
            if let Some(r) = self.recent.returns() {
                r.expire_now();
            }
            let pending = self.recent.apply(&mut snapshot);
            if !pending.is_empty() {
                tracing::debug!(
                    pods = pending.len(),
                    "pods evicted by an earlier cycle are not terminating in the cache yet; not evicting them again"
                );
            }
        }
        if !snapshot.warnings.is_empty() {
            tracing::debug!(count = snapshot.warnings.len(), first = %snapshot.warnings[0], "snapshot warnings");
        }
        if let Some(c) = &self.usage {
            // The same data in live and dry-run mode; stale or failed sources are errors inside
            // it, so only the plugins that need them fail this cycle.
            let measured = rt.block_on(c.measure());
            snapshot.measured = Some(Arc::new(measured));
        }
        let now = Timestamp::now();
        let backend = self.backend(&snapshot, now, stop.clone(), rt.clone());
        // Evictions in progress count against the limits (a copy of the policy's cycle settings
        // only while there are some).
        let with_in_flight;
        let cycle_config = if in_flight.marked.is_empty() && in_flight.requested.is_empty() {
            &self.policy.cycle
        } else {
            with_in_flight = CycleConfig {
                in_flight: in_flight.marked,
                requested: in_flight.requested.clone(),
                ..self.policy.cycle.clone()
            };
            &with_in_flight
        };
        let profiles_span = super::otel::profiles_span();
        let in_profiles = profiles_span.as_ref().map(tracing::Span::enter);
        let (report, _) = run_cycle(
            &self.policy.profiles,
            cycle_config,
            &mut snapshot,
            now,
            backend,
        );
        // The profile spans end before the span around them.
        super::otel::end_cycle();
        drop(in_profiles);
        if live {
            for r in &report.records {
                if r.outcome == EvictOutcome::Evicted {
                    self.recent
                        .remember_eviction(&snapshot, r.pod, &r.profile, &r.plugin);
                }
            }
        }
        if let Mode::Live(cfg) = &self.mode
            && !stop.is_cancelled()
        {
            super::request_upkeep::withdraw_unwanted(
                cfg,
                &snapshot,
                &in_flight.requested,
                &report,
                &rt,
            );
        }
        (report, snapshot_time)
    }

    /// Brings the tracker of evictions in progress up to date with `snapshot` (live mode only).
    fn in_flight(&self, snapshot: &mut Snapshot, rt: &tokio::runtime::Handle) -> InFlight {
        let Mode::Live(cfg) = &self.mode else {
            return InFlight::default();
        };
        let Some(tracker) = &cfg.background else {
            return InFlight::default();
        };
        if cfg.eviction_api == super::evreq::EvictionApi::EvictionRequest {
            super::request_upkeep::resync(cfg, rt);
        }
        let in_flight = tracker.apply_all(snapshot, self.metrics.as_deref());
        if !in_flight.marked.is_empty() {
            tracing::debug!(
                pods = in_flight.marked.len(),
                "evictions in background in progress; not evicting those pods again"
            );
        }
        if !in_flight.requested.is_empty() {
            tracing::debug!(
                pods = in_flight.requested.len(),
                "evictions requested with EvictionRequests in progress; counted against the limits"
            );
        }
        in_flight
    }

    /// The eviction backend of one cycle.
    fn backend(
        &self,
        snapshot: &Snapshot,
        now: Timestamp,
        stop: CancellationToken,
        rt: tokio::runtime::Handle,
    ) -> Box<dyn EvictionBackend + Send> {
        match &self.mode {
            Mode::DryRun => {
                // The API server's PDB rules, then the eviction guard's decision (as `plan`).
                let mut verdict = api_and_guard_verdict(
                    snapshot,
                    now,
                    kube_descheduler_guard::GuardConfig::default(),
                );
                Box::new(PlanBackend::with_verdict(Box::new(move |s, p| {
                    if stop.is_cancelled() {
                        return stopped();
                    }
                    verdict(s, p)
                })))
            }
            Mode::DryRunRequests => Box::new(PlanBackend::with_verdict(Box::new(move |s, p| {
                if stop.is_cancelled() {
                    return stopped();
                }
                EvictOutcome::Requested {
                    name: super::evreq::request_name(&s.pod(p).uid),
                    written: true,
                }
            }))),
            Mode::Live(cfg) => {
                let api = Box::new(ApiEvictor::new((**cfg).clone(), rt, stop));
                match self.recent.returns() {
                    Some(r) => Box::new(BackoffBackend::new(api, r.clone())),
                    None => api,
                }
            }
        }
    }

    /// Summarises, logs and accounts a finished cycle.
    pub fn account(
        &self,
        report: &CycleReport,
        source: Source,
        stop: &CancellationToken,
    ) -> CycleSummary {
        self.account_with_snapshot_time(report, source, stop, std::time::Duration::ZERO)
    }

    /// [`Self::account`], logging how long taking the snapshot from the cluster state took.
    pub fn account_with_snapshot_time(
        &self,
        report: &CycleReport,
        source: Source,
        stop: &CancellationToken,
        snapshot_time: std::time::Duration,
    ) -> CycleSummary {
        let mut s = CycleSummary {
            duration_seconds: report.duration.as_secs_f64(),
            ..Default::default()
        };
        let dry = matches!(self.mode, Mode::DryRun | Mode::DryRunRequests);
        let mut aborted = false;
        let mut backoffs = 0;
        for r in &report.records {
            if not_attempted(&r.outcome) {
                aborted = true;
                continue;
            }
            match &r.outcome {
                EvictOutcome::Evicted => s.evicted += 1,
                EvictOutcome::Deflected { .. } | EvictOutcome::Background { .. } => {
                    s.deflected += 1
                }
                EvictOutcome::Requested { .. } => s.requested += 1,
                EvictOutcome::Denied { .. } => s.skipped += 1,
                EvictOutcome::BackedOff { .. } => {
                    s.skipped += 1;
                    backoffs += 1;
                }
                EvictOutcome::Failed { .. } | EvictOutcome::NotAttempted { .. } => s.errors += 1,
            }
        }
        if dry {
            super::cycle_log::dry_run_attempts(
                report.records.iter().filter(|r| !not_attempted(&r.outcome)),
            );
        }
        super::cycle_log::limit_refusals(&report.limit_hits);
        super::cycle_log::placement_predictions(
            report.records.iter().filter(|r| !not_attempted(&r.outcome)),
        );
        super::cycle_log::placement_refusals(&report.placement_refusals);
        s.status = if let Some(why) = &report.skipped {
            s.message = Some(why.clone());
            "skipped".into()
        } else if aborted || stop.is_cancelled() {
            "aborted".into()
        } else {
            "completed".into()
        };
        tracing::info!(
            source = source.as_str(),
            status = %s.status,
            evicted = s.evicted,
            deflected = s.deflected,
            skipped = s.skipped,
            errors = s.errors,
            requested = s.requested,
            limit_refusals = report.limit_hits.len(),
            placement_backoff = backoffs,
            placement_refusals = report.placement_refusals.len(),
            nodes = report.nodes,
            duration_seconds = s.duration_seconds,
            snapshot_seconds = snapshot_time.as_secs_f64(),
            dry_run = dry,
            "descheduling cycle finished"
        );
        if let Some(m) = &self.metrics {
            m.record_cycle(report, &s.status, source.as_str());
        }
        s
    }
}

impl CycleExec for LiveCycle {
    fn run(&self, source: Source, stop: CancellationToken) -> BoxFuture<'static, CycleSummary> {
        let this = self.clone();
        Box::pin(async move {
            let rt = tokio::runtime::Handle::current();
            let worker = this.clone();
            let s2 = stop.clone();
            let ran = tokio::task::spawn_blocking(move || {
                let span = super::otel::cycle_span(source.as_str());
                let entered = span.as_ref().map(tracing::Span::enter);
                let out = worker.run_blocking(s2, rt);
                super::otel::end_cycle();
                drop(entered);
                crate::memory::release_free_memory();
                out
            });
            match ran.await {
                Ok((report, taken)) => {
                    this.account_with_snapshot_time(&report, source, &stop, taken)
                }
                Err(e) => {
                    tracing::error!(error = %e, "descheduling cycle panicked");
                    CycleSummary {
                        status: "failed".into(),
                        message: Some(format!("the cycle failed: {e}")),
                        ..Default::default()
                    }
                }
            }
        })
    }
}
