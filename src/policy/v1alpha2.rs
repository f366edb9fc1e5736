//! `descheduler/v1alpha2`: the wire format (decoded strictly), validation, and profile building.

use serde::Deserialize;
use std::collections::HashSet;

use crate::error::ConfigError;
use crate::evictor::window::{WindowLimit, WindowSpec};
use crate::evictor::{LimitValue, ScaledLimits};
use crate::framework::cycle::CycleConfig;
use crate::framework::registry::Registry;
use crate::plugins::low_node_utilization;
use crate::scheduling::selector;
use crate::usage::{KUBERNETES_METRICS, MetricsNeeds, PROMETHEUS, PrometheusProvider};

use super::Policy;

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

/// Decodes and validates a v1alpha2 policy and builds its profiles from `registry`; relative paths
/// (a WebAssembly plugin's `module`) resolve against `base`.
pub fn build(
    value: &serde_json::Value,
    mut warnings: Vec<String>,
    registry: &Registry,
    base: Option<&std::path::Path>,
) -> Result<Policy, ConfigError> {
    let wire: PolicyV1alpha2 = serde_path_to_error::deserialize(value)
        .map_err(|e| ConfigError::new(format!("{}: {}", e.path(), e.inner())))?;
    let node_selector = match wire
        .node_selector
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        Some(s) => {
            Some(selector::parse(s).map_err(|e| ConfigError::new(format!("nodeSelector: {e}")))?)
        }
        None => None,
    };
    if let Some(g) = wire.grace_period_seconds
        && g < 0
    {
        return Err(ConfigError::new(format!(
            "gracePeriodSeconds: must be >= 0, got {g}"
        )));
    }
    let prometheus = validate_metrics(&wire)?;
    let window = match &wire.workload_eviction_window {
        Some(spec) => Some(WindowLimit::from_spec(spec).map_err(ConfigError::new)?),
        None => None,
    };
    let mut seen_profiles = HashSet::new();
    let mut profiles = Vec::with_capacity(wire.profiles.len());
    for (i, p) in wire.profiles.iter().enumerate() {
        if p.name.is_empty() {
            return Err(ConfigError::new(format!(
                "profiles[{i}].name: a profile needs a name"
            )));
        }
        if !seen_profiles.insert(p.name.as_str()) {
            return Err(ConfigError::new(format!(
                "profiles[{i}].name: duplicate profile name {:?}",
                p.name
            )));
        }
        profiles.push(super::profile::build(p, registry, base)?);
    }
    let metrics = metrics_needs(&wire, prometheus)?;
    if profiles.is_empty() {
        warnings.push("the policy has no profiles: nothing will be evicted".into());
    }
    Ok(Policy {
        profiles,
        cycle: CycleConfig {
            node_selector,
            max_per_node: count_of(wire.max_no_of_pods_to_evict_per_node),
            max_per_namespace: count_of(wire.max_no_of_pods_to_evict_per_namespace),
            max_total: wire.max_no_of_pods_to_evict_total,
            scheduler: Default::default(),
            scaled: ScaledLimits {
                per_node: percent_of(wire.max_no_of_pods_to_evict_per_node),
                per_namespace: percent_of(wire.max_no_of_pods_to_evict_per_namespace),
                per_workload: wire.max_no_of_pods_to_evict_per_workload,
                max_unavailable_per_workload: wire.max_unavailable_per_workload,
                window,
            },
        },
        grace_period_seconds: wire.grace_period_seconds,
        eviction_failure_event_notification: wire
            .eviction_failure_event_notification
            .unwrap_or(false),
        warnings,
        metrics,
    })
}

/// The limit when written as a count (the form upstream knows, kept in [`CycleConfig`] as before).
fn count_of(v: Option<LimitValue>) -> Option<u32> {
    match v {
        Some(LimitValue::Count(n)) => Some(n),
        _ => None,
    }
}

/// The limit when written as a percentage.
fn percent_of(v: Option<LimitValue>) -> Option<LimitValue> {
    v.filter(|v| v.is_percent())
}

/// Upstream `validateDeschedulerConfiguration`'s checks of `metricsProviders` (plus: a source
/// must be one upstream knows). Returns the Prometheus provider, if any.
fn validate_metrics(wire: &PolicyV1alpha2) -> Result<Option<PrometheusProvider>, ConfigError> {
    let mut sources = HashSet::new();
    let mut prometheus = None;
    for (i, m) in wire.metrics_providers.iter().enumerate() {
        let at = format!("metricsProviders[{i}]");
        match m.source.as_str() {
            KUBERNETES_METRICS | PROMETHEUS => {}
            other => {
                return Err(ConfigError::new(format!(
                    "{at}.source: expected \"KubernetesMetrics\" or \"Prometheus\", got {other:?}"
                )));
            }
        }
        if !sources.insert(m.source.as_str()) {
            return Err(ConfigError::new(format!(
                "{at}.source: metric provider {:?} is already configured, each source can be configured only once",
                m.source
            )));
        }
        if m.source != PROMETHEUS {
            continue;
        }
        let Some(p) = &m.prometheus else {
            return Err(ConfigError::new(format!(
                "{at}.prometheus: prometheus configuration is required when prometheus source is enabled"
            )));
        };
        if p.url.is_empty() {
            return Err(ConfigError::new(format!(
                "{at}.prometheus.url: prometheus URL is required when prometheus is enabled"
            )));
        }
        if let Err(e) = check_prometheus_url(&p.url) {
            return Err(ConfigError::new(format!(
                "{at}.prometheus.url: error parsing prometheus URL: {e}"
            )));
        }
        let token_secret = match &p.auth_token {
            None => None,
            Some(AuthToken {
                secret_reference: None,
            }) => {
                return Err(ConfigError::new(format!(
                    "{at}.prometheus.authToken.secretReference: prometheus authToken secret is expected to be set when authToken field is"
                )));
            }
            Some(AuthToken {
                secret_reference: Some(r),
            }) => {
                if r.namespace.is_empty() || r.name.is_empty() {
                    return Err(ConfigError::new(format!(
                        "{at}.prometheus.authToken.secretReference: prometheus authToken secret reference does not set both namespace and name"
                    )));
                }
                Some((r.namespace.clone(), r.name.clone()))
            }
        };
        prometheus = Some(PrometheusProvider {
            url: p.url.clone(),
            token_secret,
        });
    }
    if wire.metrics_collector.as_ref().is_some_and(|c| c.enabled)
        && sources.contains(KUBERNETES_METRICS)
    {
        return Err(ConfigError::new(
            "metricsCollector: it is not allowed to combine metrics provider when metrics collector is enabled (metricsProviders has a KubernetesMetrics entry)",
        ));
    }
    Ok(prometheus)
}

/// An http(s) URL with a host (upstream parses it with `url.Parse`; an empty host or another
/// scheme could never be queried, so they are refused here).
fn check_prometheus_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("{url:?} is not an http or https URL"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{url:?} has no valid host"));
    }
    Ok(())
}

/// What the policy's LowNodeUtilization configs measure, checked against `metricsProviders`:
/// a plugin's metrics source needs the matching provider (KubernetesMetrics is also satisfied by
/// the deprecated `metricsCollector.enabled`, as upstream). Errors name both fields.
fn metrics_needs(
    wire: &PolicyV1alpha2,
    prometheus: Option<PrometheusProvider>,
) -> Result<MetricsNeeds, ConfigError> {
    let has_kubernetes = wire
        .metrics_providers
        .iter()
        .any(|m| m.source == KUBERNETES_METRICS)
        || wire.metrics_collector.as_ref().is_some_and(|c| c.enabled);
    let mut needs = MetricsNeeds::default();
    for p in &wire.profiles {
        for c in &p.plugin_config {
            if c.name != low_node_utilization::NAME {
                continue;
            }
            let Some(m) = c.args.get("metricsUtilization").filter(|v| !v.is_null()) else {
                continue;
            };
            // The plugin's own validation reports malformed args with their field names.
            let Ok(m) =
                serde_json::from_value::<low_node_utilization::MetricsUtilization>(m.clone())
            else {
                continue;
            };
            let at = format!(
                "profile {:?}: plugin {:?}: metricsUtilization.source",
                p.name, c.name
            );
            if m.metrics_server || m.source == KUBERNETES_METRICS {
                if !has_kubernetes {
                    return Err(ConfigError::new(format!(
                        "{at}: {} needs a metricsProviders entry with source: KubernetesMetrics (or the deprecated metricsCollector.enabled: true); metricsProviders has none",
                        if m.metrics_server {
                            "metricsServer: true"
                        } else {
                            "KubernetesMetrics"
                        }
                    )));
                }
                needs.kubernetes = true;
            } else if m.source == PROMETHEUS {
                if prometheus.is_none() {
                    return Err(ConfigError::new(format!(
                        "{at}: Prometheus needs a metricsProviders entry with source: Prometheus and prometheus.url; metricsProviders has none"
                    )));
                }
                if let Some(q) = m.prometheus.as_ref().map(|p| p.query.clone())
                    && !q.is_empty()
                    && !needs.prometheus_queries.contains(&q)
                {
                    needs.prometheus_queries.push(q);
                }
            }
        }
    }
    needs.prometheus_queries.sort();
    needs.prometheus = prometheus;
    Ok(needs)
}
