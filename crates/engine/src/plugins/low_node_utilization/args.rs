//! LowNodeUtilization args: the types (upstream `LowNodeUtilizationArgs`), decoding and upstream's
//! validation (`ValidateLowNodeUtilizationArgs`, plus the metrics-source checks).

use serde::Deserialize;

use super::LowNodeUtilization;
use crate::framework::args::{ArgsError, selecting_args};
use crate::plugins::node_utilization::{
    METRIC_RESOURCE, Thresholds, validate_evictable_namespaces, validate_thresholds,
};

/// `evictionLimits`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvictionLimits {
    /// At most this many evictions per node by this plugin per cycle (0: none).
    pub node: Option<u64>,
}

/// `metricsUtilization.prometheus`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prometheus {
    /// PromQL query returning per-node usage.
    pub query: String,
}

/// `metricsUtilization`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricsUtilization {
    /// Deprecated: use the metrics server.
    pub metrics_server: bool,
    /// `KubernetesMetrics` or `Prometheus`.
    pub source: String,
    /// Prometheus settings.
    pub prometheus: Option<Prometheus>,
}

selecting_args! {
    /// LowNodeUtilization args (upstream `LowNodeUtilizationArgs`).
    pub struct LowNodeUtilizationArgs {
        /// Thresholds are deviations from the mean usage instead of absolute percentages.
        pub use_deviation_thresholds: bool,
        /// A node is underutilized when every resource is at or below these.
        pub thresholds: Thresholds,
        /// A node is overutilized when some resource is above these.
        pub target_thresholds: Thresholds,
        /// Act only when more than this many nodes are underutilized.
        pub number_of_nodes: i64,
        /// Usage source (only request-based usage is supported here).
        pub metrics_utilization: Option<MetricsUtilization>,
        evictable_namespaces,
        /// Per-node eviction limit of this plugin.
        pub eviction_limits: Option<EvictionLimits>,
    }
}

impl LowNodeUtilizationArgs {
    /// Upstream `ValidateLowNodeUtilizationArgs`.
    pub fn validate(&self) -> Result<(), ArgsError> {
        validate_evictable_namespaces(&self.evictable_namespaces)?;
        validate_thresholds(
            "thresholds",
            "thresholds config is not valid: ",
            &self.thresholds,
        )?;
        validate_thresholds(
            "targetThresholds",
            "targetThresholds config is not valid: ",
            &self.target_thresholds,
        )?;
        let differ = || {
            ArgsError::new(
                "targetThresholds",
                "thresholds and targetThresholds configured different resources",
            )
        };
        if self.thresholds.len() != self.target_thresholds.len() {
            return Err(differ());
        }
        for (name, &value) in &self.thresholds {
            let Some(&target) = self.target_thresholds.get(name) else {
                return Err(differ());
            };
            if value > target && !self.use_deviation_thresholds {
                return Err(ArgsError::new(
                    format!("thresholds.{name}"),
                    format!("thresholds' {name} percentage is greater than targetThresholds'"),
                ));
            }
        }
        if let Some(m) = &self.metrics_utilization {
            self.validate_metrics(m)?;
        }
        Ok(())
    }

    fn validate_metrics(&self, m: &MetricsUtilization) -> Result<(), ArgsError> {
        const F: &str = "metricsUtilization";
        if m.source == "KubernetesMetrics" && m.metrics_server {
            return Err(ArgsError::new(
                F,
                "it is not allowed to set both \"KubernetesMetrics\" source and metricsServer",
            ));
        }
        if m.source == "KubernetesMetrics" && m.prometheus.is_some() {
            return Err(ArgsError::new(
                format!("{F}.prometheus"),
                "prometheus configuration is not allowed to set when source is set to \"KubernetesMetrics\"",
            ));
        }
        let query_missing = m.prometheus.as_ref().is_none_or(|p| p.query.is_empty());
        if m.source == "Prometheus" && query_missing {
            return Err(ArgsError::new(
                format!("{F}.prometheus.query"),
                "prometheus query is required when metrics source is set to \"Prometheus\"",
            ));
        }
        // Checks upstream makes when building the plugin.
        if m.source == "Prometheus" {
            for (field, t) in [
                ("thresholds", &self.thresholds),
                ("targetThresholds", &self.target_thresholds),
            ] {
                if t.len() != 1 || !t.contains_key(METRIC_RESOURCE) {
                    return Err(ArgsError::new(
                        field,
                        format!(
                            "{field} are expected to specify a single instance of \"{METRIC_RESOURCE}\" resource, got {:?} instead",
                            t.keys().collect::<Vec<_>>()
                        ),
                    ));
                }
            }
        }
        // Upstream reports these when the plugin first runs; a policy that can never work is
        // refused when it loads here.
        match m.source.as_str() {
            _ if m.metrics_server => Ok(()),
            "KubernetesMetrics" | "Prometheus" => Ok(()),
            "" => Err(ArgsError::new(
                format!("{F}.source"),
                "metrics source is empty",
            )),
            _ => Err(ArgsError::new(
                format!("{F}.source"),
                "unrecognized metrics source",
            )),
        }
    }

    /// `Some(true)`: metrics.k8s.io; `Some(false)`: Prometheus; `None`: requests.
    pub(super) fn measures_with_kubernetes(&self) -> Option<bool> {
        let m = self.metrics_utilization.as_ref()?;
        if m.metrics_server || m.source == "KubernetesMetrics" {
            Some(true)
        } else if m.source == "Prometheus" {
            Some(false)
        } else {
            None
        }
    }
}

impl LowNodeUtilization {
    /// A plugin with validated `args`.
    pub fn new(args: LowNodeUtilizationArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        Ok(LowNodeUtilization { args })
    }
}
