//! The plugin registry: every plugin name maps to a factory that decodes, validates and defaults
//! its args (strictly) and returns the plugin at its extension point. [`Registry::builtin`] holds
//! the ten upstream plugins and the DefaultEvictor; a program adds its own with
//! [`Registry::with`] and runs the whole CLI with it (`cli::main_with`).

use std::fmt;
use std::sync::Arc;

use super::args::ArgsError;
use super::{BalancePlugin, DeschedulePlugin, EvictorPlugin};

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

impl ExtensionPoint {
    /// The name of the extension point in a policy's `plugins` (`deschedule`, `balance`).
    pub fn policy_name(self) -> &'static str {
        match self {
            ExtensionPoint::Deschedule => "deschedule",
            ExtensionPoint::Balance => "balance",
        }
    }
}

/// A factory's build function: decodes, validates and defaults `args` (null when the policy's
/// `pluginConfig` entry has none), then builds the plugin.
pub type BuildFn = dyn Fn(&serde_json::Value) -> Result<Plugin, ArgsError> + Send + Sync;

/// An evictor factory's build function (as [`BuildFn`]).
pub type BuildEvictorFn =
    dyn Fn(&serde_json::Value) -> Result<Box<dyn EvictorPlugin>, ArgsError> + Send + Sync;

/// A registered Deschedule or Balance plugin: its name, extension point and factory.
#[derive(Clone)]
pub struct PluginFactory {
    /// The plugin name as it appears in a policy (and as the `strategy` of its evictions).
    pub name: String,
    /// The extension point it implements.
    pub point: ExtensionPoint,
    /// Decodes, validates and defaults `args`, then builds the plugin.
    pub build: Arc<BuildFn>,
}

impl PluginFactory {
    /// A factory for `name` at `point` from a build function returning a [`Plugin`].
    pub fn new(
        name: impl Into<String>,
        point: ExtensionPoint,
        build: impl Fn(&serde_json::Value) -> Result<Plugin, ArgsError> + Send + Sync + 'static,
    ) -> Self {
        PluginFactory {
            name: name.into(),
            point,
            build: Arc::new(build),
        }
    }

    /// A Deschedule plugin `name` built by `build` from its args.
    pub fn deschedule<P: DeschedulePlugin + 'static>(
        name: impl Into<String>,
        build: impl Fn(&serde_json::Value) -> Result<P, ArgsError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(name, ExtensionPoint::Deschedule, move |args| {
            Ok(Plugin::Deschedule(Box::new(build(args)?)))
        })
    }

    /// A Balance plugin `name` built by `build` from its args.
    pub fn balance<P: BalancePlugin + 'static>(
        name: impl Into<String>,
        build: impl Fn(&serde_json::Value) -> Result<P, ArgsError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(name, ExtensionPoint::Balance, move |args| {
            Ok(Plugin::Balance(Box::new(build(args)?)))
        })
    }
}

impl fmt::Debug for PluginFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginFactory")
            .field("name", &self.name)
            .field("point", &self.point)
            .finish_non_exhaustive()
    }
}

/// A registered evictor plugin (Filter and PreEvictionFilter), such as the DefaultEvictor: a
/// profile names it under `plugins.filter.enabled` / `plugins.preevictionfilter.enabled`.
#[derive(Clone)]
pub struct EvictorFactory {
    /// The plugin name as it appears in a policy.
    pub name: String,
    /// Decodes, validates and defaults `args`, then builds the evictor.
    pub build: Arc<BuildEvictorFn>,
}

impl EvictorFactory {
    /// An evictor `name` built by `build` from its args.
    pub fn new<E: EvictorPlugin + 'static>(
        name: impl Into<String>,
        build: impl Fn(&serde_json::Value) -> Result<E, ArgsError> + Send + Sync + 'static,
    ) -> Self {
        EvictorFactory {
            name: name.into(),
            build: Arc::new(move |args| Ok(Box::new(build(args)?) as Box<dyn EvictorPlugin>)),
        }
    }
}

impl fmt::Debug for EvictorFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvictorFactory")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Something [`Registry::with`] accepts: a plugin or an evictor factory.
#[derive(Debug, Clone)]
pub enum Registration {
    /// A Deschedule or Balance plugin.
    Plugin(PluginFactory),
    /// An evictor plugin.
    Evictor(EvictorFactory),
}

impl Registration {
    /// The registered name.
    pub fn name(&self) -> &str {
        match self {
            Registration::Plugin(f) => &f.name,
            Registration::Evictor(f) => &f.name,
        }
    }
}

impl From<PluginFactory> for Registration {
    fn from(f: PluginFactory) -> Self {
        Registration::Plugin(f)
    }
}

impl From<EvictorFactory> for Registration {
    fn from(f: EvictorFactory) -> Self {
        Registration::Evictor(f)
    }
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name is registered already (names are unique across plugins and evictors).
    #[error(
        "plugin {0:?} is registered already: plugin names are unique (built-in names cannot be reused)"
    )]
    Duplicate(String),
    /// The name is empty or not usable in a policy.
    #[error(
        "plugin name {0:?} is invalid: it must be non-empty, without whitespace or control characters"
    )]
    InvalidName(String),
}

/// The plugins a policy may name: Deschedule and Balance plugins, and evictors.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    plugins: Vec<PluginFactory>,
    evictors: Vec<EvictorFactory>,
}

impl Registry {
    /// A registry with nothing in it.
    pub fn empty() -> Self {
        Registry::default()
    }

    /// A registry of exactly these factories, in this order (names are not checked: for the
    /// built-in set, [`Registry::builtin`] in `plugins/`, whose names are known to be distinct).
    pub(crate) fn from_parts(plugins: Vec<PluginFactory>, evictors: Vec<EvictorFactory>) -> Self {
        Registry { plugins, evictors }
    }

    /// This registry plus `factory`; refuses a name registered already.
    pub fn with(mut self, factory: impl Into<Registration>) -> Result<Self, RegistryError> {
        self.register(factory)?;
        Ok(self)
    }

    /// Adds `factory`; refuses a name registered already (the registry is unchanged then).
    pub fn register(&mut self, factory: impl Into<Registration>) -> Result<(), RegistryError> {
        let r = factory.into();
        let name = r.name();
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(RegistryError::InvalidName(name.to_string()));
        }
        if self.contains(name) {
            return Err(RegistryError::Duplicate(name.to_string()));
        }
        match r {
            Registration::Plugin(f) => self.plugins.push(f),
            Registration::Evictor(f) => self.evictors.push(f),
        }
        Ok(())
    }

    /// Whether `name` is registered (as a plugin or an evictor).
    pub fn contains(&self, name: &str) -> bool {
        self.plugin(name).is_some() || self.evictor(name).is_some()
    }

    /// The Deschedule or Balance plugin `name`.
    pub fn plugin(&self, name: &str) -> Option<&PluginFactory> {
        self.plugins.iter().find(|f| f.name == name)
    }

    /// The evictor plugin `name`.
    pub fn evictor(&self, name: &str) -> Option<&EvictorFactory> {
        self.evictors.iter().find(|f| f.name == name)
    }

    /// The Deschedule and Balance plugins, in registration order.
    pub fn plugins(&self) -> &[PluginFactory] {
        &self.plugins
    }

    /// The evictor plugins, in registration order.
    pub fn evictors(&self) -> &[EvictorFactory] {
        &self.evictors
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .plugins
            .iter()
            .map(|f| f.name.as_str())
            .chain(self.evictors.iter().map(|f| f.name.as_str()))
            .collect();
        names.sort_unstable();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Handle;
    use crate::snapshot::NodeId;

    struct Nop(String);
    impl DeschedulePlugin for Nop {
        fn name(&self) -> &str {
            &self.0
        }
        fn deschedule(&self, _: &mut Handle<'_>, _: &[NodeId]) {}
    }

    fn nop(name: &str) -> PluginFactory {
        PluginFactory::deschedule(name, |a: &serde_json::Value| {
            let n: String = crate::framework::args::decode::<Option<String>>(a)
                .ok()
                .flatten()
                .unwrap_or_default();
            Ok(Nop(n))
        })
    }

    #[test]
    fn builtin_has_the_ten_plugins_and_the_default_evictor() {
        let r = Registry::builtin();
        assert_eq!(r.plugins().len(), 10);
        assert_eq!(r.evictors().len(), 1);
        assert!(r.evictor("DefaultEvictor").is_some());
        assert!(r.plugin("DefaultEvictor").is_none());
        assert_eq!(
            r.plugin("PodLifeTime").map(|f| f.point),
            Some(ExtensionPoint::Deschedule)
        );
        assert_eq!(
            r.plugin("LowNodeUtilization").map(|f| f.point),
            Some(ExtensionPoint::Balance)
        );
        let names = r.names();
        assert_eq!(names.len(), 11);
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    }

    #[test]
    fn duplicates_and_bad_names_are_refused_and_leave_the_registry_unchanged() {
        let r = Registry::builtin().with(nop("Mine")).expect("new name");
        assert!(r.plugin("Mine").is_some());
        let e = r.clone().with(nop("Mine")).unwrap_err();
        assert_eq!(e, RegistryError::Duplicate("Mine".into()));
        assert!(
            e.to_string().contains("\"Mine\" is registered already"),
            "{e}"
        );
        // Built-in names, of plugins and of the evictor, are taken too.
        for taken in ["PodLifeTime", "DefaultEvictor"] {
            assert_eq!(
                r.clone().with(nop(taken)).unwrap_err(),
                RegistryError::Duplicate(taken.into())
            );
        }
        let mut r2 = r.clone();
        for bad in ["", "My Plugin", "tab\t"] {
            assert_eq!(
                r2.register(nop(bad)).unwrap_err(),
                RegistryError::InvalidName(bad.into())
            );
        }
        assert_eq!(r2.names(), r.names());
        assert_eq!(r2.plugins().len(), 11);
    }
}
