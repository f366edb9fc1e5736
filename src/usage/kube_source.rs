//! metrics.k8s.io as a usage source: one LIST of NodeMetrics and one of PodMetrics per
//! collection (upstream GETs every node separately), and the Prometheus bearer token read from a
//! Secret.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::Value;

use super::PROMETHEUS_TOKEN_KEY;
use super::metrics_api::RawSamples;

/// The NodeMetrics collection path.
pub const NODES_PATH: &str = "/apis/metrics.k8s.io/v1beta1/nodes";
/// The PodMetrics collection path (all namespaces).
pub const PODS_PATH: &str = "/apis/metrics.k8s.io/v1beta1/pods";

async fn list(client: &kube::Client, path: &str) -> Result<Value, String> {
    let req = hyper::http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| format!("GET {path}: {e}"))?;
    client
        .request::<Value>(req)
        .await
        .map_err(|e| format!("GET {path}: {e}"))
}

/// Lists NodeMetrics and PodMetrics once each. Errors name the path.
pub async fn collect(client: &kube::Client) -> Result<RawSamples, String> {
    let (nodes, pods) = tokio::join!(list(client, NODES_PATH), list(client, PODS_PATH));
    let mut samples = RawSamples::default();
    samples
        .add_list(&nodes?)
        .map_err(|e| format!("{NODES_PATH}: {e}"))?;
    samples
        .add_list(&pods?)
        .map_err(|e| format!("{PODS_PATH}: {e}"))?;
    Ok(samples)
}

/// Reads the Prometheus bearer token from Secret `namespace/name`, data key
/// `prometheusAuthToken` (upstream's key).
pub async fn read_token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, String> {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| format!("Secret {namespace}/{name}: {e}"))?;
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(PROMETHEUS_TOKEN_KEY))
        .ok_or_else(|| {
            format!("Secret {namespace}/{name}: no data key {PROMETHEUS_TOKEN_KEY:?}")
        })?;
    let token = std::str::from_utf8(&bytes.0)
        .map_err(|_| format!("Secret {namespace}/{name}: {PROMETHEUS_TOKEN_KEY} is not UTF-8"))?
        .trim()
        .to_string();
    if token.is_empty() {
        return Err(format!(
            "Secret {namespace}/{name}: {PROMETHEUS_TOKEN_KEY} is empty"
        ));
    }
    Ok(token)
}
