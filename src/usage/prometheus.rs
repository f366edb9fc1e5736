//! Prometheus as a usage source (upstream `NodeUsageFromPrometheusMetrics`): an instant query
//! (`GET /api/v1/query`) returning a vector with one sample per node, label `instance` = node
//! name, value in [0, 1]. Errors name the query.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::PrometheusUsage;

/// How long one query may take (connect + response).
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(15);

/// Decodes an instant-query response body. Upstream's rules: the result must be a vector; every
/// sample needs an `instance` label; every value must lie in [0, 1].
pub fn decode_response(query: &str, body: &[u8]) -> Result<PrometheusUsage, String> {
    let e = |msg: String| format!("prometheus query {query:?}: {msg}");
    let v: Value = serde_json::from_slice(body)
        .map_err(|err| e(format!("the response is not JSON: {err}")))?;
    match v.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some(status) => {
            let kind = v.get("errorType").and_then(Value::as_str).unwrap_or("");
            let msg = v.get("error").and_then(Value::as_str).unwrap_or("");
            return Err(e(format!("status {status}: {kind}: {msg}")));
        }
        None => return Err(e("the response has no status".into())),
    }
    let data = v.get("data").ok_or_else(|| e("data: missing".into()))?;
    let kind = data.get("resultType").and_then(Value::as_str).unwrap_or("");
    if kind != "vector" {
        return Err(e(format!(
            "expected query results to be of type \"vector\", got {kind:?} instead"
        )));
    }
    let samples = data
        .get("result")
        .and_then(Value::as_array)
        .ok_or_else(|| e("data.result: expected an array".into()))?;
    let mut out = PrometheusUsage::new();
    for (i, s) in samples.iter().enumerate() {
        let Some(node) = s
            .get("metric")
            .and_then(|m| m.get("instance"))
            .and_then(Value::as_str)
        else {
            return Err(e(format!(
                "data.result[{i}]: the sample is missing the 'instance' label"
            )));
        };
        let value = s
            .get("value")
            .and_then(|v| v.get(1))
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<f64>().ok())
            .ok_or_else(|| {
                e(format!(
                    "data.result[{i}].value: expected [time, \"number\"] for {node:?}"
                ))
            })?;
        if !(0.0..=1.0).contains(&value) {
            return Err(e(format!(
                "the sample for {node:?} has value {value} outside of the [0, 1] interval"
            )));
        }
        out.insert(node.to_string(), value);
    }
    Ok(out)
}

/// A Prometheus HTTP API client: base URL plus an optional bearer token.
#[derive(Clone)]
pub struct PrometheusClient {
    base: reqwest::Url,
    token: Option<Arc<str>>,
    http: reqwest::Client,
}

impl std::fmt::Debug for PrometheusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusClient")
            .field("base", &self.base.as_str())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl PrometheusClient {
    /// A client for `url` (http or https). `token` is sent as `Authorization: Bearer`;
    /// `ca_pem` adds trusted CAs for https (upstream trusts the pod's service-account CA).
    pub fn new(url: &str, token: Option<&str>, ca_pem: Option<&[u8]>) -> Result<Self, String> {
        let mut base =
            reqwest::Url::parse(url).map_err(|e| format!("prometheus URL {url:?}: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!(
                "prometheus URL {url:?}: expected an http or https URL"
            ));
        }
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        let mut roots = rustls::RootCertStore::empty();
        if let Some(pem) = ca_pem {
            use rustls_pki_types::pem::PemObject;
            for cert in rustls_pki_types::CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("prometheus CA: {e}"))?;
                roots.add(cert).map_err(|e| format!("prometheus CA: {e}"))?;
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .timeout(QUERY_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("prometheus client: {e}"))?;
        let token = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(Arc::from);
        Ok(PrometheusClient { base, token, http })
    }

    /// The server URL.
    pub fn url(&self) -> &str {
        self.base.as_str()
    }

    /// Runs an instant query and decodes it with [`decode_response`]. Errors (unreachable,
    /// 401, bad JSON, bad samples) name the query.
    pub async fn query(&self, query: &str) -> Result<PrometheusUsage, String> {
        let e = |msg: String| format!("prometheus query {query:?}: {msg}");
        let url = self
            .base
            .join("api/v1/query")
            .map_err(|err| e(err.to_string()))?;
        let mut req = self.http.get(url).query(&[("query", query)]);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .map_err(|err| e(format!("{} unreachable: {err}", self.base)))?;
        let status = resp.status();
        let body = resp
            .bytes()
            .await
            .map_err(|err| e(format!("reading the response: {err}")))?;
        // Prometheus answers 400/422/503 with a JSON error body; anything else is an HTTP error.
        if !status.is_success() && !matches!(status.as_u16(), 400 | 422 | 503) {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            return Err(e(format!("HTTP {status}: {}", text.trim())));
        }
        decode_response(query, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    fn vector(samples: Value) -> Vec<u8> {
        body(json!({"status": "success", "data": {"resultType": "vector", "result": samples}}))
    }

    #[test]
    fn decodes_one_sample_per_instance() {
        let u = decode_response(
            "q",
            &vector(json!([
                {"metric": {"instance": "n1", "job": "x"}, "value": [1.5, "0.25"]},
                {"metric": {"instance": "n2"}, "value": [1.5, "1"]}])),
        )
        .unwrap();
        assert_eq!(u.len(), 2);
        assert_eq!(u["n1"], 0.25);
        assert_eq!(u["n2"], 1.0);
    }

    #[test]
    fn upstream_errors_name_the_query() {
        let err = |b: Vec<u8>| decode_response("my_query", &b).unwrap_err();
        let e = err(vector(json!([{"metric": {}, "value": [1, "0.5"]}])));
        assert!(
            e.starts_with("prometheus query \"my_query\":") && e.contains("'instance'"),
            "{e}"
        );
        let e = err(vector(
            json!([{"metric": {"instance": "n1"}, "value": [1, "1.5"]}]),
        ));
        assert!(
            e.contains("outside of the [0, 1] interval") && e.contains("n1"),
            "{e}"
        );
        let e = err(vector(
            json!([{"metric": {"instance": "n1"}, "value": [1, "NaN"]}]),
        ));
        assert!(e.contains("outside"), "{e}");
        let e = err(body(
            json!({"status": "success", "data": {"resultType": "matrix", "result": []}}),
        ));
        assert!(e.contains("\"vector\", got \"matrix\""), "{e}");
        let e = err(body(
            json!({"status": "error", "errorType": "bad_data", "error": "parse error"}),
        ));
        assert!(e.contains("bad_data: parse error"), "{e}");
        assert!(err(b"<html>".to_vec()).contains("not JSON"));
    }

    #[test]
    fn client_rejects_bad_urls() {
        assert!(PrometheusClient::new("ftp://x", None, None).is_err());
        assert!(PrometheusClient::new("not a url", None, None).is_err());
        let c = PrometheusClient::new("http://127.0.0.1:9090/prom", Some("t"), None).unwrap();
        assert_eq!(c.url(), "http://127.0.0.1:9090/prom/");
        assert!(!format!("{c:?}").contains("\"t\""));
    }
}
