//! Plugins, one file each, and the registry that maps policy names to them.

pub mod default_evictor;

use crate::framework::PluginFactory;

/// Every plugin a policy may enable (besides DefaultEvictor).
pub fn registry() -> Vec<PluginFactory> {
    vec![]
}

/// Looks up a plugin by name.
pub fn find(name: &str) -> Option<PluginFactory> {
    registry().into_iter().find(|f| f.name == name)
}
