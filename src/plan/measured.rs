//! Measured usage for an offline plan: metrics.k8s.io lists read from files (`--metrics`, what
//! `kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes` and `.../pods` print) and Prometheus
//! queries against a server (`--prometheus-url`), plus the per-node report of the usage used.

use std::path::PathBuf;

use serde::Serialize;

use crate::usage::collector::query_all;
use crate::usage::prometheus::PrometheusClient;
use kube_descheduler_engine::snapshot::{NodeId, Snapshot};
use kube_descheduler_engine::usage::metrics_api::RawSamples;
use kube_descheduler_engine::usage::{
    KUBERNETES_METRICS, KubernetesUsage, Measured, MetricsNeeds, PROMETHEUS,
};

/// Where a plan's measured usage comes from.
#[derive(Debug, Clone, Default)]
pub struct MetricsInputs {
    /// NodeMetrics / PodMetrics list files.
    pub files: Vec<PathBuf>,
    /// Prometheus server to run the policy's queries against.
    pub prometheus_url: Option<String>,
    /// File holding the Prometheus bearer token.
    pub prometheus_token_file: Option<PathBuf>,
    /// metrics.k8s.io samples read from the cluster itself (`plan --kubeconfig` without
    /// `--metrics`), where they come from (named in errors), or why they could not be read.
    pub cluster: Option<(String, Result<RawSamples, String>)>,
}

fn read_list(path: &PathBuf) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--metrics {}: cannot read: {e}", path.display()))?;
    serde_json::from_str(&text)
        .or_else(|_| serde_saphyr::from_str(&text))
        .map_err(|e| format!("--metrics {}: not JSON or YAML: {e}", path.display()))
}

/// Collects what `needs` asks for from `inputs`. Inputs the policy does not use produce
/// warnings; a source the policy needs but no input provides is an error naming the flag.
pub fn collect(
    needs: &MetricsNeeds,
    inputs: &MetricsInputs,
    warnings: &mut Vec<String>,
) -> Result<Option<Measured>, String> {
    if needs.is_empty() {
        if !inputs.files.is_empty() || inputs.prometheus_url.is_some() {
            warnings.push(
                "--metrics / --prometheus-url given, but no LowNodeUtilization in the policy sets metricsUtilization; usage comes from requests".into(),
            );
        }
        return Ok(None);
    }
    let mut m = Measured {
        collected_at: Some(jiff::Timestamp::now()),
        ..Default::default()
    };
    if needs.kubernetes && inputs.files.is_empty() && inputs.cluster.is_some() {
        if let Some((server, samples)) = &inputs.cluster {
            let raw = samples
                .clone()
                .map_err(|e| format!("{KUBERNETES_METRICS} usage from the API server {server}: {e} (or pass --metrics FILE)"))?;
            m.kubernetes = Some(Ok(KubernetesUsage {
                nodes: raw.nodes,
                pods: raw.pods,
            }));
        }
    } else if needs.kubernetes {
        if inputs.files.is_empty() {
            return Err(format!(
                "the policy's LowNodeUtilization uses {KUBERNETES_METRICS} usage: pass --metrics FILE with the NodeMetrics and PodMetrics lists (kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes, and .../pods)"
            ));
        }
        let mut raw = RawSamples::default();
        for f in &inputs.files {
            raw.add_list(&read_list(f)?)
                .map_err(|e| format!("--metrics {}: {e}", f.display()))?;
        }
        // One sample: the moving average starts at it (upstream's first collection).
        m.kubernetes = Some(Ok(KubernetesUsage {
            nodes: raw.nodes,
            pods: raw.pods,
        }));
    } else if !inputs.files.is_empty() {
        warnings.push(format!(
            "--metrics given, but no LowNodeUtilization in the policy uses {KUBERNETES_METRICS}"
        ));
    }
    if !needs.prometheus_queries.is_empty() {
        let Some(url) = &inputs.prometheus_url else {
            return Err(format!(
                "the policy's LowNodeUtilization uses {PROMETHEUS} usage: pass --prometheus-url URL (and --prometheus-token-file FILE when the server needs a token)"
            ));
        };
        let token = match &inputs.prometheus_token_file {
            Some(f) => Some(std::fs::read_to_string(f).map_err(|e| {
                format!("--prometheus-token-file {}: cannot read: {e}", f.display())
            })?),
            None => None,
        };
        let client = PrometheusClient::new(url, token.as_deref(), None)
            .map_err(|e| format!("--prometheus-url: {e}"))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the query runtime: {e}"))?;
        m.prometheus = rt.block_on(query_all(&client, &needs.prometheus_queries));
        for (q, r) in &m.prometheus {
            if let Err(e) = r {
                return Err(format!("--prometheus-url {url}: query {q:?} failed: {e}"));
            }
        }
    } else if inputs.prometheus_url.is_some() {
        warnings.push(format!(
            "--prometheus-url given, but no LowNodeUtilization in the policy uses {PROMETHEUS}"
        ));
    }
    Ok(Some(m))
}

/// The usage a node was measured at, and by which source.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeUsageReport {
    /// Node name.
    pub node: String,
    /// `KubernetesMetrics` or `Prometheus`.
    pub source: &'static str,
    /// The PromQL query (Prometheus).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// CPU in millicores (KubernetesMetrics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_milli: Option<i64>,
    /// Memory in bytes (KubernetesMetrics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<i64>,
    /// Utilization in [0, 1] (Prometheus).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// Why the node has no usage from this source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One row per node of the cycle and source the policy measures with.
pub fn node_usage(snapshot: &Snapshot, nodes: &[NodeId]) -> Vec<NodeUsageReport> {
    let Some(m) = snapshot.measured.as_deref() else {
        return Vec::new();
    };
    let blank = |node: &str, source| NodeUsageReport {
        node: node.to_string(),
        source,
        query: None,
        cpu_milli: None,
        memory_bytes: None,
        utilization: None,
        error: None,
    };
    let mut out = Vec::new();
    if let Some(k) = &m.kubernetes {
        for &n in nodes {
            let name = snapshot.node(n).name.as_str();
            let mut r = blank(name, KUBERNETES_METRICS);
            match k {
                Ok(k) => match k.nodes.get(name) {
                    Some(u) => {
                        r.cpu_milli = Some(u.cpu_milli);
                        r.memory_bytes = Some(u.memory);
                    }
                    None => r.error = Some("no NodeMetrics sample".into()),
                },
                Err(e) => r.error = Some(e.clone()),
            }
            out.push(r);
        }
    }
    for (q, res) in &m.prometheus {
        for &n in nodes {
            let name = snapshot.node(n).name.as_str();
            let mut r = blank(name, PROMETHEUS);
            r.query = Some(q.clone());
            match res {
                Ok(u) => match u.get(name) {
                    Some(v) => r.utilization = Some(*v),
                    None => r.error = Some("no sample with this instance label".into()),
                },
                Err(e) => r.error = Some(e.clone()),
            }
            out.push(r);
        }
    }
    out
}
