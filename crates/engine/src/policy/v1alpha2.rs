//! `descheduler/v1alpha2`: validation of the wire format ([`super::wire`]) and the policy built
//! from it (profiles by [`super::profile`]).

use std::collections::HashSet;

use crate::error::ConfigError;
use crate::evictor::ScaledLimits;
use crate::evictor::window::WindowLimit;
use crate::framework::cycle::CycleConfig;
use crate::framework::registry::Registry;
use crate::plugins::low_node_utilization;
use crate::scheduling::selector;
use crate::usage::{KUBERNETES_METRICS, MetricsNeeds, PROMETHEUS, PrometheusProvider};

use super::Policy;
pub use super::wire::*;

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
            max_per_node: wire.max_no_of_pods_to_evict_per_node,
            max_per_namespace: wire.max_no_of_pods_to_evict_per_namespace,
            max_total: wire.max_no_of_pods_to_evict_total,
            scheduler: Default::default(),
            in_flight: Vec::new(),
            requested: Vec::new(),
            scaled: ScaledLimits {
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
