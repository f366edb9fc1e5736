//! HTTP front: authentication, discovery, routing of resource paths to verbs.
pub mod list_stream;
pub mod table;
pub mod verbs;
pub mod watch;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;

use crate::SimState;
use crate::auth::UserInfo;
use crate::discovery;
use crate::error::{ApiError, ApiResult};
use crate::resources::{ResourceDef, by_gvr};

/// kube-apiserver's request body limit (3 MiB, `MaxRequestBodyBytes`).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The router: everything goes through one fallback handler.
pub fn router(st: Arc<SimState>) -> Router {
    Router::new().fallback(handle).with_state(st)
}

/// A parsed request.
pub struct Req {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: axum::body::Bytes,
    pub user: UserInfo,
}

impl Req {
    pub fn q(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn q_bool(&self, key: &str) -> bool {
        matches!(self.q(key), Some("true" | "1"))
    }

    /// `?dryRun=All` (any other value is rejected, as kube-apiserver does).
    pub fn dry_run(&self) -> ApiResult<bool> {
        let vals: Vec<&str> = self
            .query
            .iter()
            .filter(|(k, _)| k == "dryRun")
            .map(|(_, v)| v.as_str())
            .collect();
        if vals.is_empty() {
            return Ok(false);
        }
        if vals.iter().all(|v| *v == "All") {
            return Ok(true);
        }
        Err(ApiError::bad_request(format!(
            "Invalid dryRun value: {vals:?} (only \"All\" is supported)"
        )))
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// What a resource URL addresses.
pub struct Target {
    pub def: &'static ResourceDef,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

/// Parses `/api/v1/...` and `/apis/<g>/<v>/...` resource paths of built-in kinds.
pub fn parse_target(path: &str) -> Option<Target> {
    parse_target_with(path, by_gvr)
}

/// [`parse_target`] with a resource lookup (built-in kinds and those served from CRDs).
pub fn parse_target_with(
    path: &str,
    by_gvr: impl Fn(&str, &str, &str) -> Option<&'static ResourceDef>,
) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    if rest.is_empty() || rest.iter().any(|s| s.is_empty()) {
        return None;
    }
    if rest[0] == "namespaces"
        && rest.len() >= 3
        && let Some(def) = by_gvr(group, version, rest[2]).filter(|d| d.namespaced)
    {
        if rest.len() > 5 {
            return None;
        }
        return Some(Target {
            def,
            namespace: Some(rest[1].to_string()),
            name: rest.get(3).map(|s| s.to_string()),
            sub: rest.get(4).map(|s| s.to_string()),
        });
    }
    let def = by_gvr(group, version, rest[0])?;
    if rest.len() > 3 {
        return None;
    }
    Some(Target {
        def,
        namespace: None,
        name: rest.get(1).map(|s| s.to_string()),
        sub: rest.get(2).map(|s| s.to_string()),
    })
}

/// A JSON response.
pub fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(bytes))
        .unwrap_or_else(|_| Response::new(Body::empty()));
    for w in warnings {
        // RFC 7234 warn-code 299, as k8s.io/apiserver `warning` recorder writes it.
        let v = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(h) = HeaderValue::from_str(&v) {
            resp.headers_mut().append("warning", h);
        }
    }
    resp
}

/// A `metav1.Status` error response (with `Retry-After` when details ask for it).
pub fn error_response(e: &ApiError) -> Response {
    let mut resp = json_response(e.code, &e.to_status(), &[]);
    if let Some(s) = e.retry_after()
        && let Ok(h) = HeaderValue::from_str(&s.to_string())
    {
        resp.headers_mut().insert("retry-after", h);
    }
    resp
}

async fn handle(State(st): State<Arc<SimState>>, req: Request) -> Response {
    match dispatch(st, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

fn verb_of(method: &Method, t: &Target, watch: bool) -> &'static str {
    match (method.as_str(), t.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

async fn dispatch(st: Arc<SimState>, req: Request) -> ApiResult<Response> {
    let path = req.uri().path().to_string();
    if let Some(resp) = unauthenticated_route(&path) {
        return Ok(resp);
    }
    let headers = req.headers();
    let token = headers
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or("");
    let user = st
        .auth
        .authenticate(token)
        .ok_or_else(ApiError::unauthorized)?;
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string();
    if let Some(resp) = document_route(&st, req.method(), &path, &host) {
        return resp;
    }
    serve_resource(st, req, path, user).await
}

/// The health and version endpoints, which answer without authentication.
fn unauthenticated_route(path: &str) -> Option<Response> {
    match path {
        "/healthz" | "/livez" | "/readyz" => Some(
            Response::builder()
                .status(200)
                .header("content-type", "text/plain")
                .body(Body::from("ok"))
                .unwrap_or_else(|_| Response::new(Body::empty())),
        ),
        "/version" | "/version/" => Some(json_response(200, &discovery::version(), &[])),
        _ => None,
    }
}

/// The metrics API, OpenAPI and discovery documents, when `path` names one of them.
fn document_route(
    st: &SimState,
    method: &Method,
    path: &str,
    host: &str,
) -> Option<ApiResult<Response>> {
    let trimmed = path.trim_end_matches('/');
    if let Some(r) = crate::metrics_api::route(st, method, trimmed) {
        return Some(r);
    }
    if trimmed == "/openapi/v3" {
        let custom = crate::crds::served(&st.store);
        return Some(Ok(json_response(
            200,
            &crate::openapi::root_with(&custom),
            &[],
        )));
    }
    if let Some(gv) = trimmed.strip_prefix("/openapi/v3/") {
        let custom = crate::crds::served(&st.store);
        return Some(
            crate::openapi::group_version_with(gv, &custom)
                .ok_or_else(ApiError::no_route)
                .map(|doc| json_response(200, &doc, &[])),
        );
    }
    let doc = match discovery_doc(st, trimmed, host) {
        Ok(None) => return None,
        Ok(Some(doc)) => doc,
        Err(e) => return Some(Err(e)),
    };
    if method != Method::GET {
        return Some(Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )));
    }
    Some(Ok(json_response(200, &doc, &[])))
}

/// The discovery document at `trimmed` (`/api`, `/apis`, a group or a group version); `None`
/// for any other path, an error for an unknown group or version.
fn discovery_doc(st: &SimState, trimmed: &str, host: &str) -> ApiResult<Option<Value>> {
    let custom = || crate::crds::served(&st.store);
    Ok(match trimmed {
        "/api" => Some(discovery::core_versions(host)),
        "/apis" => Some(discovery::group_list_with(&custom())),
        "/api/v1" => discovery::resource_list("", "v1"),
        _ => {
            let segs: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
            match segs.as_slice() {
                ["apis", g] => {
                    Some(discovery::group_with(g, &custom()).ok_or_else(ApiError::no_route)?)
                }
                ["apis", g, v] => Some(
                    discovery::resource_list_with(g, v, &custom())
                        .ok_or_else(ApiError::no_route)?,
                ),
                _ => None,
            }
        }
    })
}

/// A request on a resource: injected faults first, then the verb, and the eviction log for
/// evictions that took effect.
async fn serve_resource(
    st: Arc<SimState>,
    req: Request,
    path: String,
    user: UserInfo,
) -> ApiResult<Response> {
    let method = req.method().clone();
    let query: Vec<(String, String)> = req
        .uri()
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let headers = req.headers().clone();
    let target = parse_target_with(&path, |g, v, r| crate::crds::lookup_gvr(&st.store, g, v, r))
        .ok_or_else(ApiError::no_route)?;
    let watch = query
        .iter()
        .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
    let verb = verb_of(&method, &target, watch);
    let res_name = match &target.sub {
        Some(s) => format!("{}/{}", target.def.resource, s),
        None => target.def.resource.to_string(),
    };
    let ns = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let injected = st.faults.check(verb, &res_name, &ns, &name);
    if let Some(d) = injected.latency {
        tokio::time::sleep(d).await;
    }
    if let Some(e) = injected.error {
        return Err(e);
    }

    let dry_run = query.iter().any(|(k, _)| k == "dryRun");
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|_| ApiError::too_large(&format!("limit is {MAX_BODY} bytes")))?;
    let r = Req {
        method,
        path,
        query,
        headers,
        body,
        user,
    };
    let resp = verbs::serve(st.clone(), r, target, verb).await;
    if res_name == "pods/eviction"
        && verb == "create"
        && !dry_run
        && resp.as_ref().is_ok_and(|r| r.status().is_success())
    {
        st.evictions.record(&ns, &name);
    }
    // The request has taken effect; only the answer is late (see `FaultRule::latency_after`).
    if let Some(d) = injected.latency_after {
        tokio::time::sleep(d).await;
    }
    resp
}
