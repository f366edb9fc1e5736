//! Evictions: the per-cycle [`EvictionSession`] (limits, accounting, records) and the backends that
//! carry an eviction out (planning here; the live API evictor lives in [`crate::live`]).

pub mod limit_value;
pub mod limits;
pub mod planner;
pub mod reason;
pub mod usage;
pub mod window;
pub mod workloads;

use rustc_hash::FxHashSet as HashSet;

use std::sync::Arc;

use crate::placement::{PlacementMode, PlacementReport, Refusal, SchedulerProfiles, Simulator};
use crate::snapshot::{NodeId, PodId, Snapshot};
pub use limit_value::LimitValue;
pub use limits::{LimitError, Limits, ScaledLimits};
pub use reason::{EvictionReason, ReasonDetail, ReasonValue};
pub use usage::NodeUsageReport;

/// What happened to one eviction attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictOutcome {
    /// The pod was evicted (or would be, when planning).
    Evicted,
    /// The eviction guard deflected it into a rolling restart: the pod moves without downtime.
    Deflected {
        /// The guard's message.
        message: String,
    },
    /// Refused with 429 by a PodDisruptionBudget or the guard's health rule (upstream: "skipped").
    Denied {
        /// Why.
        reason: String,
    },
    /// Refused by `run` itself: the owner's last replacement came back to this node (placement
    /// backoff). Counted as a denial (upstream: "skipped") everywhere but its own metric label.
    BackedOff {
        /// Why, naming the owner, the node and until when.
        reason: String,
    },
    /// Any other failure.
    Failed {
        /// The error.
        error: String,
    },
    /// The cluster answered with an eviction in background (feature gate
    /// `EvictionsInBackground`): another controller evacuates the pod. Counted as a deflection
    /// everywhere but its own metric label.
    Background {
        /// The cluster's answer.
        message: String,
    },
    /// An EvictionRequest (`lifecycle.k8s.io/v1alpha1`) asks for the pod's eviction: created, or
    /// ours already asked. The pod leaves when the request's responders evict it.
    Requested {
        /// The EvictionRequest's name.
        name: String,
        /// This attempt wrote it (created, or renewed a withdrawn one); false when ours already
        /// asked for the eviction.
        written: bool,
    },
    /// Not attempted: descheduling was stopped (shutdown, lost leadership). Not accounted.
    NotAttempted {
        /// Why.
        reason: String,
    },
}

impl EvictOutcome {
    /// The outcome's short name, as `plan --output json` prints it.
    pub fn as_str(&self) -> &'static str {
        match self {
            EvictOutcome::Evicted => "evicted",
            EvictOutcome::Deflected { .. } | EvictOutcome::Background { .. } => "deflected",
            EvictOutcome::Denied { .. } | EvictOutcome::BackedOff { .. } => "denied",
            EvictOutcome::Failed { .. } | EvictOutcome::NotAttempted { .. } => "error",
            EvictOutcome::Requested { .. } => "requested",
        }
    }

    /// The pod leaves its node (evicted, deflected, evicted in background or requested); such
    /// outcomes count against limits.
    pub fn moves_pod(&self) -> bool {
        matches!(
            self,
            EvictOutcome::Evicted
                | EvictOutcome::Deflected { .. }
                | EvictOutcome::Background { .. }
                | EvictOutcome::Requested { .. }
        )
    }
}

/// Why an eviction was not attempted or did not succeed, as plugins see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictError {
    /// A limit was reached (`maxNoOfPodsToEvict*`). Node limit: go to the next node; total: stop.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// The DefaultEvictor's PreEvictionFilter rejected the pod (nodeFit, namespace labels).
    #[error("pod does not pass the pre-eviction filter")]
    Filtered,
    /// The pod was already evicted in this cycle.
    #[error("pod was already evicted in this cycle")]
    AlreadyEvicted,
    /// No pod of the snapshot has this id (a plugin's mistake; nothing was attempted).
    #[error("no pod with id {0} in the snapshot")]
    UnknownPod(crate::snapshot::PodId),
    /// The attempt was made and did not move the pod (denied or failed).
    #[error("eviction not done: {0:?}")]
    NotEvicted(EvictOutcome),
    /// The DefaultEvictor's `placement: Enforce` refused it before any attempt (the replacement
    /// would come back, fit nowhere, or land on a node this cycle is emptying). Not counted
    /// against any limit: the plugin goes on to its next candidate.
    #[error("refused by placement ({}): {}", .0.code.as_str(), .0.message)]
    Placement(Refusal),
}

impl EvictError {
    /// The total limit was reached: the plugin should stop.
    pub fn is_total_limit(&self) -> bool {
        matches!(self, EvictError::Limit(LimitError::Total { .. }))
    }
    /// The node limit was reached: the plugin should move on to the next node.
    pub fn is_node_limit(&self) -> bool {
        matches!(self, EvictError::Limit(l) if l.ends_node())
    }
}

/// Context of one eviction request.
#[derive(Debug, Clone)]
pub struct EvictionRequest<'a> {
    /// Profile name.
    pub profile: &'a str,
    /// Plugin (strategy) name.
    pub plugin: &'a str,
    /// Why the plugin chose the pod (the plugin name when it gave no reason).
    pub reason: &'a Arc<EvictionReason>,
}

/// Carries out an eviction: records it (planning), asks the guard, or calls the API (live).
pub trait EvictionBackend {
    /// Evicts `pod`. Limits were already checked by the session.
    fn evict(&mut self, snapshot: &Snapshot, pod: PodId, req: &EvictionRequest<'_>)
    -> EvictOutcome;

    /// A limit refused the eviction of `pod` (no attempt was made). The live backend publishes
    /// upstream's `EvictionFailed` Event when the policy asks for it; the default does nothing.
    fn limit_refused(
        &mut self,
        _snapshot: &Snapshot,
        _pod: PodId,
        _req: &EvictionRequest<'_>,
        _limit: &LimitError,
    ) {
    }

    /// `placement: Enforce` refused the eviction of `pod` (no attempt was made). The live backend
    /// publishes an `EvictionRefusedByPlacement` Event on the pod; the default does nothing.
    fn placement_refused(
        &mut self,
        _snapshot: &Snapshot,
        _pod: PodId,
        _req: &EvictionRequest<'_>,
        _refusal: &Refusal,
    ) {
    }
}

/// An eviction `placement: Enforce` refused before any attempt, with the prediction behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementHit {
    /// `namespace`.
    pub namespace: Arc<str>,
    /// `name`.
    pub name: String,
    /// Node name (empty if unbound).
    pub node: Arc<str>,
    /// Profile.
    pub profile: Arc<str>,
    /// Plugin.
    pub plugin: Arc<str>,
    /// Why the plugin chose the pod.
    pub reason: Arc<EvictionReason>,
    /// The prediction; its `refusal` is set.
    pub placement: Arc<PlacementReport>,
}

impl PlacementHit {
    /// The refusal (always set on a hit).
    pub fn refusal(&self) -> Option<&Refusal> {
        self.placement.refusal.as_ref()
    }

    /// The refusal's code as text (`PlacementReturn`, …).
    pub fn code(&self) -> &'static str {
        self.refusal().map_or("", |r| r.code.as_str())
    }

    /// The refusal's sentence.
    pub fn message(&self) -> &str {
        self.refusal().map_or("", |r| r.message.as_str())
    }
}

/// An eviction a limit refused before any attempt (upstream counts these in
/// `descheduler_pods_evicted_total` with the limit's error text as `result`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHit {
    /// `namespace`.
    pub namespace: Arc<str>,
    /// `name`.
    pub name: String,
    /// Node name (empty if unbound).
    pub node: Arc<str>,
    /// Profile.
    pub profile: Arc<str>,
    /// Plugin.
    pub plugin: Arc<str>,
    /// The limit that refused it.
    pub limit: LimitError,
}

/// A plugin run that failed for the cycle (e.g. its metrics source had no usable data), so it
/// evicted nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFailure {
    /// Profile.
    pub profile: String,
    /// Plugin.
    pub plugin: String,
    /// What went wrong.
    pub error: String,
}

/// How an attempt's records name the pod's node, the profile and the plugin.
struct AttemptNames {
    node: Arc<str>,
    profile: Arc<str>,
    plugin: Arc<str>,
}

/// One eviction attempt and its outcome, in order. The strings that repeat from record to record
/// (namespace, node, profile, plugin) are shared, not copied; so is a reason a plugin gives to
/// several pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionRecord {
    /// The pod.
    pub pod: PodId,
    /// `namespace`.
    pub namespace: Arc<str>,
    /// `name`.
    pub name: String,
    /// Node name (empty if unbound).
    pub node: Arc<str>,
    /// Profile.
    pub profile: Arc<str>,
    /// Plugin.
    pub plugin: Arc<str>,
    /// Why the plugin chose the pod.
    pub reason: Arc<EvictionReason>,
    /// Outcome.
    pub outcome: EvictOutcome,
    /// Where the replacement is predicted to land (`placement: Report`; `None` when Off).
    pub placement: Option<Arc<PlacementReport>>,
}

/// Per-cycle eviction state: limits and their counters (shared by all profiles), the backend, and
/// the record of every attempt.
pub struct EvictionSession {
    limits: Limits,
    backend: Box<dyn EvictionBackend + Send>,
    records: Vec<EvictionRecord>,
    limit_hits: Vec<LimitHit>,
    placement_hits: Vec<PlacementHit>,
    failures: Vec<PluginFailure>,
    moved: HashSet<PodId>,
    names: SharedNames,
    usage_reports: Vec<NodeUsageReport>,
    /// The placement simulator, made at the first eviction of a profile with placement on.
    simulator: Option<Simulator>,
    /// The scheduler profiles the simulator models.
    scheduler: Arc<SchedulerProfiles>,
    /// Nodes this cycle's node-usage plugins are emptying.
    emptying: HashSet<NodeId>,
    /// Pods already counted against the limits before the plugins ran (outstanding eviction
    /// requests): choosing one again neither checks nor counts the limits.
    precounted: HashSet<PodId>,
}

/// Shared copies of the strings records repeat: the last profile and plugin seen (a plugin's
/// evictions come in a row) and node names.
#[derive(Default)]
struct SharedNames {
    profile: Option<Arc<str>>,
    plugin: Option<Arc<str>>,
    nodes: rustc_hash::FxHashMap<NodeId, Arc<str>>,
}

impl SharedNames {
    /// `text` as a shared string, reusing `slot` when it holds the same text.
    fn share(slot: &mut Option<Arc<str>>, text: &str) -> Arc<str> {
        match slot {
            Some(shared) if **shared == *text => shared.clone(),
            _ => slot.insert(Arc::from(text)).clone(),
        }
    }

    /// The name of the pod's node (empty if unbound).
    fn node(&mut self, snapshot: &Snapshot, pod: &crate::snapshot::Pod) -> Arc<str> {
        match pod.node {
            Some(n) => self
                .nodes
                .entry(n)
                .or_insert_with(|| Arc::from(snapshot.node(n).name.as_str()))
                .clone(),
            None => Arc::from(pod.node_name.as_deref().unwrap_or_default()),
        }
    }
}

impl EvictionSession {
    /// A new session; counters start at zero.
    pub fn new(limits: Limits, backend: Box<dyn EvictionBackend + Send>) -> Self {
        EvictionSession {
            limits,
            backend,
            records: Vec::new(),
            limit_hits: Vec::new(),
            placement_hits: Vec::new(),
            failures: Vec::new(),
            moved: HashSet::default(),
            names: SharedNames::default(),
            usage_reports: Vec::new(),
            simulator: None,
            scheduler: Arc::default(),
            emptying: HashSet::default(),
            precounted: HashSet::default(),
        }
    }

    /// Records pods already counted against the limits (see [`EvictionSession::evict_placed`]).
    pub fn set_precounted(&mut self, pods: impl IntoIterator<Item = PodId>) {
        self.precounted.extend(pods);
    }

    /// The scheduler configuration predictions use (default: kube-scheduler's default profile).
    pub fn set_scheduler(&mut self, scheduler: Arc<SchedulerProfiles>) {
        self.scheduler = scheduler;
    }

    /// Records that a node-usage plugin is emptying `nodes` this cycle.
    pub fn mark_emptying(&mut self, nodes: impl IntoIterator<Item = NodeId>) {
        self.emptying.extend(nodes);
    }

    /// Evicts `pod`: checks limits (total → node → namespace), calls the backend, records the result.
    pub fn evict(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
    ) -> Result<EvictOutcome, EvictError> {
        self.evict_placed(snapshot, pod, req, PlacementMode::Off)
    }

    /// [`EvictionSession::evict`] with the profile's DefaultEvictor `placement` mode: with
    /// `Report`, the record carries the predicted landing node of the pod's replacement; with
    /// `Enforce`, an eviction the prediction refuses is not attempted ([`EvictError::Placement`],
    /// recorded in [`EvictionSession::placement_hits`], counted against no limit).
    pub fn evict_placed(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        placement: PlacementMode,
    ) -> Result<EvictOutcome, EvictError> {
        if self.moved.contains(&pod) || snapshot.is_evicted(pod) {
            return Err(EvictError::AlreadyEvicted);
        }
        let p = snapshot.pod(pod);
        let names = AttemptNames {
            node: self.names.node(snapshot, p),
            profile: SharedNames::share(&mut self.names.profile, req.profile),
            plugin: SharedNames::share(&mut self.names.plugin, req.plugin),
        };
        let precounted = self.precounted.contains(&pod);
        if !precounted && let Err(limit) = self.limits.check_pod(snapshot, pod) {
            return Err(self.refuse_by_limit(snapshot, pod, req, limit, names));
        }
        let mode = placement;
        let (placement, target) = self.predict(snapshot, pod, req, mode);
        if mode == PlacementMode::Enforce
            && let Some(report) = placement.as_ref().filter(|r| r.refusal.is_some())
        {
            return Err(self.refuse_by_placement(snapshot, pod, req, report, names));
        }
        let outcome = self.backend.evict(snapshot, pod, req);
        self.settle(snapshot, pod, target, precounted, &outcome);
        self.records.push(EvictionRecord {
            pod,
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            node: names.node,
            profile: names.profile,
            plugin: names.plugin,
            reason: req.reason.clone(),
            outcome: outcome.clone(),
            placement,
        });
        if outcome.moves_pod() {
            Ok(outcome)
        } else {
            Err(EvictError::NotEvicted(outcome))
        }
    }

    /// Records that `limit` refuses the eviction of `pod`; the error to return.
    fn refuse_by_limit(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        limit: LimitError,
        names: AttemptNames,
    ) -> EvictError {
        let p = snapshot.pod(pod);
        self.backend.limit_refused(snapshot, pod, req, &limit);
        self.limit_hits.push(LimitHit {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            node: names.node,
            profile: names.profile,
            plugin: names.plugin,
            limit: limit.clone(),
        });
        limit.into()
    }

    /// Records that the placement `report` (which has a refusal) refuses the eviction of `pod`,
    /// putting the pod back in the simulator; the error to return.
    fn refuse_by_placement(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        report: &Arc<PlacementReport>,
        names: AttemptNames,
    ) -> EvictError {
        let p = snapshot.pod(pod);
        if let Some(sim) = &mut self.simulator {
            sim.abandon(snapshot, pod);
        }
        let refusal = report.refusal.clone().unwrap_or_else(|| Refusal {
            code: crate::placement::RefusalCode::PlacementNoFit,
            message: String::new(),
        });
        self.backend.placement_refused(snapshot, pod, req, &refusal);
        self.placement_hits.push(PlacementHit {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            node: names.node,
            profile: names.profile,
            plugin: names.plugin,
            reason: req.reason.clone(),
            placement: report.clone(),
        });
        EvictError::Placement(refusal)
    }

    /// Brings the simulator, the limits' counters (unless `precounted`) and the moved pods up to
    /// date with the `outcome` of evicting `pod` (its replacement predicted onto `target`).
    fn settle(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        target: Option<NodeId>,
        precounted: bool,
        outcome: &EvictOutcome,
    ) {
        if let Some(sim) = &mut self.simulator {
            if outcome.moves_pod() {
                sim.commit(snapshot, pod, target);
            } else {
                sim.abandon(snapshot, pod);
            }
        }
        if outcome.moves_pod() {
            if !precounted {
                self.limits.count_pod(snapshot, pod);
            }
            self.moved.insert(pod);
        }
    }

    /// With placement on: the prediction for `pod`'s replacement (taking the pod off its node in
    /// the simulator until the outcome is known) and its target node. Once the simulator exists,
    /// every eviction updates it, whatever its profile's mode.
    fn predict(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        mode: PlacementMode,
    ) -> (Option<Arc<PlacementReport>>, Option<NodeId>) {
        if mode == PlacementMode::Off {
            return (None, None);
        }
        let scheduler = self.scheduler.clone();
        let moved = &self.moved;
        let sim = self
            .simulator
            .get_or_insert_with(|| Simulator::new(snapshot, moved, scheduler));
        let prediction = sim.evaluate(snapshot, pod);
        let target = prediction.as_ref().ok().and_then(|p| p.best);
        let report = crate::placement::judge(snapshot, pod, req.plugin, prediction, &self.emptying);
        (Some(Arc::new(report)), target)
    }

    /// Whether `pod` was moved (evicted or deflected) by this evictor.
    pub fn moved(&self, pod: PodId) -> bool {
        self.moved.contains(&pod)
    }

    /// The pods moved so far in this cycle.
    pub fn moved_set(&self) -> &HashSet<PodId> {
        &self.moved
    }

    /// Pods moved so far, for marking in the snapshot.
    pub fn moved_pods(&self) -> impl Iterator<Item = PodId> + '_ {
        self.moved.iter().copied()
    }

    /// The limits and their counters.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Every attempt so far, in order.
    pub fn records(&self) -> &[EvictionRecord] {
        &self.records
    }

    /// Evictions refused by a limit so far, in order.
    pub fn limit_hits(&self) -> &[LimitHit] {
        &self.limit_hits
    }

    /// Evictions `placement: Enforce` refused so far, in order.
    pub fn placement_hits(&self) -> &[PlacementHit] {
        &self.placement_hits
    }

    /// Takes the placement refusals recorded so far.
    pub fn take_placement_hits(&mut self) -> Vec<PlacementHit> {
        std::mem::take(&mut self.placement_hits)
    }

    /// Takes the plugin failures recorded so far.
    pub fn take_failures(&mut self) -> Vec<PluginFailure> {
        std::mem::take(&mut self.failures)
    }

    /// Records that a plugin's run failed for this cycle.
    pub fn plugin_failed(&mut self, failure: PluginFailure) {
        self.failures.push(failure);
    }

    /// Takes the limit refusals recorded so far.
    pub fn take_limit_hits(&mut self) -> Vec<LimitHit> {
        std::mem::take(&mut self.limit_hits)
    }

    /// Records how a node-usage plugin classified the nodes (for `plan`'s before/after table).
    pub fn report_node_usage(&mut self, report: NodeUsageReport) {
        self.usage_reports.push(report);
    }

    /// Takes the node-usage reports recorded so far.
    pub fn take_usage_reports(&mut self) -> Vec<NodeUsageReport> {
        std::mem::take(&mut self.usage_reports)
    }

    /// Consumes the session, returning its records.
    pub fn into_records(self) -> Vec<EvictionRecord> {
        self.records
    }

    /// Consumes the session, returning its records and the backend.
    pub fn into_parts(self) -> (Vec<EvictionRecord>, Box<dyn EvictionBackend + Send>) {
        (self.records, self.backend)
    }
}

#[cfg(test)]
mod enforce_tests;
