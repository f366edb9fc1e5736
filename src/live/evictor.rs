//! The live eviction backend: POSTs `policy/v1` Evictions (v1beta1 only when v1 is absent) with a
//! UID precondition, classifies the answer, publishes Events, and honours the client rate limit.
//!
//! The engine calls it synchronously from a blocking thread; each call blocks on the runtime.
//! An eviction is never retried within a cycle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::Client;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use super::events::{EventSink, PodRef};
use super::ratelimit::RateLimiter;
use kube_descheduler_engine::evictor::{
    EvictOutcome, EvictionBackend, EvictionRequest, LimitError,
};
use kube_descheduler_engine::snapshot::{PodId, Snapshot};

/// Text in the eviction guard's (and KubeVirt-style) 429 that means "evacuation started".
pub const DEFLECTION_TEXT: &str = "Eviction triggered evacuation";
/// `EvictionRefusedByPlacement` Events published per cycle at most (a policy fighting the
/// scheduler in a big cluster refuses thousands of evictions every cycle; the log and the metric
/// count them all).
pub const PLACEMENT_EVENTS_PER_CYCLE: usize = 100;
/// How long one eviction call may take before it counts as an error: kube-apiserver's default
/// `--request-timeout` (60 s), after which the server itself would have answered 504. Without it a
/// hung connection would hold the cycle for the client's 295 s read timeout.
pub const DEFAULT_EVICTION_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether `outcome` is an eviction that was not attempted (cycle stopped): not accounted.
pub fn not_attempted(outcome: &EvictOutcome) -> bool {
    matches!(outcome, EvictOutcome::NotAttempted { .. })
}

/// Settings shared by every cycle's backend.
#[derive(Clone)]
pub struct ApiEvictorConfig {
    /// API client.
    pub client: Client,
    /// Rate limit for evictions and Events.
    pub limiter: Arc<RateLimiter>,
    /// Policy `gracePeriodSeconds` (sent only when the pod sets no `terminationGracePeriodSeconds`,
    /// as upstream).
    pub grace_period_seconds: Option<i64>,
    /// Policy `evictionFailureEventNotification`.
    pub failure_events: bool,
    /// Events sink (None: no Events).
    pub events: Option<EventSink>,
    /// The cluster state, to know whether a pod sets `terminationGracePeriodSeconds` (None: treat as unset).
    pub pods: Option<Arc<crate::cluster::state::ClusterState>>,
    /// Set once the server lacks `policy/v1` Evictions; later calls use `policy/v1beta1`.
    pub use_v1beta1: Arc<AtomicBool>,
    /// Bound on one eviction call ([`DEFAULT_EVICTION_CALL_TIMEOUT`]); past it the eviction is an
    /// error (not retried within the cycle; the next cycle sees whether the pod left).
    pub call_timeout: std::time::Duration,
    /// The tracker of evictions in progress: evictions in background (feature gate
    /// `EvictionsInBackground`, see `background_gate`) and outstanding EvictionRequests (`None`:
    /// neither is on).
    pub background: Option<Arc<super::background::BackgroundEvictions>>,
    /// Feature gate `EvictionsInBackground`.
    pub background_gate: bool,
    /// `--eviction-api`: Eviction POSTs or EvictionRequests.
    pub eviction_api: super::evreq::EvictionApi,
}

/// The backend for one cycle.
pub struct ApiEvictor {
    cfg: ApiEvictorConfig,
    rt: Handle,
    stop: CancellationToken,
    placement_events: usize,
}

impl ApiEvictor {
    /// A backend on runtime `rt`; once `stop` is cancelled no further eviction is attempted.
    pub fn new(cfg: ApiEvictorConfig, rt: Handle, stop: CancellationToken) -> Self {
        ApiEvictor {
            cfg,
            rt,
            stop,
            placement_events: 0,
        }
    }
}

/// How the API answered one Eviction POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Classified outcome.
    Outcome(EvictOutcome),
    /// The server has no `policy/v1` Eviction: try `policy/v1beta1`.
    VersionMissing,
}

/// Classifies the result of an Eviction POST.
pub fn classify(result: &Result<(), kube::Error>, pod_name: &str) -> Answer {
    let err = match result {
        Ok(()) => return Answer::Outcome(EvictOutcome::Evicted),
        Err(e) => e,
    };
    let kube::Error::Api(status) = err else {
        return Answer::Outcome(EvictOutcome::Failed {
            error: format!("error when evicting pod {pod_name:?}: {err}"),
        });
    };
    let msg = status.message.clone();
    match status.code {
        429 if msg.contains(DEFLECTION_TEXT) => {
            Answer::Outcome(EvictOutcome::Deflected { message: msg })
        }
        429 => Answer::Outcome(EvictOutcome::Denied { reason: msg }),
        404 => {
            // A missing object (the pod, or its namespace) is named in the details; a missing
            // API version is a bare 404 with no kind.
            let about_object = status
                .details
                .as_ref()
                .is_some_and(|d| !d.kind.is_empty() || d.name == pod_name);
            if about_object || msg.contains(&format!("\"{pod_name}\" not found")) {
                Answer::Outcome(EvictOutcome::Failed {
                    error: format!("pod not found when evicting {pod_name:?}: {msg}"),
                })
            } else {
                Answer::VersionMissing
            }
        }
        400 if msg.contains("policy/v1") && msg.contains("Eviction") => Answer::VersionMissing,
        code => Answer::Outcome(EvictOutcome::Failed {
            error: format!("error when evicting pod {pod_name:?}: {code} {msg}"),
        }),
    }
}

/// The Eviction body: `apiVersion`, `kind`, `metadata{name, namespace}` and `deleteOptions` with
/// the UID precondition and `gracePeriodSeconds` when given.
pub fn eviction_body(
    api_version: &str,
    namespace: &str,
    name: &str,
    uid: &str,
    grace_period_seconds: Option<i64>,
) -> serde_json::Value {
    let mut delete_options = serde_json::json!({ "preconditions": { "uid": uid } });
    if let Some(g) = grace_period_seconds {
        delete_options["gracePeriodSeconds"] = serde_json::json!(g);
    }
    serde_json::json!({
        "apiVersion": api_version,
        "kind": "Eviction",
        "metadata": { "name": name, "namespace": namespace },
        "deleteOptions": delete_options,
    })
}

/// POSTs one Eviction (`create pods/eviction`).
pub async fn post_eviction(client: &Client, body: &serde_json::Value) -> Result<(), kube::Error> {
    let ns = body["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = body["metadata"]["name"].as_str().unwrap_or_default();
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}/eviction");
    let bytes = serde_json::to_vec(body).map_err(kube::Error::SerdeError)?;
    let req = hyper::Request::post(path)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(bytes)
        .map_err(kube::Error::HttpError)?;
    client.request_text(req).await.map(|_| ())
}

/// The pod's identity for the eviction call and its Events (node by binding or `spec.nodeName`).
fn pod_ref(snapshot: &Snapshot, pod: PodId) -> PodRef<'_> {
    let p = snapshot.pod(pod);
    let node = p
        .node
        .map(|n| snapshot.node(n).name.as_str())
        .or(p.node_name.as_deref())
        .unwrap_or_default();
    PodRef {
        namespace: &p.namespace,
        name: &p.name,
        uid: &p.uid,
        node,
    }
}

impl ApiEvictor {
    async fn evict_async(
        &self,
        pod: &PodRef<'_>,
        req: &EvictionRequest<'_>,
        background: bool,
    ) -> EvictOutcome {
        let grace = match &self.cfg.pods {
            Some(state) if state.pod_sets_grace(pod.namespace, pod.name) == Some(true) => None,
            _ => self.cfg.grace_period_seconds,
        };
        let mut outcome = None;
        for _ in 0..2 {
            let version = if self.cfg.use_v1beta1.load(Ordering::Relaxed) {
                "policy/v1beta1"
            } else {
                "policy/v1"
            };
            let body = eviction_body(version, pod.namespace, pod.name, pod.uid, grace);
            self.cfg.limiter.acquire().await;
            let result = match tokio::time::timeout(
                self.cfg.call_timeout,
                post_eviction(&self.cfg.client, &body),
            )
            .await
            {
                Ok(result) => result,
                Err(_) => {
                    outcome = Some(EvictOutcome::Failed {
                        error: format!(
                            "error when evicting pod {:?}: no answer within {}s",
                            pod.name,
                            self.cfg.call_timeout.as_secs_f64()
                        ),
                    });
                    break;
                }
            };
            match classify(&result, pod.name) {
                Answer::Outcome(o) => {
                    outcome = Some(o);
                    break;
                }
                Answer::VersionMissing if version == "policy/v1" => {
                    tracing::warn!(
                        "the API server has no policy/v1 Eviction; using policy/v1beta1"
                    );
                    self.cfg.use_v1beta1.store(true, Ordering::Relaxed);
                }
                Answer::VersionMissing => {
                    outcome = Some(EvictOutcome::Failed {
                        error: format!(
                            "error when evicting pod {:?}: the server supports neither policy/v1 nor policy/v1beta1 Evictions",
                            pod.name
                        ),
                    });
                    break;
                }
            }
        }
        let outcome = outcome.unwrap_or_else(|| EvictOutcome::Failed {
            error: "eviction version negotiation failed".into(),
        });
        if background
            && let EvictOutcome::Deflected { message } = &outcome
            && !is_guard_deflection(message)
        {
            return self.assume_background(pod, req, message);
        }
        self.log_and_notify(pod, req, &outcome).await;
        outcome
    }

    async fn log_and_notify(
        &self,
        pod: &PodRef<'_>,
        req: &EvictionRequest<'_>,
        outcome: &EvictOutcome,
    ) {
        let key = format!("{}/{}", pod.namespace, pod.name);
        match outcome {
            EvictOutcome::Evicted => {
                tracing::info!(pod = %key, reason = %req.reason, reason_code = &*req.reason.code, strategy = req.plugin, node = pod.node, profile = req.profile, "Evicted pod");
                if let Some(ev) = &self.cfg.events {
                    self.cfg.limiter.acquire().await;
                    ev.evicted(pod, req.reason, req.plugin, None).await;
                }
            }
            EvictOutcome::Deflected { message } => {
                tracing::info!(pod = %key, reason = %req.reason, reason_code = &*req.reason.code, strategy = req.plugin, node = pod.node, profile = req.profile, response = %message, "Eviction deflected into a rolling restart");
                if let Some(ev) = &self.cfg.events {
                    self.cfg.limiter.acquire().await;
                    ev.evicted(pod, req.reason, req.plugin, Some(message)).await;
                }
            }
            EvictOutcome::Requested { name, .. } => {
                tracing::info!(pod = %key, reason = %req.reason, reason_code = &*req.reason.code, strategy = req.plugin, node = pod.node, profile = req.profile, request = %name, "Eviction requested");
                if let Some(ev) = &self.cfg.events {
                    let extra = format!("eviction requested with EvictionRequest {name}");
                    self.cfg.limiter.acquire().await;
                    ev.evicted(pod, req.reason, req.plugin, Some(&extra)).await;
                }
            }
            // Logged where they arise.
            EvictOutcome::Background { .. } | EvictOutcome::NotAttempted { .. } => {}
            EvictOutcome::Denied { reason }
            | EvictOutcome::BackedOff { reason }
            | EvictOutcome::Failed { error: reason } => {
                let skipped = !matches!(outcome, EvictOutcome::Failed { .. });
                if skipped {
                    tracing::info!(pod = %key, strategy = req.plugin, error = %reason, "Eviction refused (skipped, not retried)");
                } else {
                    tracing::error!(pod = %key, strategy = req.plugin, error = %reason, "Error evicting pod");
                }
                if self.cfg.failure_events
                    && let Some(ev) = &self.cfg.events
                {
                    self.cfg.limiter.acquire().await;
                    ev.failed(pod, reason).await;
                }
            }
        }
    }
}

impl ApiEvictor {
    /// `--eviction-api EvictionRequest`: asks for the pod's eviction with our EvictionRequest
    /// (created, or ours reused; none is written when the tracker knows ours asks already).
    async fn request_async(&self, pod: &PodRef<'_>, req: &EvictionRequest<'_>) -> EvictOutcome {
        let name = super::evreq::request_name(pod.uid);
        let tracker = self.cfg.background.as_deref();
        if tracker.and_then(|t| t.request_of(pod.uid)).as_deref() == Some(name.as_str()) {
            tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), request = %name, "eviction already requested");
            return EvictOutcome::Requested {
                name,
                written: false,
            };
        }
        self.cfg.limiter.acquire().await;
        let asked = tokio::time::timeout(
            self.cfg.call_timeout,
            super::evreq::ask(&self.cfg.client, pod),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "creating EvictionRequest {name:?}: no answer within {}s",
                self.cfg.call_timeout.as_secs_f64()
            ))
        });
        let outcome = match asked {
            Ok(how) => {
                tracing::debug!(request = %name, ?how, "EvictionRequest asks for the eviction");
                if let Some(t) = tracker {
                    t.requested(assumed(pod, req), &name, true);
                }
                EvictOutcome::Requested {
                    name,
                    written: true,
                }
            }
            Err(error) => EvictOutcome::Failed {
                error: format!(
                    "error when requesting the eviction of pod {:?}: {error}",
                    pod.name
                ),
            },
        };
        self.log_and_notify(pod, req, &outcome).await;
        outcome
    }
}

/// The tracker's record of `pod`, asked for by `req`.
fn assumed<'a>(pod: &PodRef<'a>, req: &EvictionRequest<'a>) -> super::background::Assumed<'a> {
    super::background::Assumed {
        uid: pod.uid,
        namespace: pod.namespace,
        name: pod.name,
        node: pod.node,
        profile: req.profile,
        strategy: req.plugin,
    }
}

/// Whether a 429 deflection message is the eviction guard's own (its rolling restart), which
/// stays a deflection whatever the feature gates say.
pub fn is_guard_deflection(message: &str) -> bool {
    message.contains(GUARD_SIGNATURE)
}

/// Words every deflection message of the eviction guard carries.
pub const GUARD_SIGNATURE: &str = "kube-descheduler eviction guard";

impl ApiEvictor {
    /// With `EvictionsInBackground`, for a pod annotated `request-evict-only`: a 429 "Eviction
    /// triggered evacuation" (not the guard's) is an eviction in progress, tracked until the pod
    /// goes; no Event (as upstream).
    fn assume_background(
        &self,
        pod: &PodRef<'_>,
        req: &EvictionRequest<'_>,
        message: &str,
    ) -> EvictOutcome {
        let Some(tracker) = &self.cfg.background else {
            return EvictOutcome::Deflected {
                message: message.to_string(),
            };
        };
        let key = format!("{}/{}", pod.namespace, pod.name);
        tracing::info!(pod = %key, strategy = req.plugin, profile = req.profile, node = pod.node, response = %message, "Eviction in background assumed");
        tracker.assume(assumed(pod, req));
        EvictOutcome::Background {
            message: message.to_string(),
        }
    }
}

impl EvictionBackend for ApiEvictor {
    fn evict(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
    ) -> EvictOutcome {
        if self.stop.is_cancelled() {
            return EvictOutcome::NotAttempted {
                reason: "descheduling was stopped (shutdown or lost leadership)".into(),
            };
        }
        let pref = pod_ref(snapshot, pod);
        let span = super::otel::evict_span(pref.namespace, pref.name, &req.reason);
        let outcome = if self.cfg.eviction_api == super::evreq::EvictionApi::EvictionRequest {
            self.rt.block_on(self.request_async(&pref, req))
        } else {
            let background = self.cfg.background_gate
                && super::background::requests_background(snapshot, pod)
                && !super::background::completed(snapshot, pod);
            self.rt.block_on(self.evict_async(&pref, req, background))
        };
        if let Some(span) = &span {
            super::otel::record_outcome(span, pref.node, &outcome);
        }
        outcome
    }

    /// Upstream's `EvictionFailed` Event for a limit hit (only with
    /// `evictionFailureEventNotification`), e.g. "… failed: node eviction limit exceeded (3)".
    fn limit_refused(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        _req: &EvictionRequest<'_>,
        limit: &LimitError,
    ) {
        if !self.cfg.failure_events || self.stop.is_cancelled() {
            return;
        }
        let Some(ev) = &self.cfg.events else {
            return;
        };
        let pref = pod_ref(snapshot, pod);
        let text = limit.event_text();
        self.rt.block_on(async {
            self.cfg.limiter.acquire().await;
            ev.failed(&pref, &text).await;
        });
    }

    /// A Warning `EvictionRefusedByPlacement` Event on the pod (the first
    /// [`PLACEMENT_EVENTS_PER_CYCLE`] refusals of the cycle), whatever
    /// `evictionFailureEventNotification` says: the refusal is ours, not an API failure.
    fn placement_refused(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        refusal: &kube_descheduler_engine::placement::Refusal,
    ) {
        if self.stop.is_cancelled() || self.placement_events >= PLACEMENT_EVENTS_PER_CYCLE {
            return;
        }
        let Some(ev) = &self.cfg.events else {
            return;
        };
        self.placement_events += 1;
        let pref = pod_ref(snapshot, pod);
        self.rt.block_on(async {
            self.cfg.limiter.acquire().await;
            ev.refused_by_placement(&pref, req.plugin, refusal).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use serde_json::json;

    /// A 404 as kube-apiserver sends it; `details` names the missing object when there is one.
    fn not_found(message: &str, details: Option<serde_json::Value>) -> Result<(), kube::Error> {
        let mut body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": message, "reason": "NotFound", "code": 404});
        if let Some(details) = details {
            body["details"] = details;
        }
        let status: Status = serde_json::from_value(body).expect("a valid Status literal");
        Err(kube::Error::Api(Box::new(status)))
    }

    fn is_failure(answer: Answer) -> bool {
        matches!(answer, Answer::Outcome(EvictOutcome::Failed { .. }))
    }

    #[test]
    fn a_missing_pod_or_namespace_is_a_failure_not_a_missing_version() {
        let pod = not_found(
            "pods \"web-1\" not found",
            Some(json!({"name": "web-1", "kind": "pods"})),
        );
        assert!(is_failure(classify(&pod, "web-1")));
        let namespace = not_found(
            "namespaces \"gone\" not found",
            Some(json!({"name": "gone", "kind": "namespaces"})),
        );
        assert!(is_failure(classify(&namespace, "web-1")));
    }

    #[test]
    fn a_bare_404_means_the_eviction_version_is_missing() {
        let bare = not_found("the server could not find the requested resource", None);
        assert_eq!(classify(&bare, "web-1"), Answer::VersionMissing);
    }
}
