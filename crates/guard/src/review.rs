//! AdmissionReview (`admission.k8s.io/v1`) parsing and responses for `pods/eviction`.

use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, response::StatusSummary};
use serde::Deserialize;

use super::decision::EvictionRequest;

/// The AdmissionReview apiVersion we serve.
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

/// A request the webhook cannot read; answered with HTTP 400 and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadReview(pub String);

/// A parsed review.
#[derive(Debug)]
pub enum ParsedReview {
    /// A pods/eviction CREATE.
    Eviction {
        /// The admission request (for the response's uid and types).
        request: Box<AdmissionRequest<DynamicObject>>,
        /// What the eviction asks for.
        eviction: EvictionRequest,
    },
    /// Anything else: allowed untouched.
    Other(Box<AdmissionRequest<DynamicObject>>),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DeleteOptionsLite {
    #[serde(default)]
    preconditions: Option<PreconditionsLite>,
    #[serde(default)]
    dry_run: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PreconditionsLite {
    #[serde(default)]
    uid: Option<String>,
}

/// Parses an AdmissionReview body. Errors name the offending field.
pub fn parse_review(body: &[u8]) -> Result<ParsedReview, BadReview> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let review: AdmissionReview<DynamicObject> =
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path.is_empty() || path == "." {
                BadReview(format!("malformed AdmissionReview: {inner}"))
            } else {
                BadReview(format!("malformed AdmissionReview at `{path}`: {inner}"))
            }
        })?;
    if review.types.api_version != REVIEW_API_VERSION || review.types.kind != "AdmissionReview" {
        return Err(BadReview(format!(
            "unsupported review type `{}` `{}`: expected apiVersion {REVIEW_API_VERSION}, kind AdmissionReview",
            review.types.api_version, review.types.kind
        )));
    }
    if review.request.is_none() {
        return Err(BadReview("AdmissionReview has no `request`".into()));
    }
    let request: AdmissionRequest<DynamicObject> = review
        .try_into()
        .map_err(|_| BadReview("AdmissionReview has no `request`".into()))?;
    if request.uid.is_empty() {
        return Err(BadReview("`request.uid` is empty".into()));
    }
    let is_eviction = request.resource.group.is_empty()
        && request.resource.resource == "pods"
        && request.sub_resource.as_deref() == Some("eviction")
        && request.operation == Operation::Create;
    if !is_eviction {
        return Ok(ParsedReview::Other(Box::new(request)));
    }
    let eviction = eviction_of(&request)?;
    Ok(ParsedReview::Eviction {
        request: Box::new(request),
        eviction,
    })
}

fn eviction_of(request: &AdmissionRequest<DynamicObject>) -> Result<EvictionRequest, BadReview> {
    if request.name.is_empty() {
        return Err(BadReview("`request.name` (the pod name) is empty".into()));
    }
    let namespace = request.namespace.clone().filter(|n| !n.is_empty());
    let Some(namespace) = namespace else {
        return Err(BadReview(
            "`request.namespace` (the pod namespace) is empty".into(),
        ));
    };
    let Some(object) = &request.object else {
        return Err(BadReview(
            "`request.object` (the Eviction) is missing".into(),
        ));
    };
    if let Some(types) = &object.types
        && !(types.kind == "Eviction"
            && (types.api_version == "policy/v1" || types.api_version == "policy/v1beta1"))
    {
        return Err(BadReview(format!(
            "`request.object` is `{}` `{}`, expected a policy/v1 or policy/v1beta1 Eviction",
            types.api_version, types.kind
        )));
    }
    let options: DeleteOptionsLite = match object.data.get("deleteOptions") {
        None | Some(serde_json::Value::Null) => DeleteOptionsLite::default(),
        Some(v) => serde_path_to_error::deserialize(v).map_err(|e| {
            BadReview(format!(
                "malformed `request.object.deleteOptions` at `{}`: {}",
                e.path(),
                e.inner()
            ))
        })?,
    };
    let body_dry_run = options
        .dry_run
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|d| d == "All");
    Ok(EvictionRequest {
        namespace,
        name: request.name.clone(),
        uid_precondition: options
            .preconditions
            .and_then(|p| p.uid)
            .filter(|u| !u.is_empty()),
        dry_run: request.dry_run || body_dry_run,
    })
}

/// An allowing response, with optional warnings.
pub fn allow(
    request: &AdmissionRequest<DynamicObject>,
    warnings: Vec<String>,
) -> AdmissionReview<DynamicObject> {
    let mut resp = AdmissionResponse::from(request);
    if !warnings.is_empty() {
        resp.warnings = Some(warnings);
    }
    resp.into_review()
}

/// A denying response: code 429, reason TooManyRequests, no details (so no retryAfterSeconds).
pub fn deny_429(
    request: &AdmissionRequest<DynamicObject>,
    message: &str,
) -> AdmissionReview<DynamicObject> {
    let mut resp = AdmissionResponse::from(request).deny(message);
    resp.result.code = 429;
    resp.result.reason = "TooManyRequests".into();
    resp.result.status = Some(StatusSummary::Failure);
    resp.result.details = None;
    resp.into_review()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn review(object: serde_json::Value, dry_run: bool) -> Vec<u8> {
        serde_json::to_vec(&crate::testing::eviction_review(
            "abc-123",
            ("shop", "web-1"),
            json!({"username": "admin"}),
            object,
            dry_run,
        ))
        .unwrap()
    }

    fn eviction(body: &[u8]) -> EvictionRequest {
        match parse_review(body).unwrap() {
            ParsedReview::Eviction { eviction, .. } => eviction,
            other => panic!("expected an eviction, got {other:?}"),
        }
    }

    #[test]
    fn parses_v1_and_v1beta1_evictions_with_preconditions_and_dry_run() {
        let v1 = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1", "namespace": "shop"},
            "deleteOptions": {"preconditions": {"uid": "u1"}, "dryRun": ["All"]}});
        let e = eviction(&review(v1, false));
        assert_eq!(
            e,
            EvictionRequest {
                namespace: "shop".into(),
                name: "web-1".into(),
                uid_precondition: Some("u1".into()),
                dry_run: true
            }
        );
        let beta = json!({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "web-1"}});
        let e = eviction(&review(beta.clone(), false));
        assert!(!e.dry_run && e.uid_precondition.is_none());
        assert!(eviction(&review(beta, true)).dry_run, "query dryRun counts");
    }

    #[test]
    fn names_the_problem_in_malformed_bodies() {
        assert!(
            parse_review(b"not json")
                .unwrap_err()
                .0
                .contains("malformed AdmissionReview")
        );
        let err = parse_review(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}"#,
        )
        .unwrap_err();
        assert!(err.0.contains("request.uid"), "{err}");
        let err =
            parse_review(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#)
                .unwrap_err();
        assert!(err.0.contains("admission.k8s.io/v1beta1"), "{err}");
        let err = parse_review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#)
            .unwrap_err();
        assert!(err.0.contains("no `request`"), "{err}");
        let bad_opts = json!({"apiVersion": "policy/v1", "kind": "Eviction", "deleteOptions": {"dryRun": "All"}});
        let err = parse_review(&review(bad_opts, false)).unwrap_err();
        assert!(
            err.0.contains("deleteOptions") && err.0.contains("dryRun"),
            "{err}"
        );
        let wrong = json!({"apiVersion": "v1", "kind": "Pod"});
        assert!(
            parse_review(&review(wrong, false))
                .unwrap_err()
                .0
                .contains("expected a policy/v1")
        );
    }

    #[test]
    fn deny_has_429_and_no_retry_after() {
        let body = review(
            json!({"apiVersion": "policy/v1", "kind": "Eviction"}),
            false,
        );
        let ParsedReview::Eviction { request, .. } = parse_review(&body).unwrap() else {
            panic!()
        };
        let v = serde_json::to_value(deny_429(&request, "nope")).unwrap();
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["response"]["uid"], "abc-123");
        assert_eq!(v["response"]["allowed"], false);
        assert_eq!(
            v["response"]["status"],
            json!({"status": "Failure", "code": 429, "reason": "TooManyRequests", "message": "nope"})
        );
    }
}
