//! Evictions in background (feature gate `EvictionsInBackground`, as upstream v0.36): a pod
//! annotated `descheduler.alpha.kubernetes.io/request-evict-only` whose eviction the cluster
//! answers with 429 "Eviction triggered evacuation" is being evacuated by another controller
//! (e.g. KubeVirt live migration). The eviction is assumed in progress — not an error, counted
//! `pods_evicted{result="background"}` — and the pod is not evicted again until it is gone, loses
//! the annotation, completes, or the assumption is older than [`ASSUMED_TIMEOUT`]. An assumed
//! eviction then ends counted as upstream after v0.36.0: pod gone or Succeeded → `success`, pod
//! Failed or timed out → `error`. Pods an evacuating controller marks
//! `descheduler.alpha.kubernetes.io/eviction-in-progress` are tracked the same way (not counted),
//! until that annotation is removed.
//!
//! The tracker is brought up to date from each cycle's snapshot, before the plugins run; the
//! pods it tracks are marked evicted in that snapshot so no plugin picks them, and count against
//! the eviction limits.
//!
//! The same tracker holds the pods with an outstanding EvictionRequest of ours
//! (`--eviction-api EvictionRequest`, [`super::evreq`]): they count against the limits until the
//! pod is gone or the request is withdrawn, but are not marked evicted, so the plugins may choose
//! them again; one no plugin chooses again is withdrawn. Their end is counted as an assumed
//! eviction's: pod gone or Succeeded → `success`, Failed → `error`; there is no timeout.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube_descheduler_engine::snapshot::model::PodPhase;
use kube_descheduler_engine::snapshot::{Pod, PodId, Snapshot};

use super::features::{EVICTION_IN_PROGRESS_ANNOTATION, EVICTION_REQUEST_ANNOTATION};
use crate::serving::metrics::{EvictedLabels, Metrics};

/// Upstream's `assumedEvictionRequestTimeoutSeconds` (10 minutes): an eviction in background
/// assumed longer ago than this is forgotten (the pod may be evicted again).
pub const ASSUMED_TIMEOUT: Duration = Duration::from_secs(10 * 60);

#[derive(Debug, Clone)]
struct Item {
    namespace: String,
    name: String,
    node: String,
    profile: String,
    strategy: String,
    since: Instant,
    /// Assumed from our eviction's 429 (its end is counted), not only observed.
    assumed: bool,
    /// Seen with the in-progress annotation (its removal cancels the tracking).
    in_progress_seen: bool,
    /// The name of our outstanding EvictionRequest for the pod (None: an eviction in background).
    request: Option<String>,
}

/// Evictions in background, by pod UID.
#[derive(Debug)]
pub struct BackgroundEvictions {
    items: Mutex<HashMap<String, Item>>,
    timeout: Duration,
}

impl Default for BackgroundEvictions {
    fn default() -> Self {
        Self::new(ASSUMED_TIMEOUT)
    }
}

/// The pod an eviction in background was assumed for.
#[derive(Debug, Clone, Copy)]
pub struct Assumed<'a> {
    /// UID.
    pub uid: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// Node.
    pub node: &'a str,
    /// Profile that asked.
    pub profile: &'a str,
    /// Plugin that asked.
    pub strategy: &'a str,
}

/// Whether a pod asks for evictions in background.
pub fn requests_background(snapshot: &Snapshot, pod: PodId) -> bool {
    snapshot
        .pod(pod)
        .annotations
        .contains_key(EVICTION_REQUEST_ANNOTATION)
}

/// Whether a pod has completed (an eviction of it is ignored, as upstream).
pub fn completed(snapshot: &Snapshot, pod: PodId) -> bool {
    snapshot.pod(pod).is_terminal()
}

impl BackgroundEvictions {
    /// A tracker forgetting assumed evictions after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        BackgroundEvictions {
            items: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Item>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the eviction of `pod` as in progress in background.
    pub fn assume(&self, pod: Assumed<'_>) {
        self.insert(pod, true, None);
    }

    /// Records our outstanding EvictionRequest `name` for `pod`; `counted`: its end is counted
    /// in the metrics (false for a request found at start).
    pub fn requested(&self, pod: Assumed<'_>, name: &str, counted: bool) {
        self.insert(pod, counted, Some(name.to_string()));
    }

    fn insert(&self, pod: Assumed<'_>, counted: bool, request: Option<String>) {
        self.lock().insert(
            pod.uid.to_string(),
            Item {
                namespace: pod.namespace.to_string(),
                name: pod.name.to_string(),
                node: pod.node.to_string(),
                profile: pod.profile.to_string(),
                strategy: pod.strategy.to_string(),
                since: Instant::now(),
                assumed: counted,
                in_progress_seen: false,
                request,
            },
        );
    }

    /// Makes the tracked requests those of `outstanding` (our requests with intent `Eviction` as
    /// the API server has them): one deleted or withdrawn by someone else is no longer tracked (a
    /// plugin choosing the pod again asks anew), one the tracker did not know is tracked
    /// (uncounted).
    pub fn sync_requests(&self, outstanding: &[Outstanding]) {
        let known: std::collections::HashSet<&str> =
            outstanding.iter().map(|o| o.uid.as_str()).collect();
        self.lock()
            .retain(|uid, item| item.request.is_none() || known.contains(uid.as_str()));
        for o in outstanding {
            if self.request_of(&o.uid).as_deref() != Some(o.name.as_str()) {
                self.insert(o.as_assumed(), false, Some(o.name.clone()));
            }
        }
    }

    /// The name of our outstanding EvictionRequest for the pod with `uid`.
    pub fn request_of(&self, uid: &str) -> Option<String> {
        self.lock().get(uid).and_then(|i| i.request.clone())
    }

    /// Stops tracking the pod with `uid` (its request was withdrawn).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Evictions in background in progress.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is in progress.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Brings the tracker up to date with `snapshot` and marks the pods still in progress evicted
    /// in it. Assumed evictions that ended are counted in `metrics` (see the module doc). Returns
    /// the pods marked.
    pub fn apply(&self, snapshot: &mut Snapshot, metrics: Option<&Metrics>) -> Vec<PodId> {
        self.apply_all(snapshot, metrics).marked
    }

    /// [`Self::apply`], also returning the pods with an outstanding request (not marked).
    pub fn apply_all(&self, snapshot: &mut Snapshot, metrics: Option<&Metrics>) -> InFlight {
        let mut items = self.lock();
        let now = Instant::now();
        let mut keep = HashMap::new();
        let mut in_flight = InFlight::default();
        for id in 0..snapshot.pods.len() as PodId {
            let pod = snapshot.pod(id);
            let item = items.remove(&pod.uid);
            let Some(item) = self.next_state(item, pod, now, metrics) else {
                continue;
            };
            match item.request {
                Some(_) => in_flight.requested.push(id),
                None => in_flight.marked.push(id),
            }
            keep.insert(pod.uid.clone(), item);
        }
        for (_, gone) in items.drain() {
            tracing::info!(pod = %format!("{}/{}", gone.namespace, gone.name), request = gone.request.as_deref(), "pod with an eviction in progress is gone");
            count_end(metrics, &gone, "success");
        }
        *items = keep;
        drop(items);
        for &id in &in_flight.marked {
            snapshot.mark_evicted(id);
        }
        in_flight
    }

    /// What becomes of a pod's tracking (`item`, if tracked) given the pod as it is now: `None`
    /// when it is not (or no longer) tracked.
    fn next_state(
        &self,
        item: Option<Item>,
        pod: &Pod,
        now: Instant,
        metrics: Option<&Metrics>,
    ) -> Option<Item> {
        let requested = pod.annotations.contains_key(EVICTION_REQUEST_ANNOTATION);
        let in_progress = pod
            .annotations
            .contains_key(EVICTION_IN_PROGRESS_ANNOTATION);
        let key = || format!("{}/{}", pod.namespace, pod.name);
        if let Some(requested) = item.as_ref().filter(|i| i.request.is_some()) {
            if !pod.is_terminal() {
                return item;
            }
            tracing::debug!(pod = %key(), "pod with an eviction request completed; no longer tracked");
            count_end(metrics, requested, terminal_result(pod));
            return None;
        }
        let Some(mut item) = item else {
            // Not tracked: picked up when an evacuating controller marks it in progress.
            if requested && in_progress && !pod.is_terminal() {
                tracing::debug!(pod = %key(), "eviction in background detected");
                return Some(Item {
                    namespace: pod.namespace.to_string(),
                    name: pod.name.clone(),
                    node: String::new(),
                    profile: String::new(),
                    strategy: String::new(),
                    since: now,
                    assumed: false,
                    in_progress_seen: true,
                    request: None,
                });
            }
            return None;
        };
        if !requested {
            tracing::debug!(pod = %key(), "pod with eviction in background lost its annotation; no longer tracked");
            return None;
        }
        if pod.is_terminal() {
            tracing::debug!(pod = %key(), "pod with eviction in background completed; no longer tracked");
            count_end(metrics, &item, terminal_result(pod));
            return None;
        }
        if item.assumed && now.duration_since(item.since) > self.timeout {
            tracing::info!(pod = %key(), timeout_seconds = self.timeout.as_secs(), "assumed eviction in background timed out; no longer tracked");
            count_end(metrics, &item, "error");
            // Still marked in progress by its controller: tracked again, as observed.
            return self.next_state(None, pod, now, None);
        }
        if item.in_progress_seen && !in_progress {
            tracing::debug!(pod = %key(), "eviction in background canceled (annotation removed); no longer tracked");
            return None;
        }
        item.in_progress_seen |= in_progress;
        Some(item)
    }
}

/// The `result` counted for a tracked pod that completed.
fn terminal_result(pod: &Pod) -> &'static str {
    if pod.phase == PodPhase::Failed {
        "error"
    } else {
        "success"
    }
}

/// Pods with an eviction in progress, as of one snapshot.
#[derive(Debug, Default)]
pub struct InFlight {
    /// Evictions in background: marked evicted in the snapshot.
    pub marked: Vec<PodId>,
    /// Pods with an outstanding EvictionRequest of ours: left to the plugins.
    pub requested: Vec<PodId>,
}

/// Counts the end of an assumed eviction in background (`result`), as upstream after v0.36.0.
fn count_end(metrics: Option<&Metrics>, item: &Item, result: &str) {
    if !item.assumed {
        return;
    }
    let Some(m) = metrics else {
        return;
    };
    m.pods_evicted
        .get_or_create(&EvictedLabels {
            result: result.into(),
            strategy: item.strategy.clone(),
            profile: item.profile.clone(),
            namespace: item.namespace.clone(),
            node: item.node.clone(),
        })
        .inc();
}

/// An outstanding request of ours found at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outstanding {
    /// The pod's UID.
    pub uid: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The request's name.
    pub name: String,
}

impl Outstanding {
    /// The tracker's record of it (node, profile and strategy unknown).
    pub fn as_assumed(&self) -> Assumed<'_> {
        Assumed {
            uid: &self.uid,
            namespace: &self.namespace,
            name: &self.pod,
            node: "",
            profile: "",
            strategy: "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::metrics::tests::count;
    use kube_descheduler_engine::testing::{node, pod, snapshot};

    fn requested(t: &BackgroundEvictions) {
        let pod = Assumed {
            uid: "uid-ns-web",
            namespace: "ns",
            name: "web",
            node: "n1",
            profile: "p",
            strategy: "s",
        };
        t.requested(pod, "kube-descheduler-uid-ns-web", true);
    }

    #[test]
    fn a_requested_pod_is_in_flight_but_not_marked_until_it_is_gone() {
        let (t, m) = (BackgroundEvictions::default(), Metrics::new());
        requested(&t);
        let mut s = snapshot(
            vec![node("n1").build()],
            vec![pod("ns", "web", "n1").build()],
        );
        let in_flight = t.apply_all(&mut s, Some(&m));
        assert_eq!((in_flight.marked, in_flight.requested), (vec![], vec![0]));
        assert!(!s.is_evicted(0), "left to the plugins");
        assert_eq!(
            t.request_of("uid-ns-web").as_deref(),
            Some("kube-descheduler-uid-ns-web")
        );
        let mut gone = snapshot(vec![node("n1").build()], vec![]);
        assert!(t.apply_all(&mut gone, Some(&m)).requested.is_empty());
        assert!(t.is_empty());
        assert_eq!(count(&m, "success"), 1, "the request's end is counted once");
    }

    #[test]
    fn syncing_drops_requests_the_server_lost_and_adds_those_it_has() {
        let t = BackgroundEvictions::default();
        requested(&t);
        let other = super::Outstanding {
            uid: "uid-ns-api".into(),
            namespace: "ns".into(),
            pod: "api".into(),
            name: "kube-descheduler-uid-ns-api".into(),
        };
        t.sync_requests(std::slice::from_ref(&other));
        assert_eq!(
            t.request_of("uid-ns-web"),
            None,
            "deleted or withdrawn elsewhere"
        );
        assert_eq!(t.request_of("uid-ns-api"), Some(other.name.clone()));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_withdrawn_request_is_forgotten_uncounted() {
        let (t, m) = (BackgroundEvictions::default(), Metrics::new());
        requested(&t);
        t.forget("uid-ns-web");
        let mut gone = snapshot(vec![node("n1").build()], vec![]);
        t.apply_all(&mut gone, Some(&m));
        assert_eq!(count(&m, "success") + count(&m, "error"), 0);
    }
}
