//! The webhook's HTTP routes: `POST /validate/eviction`, `/healthz`, `/readyz`, `/metrics`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use prometheus_client::registry::Registry;

use super::decision::{AllowReason, EvictionRequest, GuardConfig, Verdict, decide};
use super::in_flight::EvictionLog;
use super::metrics::GuardMetrics;
use super::rate::{RateLimits, RestartBudget};
use super::review::{ParsedReview, allow, deny_429, parse_review};
use super::source::{FactSource, Gathered, PodLookup, SourceError, gather_for};
use crate::peer::Peer;
use crate::restart::{
    RequestAudit, RestartOutcome, RestartRequest, Restarter, SurgeOutcome, SurgeRequest,
};

/// Default largest AdmissionReview body accepted (an object and its old version, with headroom);
/// `--max-request-body-bytes` changes it.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

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
    fn mark_evicting(&self, gathered: &mut Gathered, now: Timestamp) {
        let Some(ns) = gathered.pod.as_ref().map(|p| p.namespace.clone()) else {
            return;
        };
        for s in gathered.siblings.iter_mut().flatten() {
            s.being_evicted = self.evictions.recent(&ns, &s.name, now);
        }
    }

    /// Decides on gathered facts (with this replica's first refusal of the pod).
    fn decide(&self, eviction: &EvictionRequest, gathered: &Gathered, now: Timestamp) -> Verdict {
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
    async fn gather_by(
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

    /// The answer when the facts could not be read: allow (never block a drain because we
    /// cannot see), with a warning.
    fn cannot_check(
        &self,
        request: &AdmissionRequest<DynamicObject>,
        pod_key: &str,
        error: Option<SourceError>,
    ) -> AdmissionReview<DynamicObject> {
        self.metrics.allow(AllowReason::Unknown.as_str());
        match error {
            Some(e) => {
                tracing::warn!(pod = %pod_key, error = %e, "cannot decide; allowing the eviction");
                self.metrics.error("lookup");
                let warning =
                    format!("eviction guard could not check pod {pod_key} ({e}); allowing");
                allow(request, vec![warning])
            }
            None => {
                tracing::warn!(pod = %pod_key, "reading the facts took longer than {GATHER_BUDGET:?}; allowing the eviction");
                self.metrics.error("lookup_timeout");
                allow(
                    request,
                    vec![format!(
                        "eviction guard could not check pod {pod_key} in time; allowing"
                    )],
                )
            }
        }
    }

    /// Answers one eviction review.
    ///
    /// The pod comes from the watch cache when it has it. The cache may lag, so only an allow is
    /// answered from it directly; a verdict that refuses the eviction or restarts a Deployment is
    /// decided again on a fresh read of the pod (gone, replaced, terminating or not ready any
    /// more → allow). A second restart is also excluded by the restart actor's compare-and-set.
    pub async fn review_eviction(
        &self,
        request: &AdmissionRequest<DynamicObject>,
        eviction: &EvictionRequest,
    ) -> AdmissionReview<DynamicObject> {
        self.review_eviction_from(request, eviction, &Peer::default())
            .await
    }

    /// [`GuardState::review_eviction`] for a review that came from `peer` (recorded with every
    /// restart and surge it leads to).
    pub async fn review_eviction_from(
        &self,
        request: &AdmissionRequest<DynamicObject>,
        eviction: &EvictionRequest,
        peer: &Peer,
    ) -> AdmissionReview<DynamicObject> {
        let pod_key = format!("{}/{}", eviction.namespace, eviction.name);
        if !eviction.dry_run {
            self.evictions
                .note(&eviction.namespace, &eviction.name, (self.clock)());
        }
        let now = (self.clock)();
        let (gathered, verdict) = match self.verdict_for(eviction, now).await {
            Ok(decided) => decided,
            Err(e) => return self.cannot_check(request, &pod_key, e),
        };
        let asked = Asked {
            request,
            eviction,
            peer,
            pod_uid: gathered
                .pod
                .as_ref()
                .map(|p| p.uid.clone())
                .unwrap_or_default(),
            pod_key,
        };
        tracing::debug!(pod = %asked.pod_key, outcome = verdict.outcome(), "eviction reviewed");
        let forget = self.config.deflect_deadline * 2;
        match verdict {
            Verdict::Allow { reason, warnings } => {
                self.metrics.allow(reason.as_str());
                allow(request, warnings)
            }
            Verdict::Deflect {
                deployment,
                message,
            } => {
                self.denials.note(&asked.pod_uid, now, forget);
                let others_ready = gathered.census().is_some_and(|c| c.other_ready > 0);
                self.deflect(&asked, &deployment, &message, others_ready)
                    .await
            }
            Verdict::DenyInFlight { message, .. } => {
                self.metrics.deny("in_flight");
                deny_429(request, &message)
            }
            Verdict::Surge {
                deployment,
                budget,
                from,
                to,
                message,
            } => {
                self.denials.note(&asked.pod_uid, now, forget);
                let surge = (budget, from, to);
                self.surge(&asked, &deployment, surge, &message).await
            }
            // Plain refusals: remembered for the deadline, counted under their reason, 429.
            Verdict::DenySurging { ref message, .. }
            | Verdict::DenyHpa { ref message, .. }
            | Verdict::DenyPdb { ref message, .. }
            | Verdict::DenyUnhealthy { ref message, .. } => {
                self.denials.note(&asked.pod_uid, now, forget);
                self.metrics.deny(denial_reason(&verdict));
                deny_429(request, message)
            }
        }
    }

    /// The facts and the verdict on them. An allow may come from the watch cache; anything else
    /// is decided again on a fresh read of the pod.
    async fn verdict_for(
        &self,
        eviction: &EvictionRequest,
        now: Timestamp,
    ) -> Result<(Gathered, Verdict), Option<SourceError>> {
        let deadline = tokio::time::Instant::now() + GATHER_BUDGET;
        let mut gathered = self
            .gather_by(eviction, PodLookup::PreferCache, deadline)
            .await?;
        self.metrics.pod_read(if gathered.pod_from_cache {
            "cache"
        } else {
            "api"
        });
        self.mark_evicting(&mut gathered, now);
        let mut verdict = self.decide(eviction, &gathered, now);
        if gathered.pod_from_cache && !matches!(verdict, Verdict::Allow { .. }) {
            self.metrics.pod_read("recheck");
            gathered = self.gather_by(eviction, PodLookup::Fresh, deadline).await?;
            self.mark_evicting(&mut gathered, now);
            verdict = self.decide(eviction, &gathered, now);
        }
        Ok((gathered, verdict))
    }

    /// Takes a token from the namespace's budget for a write to `deployment` (`namespace/name`):
    /// its namespace and name, or the 429 answer when the budget is empty.
    fn take_token<'d>(
        &self,
        asked: &'d Asked<'_>,
        deployment: &'d str,
        write: &GuardedWrite,
    ) -> Result<(&'d str, &'d str), Box<AdmissionReview<DynamicObject>>> {
        let (namespace, name) = deployment
            .split_once('/')
            .unwrap_or((&asked.eviction.namespace, deployment));
        let Err(empty) = self.budget.try_take(namespace) else {
            return Ok((namespace, name));
        };
        self.metrics.deny(write.metric);
        let msg = self
            .budget
            .exhausted_message(write.what, &asked.pod_key, &empty);
        tracing::warn!(pod = %asked.pod_key, deployment = %deployment, audit = %asked.audit(), "{} budget empty; refusing without {}", write.what, write.action);
        Err(Box::new(deny_429(asked.request, &msg)))
    }

    /// Rule A: take a token, start the rolling restart of `deployment` and refuse the eviction
    /// with the deflection message (another 429 when the budget is empty or the restart failed).
    async fn deflect(
        &self,
        asked: &Asked<'_>,
        deployment: &str,
        message: &str,
        others_ready: bool,
    ) -> AdmissionReview<DynamicObject> {
        let (request, pod_key) = (asked.request, &asked.pod_key);
        let (namespace, name) = match self.take_token(asked, deployment, &RESTART) {
            Ok(target) => target,
            Err(refused) => return *refused,
        };
        let outcome = self
            .restarter
            .restart(RestartRequest {
                namespace: namespace.to_owned(),
                deployment: name.to_owned(),
                pod: asked.eviction.name.clone(),
                pod_uid: asked.pod_uid.clone(),
                requested_by: asked.requested_by(),
                audit: asked.audit(),
            })
            .await;
        if matches!(outcome, RestartOutcome::InFlight { .. }) {
            // Nothing was patched: the restart someone else started is rolling.
            self.budget.refund(namespace);
        }
        match outcome {
            RestartOutcome::Restarted { .. } | RestartOutcome::InFlight { .. } => {
                self.metrics.deflect();
                self.metrics.deny("deflected");
                self.metrics.rule_action(if others_ready {
                    "ready_replicas_leaving"
                } else {
                    "last_ready_replica"
                });
                deny_429(request, message)
            }
            RestartOutcome::Failed { error } => {
                self.metrics.deny("restart_failed");
                let msg = format!(
                    "Cannot evict pod {pod_key} yet: the kube-descheduler eviction guard could not start a rolling restart of Deployment {deployment} ({error}). Retry the eviction."
                );
                deny_429(request, &msg)
            }
        }
    }

    /// Rule B: take a token, raise `deployment`'s replicas (`surge`: the budget, from, to) and
    /// refuse the eviction (another 429 when the budget is empty or the surge failed).
    async fn surge(
        &self,
        asked: &Asked<'_>,
        deployment: &str,
        (budget, from, to): (String, i32, i32),
        message: &str,
    ) -> AdmissionReview<DynamicObject> {
        let (request, pod_key) = (asked.request, &asked.pod_key);
        let (namespace, name) = match self.take_token(asked, deployment, &SURGE) {
            Ok(target) => target,
            Err(refused) => return *refused,
        };
        let outcome = self
            .restarter
            .surge(SurgeRequest {
                namespace: namespace.to_owned(),
                deployment: name.to_owned(),
                from,
                to,
                budget,
                pod: asked.eviction.name.clone(),
                pod_uid: asked.pod_uid.clone(),
                requested_by: asked.requested_by(),
                audit: asked.audit(),
            })
            .await;
        if matches!(outcome, SurgeOutcome::InFlight) {
            self.budget.refund(namespace);
        }
        match outcome {
            SurgeOutcome::Surged { .. } | SurgeOutcome::InFlight => {
                self.metrics.deny("pdb_surge");
                deny_429(request, message)
            }
            SurgeOutcome::Failed { error } => {
                self.metrics.deny("pdb_surge_failed");
                let msg = format!(
                    "Cannot evict pod {pod_key} yet: a PodDisruptionBudget allows no disruption and the kube-descheduler eviction guard could not raise the replicas of Deployment {deployment} ({error}). Retry the eviction."
                );
                deny_429(request, &msg)
            }
        }
    }
}

/// A Deployment write the guard's token buckets limit.
struct GuardedWrite {
    /// In the refusal's text.
    what: &'static str,
    /// The `reason` of the denial metric.
    metric: &'static str,
    /// In the log line.
    action: &'static str,
}

const RESTART: GuardedWrite = GuardedWrite {
    what: "rolling restarts",
    metric: "restart_rate_limited",
    action: "restarting",
};

const SURGE: GuardedWrite = GuardedWrite {
    what: "replica surges",
    metric: "surge_rate_limited",
    action: "surging",
};

/// One eviction review being answered: who asked, and which pod.
struct Asked<'a> {
    request: &'a AdmissionRequest<DynamicObject>,
    eviction: &'a EvictionRequest,
    peer: &'a Peer,
    pod_key: String,
    pod_uid: String,
}

impl Asked<'_> {
    fn requested_by(&self) -> String {
        self.request
            .user_info
            .username
            .clone()
            .unwrap_or_else(|| "unknown".into())
    }

    fn audit(&self) -> RequestAudit {
        audit_of(self.request, self.peer)
    }
}

/// The record of who asked: the review's `userInfo` and UID, and the connection's peer.
fn audit_of(request: &AdmissionRequest<DynamicObject>, peer: &Peer) -> RequestAudit {
    RequestAudit {
        username: request.user_info.username.clone().unwrap_or_default(),
        groups: request.user_info.groups.clone().unwrap_or_default(),
        review_uid: request.uid.clone(),
        peer_addr: peer.addr.map(|a| a.to_string()).unwrap_or_default(),
        peer_subject: peer.subject.clone(),
    }
}

/// The `reason` label of a plain refusal's denial metric.
fn denial_reason(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::DenySurging { .. } => "pdb_surging",
        Verdict::DenyHpa { .. } => "pdb_surge_hpa",
        Verdict::DenyPdb { .. } => "pdb",
        Verdict::DenyUnhealthy { .. } => "unhealthy",
        _ => "denied",
    }
}

/// The webhook router, accepting bodies up to [`MAX_BODY_BYTES`].
pub fn router(state: Arc<GuardState>) -> Router {
    router_with_body_limit(state, MAX_BODY_BYTES)
}

/// The webhook router, accepting bodies up to `max_body_bytes` (larger: 413).
pub fn router_with_body_limit(state: Arc<GuardState>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/validate/eviction", post(validate))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

/// The probe router: `/healthz`, `/readyz` and `/metrics` only, for the port kubelet and
/// Prometheus reach without a client certificate when reviews require one.
pub fn probe_router(state: Arc<GuardState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn validate(
    State(state): State<Arc<GuardState>>,
    peer: Option<Extension<Arc<Peer>>>,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let parsed = match parse_review(&body) {
        Ok(p) => p,
        Err(e) => {
            state.metrics.error("bad_request");
            tracing::warn!(error = %e, "rejecting malformed AdmissionReview");
            return (StatusCode::BAD_REQUEST, e.0).into_response();
        }
    };
    let review = match parsed {
        ParsedReview::Other(request) => allow(&request, Vec::new()),
        ParsedReview::Eviction { request, eviction } => {
            let peer = peer.map(|Extension(p)| p).unwrap_or_default();
            state.review_eviction_from(&request, &eviction, &peer).await
        }
    };
    state.metrics.observe_review(started.elapsed());
    axum::Json(review).into_response()
}

async fn readyz(State(state): State<Arc<GuardState>>) -> Response {
    if state.source.ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced").into_response()
    }
}

async fn metrics(State(state): State<Arc<GuardState>>) -> Response {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &state.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            out,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
