//! The plugin registry: every plugin name maps to a factory that decodes, validates and defaults
//! its args (strictly) and returns the plugin at its extension point.

use super::args::ArgsError;
use super::{BalancePlugin, DeschedulePlugin};

/// A built plugin at its extension point.
pub enum Plugin {
    /// Deschedule extension point.
    Deschedule(Box<dyn DeschedulePlugin>),
    /// Balance extension point.
    Balance(Box<dyn BalancePlugin>),
}

/// Extension point a plugin implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtensionPoint {
    /// Deschedule.
    Deschedule,
    /// Balance.
    Balance,
}

/// A registered plugin: its name, extension point and factory.
pub struct PluginFactory {
    /// The plugin name as it appears in a policy.
    pub name: &'static str,
    /// The extension point it implements.
    pub point: ExtensionPoint,
    /// Decodes, validates and defaults `args`, then builds the plugin.
    pub build: fn(&serde_json::Value) -> Result<Plugin, ArgsError>,
}
