//! The return detector of `run` (the proposal of kubernetes-sigs/descheduler issue 424): evictions are
//! remembered by owner and source node for a window; when the pod watch shows a new pod of the
//! same owner bound to the node the pod was evicted from, the return is counted
//! (`kube_descheduler_placement_returns_total`), logged, announced by an `EvictedPodReturned`
//! Event on the owner, and the owner's pods are not evicted from that node again until the
//! window has passed (a refusal with `result="placement backoff"`, not counted against limits).
//!
//! The owner is the pod's controller (its ReplicaSet, StatefulSet, Job, …); pods without one
//! are not recreated and are not remembered. A "new pod" is one whose UID is neither the
//! evicted pod's nor one of the owner's pods on that node when the eviction was made, and that
//! was created after the eviction (at most [`CREATION_SLACK`] before our note of it: the API's
//! timestamps have whole seconds). Off unless `--placement-return-window` is set: a policy
//! without our additions decides as upstream does.
//!
//! State lives in the process (a restart or a new leader starts empty). Memory is bounded:
//! entries expire with the window and at most [`MAX_OWNERS`] owners are kept (the oldest are
//! dropped first). A pod watch event costs one atomic load while nothing is remembered, and one
//! hash lookup by the owner's UID otherwise.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;

use crate::serving::metrics::{Metrics, PLACEMENT_BACKOFF, PlacementLabels};
use kube_descheduler_engine::evictor::{
    EvictOutcome, EvictionBackend, EvictionRequest, LimitError,
};
use kube_descheduler_engine::snapshot::{Pod, PodId, Snapshot};

/// A suggested `--placement-return-window` (the flag's default is `0`, off).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(30 * 60);
/// How much earlier than our note of the eviction a replacement's `creationTimestamp` may be:
/// the API's timestamps have whole seconds, and the ReplicaSet controller may create the
/// replacement before the eviction's answer reaches us.
pub const CREATION_SLACK: Duration = Duration::from_secs(2);
/// Owners remembered at most (evictions and backoffs together).
pub const MAX_OWNERS: usize = 20_000;
/// The reason of the Event published on the owner.
pub const EVENT_REASON: &str = "EvictedPodReturned";

/// The controller of an evicted pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `kind`, e.g. `ReplicaSet`.
    pub kind: String,
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: String,
    /// Namespace (the pod's).
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// A replacement seen back on the node its owner's pod was evicted from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Return {
    /// The owner.
    pub owner: Owner,
    /// The node.
    pub node: String,
    /// The evicted pod's name.
    pub evicted: String,
    /// The new pod's name.
    pub pod: String,
    /// Profile and plugin of the eviction.
    pub profile: String,
    /// Plugin (strategy) of the eviction.
    pub plugin: String,
    /// When the return was seen.
    pub at: Timestamp,
    /// Until when evictions of the owner's pods from the node are refused.
    pub until: Timestamp,
}

impl Return {
    /// The Event's note (and the log line's message).
    pub fn note(&self) -> String {
        format!(
            "pod {} evicted from {} by {} (profile {}) was replaced by {}, scheduled back onto {} at {}; not evicting {}'s pods from {} until {} (upstream #424)",
            self.evicted,
            self.node,
            self.plugin,
            self.profile,
            self.pod,
            self.node,
            self.at,
            self.owner,
            self.node,
            self.until
        )
    }
}

struct Eviction {
    node: String,
    at: Instant,
    at_wall: Timestamp,
    /// The evicted pods and the owner's other pods on the node at eviction time.
    known: Vec<String>,
    evicted: String,
    profile: String,
    plugin: String,
}

struct Backoff {
    node: String,
    until: Instant,
    until_wall: Timestamp,
    returned_at: Timestamp,
}

struct Entry {
    owner: Owner,
    evictions: Vec<Eviction>,
    backoffs: Vec<Backoff>,
    touched: Instant,
}

#[derive(Default)]
struct Inner {
    owners: HashMap<String, Entry>,
}

/// Remembers evictions, detects returns, and refuses evictions during a backoff.
pub struct ReturnDetector {
    window: Duration,
    cap: usize,
    /// Evictions remembered (not yet returned or expired): 0 makes watch events free.
    watching: AtomicUsize,
    inner: Mutex<Inner>,
    metrics: Option<Arc<Metrics>>,
    events: Option<tokio::sync::mpsc::Sender<Return>>,
}

/// The pod's controller owner reference, as an [`Owner`].
fn owner_of(pod: &Pod) -> Option<Owner> {
    let o = pod.owners.iter().find(|o| o.controller)?;
    Some(Owner {
        kind: o.kind.clone(),
        api_version: o.api_version.clone(),
        namespace: pod.namespace.to_string(),
        name: o.name.clone(),
        uid: o.uid.clone(),
    })
}

/// The key of an owner: its UID, or `kind/namespace/name` when it has none.
fn key_of(pod: &Pod) -> Option<std::borrow::Cow<'_, str>> {
    let o = pod.owners.iter().find(|o| o.controller)?;
    Some(if o.uid.is_empty() {
        format!("{}/{}/{}", o.kind, pod.namespace, o.name).into()
    } else {
        o.uid.as_str().into()
    })
}

fn node_of<'a>(snapshot: &'a Snapshot, pod: &'a Pod) -> Option<&'a str> {
    pod.node
        .map(|n| snapshot.node(n).name.as_str())
        .or(pod.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl crate::cluster::state::PodObserver for ReturnDetector {
    fn pod_seen(&self, pod: &Pod) {
        self.observe(pod);
    }
}

impl ReturnDetector {
    /// A detector remembering evictions for `window`; returns are counted in `metrics` and sent
    /// to `events` (dropped when its queue is full).
    pub fn new(
        window: Duration,
        metrics: Option<Arc<Metrics>>,
        events: Option<tokio::sync::mpsc::Sender<Return>>,
    ) -> Self {
        ReturnDetector {
            window,
            cap: MAX_OWNERS,
            watching: AtomicUsize::new(0),
            inner: Mutex::new(Inner::default()),
            metrics,
            events,
        }
    }

    /// The same detector keeping at most `cap` owners.
    pub fn with_cap(mut self, cap: usize) -> Self {
        self.cap = cap.max(1);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers the eviction of `pod` (accepted by the API) by `plugin` of `profile`.
    pub fn record(&self, snapshot: &Snapshot, pod: PodId, profile: &str, plugin: &str) {
        let p = snapshot.pod(pod);
        let (Some(owner), Some(key), Some(node)) = (owner_of(p), key_of(p), node_of(snapshot, p))
        else {
            return;
        };
        let known: Vec<String> = p
            .node
            .into_iter()
            .flat_map(|n| snapshot.pods_on_node(n))
            .map(|id| snapshot.pod(id))
            .filter(|other| key_of(other).as_deref() == Some(&*key))
            .map(|other| other.uid.clone())
            .chain(std::iter::once(p.uid.clone()))
            .collect();
        let now = Instant::now();
        let mut g = self.lock();
        if !g.owners.contains_key(&*key) && g.owners.len() >= self.cap {
            self.expire(&mut g, now);
            if g.owners.len() >= self.cap {
                drop_oldest(&mut g, self.cap / 10);
            }
            self.recount(&g);
        }
        let entry = g.owners.entry(key.into_owned()).or_insert_with(|| Entry {
            owner,
            evictions: Vec::new(),
            backoffs: Vec::new(),
            touched: now,
        });
        entry.touched = now;
        if let Some(e) = entry.evictions.iter_mut().find(|e| e.node == node) {
            // Another of the owner's pods left the same node: one return is enough.
            for uid in known {
                if !e.known.contains(&uid) {
                    e.known.push(uid);
                }
            }
            e.at = now;
            e.at_wall = Timestamp::now();
        } else {
            self.watching.fetch_add(1, Ordering::Relaxed);
            entry.evictions.push(Eviction {
                node: node.to_string(),
                at: now,
                at_wall: Timestamp::now(),
                known,
                evicted: p.name.clone(),
                profile: profile.to_string(),
                plugin: plugin.to_string(),
            });
        }
    }

    /// Sets the number of remembered evictions from the entries (after expiry or dropping).
    fn recount(&self, g: &Inner) {
        let n = g.owners.values().map(|e| e.evictions.len()).sum();
        self.watching.store(n, Ordering::Relaxed);
    }

    fn expire(&self, g: &mut Inner, now: Instant) {
        let window = self.window;
        g.owners.retain(|_, e| {
            e.evictions.retain(|v| now.duration_since(v.at) < window);
            e.backoffs.retain(|b| b.until > now);
            !e.evictions.is_empty() || !e.backoffs.is_empty()
        });
    }

    /// Forgets expired evictions and backoffs (called once a cycle).
    pub fn expire_now(&self) {
        let mut g = self.lock();
        self.expire(&mut g, Instant::now());
        self.recount(&g);
    }

    /// A pod seen by the watch (added or changed). When it is a new pod of a remembered owner
    /// bound to the node that owner's pod was evicted from, the return is recorded and returned.
    pub fn observe(&self, pod: &Pod) -> Option<Return> {
        if self.watching.load(Ordering::Relaxed) == 0 || pod.deletion_timestamp.is_some() {
            return None;
        }
        let node = pod.node_name.as_deref().filter(|n| !n.is_empty())?;
        let key = key_of(pod)?;
        let mut g = self.lock();
        let entry = g.owners.get_mut(&*key)?;
        let now = Instant::now();
        let i = entry.evictions.iter().position(|e| {
            e.node == node
                && now.duration_since(e.at) < self.window
                && !e.known.contains(&pod.uid)
                // Only a pod created after the eviction is its replacement; a pod created before
                // it that our watch had not shown yet (an outage, a slow watch) is a sibling.
                // `creationTimestamp` has whole seconds and the replacement may be created
                // before we note the eviction's time, hence CREATION_SLACK; a pod without one
                // is never taken for a return (when unsure, no backoff).
                && pod.creation_timestamp.is_some_and(|c| {
                    e.at_wall
                        .checked_sub(CREATION_SLACK)
                        .is_ok_and(|t| c >= t)
                })
        })?;
        let e = entry.evictions.swap_remove(i);
        self.watching.fetch_sub(1, Ordering::Relaxed);
        let at = Timestamp::now();
        let until_wall = at.checked_add(self.window).unwrap_or(Timestamp::MAX);
        entry.backoffs.retain(|b| b.node != node);
        entry.backoffs.push(Backoff {
            node: node.to_string(),
            until: now.checked_add(self.window).unwrap_or(now),
            until_wall,
            returned_at: at,
        });
        entry.touched = now;
        let ret = Return {
            owner: entry.owner.clone(),
            node: e.node,
            evicted: e.evicted,
            pod: pod.name.clone(),
            profile: e.profile,
            plugin: e.plugin,
            at,
            until: until_wall,
        };
        drop(g);
        tracing::warn!(owner = %ret.owner, node = %ret.node, pod = %ret.pod, evicted = %ret.evicted, strategy = %ret.plugin, profile = %ret.profile, until = %ret.until, "evicted pod's replacement was scheduled back onto the same node; backing off");
        if let Some(m) = &self.metrics {
            m.placement_returns
                .get_or_create(&PlacementLabels {
                    profile: ret.profile.clone(),
                    strategy: ret.plugin.clone(),
                    namespace: ret.owner.namespace.clone(),
                })
                .inc();
        }
        if let Some(tx) = &self.events
            && tx.try_send(ret.clone()).is_err()
        {
            tracing::debug!(owner = %ret.owner, "too many return Events queued; this one is not published");
        }
        Some(ret)
    }

    /// Why `pod` must not be evicted now (its owner is backing off from its node), as the
    /// refusal's reason text (starting with `placement backoff`), or `None`.
    pub fn refusal(&self, snapshot: &Snapshot, pod: PodId) -> Option<String> {
        let p = snapshot.pod(pod);
        let node = node_of(snapshot, p)?;
        let key = key_of(p)?;
        let g = self.lock();
        let entry = g.owners.get(&*key)?;
        let now = Instant::now();
        let b = entry
            .backoffs
            .iter()
            .find(|b| b.node == node && b.until > now)?;
        Some(format!(
            "{PLACEMENT_BACKOFF}: {}: its last replacement evicted from {node} was scheduled back onto {node} at {}; not evicting from {node} until {} (upstream #424)",
            entry.owner, b.returned_at, b.until_wall
        ))
    }

    /// Owners remembered (for tests and bounds).
    pub fn owners(&self) -> usize {
        self.lock().owners.len()
    }
}

/// The live backend behind the backoff: an eviction of an owner's pod from a node the owner is
/// backing off from is refused (`Denied` with the [`ReturnDetector::refusal`] text, so limits do
/// not count it) without calling the API; others go to `inner`.
pub struct BackoffBackend {
    inner: Box<dyn EvictionBackend + Send>,
    returns: Arc<ReturnDetector>,
}

impl BackoffBackend {
    /// `inner` behind the backoff of `returns`.
    pub fn new(inner: Box<dyn EvictionBackend + Send>, returns: Arc<ReturnDetector>) -> Self {
        BackoffBackend { inner, returns }
    }
}

impl EvictionBackend for BackoffBackend {
    fn evict(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
    ) -> EvictOutcome {
        if let Some(reason) = self.returns.refusal(snapshot, pod) {
            let p = snapshot.pod(pod);
            tracing::info!(pod = %format!("{}/{}", p.namespace, p.name), strategy = req.plugin, profile = req.profile, node = node_of(snapshot, p).unwrap_or_default(), reason = %reason, "Eviction refused (placement backoff)");
            return EvictOutcome::BackedOff { reason };
        }
        self.inner.evict(snapshot, pod, req)
    }

    fn limit_refused(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        limit: &LimitError,
    ) {
        self.inner.limit_refused(snapshot, pod, req, limit);
    }

    fn placement_refused(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        refusal: &kube_descheduler_engine::placement::Refusal,
    ) {
        self.inner.placement_refused(snapshot, pod, req, refusal);
    }
}

/// Drops the `n` least recently touched owners.
fn drop_oldest(g: &mut Inner, n: usize) {
    let mut by_age: Vec<(Instant, String)> = g
        .owners
        .iter()
        .map(|(k, e)| (e.touched, k.clone()))
        .collect();
    by_age.sort();
    for (_, k) in by_age.into_iter().take(n.max(1)) {
        g.owners.remove(&k);
    }
}

#[cfg(test)]
#[path = "returns_tests.rs"]
mod tests;
