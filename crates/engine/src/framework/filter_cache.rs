//! The DefaultEvictor's Filter verdicts, remembered per profile for a whole cycle: every plugin
//! filters the pods it looks at, so without it a 150,000-pod cycle re-evaluates the same rules
//! several times per pod.

use std::sync::atomic::{AtomicU8, Ordering};

use super::EvictorPlugin;
use crate::snapshot::PodId;

const UNKNOWN: u8 = 0;
const PASS: u8 = 1;
const FAIL: u8 = 2;

/// Filter verdicts of one profile's DefaultEvictor, by pod. Shareable between threads: a verdict
/// is a pure function of the pod, so two threads storing one at once store the same value.
pub struct FilterCache {
    verdicts: Vec<AtomicU8>,
    /// The verdicts stay true while pods are evicted (no rule reads the evicted set).
    stable: bool,
}

impl FilterCache {
    /// An empty cache for `pods` pods filtered by `evictor`.
    pub fn new(evictor: &dyn EvictorPlugin, pods: usize) -> Self {
        FilterCache {
            verdicts: (0..pods).map(|_| AtomicU8::new(UNKNOWN)).collect(),
            stable: !evictor.filter_reads_evictions(),
        }
    }

    /// The verdict for `pod`, computing it with `filter` the first time.
    pub fn get_or_insert(&self, pod: PodId, filter: impl FnOnce() -> bool) -> bool {
        let Some(slot) = self.verdicts.get(pod as usize) else {
            return filter();
        };
        match slot.load(Ordering::Relaxed) {
            PASS => true,
            FAIL => false,
            _ => {
                let pass = filter();
                slot.store(if pass { PASS } else { FAIL }, Ordering::Relaxed);
                pass
            }
        }
    }

    /// Called after pods were evicted: forgets the verdicts unless they cannot change.
    pub fn pods_evicted(&mut self) {
        if !self.stable {
            self.verdicts
                .iter_mut()
                .for_each(|v| *v.get_mut() = UNKNOWN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::default_evictor::DefaultEvictor;
    use std::cell::Cell;

    fn evictor(args: serde_json::Value) -> DefaultEvictor {
        DefaultEvictor::from_args(&args).expect("valid args")
    }

    #[test]
    fn computes_each_verdict_once_and_forgets_only_when_rules_read_evictions() {
        let mut cache = FilterCache::new(&evictor(serde_json::json!({})), 2);
        let calls = Cell::new(0);
        let f = |v: bool| {
            calls.set(calls.get() + 1);
            v
        };
        assert!(cache.get_or_insert(0, || f(true)));
        assert!(!cache.get_or_insert(1, || f(false)));
        assert!(cache.get_or_insert(0, || f(false)), "remembered");
        assert!(!cache.get_or_insert(1, || f(true)), "remembered");
        assert_eq!(calls.get(), 2);
        cache.pods_evicted();
        assert!(
            cache.get_or_insert(0, || f(false)),
            "stable verdicts survive evictions"
        );
        assert_eq!(calls.get(), 2);
        // Out of range (a pod id the cache was not sized for): computed every time.
        assert!(cache.get_or_insert(7, || f(true)));
        assert_eq!(calls.get(), 3);

        // minReplicas counts the owner's live pods: evictions change verdicts.
        let mut cache = FilterCache::new(&evictor(serde_json::json!({"minReplicas": 3})), 1);
        assert!(cache.get_or_insert(0, || f(true)));
        cache.pods_evicted();
        assert!(!cache.get_or_insert(0, || f(false)), "recomputed");
        assert_eq!(calls.get(), 5);
    }
}
