//! The rollout-restart actor: the only code that writes Deployments.
//!
//! A restart sets `spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"]`
//! (RFC 3339, UTC) — exactly what `kubectl rollout restart` does — and records who/why/when in
//! `kube-descheduler.io/restarted-{at,by}` and `kube-descheduler.io/restart-reason`. The JSON
//! patch starts with a `test` of `metadata.resourceVersion` read just before, so when several
//! webhook replicas race, one patch wins and the others see a failed test (409/422), re-read the
//! Deployment and find the restart in flight. Inside one process, restarts of the same
//! Deployment are serialised as well.
//!
//! Rule B's surges and restores ([`surge`]) are written here too, the same way; the guard's
//! surge reconciler decides when to restore.

pub mod surge;

pub use surge::{RestoreOutcome, RestoreReason, SurgeOutcome, SurgeRequest};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::{Value, json};

use kube_descheduler_engine::workload::DeploymentFacts;
use kube_descheduler_engine::workload::annotations::{
    RESTART_REASON, RESTARTED_AT, RESTARTED_BY, TEMPLATE_RESTARTED_AT,
};

/// Field manager of every write we make.
pub const FIELD_MANAGER: &str = "kube-descheduler-guard";
/// Upper bound for one restart (GET + PATCH, retried read included); well inside the webhook's 5 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// A request to restart a Deployment on behalf of an eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartRequest {
    /// Deployment namespace.
    pub namespace: String,
    /// Deployment name.
    pub deployment: String,
    /// The evicted pod's name (same namespace).
    pub pod: String,
    /// The evicted pod's uid (for the Event reference).
    pub pod_uid: String,
    /// The user who asked for the eviction (`request.userInfo.username`).
    pub requested_by: String,
    /// Who asked, in full, for the log line and the Deployment's Event.
    pub audit: RequestAudit,
}

/// Who asked for the eviction that led to a write: the review's `userInfo` (as the caller wrote
/// it — only the TLS peer is vouched for by the connection), the review's UID, and the TLS peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestAudit {
    /// `request.userInfo.username`.
    pub username: String,
    /// `request.userInfo.groups`.
    pub groups: Vec<String>,
    /// `request.uid` of the AdmissionReview.
    pub review_uid: String,
    /// Remote address of the connection the review came on (empty when unknown).
    pub peer_addr: String,
    /// Subject of the client certificate the connection authenticated with, if any.
    pub peer_subject: Option<String>,
}

impl std::fmt::Display for RequestAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = if self.username.is_empty() {
            "unknown"
        } else {
            &self.username
        };
        write!(
            f,
            "user {user} (groups [{}]), review {}, from {}",
            self.groups.join(", "),
            if self.review_uid.is_empty() {
                "without uid"
            } else {
                &self.review_uid
            },
            if self.peer_addr.is_empty() {
                "unknown address"
            } else {
                &self.peer_addr
            },
        )?;
        match &self.peer_subject {
            Some(s) => write!(f, " with client certificate {s}"),
            None => f.write_str(" without a client certificate"),
        }
    }
}

/// What became of a restart request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartOutcome {
    /// We restarted the Deployment at this time.
    Restarted {
        /// The `restartedAt` value written.
        at: Timestamp,
    },
    /// A restart (ours, perhaps by another replica) is already rolling.
    InFlight {
        /// When it was started.
        at: Timestamp,
    },
    /// The restart could not be made; the caller should answer 429 so the eviction is retried.
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// Where the actor reports restart outcomes (the guard's metrics implement it).
pub trait RestartMetrics: Send + Sync {
    /// Counts a failed restart.
    fn restart_error(&self);
    /// Records the duration of a successful restart.
    fn observe_restart(&self, d: Duration);
    /// Counts an action of a drain rule (`pdb_surge`, `pdb_surge_restored`,
    /// `pdb_surge_restore_failed`).
    fn rule_action(&self, reason: &str);
}

/// Something that restarts (and, for rule B, scales) Deployments: the real actor, or a test
/// double.
pub trait Restarter: Send + Sync + 'static {
    /// Restarts the Deployment unless a restart of it is already in flight.
    fn restart(&self, req: RestartRequest) -> BoxFuture<'_, RestartOutcome>;

    /// Raises the Deployment's replicas unless a surge of it is already recorded. The default
    /// cannot.
    fn surge(&self, _req: SurgeRequest) -> BoxFuture<'_, SurgeOutcome> {
        Box::pin(std::future::ready(SurgeOutcome::Failed {
            error: "this guard cannot scale Deployments".into(),
        }))
    }

    /// Puts a surged Deployment's recorded replica count back and drops the record. The
    /// default cannot.
    fn restore<'a>(
        &'a self,
        _namespace: &'a str,
        _deployment: &'a str,
        _reason: RestoreReason,
    ) -> BoxFuture<'a, RestoreOutcome> {
        Box::pin(std::future::ready(RestoreOutcome::Failed {
            error: "this guard cannot scale Deployments".into(),
        }))
    }
}

/// The Event recorder of the guard instance `instance` (reporting controller
/// `kube-descheduler-guard`).
pub(crate) fn guard_recorder(client: Client, instance: &str) -> Recorder {
    let reporter = Reporter {
        controller: "kube-descheduler-guard".into(),
        instance: Some(instance.to_owned()),
    };
    Recorder::new(client, reporter)
}

/// The real restart actor, talking to the API server.
pub struct RestartActor {
    client: Client,
    recorder: Recorder,
    instance: String,
    timeout: Duration,
    metrics: Arc<dyn RestartMetrics>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl RestartActor {
    /// Creates the actor. `instance` identifies this webhook replica (pod name) in records and
    /// Events.
    pub fn new(
        client: Client,
        instance: impl Into<String>,
        metrics: Arc<dyn RestartMetrics>,
    ) -> Self {
        let instance = instance.into();
        RestartActor {
            recorder: guard_recorder(client.clone(), &instance),
            client,
            instance,
            timeout: DEFAULT_TIMEOUT,
            metrics,
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// Overrides the time budget of one restart (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        // Forget locks nobody holds so the map does not grow without bound.
        if locks.len() > 1024 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        locks.entry(key.to_owned()).or_default().clone()
    }

    async fn run(&self, req: &RestartRequest) -> RestartOutcome {
        let key = format!("{}/{}", req.namespace, req.deployment);
        let lock = self.lock_for(&key);
        let _guard = lock.lock().await;
        let started = Instant::now();
        let outcome = match tokio::time::timeout(self.timeout, self.restart_once(req)).await {
            Ok(outcome) => outcome,
            Err(_) => RestartOutcome::Failed {
                error: format!(
                    "restart of Deployment {key} timed out after {:?}",
                    self.timeout
                ),
            },
        };
        match &outcome {
            RestartOutcome::Restarted { .. } => {
                self.metrics.observe_restart(started.elapsed());
                let a = &req.audit;
                tracing::info!(
                    deployment = %key,
                    pod = %req.pod,
                    user = %a.username,
                    groups = ?a.groups,
                    review_uid = %a.review_uid,
                    peer = %a.peer_addr,
                    peer_subject = a.peer_subject.as_deref().unwrap_or(""),
                    "restarted Deployment to move an evicted pod"
                );
            }
            RestartOutcome::InFlight { at } => {
                tracing::debug!(deployment = %key, %at, "restart already in flight");
            }
            RestartOutcome::Failed { error } => {
                self.metrics.restart_error();
                tracing::warn!(deployment = %key, %error, "restart failed");
            }
        }
        outcome
    }

    async fn restart_once(&self, req: &RestartRequest) -> RestartOutcome {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &req.namespace);
        let key = format!("{}/{}", req.namespace, req.deployment);
        let current = match api.get(&req.deployment).await {
            Ok(d) => d,
            Err(e) => {
                return RestartOutcome::Failed {
                    error: format!("reading Deployment {key}: {e}"),
                };
            }
        };
        if let Some(at) = restart_in_flight(&current) {
            return RestartOutcome::InFlight { at };
        }
        if current.spec.paused == Some(true) {
            return RestartOutcome::Failed {
                error: format!("Deployment {key} is paused"),
            };
        }
        let Some(rv) = current.metadata.resource_version.clone() else {
            return RestartOutcome::Failed {
                error: format!("Deployment {key} has no resourceVersion"),
            };
        };
        let at = next_restart_time(&current, Timestamp::now());
        let by = format!(
            "{} (eviction requested by {})",
            self.instance, req.requested_by
        );
        let reason = format!(
            "eviction of pod {}/{} deflected into a rolling restart",
            req.namespace, req.pod
        );
        let patch = restart_patch(&current, &rv, at, &by, &reason);
        match compare_and_set(&api, &req.deployment, patch).await {
            Ok(updated) => {
                self.publish_events(&updated, req, at);
                RestartOutcome::Restarted { at }
            }
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 422 => {
                // Someone else changed the Deployment between our read and write: most likely
                // another replica restarting it. Look again.
                match api.get(&req.deployment).await {
                    Ok(d) => match restart_in_flight(&d) {
                        Some(at) => RestartOutcome::InFlight { at },
                        None => RestartOutcome::Failed {
                            error: format!("Deployment {key} changed while restarting it; retry"),
                        },
                    },
                    Err(e) => RestartOutcome::Failed {
                        error: format!("re-reading Deployment {key}: {e}"),
                    },
                }
            }
            Err(e) => RestartOutcome::Failed {
                error: format!("patching Deployment {key}: {e}"),
            },
        }
    }

    fn publish_events(&self, d: &Deployment, req: &RestartRequest, at: Timestamp) {
        let recorder = self.recorder.clone();
        let dep_ref = d.object_ref(&());
        let pod_ref = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(req.pod.clone()),
            namespace: Some(req.namespace.clone()),
            uid: Some(req.pod_uid.clone()).filter(|u| !u.is_empty()),
            ..ObjectReference::default()
        };
        let note_dep = format!(
            "Rolling restart (restartedAt {at}) so evicted pod {} is replaced before it is removed; asked by {}",
            req.pod, req.audit
        );
        let note_pod = format!(
            "Eviction deflected: Deployment {} is rolling out a replacement first (requested by {})",
            req.deployment, req.requested_by
        );
        tokio::spawn(async move {
            let dep_event = Event {
                type_: EventType::Normal,
                reason: "EvictionDeflected".into(),
                note: Some(note_dep),
                action: "RolloutRestart".into(),
                secondary: Some(pod_ref.clone()),
            };
            let pod_event = Event {
                type_: EventType::Normal,
                reason: "EvictionDeflected".into(),
                note: Some(note_pod),
                action: "DenyEviction".into(),
                secondary: Some(dep_ref.clone()),
            };
            let publish = async {
                if let Err(e) = recorder.publish(&dep_event, &dep_ref).await {
                    tracing::debug!(error = %e, "publishing Deployment event");
                }
                if let Err(e) = recorder.publish(&pod_event, &pod_ref).await {
                    tracing::debug!(error = %e, "publishing Pod event");
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), publish).await;
        });
    }
}

impl Restarter for RestartActor {
    fn restart(&self, req: RestartRequest) -> BoxFuture<'_, RestartOutcome> {
        Box::pin(async move { self.run(&req).await })
    }

    fn surge(&self, req: SurgeRequest) -> BoxFuture<'_, SurgeOutcome> {
        Box::pin(async move {
            let key = format!("{}/{}", req.namespace, req.deployment);
            let lock = self.lock_for(&key);
            let _guard = lock.lock().await;
            match tokio::time::timeout(self.timeout, self.surge_once(&req)).await {
                Ok(o) => o,
                Err(_) => SurgeOutcome::Failed {
                    error: format!(
                        "surge of Deployment {key} timed out after {:?}",
                        self.timeout
                    ),
                },
            }
        })
    }

    fn restore<'a>(
        &'a self,
        namespace: &'a str,
        deployment: &'a str,
        reason: RestoreReason,
    ) -> BoxFuture<'a, RestoreOutcome> {
        Box::pin(async move {
            let key = format!("{namespace}/{deployment}");
            let lock = self.lock_for(&key);
            let _guard = lock.lock().await;
            match tokio::time::timeout(
                self.timeout,
                self.restore_once(namespace, deployment, reason),
            )
            .await
            {
                Ok(o) => o,
                Err(_) => RestoreOutcome::Failed {
                    error: format!(
                        "restore of Deployment {key} timed out after {:?}",
                        self.timeout
                    ),
                },
            }
        })
    }
}

impl RestartActor {
    async fn surge_once(&self, req: &SurgeRequest) -> SurgeOutcome {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &req.namespace);
        let key = format!("{}/{}", req.namespace, req.deployment);
        let current = match api.get(&req.deployment).await {
            Ok(d) => d,
            Err(e) => {
                return SurgeOutcome::Failed {
                    error: format!("reading Deployment {key}: {e}"),
                };
            }
        };
        if DeploymentFacts::from_deployment(&current).surge.is_some() {
            return SurgeOutcome::InFlight;
        }
        let replicas = current.spec.replicas.unwrap_or(1);
        if replicas != req.from {
            return SurgeOutcome::Failed {
                error: format!(
                    "Deployment {key} has {replicas} replicas now, not {}; retry",
                    req.from
                ),
            };
        }
        let Some(rv) = current.metadata.resource_version.clone() else {
            return SurgeOutcome::Failed {
                error: format!("Deployment {key} has no resourceVersion"),
            };
        };
        let at = Timestamp::now()
            .round(jiff::Unit::Second)
            .unwrap_or_else(|_| Timestamp::now());
        let reason = format!(
            "PodDisruptionBudget {} blocked the eviction of pod {}/{} (requested by {}); surged by {}",
            req.budget, req.namespace, req.pod, req.requested_by, self.instance
        );
        let patch = surge::surge_patch(&current, &rv, req.from, req.to, at, &reason);
        match compare_and_set(&api, &req.deployment, patch).await {
            Ok(updated) => {
                self.announce_surge(req, &key, &updated);
                SurgeOutcome::Surged { at }
            }
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 422 => {
                surge_conflict(&api, req, &key).await
            }
            Err(e) => SurgeOutcome::Failed {
                error: format!("patching Deployment {key}: {e}"),
            },
        }
    }

    /// Counts, logs and publishes an event on the Deployment `updated` (named `key`) that the
    /// surge `req` raised.
    fn announce_surge(&self, req: &SurgeRequest, key: &str, updated: &Deployment) {
        self.metrics.rule_action("pdb_surge");
        let a = &req.audit;
        tracing::info!(
            deployment = %key,
            from = req.from,
            to = req.to,
            budget = %req.budget,
            user = %a.username,
            groups = ?a.groups,
            review_uid = %a.review_uid,
            peer = %a.peer_addr,
            peer_subject = a.peer_subject.as_deref().unwrap_or(""),
            "surged Deployment for a blocked eviction"
        );
        let note = format!(
            "Raised replicas from {} to {} so PodDisruptionBudget {} can allow the eviction of pod {}; restored once no pod sits on an unschedulable node; asked by {}",
            req.from, req.to, req.budget, req.pod, req.audit
        );
        self.publish_deployment_event(updated, "EvictionSurge", "ScaleUp", note);
    }

    async fn restore_once(
        &self,
        namespace: &str,
        deployment: &str,
        reason: RestoreReason,
    ) -> RestoreOutcome {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        let key = format!("{namespace}/{deployment}");
        let current = match api.get_opt(deployment).await {
            Ok(Some(d)) => d,
            Ok(None) => return RestoreOutcome::NotSurged,
            Err(e) => {
                return RestoreOutcome::Failed {
                    error: format!("reading Deployment {key}: {e}"),
                };
            }
        };
        let Some(rv) = current.metadata.resource_version.clone() else {
            return RestoreOutcome::Failed {
                error: format!("Deployment {key} has no resourceVersion"),
            };
        };
        let Some((patch, replicas)) = surge::restore_patch(&current, &rv) else {
            return RestoreOutcome::NotSurged;
        };
        match compare_and_set(&api, deployment, patch).await {
            Ok(updated) => {
                self.metrics.rule_action("pdb_surge_restored");
                tracing::info!(deployment = %key, replicas, reason = reason.as_str(), "restored a surged Deployment");
                let note = format!(
                    "Restored replicas to {replicas} after a surge for a blocked eviction ({})",
                    reason.as_str()
                );
                self.publish_deployment_event(&updated, "SurgeRestored", "ScaleDown", note);
                RestoreOutcome::Restored { replicas }
            }
            Err(e) => {
                self.metrics.rule_action("pdb_surge_restore_failed");
                RestoreOutcome::Failed {
                    error: format!("patching Deployment {key}: {e}"),
                }
            }
        }
    }

    fn publish_deployment_event(&self, d: &Deployment, reason: &str, action: &str, note: String) {
        let recorder = self.recorder.clone();
        let dep_ref = d.object_ref(&());
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        tokio::spawn(async move {
            let publish = recorder.publish(&event, &dep_ref);
            if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(5), publish).await {
                tracing::debug!(error = %e, "publishing Deployment event");
            }
        });
    }
}

/// When our restart of `d` is still rolling out, its start time.
pub fn restart_in_flight(d: &Deployment) -> Option<Timestamp> {
    let facts = DeploymentFacts::from_deployment(d);
    let in_progress = facts.rollout_in_progress();
    facts.restart.filter(|_| in_progress).map(|r| r.at)
}

/// The `restartedAt` value for a new restart: now, in whole seconds, but strictly later than the
/// template's current value — an unchanged value would start no rollout.
pub fn next_restart_time(current: &Deployment, now: Timestamp) -> Timestamp {
    let now = now.round(jiff::Unit::Second).unwrap_or(now);
    let previous: Option<Timestamp> = current
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(TEMPLATE_RESTARTED_AT))
        .and_then(|v| v.parse().ok());
    match previous {
        Some(p) if p >= now => p
            .checked_add(jiff::SignedDuration::from_secs(1))
            .unwrap_or(now),
        _ => now,
    }
}

/// Applies `patch` (whose first operation tests the resourceVersion) to Deployment `name` as
/// our field manager.
async fn compare_and_set(
    api: &Api<Deployment>,
    name: &str,
    patch: json_patch::Patch,
) -> kube::Result<Deployment> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Json::<()>(patch)).await
}

/// The compare-and-set JSON patch of a restart: test the resourceVersion, then set the template
/// annotation and our record (creating annotation maps that do not exist yet).
pub fn restart_patch(
    current: &Deployment,
    resource_version: &str,
    at: Timestamp,
    by: &str,
    reason: &str,
) -> json_patch::Patch {
    let at = at.to_string();
    let mut ops: Vec<Value> =
        vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})];
    if current.metadata.annotations.is_none() {
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    for (k, v) in [
        (RESTARTED_AT, at.as_str()),
        (RESTARTED_BY, by),
        (RESTART_REASON, reason),
    ] {
        ops.push(json!({"op": "add", "path": format!("/metadata/annotations/{}", escape(k)), "value": v}));
    }
    match &current.spec.template.metadata {
        None => ops.push(
            json!({"op": "add", "path": "/spec/template/metadata", "value": {"annotations": {}}}),
        ),
        Some(m) if m.annotations.is_none() => ops
            .push(json!({"op": "add", "path": "/spec/template/metadata/annotations", "value": {}})),
        Some(_) => {}
    }
    ops.push(json!({
        "op": "add",
        "path": format!("/spec/template/metadata/annotations/{}", escape(TEMPLATE_RESTARTED_AT)),
        "value": at,
    }));
    // The ops above are well-formed by construction; an empty patch would be harmless anyway.
    serde_json::from_value(Value::Array(ops)).unwrap_or_else(|_| json_patch::Patch(Vec::new()))
}

/// JSON-pointer escaping of one path segment (RFC 6901).
pub(crate) fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The outcome of a surge patch the API server refused as conflicting (409 or 422): in flight
/// when the Deployment, read again, already carries a surge, else failed.
async fn surge_conflict(api: &Api<Deployment>, req: &SurgeRequest, key: &str) -> SurgeOutcome {
    match api.get(&req.deployment).await {
        Ok(d) if DeploymentFacts::from_deployment(&d).surge.is_some() => SurgeOutcome::InFlight,
        Ok(_) => SurgeOutcome::Failed {
            error: format!("Deployment {key} changed while surging it; retry"),
        },
        Err(e) => SurgeOutcome::Failed {
            error: format!("re-reading Deployment {key}: {e}"),
        },
    }
}

#[cfg(test)]
mod tests;
