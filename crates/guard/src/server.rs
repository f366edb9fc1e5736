//! The webhook's HTTP routes: `POST /validate/eviction`, `/healthz`, `/readyz`, `/metrics`.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};

use super::decision::EvictionRequest;
use super::review::{ParsedReview, allow, deny_429, parse_review};
use crate::answering::{AnswerKind, Caller, EvictionPath};
use crate::peer::Peer;
use crate::restart::RequestAudit;

/// Default largest AdmissionReview body accepted (an object and its old version, with headroom);
/// `--max-request-body-bytes` changes it.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub use crate::state::{Clock, DenialMemory, GATHER_BUDGET, GuardState};

impl GuardState {
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
