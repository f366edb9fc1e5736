//! `descheduler/v1alpha2`: the wire format (decoded strictly), validation, and profile building.

use serde::Deserialize;
use std::collections::HashSet;

use crate::error::ConfigError;
use crate::framework::args::ArgsError;
use crate::framework::cycle::{CycleConfig, Profile};
use crate::framework::registry::{ExtensionPoint, Plugin};
use crate::plugins::{self, default_evictor};
use crate::scheduling::selector;

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
    /// Per-node eviction limit per cycle.
    #[serde(default)]
    pub max_no_of_pods_to_evict_per_node: Option<u32>,
    /// Per-namespace eviction limit per cycle.
    #[serde(default)]
    pub max_no_of_pods_to_evict_per_namespace: Option<u32>,
    /// Total eviction limit per cycle.
    #[serde(default)]
    pub max_no_of_pods_to_evict_total: Option<u32>,
    /// Grace period for evictions.
    #[serde(default)]
    pub grace_period_seconds: Option<i64>,
    /// Emit Events when evictions fail.
    #[serde(default)]
    pub eviction_failure_event_notification: Option<bool>,
    /// Metrics sources for utilization plugins (accepted and validated; request-based usage is used).
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
    /// Token secret.
    #[serde(default)]
    pub auth_token: Option<serde_json::Value>,
}

/// `metricsCollector` (deprecated).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsCollector {
    /// Enabled.
    #[serde(default)]
    pub enabled: bool,
}

fn known_plugins() -> String {
    let mut names: Vec<&str> = plugins::registry().iter().map(|f| f.name).collect();
    names.push(default_evictor::NAME);
    names.sort_unstable();
    names.join(", ")
}

/// Decodes and validates a v1alpha2 policy and builds its profiles.
pub fn build(value: &serde_json::Value, mut warnings: Vec<String>) -> Result<Policy, ConfigError> {
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
    validate_metrics(&wire)?;
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
        profiles.push(build_profile(p)?);
    }
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
        },
        grace_period_seconds: wire.grace_period_seconds,
        eviction_failure_event_notification: wire
            .eviction_failure_event_notification
            .unwrap_or(false),
        warnings,
    })
}

fn validate_metrics(wire: &PolicyV1alpha2) -> Result<(), ConfigError> {
    let mut sources = HashSet::new();
    for (i, m) in wire.metrics_providers.iter().enumerate() {
        match m.source.as_str() {
            "KubernetesMetrics" | "Prometheus" => {}
            other => {
                return Err(ConfigError::new(format!(
                    "metricsProviders[{i}].source: expected \"KubernetesMetrics\" or \"Prometheus\", got {other:?}"
                )));
            }
        }
        if !sources.insert(m.source.as_str()) {
            return Err(ConfigError::new(format!(
                "metricsProviders[{i}].source: {} is configured more than once",
                m.source
            )));
        }
        if m.source == "Prometheus" && m.prometheus.as_ref().is_none_or(|p| p.url.is_empty()) {
            return Err(ConfigError::new(format!(
                "metricsProviders[{i}].prometheus.url: required for the Prometheus source"
            )));
        }
    }
    if wire.metrics_collector.as_ref().is_some_and(|c| c.enabled)
        && sources.contains("KubernetesMetrics")
    {
        return Err(ConfigError::new(
            "metricsCollector: cannot be enabled together with a KubernetesMetrics metrics provider",
        ));
    }
    Ok(())
}

fn build_profile(p: &ProfileV1alpha2) -> Result<Profile, ConfigError> {
    let ctx = |plugin: &str, e: String| {
        ConfigError::new(format!("profile {:?}: plugin {plugin:?}: {e}", p.name))
    };
    // pluginConfig: unique, registered names; every config's args are validated (as upstream).
    let mut configs: Vec<(&str, &serde_json::Value)> = Vec::new();
    for c in &p.plugin_config {
        if configs.iter().any(|(n, _)| *n == c.name) {
            return Err(ctx(
                &c.name,
                "pluginConfig lists this plugin more than once".into(),
            ));
        }
        if c.name != default_evictor::NAME && plugins::find(&c.name).is_none() {
            return Err(ctx(
                &c.name,
                format!(
                    "unknown plugin in pluginConfig (known plugins: {})",
                    known_plugins()
                ),
            ));
        }
        configs.push((c.name.as_str(), &c.args));
    }
    let args_of = |name: &str| configs.iter().find(|(n, _)| *n == name).map(|(_, a)| *a);
    let args_err = |plugin: &str, e: ArgsError| ctx(plugin, e.to_string());

    let evictor = match args_of(default_evictor::NAME) {
        Some(a) => default_evictor::DefaultEvictor::from_args(a)
            .map_err(|e| args_err(default_evictor::NAME, e))?,
        None => default_evictor::DefaultEvictor::new(Default::default())
            .map_err(|e| args_err(default_evictor::NAME, e))?,
    };
    for (point, set) in [
        ("filter", &p.plugins.filter),
        ("preevictionfilter", &p.plugins.preevictionfilter),
    ] {
        for name in &set.enabled {
            if name != default_evictor::NAME {
                return Err(ctx(
                    name,
                    format!("only DefaultEvictor can be enabled at the {point} extension point"),
                ));
            }
        }
    }
    let mut profile = Profile {
        name: p.name.clone(),
        evictor: Box::new(evictor),
        deschedule: Vec::new(),
        balance: Vec::new(),
    };
    // Validate every pluginConfig's args, even for plugins that are not enabled.
    let mut built: Vec<(&str, Option<Plugin>)> = Vec::new();
    for (name, args) in &configs {
        if *name == default_evictor::NAME {
            continue;
        }
        let Some(f) = plugins::find(name) else {
            continue;
        };
        built.push((name, Some((f.build)(args).map_err(|e| args_err(name, e))?)));
    }
    for (point, set) in [
        (ExtensionPoint::Deschedule, &p.plugins.deschedule),
        (ExtensionPoint::Balance, &p.plugins.balance),
    ] {
        let point_name = if point == ExtensionPoint::Deschedule {
            "deschedule"
        } else {
            "balance"
        };
        for name in &set.enabled {
            let Some(factory) = plugins::find(name) else {
                return Err(ctx(
                    name,
                    format!(
                        "unknown plugin under plugins.{point_name}.enabled (known plugins: {})",
                        known_plugins()
                    ),
                ));
            };
            if factory.point != point {
                let actual = if factory.point == ExtensionPoint::Deschedule {
                    "deschedule"
                } else {
                    "balance"
                };
                return Err(ctx(
                    name,
                    format!(
                        "is a {actual} plugin; it cannot be enabled under plugins.{point_name}"
                    ),
                ));
            }
            let Some(slot) = built.iter_mut().find(|(n, _)| n == name) else {
                return Err(ctx(name, "unable to find the plugin's pluginConfig entry: every enabled plugin needs one (args may be omitted)".into()));
            };
            let Some(plugin) = slot.1.take() else {
                return Err(ctx(
                    name,
                    format!("enabled more than once under plugins.{point_name}"),
                ));
            };
            match plugin {
                Plugin::Deschedule(d) => profile.deschedule.push(d),
                Plugin::Balance(b) => profile.balance.push(b),
            }
        }
    }
    Ok(profile)
}
