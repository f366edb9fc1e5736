//! The planning backend: evicts nothing, optionally asks a verdict function (the eviction guard
//! evaluated against the snapshot) what would happen.

use super::{EvictOutcome, EvictionBackend, EvictionRequest};
use crate::snapshot::{PodId, Snapshot};

/// A function that predicts the outcome of evicting a pod (e.g. the guard's decision).
pub type VerdictFn = Box<dyn FnMut(&Snapshot, PodId) -> EvictOutcome + Send>;

/// Records evictions without calling any API.
#[derive(Default)]
pub struct PlanBackend {
    verdict: Option<VerdictFn>,
}

impl PlanBackend {
    /// Every eviction succeeds.
    pub fn new() -> Self {
        PlanBackend { verdict: None }
    }

    /// Each eviction's outcome comes from `verdict`.
    pub fn with_verdict(verdict: VerdictFn) -> Self {
        PlanBackend {
            verdict: Some(verdict),
        }
    }
}

impl EvictionBackend for PlanBackend {
    fn evict(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        _req: &EvictionRequest<'_>,
    ) -> EvictOutcome {
        match &mut self.verdict {
            Some(f) => f(snapshot, pod),
            None => EvictOutcome::Evicted,
        }
    }
}
