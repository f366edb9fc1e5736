//! Plugins, one file each, and the registry that maps policy names to them.

pub mod default_evictor;
pub mod high_node_utilization;
pub mod low_node_utilization;
pub mod node_utilization;
pub mod remove_duplicates;

use crate::framework::PluginFactory;

/// Every plugin a policy may enable (besides DefaultEvictor).
pub fn registry() -> Vec<PluginFactory> {
    vec![
        high_node_utilization::factory(),
        low_node_utilization::factory(),
        remove_duplicates::factory(),
    ]
}

/// Looks up a plugin by name.
pub fn find(name: &str) -> Option<PluginFactory> {
    registry().into_iter().find(|f| f.name == name)
}
