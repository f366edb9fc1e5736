//! The guard as a responder of the EvictionRequest API (`lifecycle.k8s.io/v1alpha1`, alpha in
//! Kubernetes 1.37, feature gate `EvictionRequestAPI`).
//!
//! The guard watches `Eviction` objects. When its responder ([`RESPONDER_NAME`]) is `Active` in
//! `.status.targetResponders`, it answers the eviction the way the webhook does
//! ([`GuardState::answer`]: the same decision, restart actor, token buckets, Events and
//! metrics, labelled `path="evictionRequest"`) and reports in its `ResponderStatus`:
//! - a rolling restart started (or already rolling): heartbeats (every [`ResponderConfig::heartbeat`])
//!   until the target pod is gone, then completion; completion also after the deflect deadline
//!   if the pod is still there, so the next responder evicts it;
//! - rule B's surge: completion at once (the next responder, normally
//!   `imperative-eviction.k8s.io/evictor`, evicts once the budget allows);
//! - anything else (not a Deployment's pod, other replicas stay Ready, a refusal): completion
//!   with the reason, which hands the Eviction on to the next responder;
//! - a token bucket empty or a write failed: a heartbeat with the reason, asked again on the
//!   next tick;
//! - every requester `Withdrawn` before a rollout started: completion saying nothing was
//!   restarted, and an `EvictionWithdrawn` Event on the pod.
//!
//! Several guard replicas may respond at once: status writes carry the resourceVersion they were
//! computed from, and the restart actor's compare-and-set makes one rollout per Deployment.

pub mod turn;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::lifecycle::v1alpha1::Eviction;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::answering::{Answer, AnswerKind, Caller, EvictionPath};
use crate::decision::EvictionRequest;
use crate::restart::RequestAudit;
use crate::state::GuardState;
use turn::{PodTarget, Report, Turn, last_heartbeat, turn_of, with_report};

/// The guard's responder name in a pod's `spec.evictionResponders`.
pub const RESPONDER_NAME: &str = "kube-descheduler.io/guard";

/// How the responder runs.
#[derive(Debug, Clone)]
pub struct ResponderConfig {
    /// The responder name it answers to (default [`RESPONDER_NAME`]).
    pub name: String,
    /// How often the Evictions are looked at.
    pub interval: Duration,
    /// How often a heartbeat is written while a rollout is in progress (the API asks for no
    /// more than one per 20 s; its deadline is 20 min).
    pub heartbeat: Duration,
    /// How long to wait for the old pod to go after a restart before handing on.
    pub deadline: Duration,
    /// Requesters whose Evictions may lead to writes; empty: any requester the API server let
    /// create an EvictionRequest.
    pub trusted_requesters: Vec<String>,
}

impl Default for ResponderConfig {
    fn default() -> Self {
        ResponderConfig {
            name: RESPONDER_NAME.to_owned(),
            interval: Duration::from_secs(1),
            heartbeat: Duration::from_secs(30),
            deadline: Duration::from_secs(600),
            trusted_requesters: Vec::new(),
        }
    }
}

/// A rollout this replica is following for an Eviction (by the Eviction's uid).
#[derive(Debug, Clone)]
struct Following {
    deployment: String,
    since: Timestamp,
}

/// The responder: the guard's state, the API, and what it is following.
pub struct Responder {
    state: Arc<GuardState>,
    client: Client,
    config: ResponderConfig,
    recorder: Recorder,
    following: HashMap<String, Following>,
    /// Evictions (by uid) whose rollout could not start yet (a token bucket was empty or the
    /// write failed): a cancellation of one of them restarted nothing.
    pending: HashSet<String>,
}

impl Responder {
    /// A responder answering through `state`, writing with `client`; `instance` names this
    /// replica in Events.
    pub fn new(
        state: Arc<GuardState>,
        client: Client,
        config: ResponderConfig,
        instance: &str,
    ) -> Self {
        Responder {
            recorder: crate::restart::guard_recorder(client.clone(), instance),
            state,
            client,
            config,
            following: HashMap::new(),
            pending: HashSet::new(),
        }
    }

    /// Watches Evictions in every namespace and responds until the task is dropped.
    pub async fn run(mut self) {
        let api: Api<Eviction> = Api::all(self.client.clone());
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff()
            .applied_objects();
        tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "watching Evictions (lifecycle.k8s.io/v1alpha1)");
                }
            }
        });
        tracing::info!(responder = %self.config.name, "responding to Evictions");
        let mut tick = tokio::time::interval(self.config.interval);
        loop {
            tick.tick().await;
            self.pass(&store).await;
        }
    }

    /// Looks at every Eviction once.
    async fn pass(&mut self, store: &Store<Eviction>) {
        let evictions = store.state();
        let mut seen = Vec::with_capacity(evictions.len());
        for eviction in evictions {
            let uid = eviction.uid().unwrap_or_default();
            seen.push(uid.clone());
            match turn_of(&eviction, &self.config.name) {
                Turn::Active {
                    pod,
                    withdrawn,
                    requesters,
                } => {
                    self.respond(&eviction, &uid, &pod, withdrawn, &requesters)
                        .await
                }
                Turn::Over { state } => self.forget(&eviction, &uid, &state).await,
                Turn::NotOurs | Turn::Waiting => {}
            }
        }
        self.following.retain(|uid, _| seen.contains(uid));
        self.pending.retain(|uid| seen.contains(uid));
    }

    /// Our turn is over (the controller moved on): stop following, and tell when it was taken
    /// from us while a rollout was still running.
    async fn forget(&mut self, eviction: &Eviction, uid: &str, state: &str) {
        if self.pending.remove(uid) && state == turn::state::CANCELED {
            self.metrics_event("canceled");
            let note = "Every requester withdrew the eviction before the guard could start a rolling restart: nothing was restarted.".to_owned();
            self.pod_event(eviction, "EvictionWithdrawn", note).await;
        }
        let Some(f) = self.following.remove(uid) else {
            return;
        };
        if state == turn::state::CANCELED {
            self.metrics_event("withdrawn_too_late");
            let note = format!(
                "Every requester withdrew, but the rolling restart of Deployment {} had already started; it continues.",
                f.deployment
            );
            self.pod_event(eviction, "EvictionWithdrawn", note).await;
        }
    }

    /// One look at an Eviction whose turn is ours.
    async fn respond(
        &mut self,
        eviction: &Eviction,
        uid: &str,
        pod: &PodTarget,
        withdrawn: bool,
        requesters: &[String],
    ) {
        let now = (self.state.clock)();
        if let Some(f) = self.following.get(uid).cloned() {
            return self.follow(eviction, uid, pod, &f, now).await;
        }
        if withdrawn {
            self.pending.remove(uid);
            self.metrics_event("canceled");
            let note = format!(
                "Every requester withdrew the eviction of pod {} before a rolling restart started: nothing was restarted.",
                pod.key()
            );
            self.pod_event(eviction, "EvictionWithdrawn", note.clone())
                .await;
            return self.report(eviction, done(note), now).await;
        }
        if !self.trusted(requesters) {
            let note = format!(
                "None of the requesters ({}) is trusted by the kube-descheduler eviction guard (--eviction-responder-requesters); passing the eviction on.",
                requesters.join(", ")
            );
            self.metrics_event("passed_on");
            return self.report(eviction, done(note), now).await;
        }
        let answer = self.ask(eviction, pod, requesters).await;
        self.act(eviction, uid, pod, answer, now).await;
    }

    /// Asks the guard about the eviction, as the webhook would.
    async fn ask(&self, eviction: &Eviction, pod: &PodTarget, requesters: &[String]) -> Answer {
        let request = EvictionRequest {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid_precondition: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
            dry_run: false,
        };
        let caller = Caller {
            requested_by: format!("evictionrequest:{}", requesters.join(",")),
            audit: RequestAudit {
                username: requesters.join(","),
                groups: Vec::new(),
                review_uid: format!("eviction/{}", eviction.uid().unwrap_or_default()),
                peer_addr: String::new(),
                peer_subject: Some(format!(
                    "Eviction {}/{}",
                    pod.namespace,
                    eviction.name_any()
                )),
            },
            path: EvictionPath::EvictionRequest,
        };
        self.state.answer(&request, &caller).await
    }

    /// Reports what the guard made of the eviction.
    async fn act(
        &mut self,
        eviction: &Eviction,
        uid: &str,
        pod: &PodTarget,
        answer: Answer,
        now: Timestamp,
    ) {
        let deployment = answer.deployment.clone().unwrap_or_default();
        self.pending.remove(uid);
        match answer.kind {
            AnswerKind::Restarting => {
                self.metrics_event("started");
                self.following.insert(
                    uid.to_owned(),
                    Following {
                        deployment: deployment.clone(),
                        since: now,
                    },
                );
                let report = Report {
                    message: format!(
                        "Rolling restart of Deployment {deployment} in progress: pod {} goes once its replacement is Ready.",
                        pod.key()
                    ),
                    expected_completion: Some(now + self.signed(self.config.deadline)),
                    complete: false,
                };
                self.report(eviction, report, now).await;
            }
            AnswerKind::Surging => {
                self.metrics_event("completed");
                let note = format!(
                    "Raised the replicas of Deployment {deployment} (rule B); the next responder evicts pod {} once its PodDisruptionBudget allows.",
                    pod.key()
                );
                self.report(eviction, done(note), now).await;
            }
            AnswerKind::Retry => {
                self.pending.insert(uid.to_owned());
                if self.heartbeat_due(eviction, now) {
                    let report = Report {
                        message: answer.message,
                        expected_completion: None,
                        complete: false,
                    };
                    self.report(eviction, report, now).await;
                }
            }
            AnswerKind::Allow | AnswerKind::Refused => {
                self.metrics_event("passed_on");
                let why = if answer.kind == AnswerKind::Allow {
                    let mut m = String::from(
                        "The kube-descheduler eviction guard has nothing to do for this pod (no single-replica rolling Deployment to restart); passing the eviction on.",
                    );
                    for w in &answer.warnings {
                        m.push(' ');
                        m.push_str(w);
                    }
                    m
                } else {
                    format!("Passing the eviction on: {}", answer.message)
                };
                self.report(eviction, done(why), now).await;
            }
        }
    }

    /// Follows a rollout: completion once the pod is gone (or the deadline passed), heartbeats
    /// in between.
    async fn follow(
        &mut self,
        eviction: &Eviction,
        uid: &str,
        pod: &PodTarget,
        f: &Following,
        now: Timestamp,
    ) {
        let gone = match self.pod_gone(pod).await {
            Ok(gone) => gone,
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "reading the Eviction's pod");
                false
            }
        };
        let over_deadline = now.duration_since(f.since) >= self.signed(self.config.deadline);
        if gone || over_deadline {
            let note = if gone {
                format!(
                    "Pod {} is gone: the rolling restart of Deployment {} replaced it.",
                    pod.key(),
                    f.deployment
                )
            } else {
                format!(
                    "The rolling restart of Deployment {} has not replaced pod {} within {}; passing the eviction on.",
                    f.deployment,
                    pod.key(),
                    crate::decision::fmt_duration(self.config.deadline)
                )
            };
            self.metrics_event(if gone { "completed" } else { "passed_on" });
            self.report(eviction, done(note), now).await;
            self.following.remove(uid);
            return;
        }
        if self.heartbeat_due(eviction, now) {
            let report = Report {
                message: format!(
                    "Rolling restart of Deployment {} in progress: pod {} goes once its replacement is Ready.",
                    f.deployment,
                    pod.key()
                ),
                expected_completion: None,
                complete: false,
            };
            self.report(eviction, report, now).await;
        }
    }

    fn heartbeat_due(&self, eviction: &Eviction, now: Timestamp) -> bool {
        last_heartbeat(eviction, &self.config.name)
            .is_none_or(|last| now.duration_since(last) >= self.signed(self.config.heartbeat))
    }

    fn signed(&self, d: Duration) -> jiff::SignedDuration {
        jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX)
    }

    fn trusted(&self, requesters: &[String]) -> bool {
        self.config.trusted_requesters.is_empty()
            || requesters
                .iter()
                .any(|r| self.config.trusted_requesters.contains(r))
    }

    /// Whether the pod is gone: not found, or replaced by another pod of the same name.
    async fn pod_gone(&self, pod: &PodTarget) -> Result<bool, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        Ok(match api.get_opt(&pod.name).await? {
            None => true,
            Some(p) => p.metadata.uid.as_deref() != Some(pod.uid.as_str()),
        })
    }

    /// Writes our `ResponderStatus` (a conflict or validation error is logged and the next tick
    /// tries again on the newer object).
    async fn report(&self, eviction: &Eviction, report: Report, now: Timestamp) {
        let Some(updated) = with_report(eviction, &self.config.name, &report, now) else {
            return;
        };
        let ns = eviction.namespace().unwrap_or_default();
        let api: Api<Eviction> = Api::namespaced(self.client.clone(), &ns);
        if let Err(e) = api
            .replace_status(&eviction.name_any(), &PostParams::default(), &updated)
            .await
        {
            self.metrics_event("status_error");
            tracing::warn!(eviction = %format!("{ns}/{}", eviction.name_any()), error = %e, "writing the responder status");
        }
    }

    fn metrics_event(&self, reason: &str) {
        self.state.metrics.responder_event(reason);
    }

    /// An Event about the Eviction's pod.
    async fn pod_event(&self, eviction: &Eviction, reason: &str, note: String) {
        let Some(pod) = eviction.spec.target.pod.as_ref() else {
            return;
        };
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: eviction.namespace(),
            name: Some(pod.name.clone()),
            uid: Some(pod.uid.clone()),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: "RespondToEviction".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, "recording an Event");
        }
    }
}

fn done(message: String) -> Report {
    Report {
        message,
        expected_completion: None,
        complete: true,
    }
}

#[cfg(test)]
mod tests;
