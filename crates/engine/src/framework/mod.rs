//! The plugin framework: extension-point traits (the profile's evictor is an [`EvictorPlugin`]),
//! the [`Handle`] plugins work through, argument decoding, shared argument types, pod ordering,
//! and the descheduling [`cycle`].

pub(crate) mod args;
pub(crate) mod composite;
#[cfg(test)]
mod contain_tests;
pub mod cycle;
pub(crate) mod filter_cache;
pub(crate) mod handle;
#[cfg(test)]
mod limit_tests;
pub mod parallel;
pub(crate) mod per_node;
pub(crate) mod podfilter;
pub mod registry;
pub(crate) mod sort;

pub use handle::Handle;
pub use registry::{EvictorFactory, Plugin, PluginFactory, Registry, RegistryError};

use jiff::Timestamp;

use crate::snapshot::{NodeId, PodId, Snapshot};

/// An evictor at the Filter and PreEvictionFilter extension points (the DefaultEvictor, in
/// [`crate::plugins::default_evictor`], or a plugin a profile names under `plugins.filter` /
/// `plugins.preevictionfilter`). The cycle and the [`Handle`] consult the profile's evictor before
/// every eviction; the framework knows it only through this trait. Limits, the guard verdict,
/// dry-run and the eviction itself stay the framework's: an evictor only says yes or no.
///
/// An evictor must not panic on any pod of the snapshot; its verdicts are cached per cycle
/// (see [`EvictorPlugin::filter_reads_evictions`]).
pub trait EvictorPlugin: Send + Sync {
    /// The evictor's registered name (for explanations and errors).
    fn name(&self) -> &str;
    /// Filter: may `pod` be evicted at all (annotations, protections, selectors)?
    fn filter(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp) -> bool;
    /// PreEvictionFilter, with the `nodeFit` nodes computed once per cycle
    /// ([`EvictorPlugin::fit_candidates`]); called right before each eviction. Default: pass.
    fn pre_eviction_filter_with(
        &self,
        _snapshot: &Snapshot,
        _pod: PodId,
        _candidates: &[NodeId],
    ) -> bool {
        true
    }
    /// Whether a Filter verdict can change when other pods are evicted; otherwise verdicts hold
    /// for a whole cycle. Default: true (verdicts are recomputed after every plugin that evicted).
    fn filter_reads_evictions(&self) -> bool {
        true
    }
    /// The nodes `nodeFit` considers this cycle (empty when `nodeFit` is off). Default: none.
    fn fit_candidates(&self, _snapshot: &Snapshot) -> Vec<NodeId> {
        Vec::new()
    }
    /// `plan --explain`: every Filter rule `pod` fails, as sentences (empty: it passes). Default:
    /// one sentence naming the evictor when [`EvictorPlugin::filter`] rejects the pod.
    fn explain_filter(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp) -> Vec<String> {
        if self.filter(snapshot, pod, now) {
            Vec::new()
        } else {
            vec![format!("{} rejects the pod", self.name())]
        }
    }
    /// The DefaultEvictor's `placement` mode (Off unless the evictor says otherwise).
    fn placement(&self) -> crate::placement::PlacementMode {
        crate::placement::PlacementMode::Off
    }
    /// The concrete evictor, for callers that know its type (e.g. to read its args).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A plugin at the Deschedule extension point: evicts pods that violate a per-pod rule.
pub trait DeschedulePlugin: Send + Sync {
    /// The plugin's registered name (the `strategy` of its evictions and metrics).
    fn name(&self) -> &str;
    /// Examines the pods on `nodes` and evicts through `handle`.
    fn deschedule(&self, handle: &mut Handle<'_>, nodes: &[NodeId]);
    /// `plan --explain`: why this plugin would not select `pod` on the cluster as it is (e.g. "restarts
    /// 3 < podRestartThreshold 10"); `None` when the plugin gives no per-pod explanation. Called
    /// only when asked, never during a cycle.
    fn explain_pod(
        &self,
        _snapshot: &Snapshot,
        _pod: PodId,
        _nodes: &[NodeId],
        _now: Timestamp,
    ) -> Option<String> {
        None
    }
}

/// A plugin at the Balance extension point: moves pods to even out the cluster.
pub trait BalancePlugin: Send + Sync {
    /// The plugin's registered name (the `strategy` of its evictions and metrics).
    fn name(&self) -> &str;
    /// Examines `nodes` as a whole and evicts through `handle`.
    fn balance(&self, handle: &mut Handle<'_>, nodes: &[NodeId]);
    /// As [`DeschedulePlugin::explain_pod`].
    fn explain_pod(
        &self,
        _snapshot: &Snapshot,
        _pod: PodId,
        _nodes: &[NodeId],
        _now: Timestamp,
    ) -> Option<String> {
        None
    }
}
