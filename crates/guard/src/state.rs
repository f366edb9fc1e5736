//! The guard's shared state: where facts come from, who restarts, the decision's configuration,
//! metrics, token buckets and this replica's memory of refusals — used by the webhook routes
//! ([`crate::server`]) and by every answer ([`crate::answering`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use prometheus_client::registry::Registry;

use crate::decision::{EvictionRequest, GuardConfig, Verdict, decide};
use crate::in_flight::EvictionLog;
use crate::metrics::GuardMetrics;
use crate::rate::{RateLimits, RestartBudget};
use crate::restart::Restarter;
use crate::source::{FactSource, Gathered, PodLookup, SourceError, gather_for};

/// Time budget for reading the facts of one eviction (both reads when a cached pod is re-read).
/// With the restart actor's 2 s this keeps an answer inside the webhook's 5 s timeout.
pub const GATHER_BUDGET: std::time::Duration = std::time::Duration::from_millis(2500);

/// A clock (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Remembers when this replica first refused each pod (by uid), to bound refusals by the deadline.
#[derive(Debug, Default)]
pub struct DenialMemory {
    first: Mutex<HashMap<String, Timestamp>>,
}

impl DenialMemory {
    /// When this pod was first refused.
    pub fn first(&self, uid: &str) -> Option<Timestamp> {
        self.first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .copied()
    }

    /// Notes a refusal (keeps the first one); forgets entries older than `forget_after`.
    pub fn note(&self, uid: &str, now: Timestamp, forget_after: std::time::Duration) {
        let mut map = self.first.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= 4096 {
            let horizon =
                jiff::SignedDuration::try_from(forget_after).unwrap_or(jiff::SignedDuration::MAX);
            map.retain(|_, t| now.duration_since(*t) < horizon);
        }
        map.entry(uid.to_owned()).or_insert(now);
    }
}

/// Everything the routes share.
pub struct GuardState {
    /// Where facts come from.
    pub source: Arc<dyn FactSource>,
    /// Who restarts Deployments.
    pub restarter: Arc<dyn Restarter>,
    /// Decision configuration.
    pub config: GuardConfig,
    /// Metrics (registered in `registry`).
    pub metrics: Arc<GuardMetrics>,
    /// Registry served on `/metrics`.
    pub registry: Arc<Registry>,
    /// First refusals per pod.
    pub denials: DenialMemory,
    /// Recent eviction requests (rule A's "being evicted").
    pub evictions: EvictionLog,
    /// The clock.
    pub clock: Clock,
    /// Token buckets bounding restarts and surges.
    pub budget: RestartBudget,
}

impl GuardState {
    /// State with a fresh registry, the system clock and the given parts.
    pub fn new(
        source: Arc<dyn FactSource>,
        restarter: Arc<dyn Restarter>,
        config: GuardConfig,
    ) -> Self {
        let mut registry = Registry::default();
        let metrics = GuardMetrics::register(&mut registry);
        Self::with_registry(source, restarter, config, metrics, registry)
    }

    /// State with metrics already registered in `registry` (the restart actor shares them).
    pub fn with_registry(
        source: Arc<dyn FactSource>,
        restarter: Arc<dyn Restarter>,
        config: GuardConfig,
        metrics: Arc<GuardMetrics>,
        registry: Registry,
    ) -> Self {
        GuardState {
            source,
            restarter,
            config,
            metrics,
            registry: Arc::new(registry),
            denials: DenialMemory::default(),
            evictions: EvictionLog::default(),
            clock: Arc::new(Timestamp::now),
            budget: RestartBudget::new(RateLimits::default()),
        }
    }

    /// Replaces the restart and surge rate limits (default [`RateLimits::default`]).
    pub fn with_rate_limits(mut self, limits: RateLimits) -> Self {
        self.budget = RestartBudget::new(limits);
        self
    }

    /// Marks the gathered pods of the Deployment whose eviction was asked for recently.
    pub(crate) fn mark_evicting(&self, gathered: &mut Gathered, now: Timestamp) {
        let Some(ns) = gathered.pod.as_ref().map(|p| p.namespace.clone()) else {
            return;
        };
        for s in gathered.siblings.iter_mut().flatten() {
            s.being_evicted = self.evictions.recent(&ns, &s.name, now);
        }
    }

    /// Decides on gathered facts (with this replica's first refusal of the pod).
    pub(crate) fn decide(
        &self,
        eviction: &EvictionRequest,
        gathered: &Gathered,
        now: Timestamp,
    ) -> Verdict {
        let uid = gathered.pod.as_ref().map_or("", |p| p.uid.as_str());
        let first = self.denials.first(uid);
        let mut scratch = Vec::new();
        decide(
            eviction,
            &gathered.facts(&mut scratch, first),
            now,
            &self.config,
        )
    }

    /// Replaces the clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Gathers facts before `deadline`; `Err(None)` when the time ran out.
    pub(crate) async fn gather_by(
        &self,
        eviction: &EvictionRequest,
        lookup: PodLookup,
        deadline: tokio::time::Instant,
    ) -> Result<Gathered, Option<SourceError>> {
        match tokio::time::timeout_at(
            deadline,
            gather_for(
                self.source.as_ref(),
                eviction,
                lookup,
                self.config.pdb_surge,
            ),
        )
        .await
        {
            Ok(Ok(g)) => Ok(g),
            Ok(Err(e)) => Err(Some(e)),
            Err(_) => Err(None),
        }
    }
}
