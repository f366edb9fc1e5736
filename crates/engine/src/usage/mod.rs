//! Measured resource usage for the utilization plugins (upstream `metricsUtilization`): what the
//! metrics sources returned, as plain data keyed by node and pod name.
//!
//! This is a bottom layer: it knows the wire format of `metrics.k8s.io/v1beta1` and upstream's
//! smoothing of node samples; it knows nothing about plugins or snapshots. The plugins read a
//! [`Measured`] attached to the snapshot. Fetching (metrics.k8s.io, Prometheus) is the binary's.

pub mod ema;
pub mod metrics_api;

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use serde::Serialize;

/// `metricsProviders[].source` / `metricsUtilization.source` value for metrics.k8s.io.
pub const KUBERNETES_METRICS: &str = "KubernetesMetrics";
/// `metricsProviders[].source` / `metricsUtilization.source` value for Prometheus.
pub const PROMETHEUS: &str = "Prometheus";

/// CPU (millicores) and memory (bytes), what metrics.k8s.io reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuMemory {
    /// CPU in millicores.
    pub cpu_milli: i64,
    /// Memory in bytes.
    pub memory: i64,
}

/// One collection from metrics.k8s.io: node usage (smoothed as upstream) and pod usage (the
/// latest sample, unsmoothed, as upstream's `podUsage`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubernetesUsage {
    /// Node name → usage.
    pub nodes: HashMap<String, CpuMemory>,
    /// `namespace/name` → the pod's usage summed over its containers, or why it has none usable
    /// (a container without a cpu or memory sample).
    pub pods: HashMap<String, Result<CpuMemory, String>>,
}

impl KubernetesUsage {
    /// The usage of pod `namespace/name`: `None` when metrics.k8s.io returned no sample for it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Result<CpuMemory, String>> {
        self.pods.get(&format!("{namespace}/{name}"))
    }
}

/// Node usage from one Prometheus query: node name (`instance` label) → fraction in [0, 1].
pub type PrometheusUsage = BTreeMap<String, f64>;

/// Everything the metrics sources returned for one cycle. A source that failed keeps its error,
/// so only the plugins that need it fail; a source nobody asked for is absent.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// metrics.k8s.io data, or why it could not be collected; `None`: not collected.
    pub kubernetes: Option<Result<KubernetesUsage, String>>,
    /// Per PromQL query: its result or its error.
    pub prometheus: BTreeMap<String, Result<PrometheusUsage, String>>,
    /// When the data was collected (the oldest part of it).
    pub collected_at: Option<Timestamp>,
}

/// What a policy needs measured: derived from its LowNodeUtilization `metricsUtilization` args
/// and its `metricsProviders`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsNeeds {
    /// Some plugin uses `source: KubernetesMetrics` (or the deprecated `metricsServer: true`).
    pub kubernetes: bool,
    /// The PromQL queries of plugins with `source: Prometheus`, deduplicated, sorted.
    pub prometheus_queries: Vec<String>,
    /// `metricsProviders[]` Prometheus entry, if any.
    pub prometheus: Option<PrometheusProvider>,
}

impl MetricsNeeds {
    /// Nothing to collect.
    pub fn is_empty(&self) -> bool {
        !self.kubernetes && self.prometheus_queries.is_empty()
    }
}

/// `metricsProviders[].prometheus`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrometheusProvider {
    /// Server URL.
    pub url: String,
    /// `authToken.secretReference`: the Secret (namespace, name) holding the bearer token under
    /// the data key [`PROMETHEUS_TOKEN_KEY`].
    pub token_secret: Option<(String, String)>,
}

/// The Secret data key upstream reads the Prometheus bearer token from.
pub const PROMETHEUS_TOKEN_KEY: &str = "prometheusAuthToken";
