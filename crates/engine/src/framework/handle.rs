//! The [`Handle`] a plugin works through: the snapshot, the clock, the DefaultEvictor's filters and
//! the eviction session (limits are enforced there, across all profiles of the cycle).

use jiff::Timestamp;

use super::EvictorPlugin;
use super::filter_cache::FilterCache;
use std::sync::Arc;

use crate::evictor::{
    EvictError, EvictOutcome, EvictionReason, EvictionRequest, EvictionSession, NodeUsageReport,
};
use crate::snapshot::{NodeId, PodId, Snapshot};

/// A read-only view of the DefaultEvictor's Filter that threads can share.
#[derive(Clone, Copy)]
pub struct FilterView<'a> {
    snapshot: &'a Snapshot,
    now: Timestamp,
    evictor: &'a dyn EvictorPlugin,
    cache: &'a FilterCache,
    fit_candidates: &'a [NodeId],
    moved: &'a rustc_hash::FxHashSet<PodId>,
}

impl<'a> FilterView<'a> {
    /// The cluster snapshot.
    pub fn snapshot(&self) -> &'a Snapshot {
        self.snapshot
    }

    /// The cycle's clock.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// As [`Handle::filter`].
    pub fn filter(&self, pod: PodId) -> bool {
        (pod as usize) < self.snapshot.pods.len()
            && !self.moved.contains(&pod)
            && self
                .cache
                .get_or_insert(pod, || self.evictor.filter(self.snapshot, pod, self.now))
    }

    /// As [`Handle::pre_eviction_filter`].
    pub fn pre_eviction_filter(&self, pod: PodId) -> bool {
        (pod as usize) < self.snapshot.pods.len()
            && self
                .evictor
                .pre_eviction_filter_with(self.snapshot, pod, self.fit_candidates)
    }

    /// As [`Handle::is_moved`].
    pub fn is_moved(&self, pod: PodId) -> bool {
        self.moved.contains(&pod)
            || ((pod as usize) < self.snapshot.pods.len() && self.snapshot.is_evicted(pod))
    }
}

/// What a plugin sees while it runs.
pub struct Handle<'a> {
    /// The cluster snapshot (pods evicted by earlier plugins in this cycle are already gone).
    pub snapshot: &'a Snapshot,
    /// The cycle's clock (`plan --now` fixes it).
    pub now: Timestamp,
    evictor: &'a dyn EvictorPlugin,
    filter_cache: &'a FilterCache,
    fit_candidates: &'a [NodeId],
    session: &'a mut EvictionSession,
    profile: &'a str,
    plugin: &'a str,
    /// The reason of evictions the plugin gives none for (its name), made once.
    plugin_reason: Option<Arc<EvictionReason>>,
}

impl<'a> Handle<'a> {
    /// A handle for `plugin` of `profile`. `filter_cache` remembers `evictor`'s Filter verdicts;
    /// `fit_candidates` are its `nodeFit` nodes for this cycle
    /// ([`EvictorPlugin::fit_candidates`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        snapshot: &'a Snapshot,
        now: Timestamp,
        evictor: &'a dyn EvictorPlugin,
        filter_cache: &'a FilterCache,
        fit_candidates: &'a [NodeId],
        session: &'a mut EvictionSession,
        profile: &'a str,
        plugin: &'a str,
    ) -> Self {
        Handle {
            snapshot,
            now,
            evictor,
            filter_cache,
            fit_candidates,
            session,
            profile,
            plugin,
            plugin_reason: None,
        }
    }

    /// The DefaultEvictor's Filter: is `pod` evictable at all (annotations, protections, selectors)?
    /// Pods already moved in this cycle do not pass.
    pub fn filter(&self, pod: PodId) -> bool {
        self.filter_view().filter(pod)
    }

    /// The Filter and the moved pods as they are now, for a plugin's analysis on several threads
    /// (see [`super::parallel`]); evictions go through the handle afterwards.
    pub fn filter_view(&self) -> FilterView<'_> {
        FilterView {
            snapshot: self.snapshot,
            now: self.now,
            evictor: self.evictor,
            cache: self.filter_cache,
            fit_candidates: self.fit_candidates,
            moved: self.session.moved_set(),
        }
    }

    /// The DefaultEvictor's PreEvictionFilter (nodeFit, namespace label selector).
    pub fn pre_eviction_filter(&self, pod: PodId) -> bool {
        self.filter_view().pre_eviction_filter(pod)
    }

    /// Ends this plugin's run for the cycle with `error` (logged, and counted in the cycle report
    /// and the `kube_descheduler_plugin_failures_total` metric); the plugin evicts nothing more.
    pub fn fail(&mut self, error: String) {
        tracing::error!(
            profile = self.profile,
            plugin = self.plugin,
            error = %error,
            "plugin run failed for this cycle; it evicts nothing more"
        );
        self.session.plugin_failed(crate::evictor::PluginFailure {
            profile: self.profile.to_string(),
            plugin: self.plugin.to_string(),
            error,
        });
    }

    /// The DefaultEvictor in force for this profile.
    pub fn evictor(&self) -> &dyn EvictorPlugin {
        self.evictor
    }

    /// Evicts `pod` with `reason` as its text (None: the plugin name, upstream's reason). Prefer
    /// [`Handle::evict_because`], which carries the numbers. Applies the PreEvictionFilter, then
    /// the limits (total → node → namespace), then the backend. `Ok` means the pod moved.
    pub fn evict(&mut self, pod: PodId, reason: Option<&str>) -> Result<EvictOutcome, EvictError> {
        let reason = self.reason_text(reason);
        self.evict_because(pod, reason)
    }

    /// Evicts `pod` because of `reason` (see [`Handle::evict`]).
    pub fn evict_because(
        &mut self,
        pod: PodId,
        reason: impl Into<Arc<EvictionReason>>,
    ) -> Result<EvictOutcome, EvictError> {
        self.check_pod(pod)?;
        if !self.pre_eviction_filter(pod) {
            return Err(EvictError::Filtered);
        }
        self.attempt(pod, reason.into())
    }

    /// [`Handle::evict`] for a pod that already passed [`FilterView::pre_eviction_filter`] in this
    /// plugin run (the PreEvictionFilter reads only the snapshot, which does not change while a
    /// plugin runs, so plugins apply it on several threads while finding candidates).
    pub fn evict_prefiltered(
        &mut self,
        pod: PodId,
        reason: Option<&str>,
    ) -> Result<EvictOutcome, EvictError> {
        let reason = self.reason_text(reason);
        self.evict_prefiltered_because(pod, reason)
    }

    /// [`Handle::evict_prefiltered`] because of `reason`.
    pub fn evict_prefiltered_because(
        &mut self,
        pod: PodId,
        reason: impl Into<Arc<EvictionReason>>,
    ) -> Result<EvictOutcome, EvictError> {
        self.check_pod(pod)?;
        debug_assert!(
            self.pre_eviction_filter(pod),
            "pod {pod} was not prefiltered"
        );
        self.attempt(pod, reason.into())
    }

    /// A pod a plugin may ask to evict: one of the snapshot's, not moved earlier in this cycle.
    /// Checked before the session is touched, so a plugin's wrong id is an error, not a panic.
    fn check_pod(&self, pod: PodId) -> Result<(), EvictError> {
        if pod as usize >= self.snapshot.pods.len() {
            return Err(EvictError::UnknownPod(pod));
        }
        if self.session.moved(pod) {
            return Err(EvictError::AlreadyEvicted);
        }
        Ok(())
    }

    /// A reason from a plain text (the plugin's name as its code), shared when it is the name.
    fn reason_text(&mut self, text: Option<&str>) -> Arc<EvictionReason> {
        match text {
            Some(t) if t != self.plugin => {
                Arc::new(EvictionReason::new(self.plugin.to_string(), t))
            }
            _ => self
                .plugin_reason
                .get_or_insert_with(|| Arc::new(EvictionReason::plugin(self.plugin.to_string())))
                .clone(),
        }
    }

    /// Limits, then the backend (the session refuses pods moved already).
    fn attempt(
        &mut self,
        pod: PodId,
        reason: Arc<EvictionReason>,
    ) -> Result<EvictOutcome, EvictError> {
        let req = EvictionRequest {
            profile: self.profile,
            plugin: self.plugin,
            reason: &reason,
        };
        self.session
            .evict_placed(self.snapshot, pod, &req, self.evictor.placement())
    }

    /// Records how this node-usage plugin classified the nodes (profile and plugin are filled in).
    pub fn report_node_usage(&mut self, mut report: NodeUsageReport) {
        report.profile = self.profile.to_string();
        report.plugin = self.plugin.to_string();
        self.session.report_node_usage(report);
    }

    /// Tells the placement simulator this plugin is emptying `nodes` this cycle (a replacement
    /// predicted onto one of them would be evicted again).
    pub fn mark_emptying(&mut self, nodes: impl IntoIterator<Item = NodeId>) {
        self.session.mark_emptying(nodes);
    }

    /// Whether `pod` was moved (evicted or deflected) earlier in this cycle.
    pub fn is_moved(&self, pod: PodId) -> bool {
        self.filter_view().is_moved(pod)
    }

    /// Whether the per-node limit is reached for `node`.
    pub fn node_limit_reached(&self, node: NodeId) -> bool {
        (node as usize) < self.snapshot.nodes.len()
            && self
                .session
                .limits()
                .node_limit_reached(self.snapshot, node)
    }

    /// Whether the per-cycle total limit is reached.
    pub fn total_limit_reached(&self) -> bool {
        self.session.limits().total_limit_reached()
    }

    /// How many more evictions the per-cycle total limit allows (`None`: no total limit).
    pub fn total_remaining(&self) -> Option<u32> {
        self.session.limits().total_remaining()
    }

    /// Evictions counted on `node` in this cycle (all profiles).
    pub fn node_evictions(&self, node: NodeId) -> u32 {
        self.session.limits().node_count(node)
    }

    /// The profile being run.
    pub fn profile(&self) -> &str {
        self.profile
    }
}
