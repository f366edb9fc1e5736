//! Args shared by LowNodeUtilization and HighNodeUtilization: thresholds, `evictableNamespaces`, and
//! their upstream validation.

use std::collections::BTreeMap;

use crate::framework::args::{ArgsError, Namespaces};

/// Percentages of allocatable by resource name (upstream `ResourceThresholds`).
pub type Thresholds = BTreeMap<String, f64>;

/// The pseudo-resource upstream uses for Prometheus-provided usage; every node has 100 of it.
pub const METRIC_RESOURCE: &str = "MetricResource";

/// Upstream's check of `evictableNamespaces`: "only Exclude namespaces can be set, inclusion is
/// not supported" (`include` is accepted by the schema but rejected here).
pub fn validate_evictable_namespaces(ns: &Option<Namespaces>) -> Result<(), ArgsError> {
    if let Some(ns) = ns
        && !ns.include.is_empty()
    {
        return Err(ArgsError::new(
            "evictableNamespaces.include",
            "only Exclude namespaces can be set, inclusion is not supported",
        ));
    }
    Ok(())
}

/// Upstream `validateThresholds`: at least one resource, each percentage in [0, 100]. `prefix`
/// starts the message (LowNodeUtilization names which map is wrong).
pub fn validate_thresholds(
    field: &str,
    prefix: &str,
    thresholds: &Thresholds,
) -> Result<(), ArgsError> {
    if thresholds.is_empty() {
        return Err(ArgsError::new(
            field,
            format!("{prefix}no resource threshold is configured"),
        ));
    }
    for (name, &pct) in thresholds {
        if !(0.0..=100.0).contains(&pct) {
            return Err(ArgsError::new(
                format!("{field}.{name}"),
                format!("{prefix}{name} threshold not in [0, 100] range"),
            ));
        }
    }
    Ok(())
}
