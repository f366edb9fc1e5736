//! One descheduling cycle: every profile's Deschedule plugins, then every profile's Balance plugins,
//! over the Ready nodes matching the policy's `nodeSelector`, with limits shared across profiles.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube_core::{Selector, SelectorExt};

use super::filter_cache::FilterCache;
use super::{BalancePlugin, DeschedulePlugin, EvictorPlugin, Handle};
use crate::evictor::{
    EvictionBackend, EvictionRecord, EvictionSession, LimitHit, LimitValue, Limits,
    NodeUsageReport, PlacementHit, ScaledLimits,
};
use crate::snapshot::{NodeId, PodId, Snapshot};

/// A profile ready to run: its DefaultEvictor and plugins in policy order.
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// The profile's DefaultEvictor.
    pub evictor: Box<dyn EvictorPlugin>,
    /// Deschedule plugins.
    pub deschedule: Vec<Box<dyn DeschedulePlugin>>,
    /// Balance plugins.
    pub balance: Vec<Box<dyn BalancePlugin>>,
}

/// Cycle-wide settings from the policy.
#[derive(Debug, Clone, Default)]
pub struct CycleConfig {
    /// The policy's top-level `nodeSelector`.
    pub node_selector: Option<Selector>,
    /// `maxNoOfPodsToEvictPerNode`: a count, or a percentage of each node's pods.
    pub max_per_node: Option<LimitValue>,
    /// `maxNoOfPodsToEvictPerNamespace`: a count, or a percentage of each namespace's pods.
    pub max_per_namespace: Option<LimitValue>,
    /// `maxNoOfPodsToEvictTotal`.
    pub max_total: Option<u32>,
    /// The cluster's scheduler profiles (`--scheduler-config`), for placement predictions.
    pub scheduler: std::sync::Arc<crate::placement::SchedulerProfiles>,
    /// The per-workload limits (none: upstream's limits).
    pub scaled: ScaledLimits,
    /// Pods whose eviction another controller is carrying out (evictions in background): each
    /// counts against the total, node and namespace limits before the plugins run, as upstream
    /// counts its pending eviction requests.
    pub in_flight: Vec<PodId>,
    /// Pods with an outstanding eviction request of ours: counted against the limits like
    /// `in_flight`, but left to the plugins, which may choose them again (not counted twice); a
    /// pod no plugin chooses again is one the cycle no longer wants.
    pub requested: Vec<PodId>,
}

impl CycleConfig {
    /// Whether the policy uses limits upstream does not have: a percentage node or namespace
    /// limit, or a per-workload limit.
    pub fn has_own_limits(&self) -> bool {
        self.max_per_node.is_some_and(LimitValue::is_percent)
            || self.max_per_namespace.is_some_and(LimitValue::is_percent)
            || self.scaled.is_set()
    }
}

/// How long one plugin ran.
#[derive(Debug, Clone)]
pub struct PluginTiming {
    /// Profile.
    pub profile: String,
    /// Plugin.
    pub plugin: String,
    /// Wall time.
    pub duration: Duration,
}

/// What a cycle did.
#[derive(Debug, Default)]
pub struct CycleReport {
    /// Every eviction attempt, in order.
    pub records: Vec<EvictionRecord>,
    /// Evictions refused by `maxNoOfPodsToEvict*` before any attempt, in order.
    pub limit_hits: Vec<LimitHit>,
    /// Evictions `placement: Enforce` refused before any attempt, in order.
    pub placement_refusals: Vec<PlacementHit>,
    /// Plugin runs that failed for the cycle (and evicted nothing more: a plugin that panicked keeps
    /// the evictions it made before).
    pub plugin_failures: Vec<crate::evictor::PluginFailure>,
    /// Set when the cycle did not run (e.g. fewer than two Ready nodes).
    pub skipped: Option<String>,
    /// Nodes the cycle considered.
    pub nodes: usize,
    /// Per-plugin wall time.
    pub timings: Vec<PluginTiming>,
    /// How each node-usage plugin classified the nodes, in run order.
    pub usage_reports: Vec<NodeUsageReport>,
    /// Total wall time.
    pub duration: Duration,
}

/// Ready nodes matching `selector` (unschedulable nodes count as Ready, as upstream).
pub fn ready_nodes(snapshot: &Snapshot, selector: Option<&Selector>) -> Vec<NodeId> {
    (0..snapshot.nodes.len() as NodeId)
        .filter(|&n| {
            let node = snapshot.node(n);
            node.ready && selector.is_none_or(|s| s.matches(&node.labels))
        })
        .collect()
}

/// Runs one cycle over `snapshot`, evicting through `backend`. Pods that move are marked evicted in
/// the snapshot after each plugin, so later plugins see the effect.
pub fn run_cycle(
    profiles: &[Profile],
    config: &CycleConfig,
    snapshot: &mut Snapshot,
    now: Timestamp,
    backend: Box<dyn EvictionBackend + Send>,
) -> (CycleReport, Box<dyn EvictionBackend + Send>) {
    let start = Instant::now();
    let mut report = CycleReport::default();
    let nodes = ready_nodes(snapshot, config.node_selector.as_ref());
    report.nodes = nodes.len();
    let mut limits = Limits::new(
        config.max_per_node,
        config.max_per_namespace,
        config.max_total,
    )
    .with_scaled(config.scaled.clone(), now);
    for &pod in config.in_flight.iter().chain(&config.requested) {
        let p = snapshot.pod(pod);
        limits.count(p.node, &p.namespace);
    }
    let mut session = EvictionSession::new(limits, backend);
    session.set_precounted(config.requested.iter().copied());
    session.set_scheduler(config.scheduler.clone());
    if nodes.len() <= 1 {
        report.skipped = Some(format!(
            "the cluster has {} Ready node(s) matching the node selector; at least 2 are needed, so evicting would only disrupt",
            nodes.len()
        ));
    } else {
        let candidates: Vec<Vec<NodeId>> = profiles
            .iter()
            .map(|p| p.evictor.fit_candidates(snapshot))
            .collect();
        let mut filter_caches: Vec<FilterCache> = profiles
            .iter()
            .map(|p| FilterCache::new(p.evictor.as_ref(), snapshot.pods.len()))
            .collect();
        let mut settled = 0;
        for (i, plugin) in plugin_runs(profiles) {
            let (profile, fit_nodes) = (&profiles[i], &candidates[i]);
            let t = Instant::now();
            {
                let mut h = Handle::new(
                    snapshot,
                    now,
                    profile.evictor.as_ref(),
                    &filter_caches[i],
                    fit_nodes,
                    &mut session,
                    &profile.name,
                    plugin.name(),
                );
                contained(&mut h, |h| plugin.run(h, &nodes));
            }
            settle(snapshot, &session, &mut settled, &mut filter_caches);
            report.timings.push(timing(&profile.name, plugin.name(), t));
        }
    }
    report.limit_hits = session.take_limit_hits();
    report.placement_refusals = session.take_placement_hits();
    report.plugin_failures = session.take_failures();
    report.usage_reports = session.take_usage_reports();
    let (records, backend) = session.into_parts();
    report.records = records;
    report.duration = start.elapsed();
    (report, backend)
}

/// A profile's plugin at one extension point, as the cycle runs it.
enum PluginRun<'p> {
    Deschedule(&'p dyn DeschedulePlugin),
    Balance(&'p dyn BalancePlugin),
}

/// Every profile's Deschedule plugins, then every profile's Balance plugins, in order, each with
/// its profile's index.
fn plugin_runs(profiles: &[Profile]) -> Vec<(usize, PluginRun<'_>)> {
    let mut runs = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        runs.extend(
            p.deschedule
                .iter()
                .map(|d| (i, PluginRun::Deschedule(d.as_ref()))),
        );
    }
    for (i, p) in profiles.iter().enumerate() {
        runs.extend(
            p.balance
                .iter()
                .map(|b| (i, PluginRun::Balance(b.as_ref()))),
        );
    }
    runs
}

impl<'p> PluginRun<'p> {
    fn name(&self) -> &'p str {
        match self {
            PluginRun::Deschedule(p) => p.name(),
            PluginRun::Balance(p) => p.name(),
        }
    }

    fn run(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        match self {
            PluginRun::Deschedule(p) => p.deschedule(h, nodes),
            PluginRun::Balance(p) => p.balance(h, nodes),
        }
    }
}

/// Runs one plugin with `h`; a panic in it fails that plugin's run for this cycle (logged and
/// counted as a plugin failure, see [`Handle::fail`]) instead of ending the cycle.
///
/// Why unwinding out of a plugin leaves the cycle consistent (the `AssertUnwindSafe`): while a
/// plugin runs, the snapshot is shared read-only; the filter cache holds only complete verdicts
/// (one atomic store each); and the eviction session is changed only inside the handle's calls,
/// each of which completes its change before returning to the plugin and checks a plugin's pod
/// ids before touching the session ([`Handle::evict`] refuses unknown or moved pods with an
/// error). A panic therefore unwinds through plugin code between two complete session updates:
/// the evictions made before it stand (in `run` they happened) and are settled as usual, and the
/// plugin's half-done work is only its own state, which is dropped. The panic hook still prints
/// the panic's message and location to stderr.
fn contained(h: &mut Handle<'_>, run: impl FnOnce(&mut Handle<'_>)) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut *h)));
    if let Err(payload) = outcome {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        h.fail(format!("the plugin panicked: {message}"));
    }
}

/// Marks the pods moved since the last call as evicted in the snapshot (later plugins no longer
/// see them). `settled` counts the session's records already handled.
fn settle(
    snapshot: &mut Snapshot,
    session: &EvictionSession,
    settled: &mut usize,
    filter_caches: &mut [FilterCache],
) {
    let records = session.records();
    let new = records.get(*settled..).unwrap_or_default();
    if new.iter().any(|r| r.outcome.moves_pod()) {
        for r in new.iter().filter(|r| r.outcome.moves_pod()) {
            snapshot.mark_evicted(r.pod);
        }
        filter_caches.iter_mut().for_each(FilterCache::pods_evicted);
    }
    *settled = records.len();
}

fn timing(profile: &str, plugin: &str, t: Instant) -> PluginTiming {
    let duration = t.elapsed();
    tracing::debug!(
        profile,
        plugin,
        seconds = duration.as_secs_f64(),
        "plugin finished"
    );
    PluginTiming {
        profile: profile.to_string(),
        plugin: plugin.to_string(),
        duration,
    }
}
