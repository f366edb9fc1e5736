//! The plugin framework: extension-point traits, the [`Handle`] plugins work through, argument
//! decoding, shared argument types, pod ordering, and the descheduling [`cycle`].

pub mod args;
pub mod cycle;
pub mod filter_cache;
pub mod handle;
pub mod parallel;
pub mod per_node;
pub mod podfilter;
pub mod registry;
pub mod sort;
pub mod testing;

pub use handle::Handle;
pub use registry::{Plugin, PluginFactory};

use jiff::Timestamp;

use crate::snapshot::{NodeId, PodId, Snapshot};

/// A plugin at the Deschedule extension point: evicts pods that violate a per-pod rule.
pub trait DeschedulePlugin: Send + Sync {
    /// The plugin's registered name.
    fn name(&self) -> &'static str;
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
    /// The plugin's registered name.
    fn name(&self) -> &'static str;
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
