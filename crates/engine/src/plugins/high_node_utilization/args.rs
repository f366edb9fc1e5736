//! HighNodeUtilization args: the type (upstream `HighNodeUtilizationArgs`), eviction modes, decoding
//! and upstream's validation (`ValidateHighNodeUtilizationArgs`).

use serde::Deserialize;

use super::HighNodeUtilization;
use crate::framework::Plugin;
use crate::framework::args::{ArgsError, decode};
use crate::plugins::node_utilization::{EvictableNamespaces, Thresholds, validate_thresholds};

/// `evictionModes` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionMode {
    /// Only evict pods that request at least one thresholded resource.
    OnlyThresholdingResources,
}

/// HighNodeUtilization args (upstream `HighNodeUtilizationArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HighNodeUtilizationArgs {
    /// A node is underutilized when every thresholded resource is at or below these.
    #[serde(default)]
    pub thresholds: Thresholds,
    /// Act only when more than this many nodes are underutilized.
    #[serde(default)]
    pub number_of_nodes: i64,
    /// Eviction modes (`OnlyThresholdingResources`).
    #[serde(default)]
    pub eviction_modes: Vec<String>,
    /// Namespaces excluded from eviction.
    #[serde(default)]
    pub evictable_namespaces: Option<EvictableNamespaces>,
}

impl HighNodeUtilizationArgs {
    /// Upstream `ValidateHighNodeUtilizationArgs`; returns the parsed eviction modes.
    pub fn validate(&self) -> Result<Vec<EvictionMode>, ArgsError> {
        if let Some(ns) = &self.evictable_namespaces {
            ns.validate()?;
        }
        validate_thresholds("thresholds", "", &self.thresholds)?;
        self.eviction_modes
            .iter()
            .enumerate()
            .map(|(i, m)| match m.as_str() {
                "OnlyThresholdingResources" => Ok(EvictionMode::OnlyThresholdingResources),
                other => Err(ArgsError::new(
                    format!("evictionModes[{i}]"),
                    format!("invalid eviction mode {other}"),
                )),
            })
            .collect()
    }
}

impl HighNodeUtilization {
    /// A plugin with validated `args`.
    pub fn new(args: HighNodeUtilizationArgs) -> Result<Self, ArgsError> {
        let modes = args.validate()?;
        Ok(HighNodeUtilization {
            only_thresholding_resources: modes.contains(&EvictionMode::OnlyThresholdingResources),
            args,
        })
    }
}

pub(super) fn build(args: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let args: HighNodeUtilizationArgs = decode(args)?;
    Ok(Plugin::Balance(Box::new(HighNodeUtilization::new(args)?)))
}
