//! The framework's composition of evictor plugins: a profile's evictor when its policy enables
//! several evictor plugins, or different ones at the Filter and PreEvictionFilter extension points
//! (upstream v1alpha2's `plugins.filter` and `plugins.preevictionfilter`): a pod passes an
//! extension point when every plugin enabled there lets it pass, as upstream's framework runs
//! them. The policy builds it.

use std::sync::Arc;

use jiff::Timestamp;

use crate::framework::EvictorPlugin;
use crate::snapshot::{NodeId, PodId, Snapshot};

/// Several evictor plugins acting as one.
pub struct CompositeEvictor {
    name: String,
    /// Every distinct evictor, built once.
    members: Vec<Arc<dyn EvictorPlugin>>,
    /// Indexes into `members` of the Filter plugins, in policy order.
    filter: Vec<usize>,
    /// Indexes into `members` of the PreEvictionFilter plugins, in policy order.
    pre_eviction: Vec<usize>,
    /// Index into `members` of the one [`EvictorPlugin::as_any`] exposes.
    primary: Option<usize>,
}

impl CompositeEvictor {
    /// `members` are the distinct evictors; `filter` / `pre_eviction` index them, and `primary`
    /// names the member whose args callers may read through [`EvictorPlugin::as_any`] (the
    /// DefaultEvictor, when there is one).
    pub fn new(
        members: Vec<Arc<dyn EvictorPlugin>>,
        filter: Vec<usize>,
        pre_eviction: Vec<usize>,
        primary: Option<usize>,
    ) -> Self {
        let name = members
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join("+");
        let n = members.len();
        CompositeEvictor {
            name,
            members,
            filter: filter.into_iter().filter(|&i| i < n).collect(),
            pre_eviction: pre_eviction.into_iter().filter(|&i| i < n).collect(),
            primary: primary.filter(|&i| i < n),
        }
    }

    fn filters(&self) -> impl Iterator<Item = &dyn EvictorPlugin> {
        self.filter.iter().map(|&i| self.members[i].as_ref())
    }

    fn pre_eviction_filters(&self) -> impl Iterator<Item = &dyn EvictorPlugin> {
        self.pre_eviction.iter().map(|&i| self.members[i].as_ref())
    }

    /// The member whose nodeFit candidates the PreEvictionFilter plugins share (the first one
    /// that computes any, normally the DefaultEvictor).
    fn fit_member(&self, snapshot: &Snapshot) -> Vec<NodeId> {
        self.pre_eviction_filters()
            .map(|m| m.fit_candidates(snapshot))
            .find(|c| !c.is_empty())
            .unwrap_or_default()
    }
}

impl EvictorPlugin for CompositeEvictor {
    fn name(&self) -> &str {
        &self.name
    }

    fn filter(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp) -> bool {
        self.filters().all(|m| m.filter(snapshot, pod, now))
    }

    fn pre_eviction_filter_with(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        candidates: &[NodeId],
    ) -> bool {
        self.pre_eviction_filters()
            .all(|m| m.pre_eviction_filter_with(snapshot, pod, candidates))
    }

    fn filter_reads_evictions(&self) -> bool {
        self.filters().any(|m| m.filter_reads_evictions())
    }

    /// The candidates of the first PreEvictionFilter plugin that has any: one list serves every
    /// plugin of the profile (only the DefaultEvictor's `nodeFit` computes one among the built-ins).
    fn fit_candidates(&self, snapshot: &Snapshot) -> Vec<NodeId> {
        self.fit_member(snapshot)
    }

    /// The first non-Off mode among the PreEvictionFilter plugins (the DefaultEvictor's
    /// `placement`), else the Filter plugins'.
    fn placement(&self) -> crate::placement::PlacementMode {
        self.pre_eviction_filters()
            .chain(self.filters())
            .map(|m| m.placement())
            .find(|p| *p != crate::placement::PlacementMode::Off)
            .unwrap_or(crate::placement::PlacementMode::Off)
    }

    fn explain_filter(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp) -> Vec<String> {
        self.filters()
            .flat_map(|m| m.explain_filter(snapshot, pod, now))
            .collect()
    }

    /// The primary member, so that callers reading its args (`plan --explain`'s nodeFit
    /// detail) find it; otherwise the composite itself.
    fn as_any(&self) -> &dyn std::any::Any {
        match self.primary {
            Some(i) => self.members[i].as_any(),
            None => self,
        }
    }
}
