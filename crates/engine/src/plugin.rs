//! The plugin API: everything a plugin author needs, and the crate's stability promise (the
//! binary crate re-exports this module as `kube_descheduler::plugin`). Items
//! re-exported here follow the crate's semver (a breaking change to any of them is a new major
//! version, or a new minor version while the crate is 0.x); everything else in the crate may
//! change in any release.
//!
//! A plugin is a [`DeschedulePlugin`] (a per-pod rule) or a [`BalancePlugin`] (a look at the
//! nodes as a whole); an evictor is an [`EvictorPlugin`] (Filter and PreEvictionFilter). Each is
//! registered under a name with a factory that decodes its args from the policy
//! ([`PluginFactory`], [`EvictorFactory`]); a program adds its factories to
//! [`Registry::builtin`] and runs the whole command line with the binary crate's
//! `kube_descheduler::cli::main_with`:
//!
//! ```
//! use kube_descheduler_engine::plugin::*;
//!
//! /// Evicts every pod labelled `retire=true` (a real plugin would say why with numbers).
//! struct EvictLabelled {
//!     name: String,
//! }
//!
//! impl DeschedulePlugin for EvictLabelled {
//!     fn name(&self) -> &str {
//!         &self.name
//!     }
//!     fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
//!         for &node in nodes {
//!             let pods: Vec<PodId> = h.snapshot.pods_on_node(node).collect();
//!             for pod in pods {
//!                 let labelled = h.snapshot.pod(pod).labels.get("retire").map(String::as_str);
//!                 if labelled == Some("true") && h.filter(pod) {
//!                     let reason = EvictionReason::new("Labelled", "labelled retire=true");
//!                     if let Err(e) = h.evict_because(pod, reason) {
//!                         if e.is_total_limit() {
//!                             return;
//!                         }
//!                     }
//!                 }
//!             }
//!         }
//!     }
//! }
//!
//! let registry = Registry::builtin()
//!     .with(PluginFactory::deschedule("EvictLabelled", |_args| {
//!         Ok(EvictLabelled { name: "EvictLabelled".into() })
//!     }))
//!     .expect("a new name");
//! assert!(registry.plugin("EvictLabelled").is_some());
//! // A second plugin of the same name is refused.
//! assert!(registry.with(PluginFactory::deschedule("PodLifeTime", |_| {
//!     Ok(EvictLabelled { name: "PodLifeTime".into() })
//! })).is_err());
//! // In the program's main: `std::process::ExitCode` from the whole CLI.
//! // fn main() -> std::process::ExitCode { kube_descheduler::cli::main_with(registry) }
//! ```
//!
//! The framework, not the plugin, applies the profile's evictors, the eviction limits, `plan`'s
//! guard verdict, dry-run and the eviction itself; a plugin that panics fails its own run for the
//! cycle (logged and counted in `kube_descheduler_plugin_failures_total`), and the others go on.

use serde::de::DeserializeOwned;

pub use jiff::Timestamp;
pub use kube_core::Selector;
pub use kube_core::SelectorExt;

pub use crate::evictor::reason::{ReasonDetail, ReasonValue, duration as human_duration, percent};
pub use crate::evictor::{EvictError, EvictOutcome, EvictionReason, LimitError, NodeUsageReport};
pub use crate::framework::args::{ArgsError, Namespaces, allows_namespace, decode};
pub use crate::framework::cycle::Profile;
pub use crate::framework::handle::FilterView;
pub use crate::framework::registry::{
    EvictorFactory, ExtensionPoint, Plugin, PluginFactory, Registration, Registry, RegistryError,
};
pub use crate::framework::{BalancePlugin, DeschedulePlugin, EvictorPlugin, Handle};
pub use crate::placement::PlacementMode;
pub use crate::plugins::default_evictor::DefaultEvictor;
pub use crate::snapshot::model::{Condition, ContainerState, OwnerRef, PodPhase, QosClass, Volume};
pub use crate::snapshot::resources::Resources;
pub use crate::snapshot::{Node, NodeId, NodeUsage, Pod, PodId, Snapshot};
pub use crate::usage::Measured;
pub use crate::workload::facts::{DeploymentFacts, ReplicaSetFacts};

/// A plugin's args type: decoded strictly by [`decode_args`] (put
/// `#[serde(deny_unknown_fields)]` on it), defaulted by serde (`#[serde(default)]`), then checked
/// by [`PluginArgs::validate`].
///
/// ```
/// use kube_descheduler_engine::plugin::{ArgsError, PluginArgs, decode_args};
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// #[serde(deny_unknown_fields, rename_all = "camelCase")]
/// struct Args {
///     #[serde(default = "three")]
///     max_restarts: u32,
/// }
/// fn three() -> u32 { 3 }
///
/// impl PluginArgs for Args {
///     fn validate(&self) -> Result<(), ArgsError> {
///         if self.max_restarts == 0 {
///             return Err(ArgsError::new("maxRestarts", "must be at least 1"));
///         }
///         Ok(())
///     }
/// }
///
/// // Absent args (no `args:` in the policy) decode as `{}`: the defaults apply.
/// let a: Args = decode_args(&serde_json::Value::Null).unwrap();
/// assert_eq!(a.max_restarts, 3);
/// // Errors name the field; the policy loader adds the profile and the plugin:
/// // `profile "p": plugin "Mine": args.maxRestarts: must be at least 1`.
/// let e = decode_args::<Args>(&serde_json::json!({"maxRestarts": 0})).err().unwrap();
/// assert_eq!(e.to_string(), "args.maxRestarts: must be at least 1");
/// let e = decode_args::<Args>(&serde_json::json!({"maxRestart": 1})).err().unwrap();
/// assert!(e.to_string().contains("unknown field `maxRestart`"));
/// ```
pub trait PluginArgs: DeserializeOwned {
    /// Checks the decoded (and defaulted) args; errors name the field (a JSON path in the args).
    fn validate(&self) -> Result<(), ArgsError> {
        Ok(())
    }
}

/// Decodes `args` strictly into `T` (see [`decode`]), then validates them.
pub fn decode_args<T: PluginArgs>(args: &serde_json::Value) -> Result<T, ArgsError> {
    let t: T = decode(args)?;
    t.validate()?;
    Ok(t)
}

/// Parses a label selector in `kubectl -l` syntax (`a=b,c!=d,e in (x,y),!f`); empty selects
/// everything. Match labels with [`SelectorExt::matches`].
///
/// ```
/// use kube_descheduler_engine::plugin::{SelectorExt, parse_selector};
/// use std::collections::BTreeMap;
///
/// let s = parse_selector("pool in (v1,v2),!spot").unwrap();
/// let labels = BTreeMap::from([("pool".to_string(), "v1".to_string())]);
/// assert!(s.matches(&labels));
/// assert!(parse_selector("pool in (v1").is_err());
/// ```
pub fn parse_selector(selector: &str) -> Result<Selector, String> {
    crate::scheduling::selector::parse(selector)
}

/// Parses a Go duration (`90s`, `10m`, `1h30m`) as the policy's `field`.
///
/// ```
/// use kube_descheduler_engine::plugin::parse_duration;
///
/// assert_eq!(parse_duration("minAge", "1h30m").unwrap().as_secs(), 5400);
/// let e = parse_duration("minAge", "soon").unwrap_err();
/// assert!(e.to_string().starts_with("args.minAge: "));
/// ```
pub fn parse_duration(field: &str, value: &str) -> Result<std::time::Duration, ArgsError> {
    crate::duration::parse_go_duration(value).map_err(|e| ArgsError::new(field, e))
}
