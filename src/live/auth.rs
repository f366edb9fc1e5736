//! Delegated authentication and authorization of the secure port, as kube-apiserver aggregated
//! servers do it: a TokenReview of the bearer token (`create tokenreviews`,
//! authentication.k8s.io/v1), then a SubjectAccessReview (`create subjectaccessreviews`,
//! authorization.k8s.io/v1) with `nonResourceAttributes{path, verb}` for the user, groups, uid
//! and extra the TokenReview returned:
//! - trigger: `{path: "/api/v1/descheduler/run", verb: "create"}`
//! - metrics: `{path: "/metrics", verb: "get"}`
//!
//! Grant with a ClusterRole rule `nonResourceURLs: ["/api/v1/descheduler/run"], verbs: ["create"]`.

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

/// Path of the trigger API.
pub const TRIGGER_PATH: &str = "/api/v1/descheduler/run";
/// SubjectAccessReview verb for the trigger.
pub const TRIGGER_VERB: &str = "create";
/// Path of the metrics endpoint.
pub const METRICS_PATH: &str = "/metrics";
/// SubjectAccessReview verb for metrics.
pub const METRICS_VERB: &str = "get";

/// The result of checking a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and allowed.
    Allowed {
        /// The user name.
        user: String,
    },
    /// No or an invalid token (401).
    Unauthenticated(String),
    /// Authenticated, not allowed (403).
    Forbidden(String),
    /// The review calls failed (500).
    Error(String),
}

/// Checks a bearer token for a (path, verb).
pub trait Authorizer: Send + Sync {
    /// Authenticates `token` and authorizes `verb` on the non-resource `path`.
    fn check<'a>(&'a self, token: &'a str, path: &'a str, verb: &'a str)
    -> BoxFuture<'a, Decision>;
}

/// [`Authorizer`] backed by the API server's TokenReview and SubjectAccessReview.
pub struct KubeAuthorizer {
    client: Client,
}

impl KubeAuthorizer {
    /// Uses `client` for the reviews.
    pub fn new(client: Client) -> Self {
        KubeAuthorizer { client }
    }

    async fn check_inner(&self, token: &str, path: &str, verb: &str) -> Decision {
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let tr = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let tr = match reviews.create(&PostParams::default(), &tr).await {
            Ok(tr) => tr,
            Err(e) => return Decision::Error(format!("TokenReview failed: {e}")),
        };
        let status = tr.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Decision::Unauthenticated(
                status
                    .error
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "invalid bearer token".into()),
            );
        }
        let user = status.user.unwrap_or_default();
        let name = user.username.clone().unwrap_or_default();
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let sars: Api<SubjectAccessReview> = Api::all(self.client.clone());
        match sars.create(&PostParams::default(), &sar).await {
            Ok(r) => {
                let st = r.status.unwrap_or_default();
                if st.allowed {
                    Decision::Allowed { user: name }
                } else {
                    let why = st.reason.filter(|r| !r.is_empty()).unwrap_or_default();
                    Decision::Forbidden(format!(
                        "user {name:?} cannot {verb} path {path:?}{}{why}",
                        if why.is_empty() { "" } else { ": " }
                    ))
                }
            }
            Err(e) => Decision::Error(format!("SubjectAccessReview failed: {e}")),
        }
    }
}

impl Authorizer for KubeAuthorizer {
    fn check<'a>(
        &'a self,
        token: &'a str,
        path: &'a str,
        verb: &'a str,
    ) -> BoxFuture<'a, Decision> {
        Box::pin(self.check_inner(token, path, verb))
    }
}

/// The bearer token of an `Authorization` header value.
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let h = header?.trim();
    let (scheme, token) = h.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
