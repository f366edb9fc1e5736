//! Prometheus metrics of `run` (no global registry).
//!
//! Upstream names and labels are kept: `descheduler_pods_evicted_total{result,strategy,profile,
//! namespace,node}` (`result`: upstream's `success` and `error`, plus ours: `deflected` for the
//! guard's rolling-restart deflection, `skipped` for a 429 refusal such as a PodDisruptionBudget,
//! `background` for an eviction in background and `requested` for an EvictionRequest asking for it;
//! an eviction refused by `maxNoOfPodsToEvict*` gets upstream's limit error text, e.g.
//! `maximum number of evicted pods per node reached`),
//! `descheduler_loop_duration_seconds`, `descheduler_strategy_duration_seconds{strategy,profile}`
//! (upstream's buckets) and `descheduler_build_info`. Ours are prefixed `kube_descheduler_`.
//! An eviction `run`'s return detector refused (the owner's last evicted pod was scheduled back
//! onto the node) is counted with `result="placement backoff"`, and each such return in
//! `kube_descheduler_placement_returns_total{profile,strategy,namespace}`. An eviction the
//! DefaultEvictor's `placement: Enforce` refused is counted in
//! `kube_descheduler_placement_refusals_total{profile,strategy,reason}` (`reason`: the refusal code).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use kube_descheduler_engine::evictor::EvictOutcome;
use kube_descheduler_engine::framework::cycle::CycleReport;

/// Upstream's `descheduler_loop_duration_seconds` buckets.
pub const LOOP_BUCKETS: [f64; 15] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
];
/// Upstream's `descheduler_strategy_duration_seconds` buckets.
pub const STRATEGY_BUCKETS: [f64; 13] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0,
];

/// Labels of `descheduler_pods_evicted_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictedLabels {
    /// `success`, `error`, `deflected`, `skipped`, `background`, `requested`, or a limit's text ([`kube_descheduler_engine::evictor::LimitError::result_label`]).
    pub result: String,
    /// Plugin name.
    pub strategy: String,
    /// Profile name.
    pub profile: String,
    /// Pod namespace.
    pub namespace: String,
    /// Node name.
    pub node: String,
}

/// The `result` of an eviction refused by `run`'s placement backoff
/// ([`EvictOutcome::BackedOff`]), and the first words of its reason text.
pub const PLACEMENT_BACKOFF: &str = "placement backoff";

/// Labels of `kube_descheduler_placement_returns_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlacementLabels {
    /// Profile of the eviction whose replacement came back.
    pub profile: String,
    /// Plugin of that eviction.
    pub strategy: String,
    /// The owner's namespace.
    pub namespace: String,
}

/// Labels of `kube_descheduler_placement_refusals_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlacementRefusalLabels {
    /// Profile.
    pub profile: String,
    /// Plugin that chose the pod.
    pub strategy: String,
    /// The refusal code: `PlacementReturn`, `PlacementNoFit` or `PlacementTargetEmptied`.
    pub reason: String,
}

/// Labels of `descheduler_strategy_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StrategyLabels {
    /// Plugin name.
    pub strategy: String,
    /// Profile name.
    pub profile: String,
}

/// Labels of `descheduler_build_info` (upstream's constant labels).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct BuildLabels {
    /// Upstream reports the Go version; we report the Rust toolchain family.
    pub GoVersion: String,
    /// `major.minor`.
    pub AppVersion: String,
    /// Full version.
    pub DeschedulerVersion: String,
    /// Git branch (from `GIT_BRANCH` at build time, else empty).
    pub GitBranch: String,
    /// Git commit (from `GIT_SHA` at build time, else empty).
    pub GitSha1: String,
}

/// Labels of cycle counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CycleLabels {
    /// `completed`, `skipped` (fewer than 2 Ready nodes) or `aborted` (stopped early).
    pub status: String,
    /// `interval`, `trigger` or `once`.
    pub source: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn loop_histogram() -> Histogram {
    Histogram::new(LOOP_BUCKETS)
}
fn strategy_histogram() -> Histogram {
    Histogram::new(STRATEGY_BUCKETS)
}

/// All metrics of `run`.
pub struct Metrics {
    registry: Registry,
    /// `descheduler_pods_evicted_total`.
    pub pods_evicted: Family<EvictedLabels, Counter>,
    /// `descheduler_loop_duration_seconds`.
    pub loop_duration: Histogram,
    /// `descheduler_strategy_duration_seconds`.
    pub strategy_duration: HistogramFamily<StrategyLabels>,
    /// `kube_descheduler_evictions_deflected_total`.
    pub deflected: Counter,
    /// `kube_descheduler_evictions_skipped_total`.
    pub skipped: Counter,
    /// `kube_descheduler_cycles_total{status,source}`.
    pub cycles: Family<CycleLabels, Counter>,
    /// `kube_descheduler_plugin_failures_total{strategy,profile}`.
    pub plugin_failures: Family<StrategyLabels, Counter>,
    /// `kube_descheduler_leader` (1 while this replica holds the lease or runs without election).
    pub leader: Gauge,
    /// `kube_descheduler_caches_synced` (1 once every watch cache listed).
    pub caches_synced: Gauge,
    /// `kube_descheduler_dry_run` (1 in dry-run mode).
    pub dry_run: Gauge,
    /// `kube_descheduler_placement_returns_total{profile,strategy,namespace}`.
    pub placement_returns: Family<PlacementLabels, Counter>,
    /// `kube_descheduler_placement_refusals_total{profile,strategy,reason}`.
    pub placement_refusals: Family<PlacementRefusalLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The value of `descheduler_pods_evicted_total{result}` for a pod in `namespace` on `node`,
    /// evicted by plugin `strategy` of `profile`.
    pub fn pods_evicted_total(
        &self,
        result: &str,
        (profile, strategy): (&str, &str),
        (namespace, node): (&str, &str),
    ) -> u64 {
        self.pods_evicted
            .get_or_create(&EvictedLabels {
                result: result.into(),
                strategy: strategy.into(),
                profile: profile.into(),
                namespace: namespace.into(),
                node: node.into(),
            })
            .get()
    }

    /// Registers every metric in a fresh registry.
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            pods_evicted: Family::default(),
            loop_duration: loop_histogram(),
            strategy_duration: Family::new_with_constructor(strategy_histogram),
            deflected: Counter::default(),
            skipped: Counter::default(),
            cycles: Family::default(),
            plugin_failures: Family::default(),
            leader: Gauge::default(),
            caches_synced: Gauge::default(),
            dry_run: Gauge::default(),
            placement_returns: Family::default(),
            placement_refusals: Family::default(),
        };
        // Registration order is the exposition's order: upstream's metrics first.
        m.register_upstream();
        m.register_own();
        m
    }

    /// Registers upstream's metrics (`descheduler_*`, names, help texts and labels kept) and sets
    /// `descheduler_build_info`.
    fn register_upstream(&mut self) {
        self.registry.register(
            "descheduler_pods_evicted",
            "Number of total evicted pods, by the result, by the strategy, by the namespace, by the node name. 'error' result means a pod could not be evicted",
            self.pods_evicted.clone(),
        );
        self.registry.register(
            "descheduler_loop_duration_seconds",
            "Time taken to complete a full descheduling cycle",
            self.loop_duration.clone(),
        );
        self.registry.register(
            "descheduler_strategy_duration_seconds",
            "Time taken to complete Each strategy of the descheduling operation",
            self.strategy_duration.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        self.registry.register(
            "descheduler_build_info",
            "Build info about descheduler, including Go version, Descheduler version, Git SHA, Git branch",
            build.clone(),
        );
        let version = env!("CARGO_PKG_VERSION");
        let app = version.split('.').take(2).collect::<Vec<_>>().join(".");
        build
            .get_or_create(&BuildLabels {
                GoVersion: "rust".into(),
                AppVersion: app,
                DeschedulerVersion: format!("v{version}"),
                GitBranch: option_env!("GIT_BRANCH").unwrap_or("").into(),
                GitSha1: option_env!("GIT_SHA").unwrap_or("").into(),
            })
            .set(1);
    }

    /// Registers our metrics (`kube_descheduler_*`).
    fn register_own(&mut self) {
        self.registry.register(
            "kube_descheduler_evictions_deflected",
            "Evictions the eviction guard turned into a rolling restart (the pod moves without downtime)",
            self.deflected.clone(),
        );
        self.registry.register(
            "kube_descheduler_evictions_skipped",
            "Evictions refused with 429 (PodDisruptionBudget or the guard's health rule); not retried",
            self.skipped.clone(),
        );
        self.registry.register(
            "kube_descheduler_cycles",
            "Descheduling cycles, by status and what started them",
            self.cycles.clone(),
        );
        self.registry.register(
            "kube_descheduler_leader",
            "1 while this replica may evict (holds the lease, or leader election is off)",
            self.leader.clone(),
        );
        self.registry.register(
            "kube_descheduler_plugin_failures",
            "Plugin runs that failed for a cycle and evicted nothing more (e.g. a metrics source without usable data, a plugin that panicked), by strategy and profile",
            self.plugin_failures.clone(),
        );
        self.registry.register(
            "kube_descheduler_caches_synced",
            "1 once every watch cache has completed its initial list",
            self.caches_synced.clone(),
        );
        self.registry.register(
            "kube_descheduler_dry_run",
            "1 when running with --dry-run (no eviction calls)",
            self.dry_run.clone(),
        );
        self.registry.register(
            "kube_descheduler_placement_returns",
            "Evicted pods whose replacement (a new pod of the same owner) was scheduled back onto the node they were evicted from, by the eviction's profile and strategy and the namespace",
            self.placement_returns.clone(),
        );
        self.registry.register(
            "kube_descheduler_placement_refusals",
            "Evictions the DefaultEvictor's placement: Enforce refused (the replacement would come back, fit nowhere or land on a node being emptied), by profile, strategy and refusal code",
            self.placement_refusals.clone(),
        );
    }

    /// The `result` label value for an outcome (None: not counted, e.g. an aborted attempt).
    pub fn result_label(outcome: &EvictOutcome) -> &'static str {
        match outcome {
            EvictOutcome::Evicted => "success",
            EvictOutcome::Background { .. } => "background",
            EvictOutcome::Requested { .. } => "requested",
            EvictOutcome::Deflected { .. } => "deflected",
            EvictOutcome::BackedOff { .. } => PLACEMENT_BACKOFF,
            EvictOutcome::Denied { .. } => "skipped",
            EvictOutcome::Failed { .. } | EvictOutcome::NotAttempted { .. } => "error",
        }
    }

    /// Accounts one finished cycle: every eviction attempt and limit refusal, the loop and
    /// per-plugin durations. Evictions not attempted because the cycle was stopped
    /// ([`EvictOutcome::NotAttempted`]) and pods our outstanding EvictionRequest already asked for
    /// (`Requested` not written) are left out.
    pub fn record_cycle(&self, report: &CycleReport, status: &str, source: &str) {
        for r in &report.records {
            if matches!(
                r.outcome,
                EvictOutcome::NotAttempted { .. } | EvictOutcome::Requested { written: false, .. }
            ) {
                continue;
            }
            self.pods_evicted
                .get_or_create(&EvictedLabels {
                    result: Self::result_label(&r.outcome).into(),
                    strategy: r.plugin.to_string(),
                    profile: r.profile.to_string(),
                    namespace: r.namespace.to_string(),
                    node: r.node.to_string(),
                })
                .inc();
            match &r.outcome {
                EvictOutcome::Deflected { .. } => {
                    self.deflected.inc();
                }
                EvictOutcome::Denied { .. } => {
                    self.skipped.inc();
                }
                _ => {}
            }
        }
        for h in &report.limit_hits {
            self.pods_evicted
                .get_or_create(&EvictedLabels {
                    result: h.limit.result_label().into(),
                    strategy: h.plugin.to_string(),
                    profile: h.profile.to_string(),
                    namespace: h.namespace.to_string(),
                    node: h.node.to_string(),
                })
                .inc();
        }
        for h in &report.placement_refusals {
            self.placement_refusals
                .get_or_create(&PlacementRefusalLabels {
                    profile: h.profile.to_string(),
                    strategy: h.plugin.to_string(),
                    reason: h.code().to_string(),
                })
                .inc();
        }
        for f in &report.plugin_failures {
            self.plugin_failures
                .get_or_create(&StrategyLabels {
                    strategy: f.plugin.clone(),
                    profile: f.profile.clone(),
                })
                .inc();
        }
        self.loop_duration.observe(report.duration.as_secs_f64());
        for t in &report.timings {
            self.strategy_duration
                .get_or_create(&StrategyLabels {
                    strategy: t.plugin.clone(),
                    profile: t.profile.clone(),
                })
                .observe(t.duration.as_secs_f64());
        }
        self.cycles
            .get_or_create(&CycleLabels {
                status: status.into(),
                source: source.into(),
            })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics failed");
        }
        out
    }
}

/// Content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kube_descheduler_engine::evictor::{EvictionReason, EvictionRecord};
    use std::sync::Arc;

    fn record(outcome: EvictOutcome) -> EvictionRecord {
        EvictionRecord {
            pod: 0,
            namespace: Arc::from("ns"),
            name: "web".into(),
            node: Arc::from("n1"),
            profile: Arc::from("p"),
            plugin: Arc::from("s"),
            reason: Arc::new(EvictionReason::plugin("s")),
            outcome,
            placement: None,
        }
    }

    /// `descheduler_pods_evicted_total{result}` of pod ns/web on n1 evicted by profile p, plugin s.
    pub(crate) fn count(m: &Metrics, result: &str) -> u64 {
        m.pods_evicted_total(result, ("p", "s"), ("ns", "n1"))
    }

    #[test]
    fn typed_outcomes_get_their_result_and_a_request_counts_once() {
        let m = Metrics::new();
        let requested = |written| EvictOutcome::Requested {
            name: "kube-descheduler-uid".into(),
            written,
        };
        let report = CycleReport {
            records: vec![
                record(requested(true)),
                record(requested(false)),
                record(EvictOutcome::Background {
                    message: "Eviction triggered evacuation".into(),
                }),
                record(EvictOutcome::Deflected {
                    message: "restart".into(),
                }),
                record(EvictOutcome::NotAttempted {
                    reason: "stopped".into(),
                }),
            ],
            ..Default::default()
        };
        m.record_cycle(&report, "completed", "once");
        assert_eq!(
            count(&m, "requested"),
            1,
            "a pod ours already asked for is not counted again"
        );
        assert_eq!(count(&m, "background"), 1);
        assert_eq!(count(&m, "deflected"), 1);
        assert_eq!(
            m.deflected.get(),
            1,
            "an eviction in background is no deflection"
        );
        assert_eq!(count(&m, "error"), 0, "not attempted is not accounted");
    }
}
