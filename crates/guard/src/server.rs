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

use super::decision::{EvictionRequest, GuardConfig, Verdict, decide};
use super::in_flight::EvictionLog;
use super::metrics::GuardMetrics;
use super::rate::{RateLimits, RestartBudget};
use super::review::{ParsedReview, allow, deny_429, parse_review};
use super::source::{FactSource, Gathered, PodLookup, SourceError, gather_for};
use crate::answering::{AnswerKind, Caller, EvictionPath};
use crate::peer::Peer;
use crate::restart::{RequestAudit, Restarter};

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
        let caller = Caller {
            requested_by: request
                .user_info
                .username
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            audit: audit_of(request, peer),
            path: EvictionPath::Webhook,
        };
        let answer = self.answer(eviction, &caller).await;
        match answer.kind {
            AnswerKind::Allow => allow(request, answer.warnings),
            _ => deny_429(request, &answer.message),
        }
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
