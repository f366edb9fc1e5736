//! Pods whose eviction the API accepted, remembered across cycles until the pod watch shows them
//! terminating or gone. A cycle that starts right after another (slow evictions, a trigger) can
//! build its snapshot from a cache a few milliseconds behind the API server and would evict the
//! same pod twice; remembered pods are treated as already evicted instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::returns::ReturnDetector;
use kube_descheduler_engine::snapshot::{PodId, Snapshot};

/// How long a remembered eviction is trusted when the cache never catches up (a broken watch).
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

/// Accepted evictions by pod UID, with when they were accepted.
pub struct RecentEvictions {
    accepted: Mutex<HashMap<String, Instant>>,
    ttl: Duration,
    /// The return detector told of every accepted eviction (None: off).
    returns: Option<Arc<ReturnDetector>>,
}

impl std::fmt::Debug for RecentEvictions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentEvictions")
            .field("accepted", &self.len())
            .field("ttl", &self.ttl)
            .field("returns", &self.returns.is_some())
            .finish()
    }
}

impl Default for RecentEvictions {
    fn default() -> Self {
        Self::new(DEFAULT_TTL)
    }
}

impl RecentEvictions {
    /// Entries are forgotten after `ttl` at the latest.
    pub fn new(ttl: Duration) -> Self {
        RecentEvictions {
            accepted: Mutex::new(HashMap::new()),
            ttl,
            returns: None,
        }
    }

    /// The same, also remembering each eviction in `returns` ([`Self::remember_eviction`]).
    pub fn with_returns(mut self, returns: Arc<ReturnDetector>) -> Self {
        self.returns = Some(returns);
        self
    }

    /// The return detector, when on.
    pub fn returns(&self) -> Option<&Arc<ReturnDetector>> {
        self.returns.as_ref()
    }

    /// Remembers the accepted eviction of `pod` by `plugin` of `profile` here and in the
    /// return detector.
    pub fn remember_eviction(&self, snapshot: &Snapshot, pod: PodId, profile: &str, plugin: &str) {
        self.remember(&snapshot.pod(pod).uid);
        if let Some(r) = &self.returns {
            r.record(snapshot, pod, profile, plugin);
        }
    }

    /// Remembers that the eviction of the pod with `uid` was accepted.
    pub fn remember(&self, uid: &str) {
        if uid.is_empty() {
            return;
        }
        self.lock().insert(uid.to_string(), Instant::now());
    }

    /// Marks remembered pods the snapshot still shows running as evicted, and forgets pods it
    /// shows terminating or no longer has, and expired entries. Returns the pods marked.
    pub fn apply(&self, snapshot: &mut Snapshot) -> Vec<PodId> {
        let mut accepted = self.lock();
        if accepted.is_empty() {
            return Vec::new();
        }
        let now = Instant::now();
        accepted.retain(|_, at| now.duration_since(*at) < self.ttl);
        let mut seen = HashMap::with_capacity(accepted.len());
        let mut marked = Vec::new();
        for id in 0..snapshot.pods.len() as PodId {
            let pod = snapshot.pod(id);
            if let Some(at) = accepted.get(&pod.uid)
                && pod.deletion_timestamp.is_none()
            {
                marked.push(id);
                seen.insert(pod.uid.clone(), *at);
            }
        }
        // Terminating or gone pods are the cache having caught up: nothing left to guard.
        *accepted = seen;
        drop(accepted);
        for &id in &marked {
            snapshot.mark_evicted(id);
        }
        marked
    }

    /// Number of remembered evictions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.accepted.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_descheduler_engine::testing::{node, pod, snapshot};

    fn snap(terminating_b: bool) -> Snapshot {
        let mut b = pod("ns", "b", "n1");
        if terminating_b {
            b = b.with(|p| {
                p.metadata.deletion_timestamp = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
                )
            });
        }
        snapshot(
            vec![node("n1").build(), node("n2").build()],
            vec![pod("ns", "a", "n1").build(), b.build()],
        )
    }

    fn id(s: &Snapshot, name: &str) -> PodId {
        s.pods
            .iter()
            .position(|p| p.name == name)
            .unwrap_or(usize::MAX) as PodId
    }

    fn uid(s: &Snapshot, name: &str) -> String {
        s.pods
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.uid.clone())
            .unwrap_or_default()
    }

    #[test]
    fn a_pod_the_cache_still_shows_running_stays_evicted_until_it_terminates() {
        let r = RecentEvictions::default();
        let mut s = snap(false);
        let (a, b) = (id(&s, "a"), id(&s, "b"));
        r.remember(&uid(&s, "b"));
        assert_eq!(r.apply(&mut s), vec![b]);
        assert!(s.is_evicted(b) && !s.is_evicted(a));
        // Still remembered while the cache lags.
        let mut s = snap(false);
        assert_eq!(r.apply(&mut s), vec![b]);
        // The cache caught up (terminating): forgotten, nothing marked.
        let mut s = snap(true);
        assert!(r.apply(&mut s).is_empty());
        assert!(r.is_empty());
    }

    #[test]
    fn gone_pods_and_expired_entries_are_forgotten() {
        let r = RecentEvictions::default();
        r.remember("no-such-uid");
        let mut s = snap(false);
        assert!(r.apply(&mut s).is_empty());
        assert!(r.is_empty());
        let r = RecentEvictions::new(Duration::ZERO);
        let mut s = snap(false);
        r.remember(&uid(&s, "a"));
        assert!(r.apply(&mut s).is_empty());
        assert!(!s.is_evicted(id(&s, "a")));
        // An empty uid is never remembered.
        let r = RecentEvictions::default();
        r.remember("");
        assert!(r.is_empty());
    }
}
