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
use crate::snapshot::{NodeId, PodId, Snapshot};

/// What `plan --explain` asks a built-in plugin about one pod: the snapshot, the pod, the nodes the
/// profile works on and the time of the cycle.
#[derive(Clone, Copy)]
pub(crate) struct PodQuestion<'a> {
    pub snapshot: &'a Snapshot,
    pub pod: PodId,
    pub nodes: &'a [NodeId],
    pub now: jiff::Timestamp,
}

/// Writes a built-in plugin's registry entry and extension point: `factory()` (the registry
/// entry under the registered name), `build(args)` (decodes the args strictly and builds the
/// plugin with its `new(args)`), and `DeschedulePlugin` / `BalancePlugin` with the plugin's
/// inherent `evict(handle, nodes)` and `explain(PodQuestion)`.
macro_rules! extension_point {
    (Deschedule for $plugin:ident, $name:expr) => {
        $crate::plugins::extension_point!(@impl Deschedule DeschedulePlugin deschedule $plugin $name);
    };
    (Balance for $plugin:ident, $name:expr) => {
        $crate::plugins::extension_point!(@impl Balance BalancePlugin balance $plugin $name);
    };
    (@impl $point:ident $trait_:ident $run:ident $plugin:ident $name:expr) => {
        /// The registry entry.
        pub fn factory() -> $crate::framework::PluginFactory {
            $crate::framework::PluginFactory::new(
                $name,
                $crate::framework::registry::ExtensionPoint::$point,
                build,
            )
        }

        /// Decodes `args` strictly and builds the plugin with its validation.
        fn build(
            args: &serde_json::Value,
        ) -> Result<$crate::framework::Plugin, $crate::framework::args::ArgsError> {
            let args = $crate::framework::args::decode(args)?;
            Ok($crate::framework::Plugin::$point(Box::new($plugin::new(args)?)))
        }

        impl $crate::framework::$trait_ for $plugin {
            fn name(&self) -> &'static str {
                $name
            }

            fn $run(
                &self,
                handle: &mut $crate::framework::Handle<'_>,
                nodes: &[$crate::snapshot::NodeId],
            ) {
                self.evict(handle, nodes)
            }

            fn explain_pod(
                &self,
                snapshot: &$crate::snapshot::Snapshot,
                pod: $crate::snapshot::PodId,
                nodes: &[$crate::snapshot::NodeId],
                now: jiff::Timestamp,
            ) -> Option<String> {
                self.explain($crate::plugins::PodQuestion {
                    snapshot,
                    pod,
                    nodes,
                    now,
                })
            }
        }
    };
}
pub(crate) use extension_point;

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
