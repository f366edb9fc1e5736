//! HighNodeUtilization args: the type (upstream `HighNodeUtilizationArgs`), eviction modes, decoding
//! and upstream's validation (`ValidateHighNodeUtilizationArgs`).

use super::HighNodeUtilization;
use crate::framework::args::{ArgsError, selecting_args};
use crate::plugins::node_utilization::{
    Thresholds, validate_evictable_namespaces, validate_thresholds,
};

/// `evictionModes` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionMode {
    /// Only evict pods that request at least one thresholded resource.
    OnlyThresholdingResources,
}

selecting_args! {
    /// HighNodeUtilization args (upstream `HighNodeUtilizationArgs`).
    pub struct HighNodeUtilizationArgs {
        /// A node is underutilized when every thresholded resource is at or below these.
        pub thresholds: Thresholds,
        /// Act only when more than this many nodes are underutilized.
        pub number_of_nodes: i64,
        /// Eviction modes (`OnlyThresholdingResources`).
        pub eviction_modes: Vec<String>,
        evictable_namespaces,
    }
}

impl HighNodeUtilizationArgs {
    /// Upstream `ValidateHighNodeUtilizationArgs`; returns the parsed eviction modes.
    pub fn validate(&self) -> Result<Vec<EvictionMode>, ArgsError> {
        validate_evictable_namespaces(&self.evictable_namespaces)?;
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
