//! The `descheduler/v1alpha2` policy as written: the wire types, decoded strictly (unknown fields
//! are errors naming their path). [`super::v1alpha2`] validates them and [`super::profile`] builds
//! profiles from them.

use crate::evictor::LimitValue;
use crate::evictor::window::WindowSpec;
use serde::Deserialize;

/// The policy as written (`descheduler/v1alpha2`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyV1alpha2 {
    /// `descheduler/v1alpha2`.
    pub api_version: String,
    /// `DeschedulerPolicy`.
    pub kind: String,
    /// Profiles.
    #[serde(default)]
    pub profiles: Vec<ProfileV1alpha2>,
    /// Label selector string limiting the nodes the cycle works on.
    #[serde(default)]
    pub node_selector: Option<String>,
    /// Per-node eviction limit per cycle: a count or a percentage of the node's pods.
    #[serde(default)]
    pub max_no_of_pods_to_evict_per_node: Option<LimitValue>,
    /// Per-namespace eviction limit per cycle: a count or a percentage of the namespace's pods.
    #[serde(default)]
    pub max_no_of_pods_to_evict_per_namespace: Option<LimitValue>,
    /// Per-workload eviction limit per cycle: a count or a percentage of the desired replicas
    /// (kube-descheduler; upstream has no such field).
    #[serde(default)]
    pub max_no_of_pods_to_evict_per_workload: Option<LimitValue>,
    /// Most replicas of a workload that may be unavailable (not Ready or moved this cycle) after an
    /// eviction (kube-descheduler).
    #[serde(default)]
    pub max_unavailable_per_workload: Option<LimitValue>,
    /// Per-workload eviction limit across cycles within a time window (kube-descheduler; applied by
    /// `run` only).
    #[serde(default)]
    pub workload_eviction_window: Option<WindowSpec>,
    /// Total eviction limit per cycle.
    #[serde(default)]
    pub max_no_of_pods_to_evict_total: Option<u32>,
    /// Grace period for evictions.
    #[serde(default)]
    pub grace_period_seconds: Option<i64>,
    /// Emit Events when evictions fail.
    #[serde(default)]
    pub eviction_failure_event_notification: Option<bool>,
    /// Metrics sources for the utilization plugins' `metricsUtilization`.
    #[serde(default)]
    pub metrics_providers: Vec<MetricsProvider>,
    /// Deprecated metrics collector switch.
    #[serde(default)]
    pub metrics_collector: Option<MetricsCollector>,
}

/// `profiles[]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProfileV1alpha2 {
    /// Profile name.
    pub name: String,
    /// Plugin args.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
    /// Plugins enabled per extension point.
    #[serde(default)]
    pub plugins: Plugins,
}

/// `pluginConfig[]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// Plugin name.
    pub name: String,
    /// Plugin args (decoded by the plugin).
    #[serde(default)]
    pub args: serde_json::Value,
}

/// `plugins`: per extension point.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plugins {
    /// Accepted, unused (as upstream).
    #[serde(default)]
    pub presort: PluginSet,
    /// Accepted, unused (as upstream).
    #[serde(default)]
    pub sort: PluginSet,
    /// Deschedule plugins.
    #[serde(default)]
    pub deschedule: PluginSet,
    /// Balance plugins.
    #[serde(default)]
    pub balance: PluginSet,
    /// Filter plugins (DefaultEvictor).
    #[serde(default)]
    pub filter: PluginSet,
    /// PreEvictionFilter plugins (DefaultEvictor).
    #[serde(default)]
    pub preevictionfilter: PluginSet,
}

/// `enabled` / `disabled` plugin names.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSet {
    /// Enabled plugins, in order.
    #[serde(default)]
    pub enabled: Vec<String>,
    /// Accepted and ignored, as upstream.
    #[serde(default)]
    pub disabled: Vec<String>,
}

/// `metricsProviders[]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricsProvider {
    /// `KubernetesMetrics` or `Prometheus`.
    pub source: String,
    /// Prometheus connection.
    #[serde(default)]
    pub prometheus: Option<Prometheus>,
}

/// `metricsProviders[].prometheus`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Prometheus {
    /// Prometheus URL.
    #[serde(default)]
    pub url: String,
    /// Where the bearer token comes from (default: the service account's token).
    #[serde(default)]
    pub auth_token: Option<AuthToken>,
}

/// `metricsProviders[].prometheus.authToken`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AuthToken {
    /// The Secret holding the token under the data key `prometheusAuthToken`.
    #[serde(default)]
    pub secret_reference: Option<SecretReference>,
}

/// `metricsProviders[].prometheus.authToken.secretReference`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretReference {
    /// Namespace of the Secret.
    #[serde(default)]
    pub namespace: String,
    /// Name of the Secret.
    #[serde(default)]
    pub name: String,
}

/// `metricsCollector` (deprecated).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsCollector {
    /// Enabled.
    #[serde(default)]
    pub enabled: bool,
}
