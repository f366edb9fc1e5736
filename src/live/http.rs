//! The secure port's routes: `/healthz`, `/readyz` (open), `/metrics` (authenticated unless
//! `--metrics-unauthenticated`), `POST /api/v1/descheduler/run` (with `--enable-trigger-api`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::auth::{self, Authorizer, Decision};
use crate::serving::health::{self, Readiness};
use crate::serving::metrics::{self, Metrics};
use crate::serving::trigger;
use crate::serving::trigger::Trigger;

/// What the routes need.
#[derive(Clone)]
pub struct AppState {
    /// Metrics (None: `--disable-metrics`).
    pub metrics: Option<Arc<Metrics>>,
    /// Authenticate `/metrics`.
    pub metrics_auth: bool,
    /// The trigger (None: trigger API off).
    pub trigger: Option<Trigger>,
    /// TokenReview + SubjectAccessReview.
    pub authz: Arc<dyn Authorizer>,
    /// Readiness.
    pub ready: Readiness,
}

/// The router.
pub fn router(state: AppState) -> Router {
    let mut r = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(readyz));
    if state.metrics.is_some() {
        r = r.route(auth::METRICS_PATH, get(metrics_route));
    }
    if state.trigger.is_some() {
        r = r.route(auth::TRIGGER_PATH, post(trigger_route));
    }
    r.with_state(state)
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    health::readyz(&s.ready)
}

/// Checks the caller; `Err` is the 401/403/500 response.
async fn authorize(
    s: &AppState,
    headers: &HeaderMap,
    path: &str,
    verb: &str,
) -> Result<(), Response> {
    let raw = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(token) = auth::bearer_token(raw) else {
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "a bearer token is required",
        ));
    };
    match s.authz.check(token, path, verb).await {
        Decision::Allowed { user } => {
            tracing::debug!(user = %user, path, verb, "authorized");
            Ok(())
        }
        Decision::Unauthenticated(m) => Err(error(StatusCode::UNAUTHORIZED, &m)),
        Decision::Forbidden(m) => Err(error(StatusCode::FORBIDDEN, &m)),
        Decision::Error(m) => {
            tracing::warn!(error = %m, "authorization check failed");
            Err(error(StatusCode::INTERNAL_SERVER_ERROR, &m))
        }
    }
}

fn error(code: StatusCode, message: &str) -> Response {
    (
        code,
        axum::Json(json!({ "status": "error", "message": message })),
    )
        .into_response()
}

async fn metrics_route(State(s): State<AppState>, headers: HeaderMap) -> Response {
    if s.metrics_auth
        && let Err(r) = authorize(&s, &headers, auth::METRICS_PATH, auth::METRICS_VERB).await
    {
        return r;
    }
    match &s.metrics {
        Some(m) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], m.render()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn trigger_route(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = authorize(&s, &headers, auth::TRIGGER_PATH, auth::TRIGGER_VERB).await {
        return r;
    }
    let timeout = match trigger::parse_timeout(q.get("timeoutSeconds").map(String::as_str)) {
        Ok(t) => t,
        Err(m) => return error(StatusCode::BAD_REQUEST, &m),
    };
    let Some(t) = &s.trigger else {
        return StatusCode::NOT_FOUND.into_response();
    };
    trigger::run(t, timeout).await.into_response()
}
