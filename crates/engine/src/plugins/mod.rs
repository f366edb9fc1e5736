//! Plugins and the registry that maps policy names to them. Laid out as upstream's
//! `pkg/framework/plugins/<name>/`: every plugin is a folder with `mod.rs` (the plugin and its
//! algorithm), `args.rs` (args types, defaults, decoding, validation) and, where it has unit
//! tests, `tests.rs`. `node_utilization` holds what LowNodeUtilization and HighNodeUtilization
//! share.

pub mod default_evictor;
pub mod high_node_utilization;
pub mod low_node_utilization;
pub mod node_utilization;
pub mod pod_lifetime;
pub mod remove_duplicates;
pub mod remove_failed_pods;
pub mod remove_pods_having_too_many_restarts;
pub mod remove_pods_violating_inter_pod_anti_affinity;
pub mod remove_pods_violating_node_affinity;
pub mod remove_pods_violating_node_taints;
pub mod remove_pods_violating_topology_spread_constraint;

use crate::framework::PluginFactory;

impl crate::framework::registry::Registry {
    /// The stock registry: the ten upstream plugins and the DefaultEvictor. (Defined here, with the
    /// plugins, so that `framework/` never imports `plugins/`.)
    pub fn builtin() -> Self {
        Self::from_parts(registry(), vec![default_evictor::evictor_factory()])
    }
}

/// Every plugin a policy may enable (besides DefaultEvictor).
pub fn registry() -> Vec<PluginFactory> {
    vec![
        remove_failed_pods::factory(),
        remove_pods_having_too_many_restarts::factory(),
        pod_lifetime::factory(),
        remove_pods_violating_node_taints::factory(),
        remove_pods_violating_node_affinity::factory(),
        remove_pods_violating_inter_pod_anti_affinity::factory(),
        remove_pods_violating_topology_spread_constraint::factory(),
        high_node_utilization::factory(),
        low_node_utilization::factory(),
        remove_duplicates::factory(),
    ]
}

/// Looks up a plugin by name.
pub fn find(name: &str) -> Option<PluginFactory> {
    registry().into_iter().find(|f| f.name == name)
}
