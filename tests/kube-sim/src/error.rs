//! `metav1.Status` errors, shaped like k8s.io/apimachinery/pkg/api/errors.
use serde_json::{Value, json};

/// An API error rendered as a `metav1.Status` body with the same code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `resource` or `resource.group`, as `schema.GroupResource.String()` prints it.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(group: &str, resource: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(resource));
    Value::Object(d)
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `errors.NewNotFound`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(details(group, resource, name))
    }

    /// 404 for a URL that names no known resource (kube-apiserver's plain 404 page).
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `errors.NewAlreadyExists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(details(group, resource, name))
    }

    /// `errors.NewConflict` with the storage layer's optimistic-concurrency message.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `errors.NewConflict`.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        )
        .with_details(details(group, resource, name))
    }

    /// `errors.NewInvalid` with one field cause.
    pub fn invalid(kind_group: &str, name: &str, field: &str, why: &str) -> Self {
        Self::invalid_fields(kind_group, name, &[(field, why)])
    }

    /// `errors.NewInvalid`: `kind_group` is `Kind` or `Kind.group`, each cause a field and its
    /// `field.Error` text (`"Forbidden: …"`, `"Required value"`, …), whose type names the cause's
    /// reason. Several causes are listed in brackets, as `ErrorList.ToAggregate` prints them.
    pub fn invalid_fields(kind_group: &str, name: &str, causes: &[(&str, &str)]) -> Self {
        let texts: Vec<String> = causes
            .iter()
            .map(|(f, why)| format!("{f}: {why}"))
            .collect();
        let listed = match texts.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let (kind, group) = kind_group.split_once('.').unwrap_or((kind_group, ""));
        let mut d = details(group, kind, name);
        let causes: Vec<Value> = causes
            .iter()
            .map(|(f, why)| json!({"reason": cause_reason(why), "message": why, "field": f}))
            .collect();
        d["causes"] = json!(causes);
        Self::new(
            422,
            "Invalid",
            format!("{kind_group} \"{name}\" is invalid: {listed}"),
        )
        .with_details(d)
    }

    /// `errors.NewBadRequest`.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg)
    }

    /// `errors.NewTooManyRequests(message, retryAfterSeconds)`.
    pub fn too_many_requests(msg: impl Into<String>, retry_after: u32) -> Self {
        let mut d = serde_json::Map::new();
        if retry_after > 0 {
            d.insert("retryAfterSeconds".into(), json!(retry_after));
        }
        Self::new(429, "TooManyRequests", msg).with_details(Value::Object(d))
    }

    /// `errors.NewInternalError`.
    pub fn internal(msg: impl std::fmt::Display) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {msg}"),
        )
        .with_details(json!({"causes": [{"message": msg.to_string()}]}))
    }

    /// 410 `Expired`, as the watch cache reports a compacted resourceVersion.
    pub fn expired(msg: impl Into<String>) -> Self {
        Self::new(410, "Expired", msg)
    }

    /// `errors.NewMethodNotSupported`.
    pub fn method_not_allowed(group: &str, resource: &str, verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "{verb} is not supported on resources of kind \"{}\"",
                qualified(group, resource)
            ),
        )
        .with_details(json!({"group": group, "kind": resource}))
    }

    /// `errors.NewUnauthorized` as the authentication filter writes it.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 413, `errors.NewRequestEntityTooLargeError`.
    pub fn too_large(msg: &str) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {msg}"),
        )
    }

    /// Reason that `errors.NewGenericServerResponse` picks for a bare status code.
    pub fn from_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            504 => "Timeout",
            503 => "ServiceUnavailable",
            c if c >= 500 => "InternalError",
            _ => "",
        };
        Self::new(code, reason, message)
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if !self.reason.is_empty() {
            s["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }

    /// `details.retryAfterSeconds`, which kube-apiserver mirrors into a `Retry-After` header.
    pub fn retry_after(&self) -> Option<u64> {
        self.details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
            .filter(|s| *s > 0)
    }
}

/// The `metav1.CauseType` of a `field.Error` from the start of its text.
fn cause_reason(why: &str) -> &'static str {
    const TYPES: [(&str, &str); 8] = [
        ("Forbidden", "FieldValueForbidden"),
        ("Required value", "FieldValueRequired"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Not found", "FieldValueNotFound"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Internal error", "InternalError"),
    ];
    TYPES
        .iter()
        .find(|(prefix, _)| why.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, t)| t)
}

/// Shorthand result type for API operations.
pub type ApiResult<T> = Result<T, ApiError>;
