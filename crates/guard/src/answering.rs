//! The guard's answer to one eviction, whichever way it was asked: an AdmissionReview of
//! `pods/eviction` (the webhook path) or an `Eviction` of the EvictionRequest API whose turn it is
//! to respond (the `evictionRequest` path, [`crate::responder`]). The decision, the restart and
//! surge writes, the token buckets, Events and metrics are the same on both paths; only the form
//! of the answer differs (a 429 review, or the responder's status).

use jiff::Timestamp;

use crate::decision::{AllowReason, EvictionRequest, Verdict};
use crate::restart::{RequestAudit, RestartOutcome, RestartRequest, SurgeOutcome, SurgeRequest};
use crate::source::{Gathered, PodLookup, SourceError};
use crate::state::{GATHER_BUDGET, GuardState};

/// The way an eviction reached the guard (the `path` label of
/// `kube_descheduler_guard_answers_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionPath {
    /// An AdmissionReview of `pods/eviction`.
    Webhook,
    /// An `Eviction` (lifecycle.k8s.io/v1alpha1) the guard responds to.
    EvictionRequest,
}

impl EvictionPath {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionPath::Webhook => "webhook",
            EvictionPath::EvictionRequest => "evictionRequest",
        }
    }
}

/// Who asked for an eviction, recorded with every write it leads to.
#[derive(Debug, Clone)]
pub struct Caller {
    /// A short name of the asker (`userInfo.username`, or the Eviction's requesters).
    pub requested_by: String,
    /// The full record for the log line and the Deployment's Event.
    pub audit: RequestAudit,
    /// The way the eviction came.
    pub path: EvictionPath,
}

/// What the guard made of an eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// Let it happen.
    Allow,
    /// A rolling restart of the pod's Deployment (ours) is started or already rolling: the pod
    /// goes when its replacement is Ready.
    Restarting,
    /// Rule B raised the Deployment's replicas (or its surge is in place): the eviction can
    /// succeed once the extra replicas are Ready.
    Surging,
    /// Nothing was written because a token bucket is empty or the write failed: ask again.
    Retry,
    /// Refused by the health guard or rule B's limits (PodDisruptionBudget, short of ready
    /// replicas, autoscaler): the eviction waits, up to the deadline.
    Refused,
}

impl AnswerKind {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerKind::Allow => "allow",
            AnswerKind::Restarting => "restarting",
            AnswerKind::Surging => "surging",
            AnswerKind::Retry => "retry",
            AnswerKind::Refused => "refused",
        }
    }
}

/// The guard's answer: its kind, the 429 text (empty for an allow) and warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// What the guard did.
    pub kind: AnswerKind,
    /// The refusal's text (what the webhook returns with 429).
    pub message: String,
    /// Warnings of an allow.
    pub warnings: Vec<String>,
    /// `namespace/name` of the Deployment restarted or surged, when there is one.
    pub deployment: Option<String>,
}

impl Answer {
    fn allow(warnings: Vec<String>) -> Self {
        Answer {
            kind: AnswerKind::Allow,
            message: String::new(),
            warnings,
            deployment: None,
        }
    }

    fn refuse(kind: AnswerKind, message: impl Into<String>, deployment: Option<&str>) -> Self {
        Answer {
            kind,
            message: message.into(),
            warnings: Vec::new(),
            deployment: deployment.map(str::to_owned),
        }
    }
}

/// A Deployment write the guard's token buckets limit.
struct GuardedWrite {
    /// In the refusal's text.
    what: &'static str,
    /// The `reason` of the denial metric.
    metric: &'static str,
    /// In the log line.
    action: &'static str,
}

const RESTART: GuardedWrite = GuardedWrite {
    what: "rolling restarts",
    metric: "restart_rate_limited",
    action: "restarting",
};

const SURGE: GuardedWrite = GuardedWrite {
    what: "replica surges",
    metric: "surge_rate_limited",
    action: "surging",
};

/// One eviction being answered: who asked, and which pod.
struct Asked<'a> {
    eviction: &'a EvictionRequest,
    caller: &'a Caller,
    pod_key: String,
    pod_uid: String,
}

impl GuardState {
    /// Answers one eviction (see [`GuardState::review_eviction`] for how the pod is read).
    pub async fn answer(&self, eviction: &EvictionRequest, caller: &Caller) -> Answer {
        let answer = self.answer_uncounted(eviction, caller).await;
        self.metrics
            .answer(caller.path.as_str(), answer.kind.as_str());
        answer
    }

    async fn answer_uncounted(&self, eviction: &EvictionRequest, caller: &Caller) -> Answer {
        let pod_key = format!("{}/{}", eviction.namespace, eviction.name);
        if !eviction.dry_run {
            self.evictions
                .note(&eviction.namespace, &eviction.name, (self.clock)());
        }
        let now = (self.clock)();
        let (gathered, verdict) = match self.verdict_for(eviction, now).await {
            Ok(decided) => decided,
            Err(e) => return self.cannot_check(&pod_key, e),
        };
        let asked = Asked {
            eviction,
            caller,
            pod_uid: gathered
                .pod
                .as_ref()
                .map(|p| p.uid.clone())
                .unwrap_or_default(),
            pod_key,
        };
        tracing::debug!(pod = %asked.pod_key, path = caller.path.as_str(), outcome = verdict.outcome(), "eviction reviewed");
        self.act_on(&asked, &gathered, verdict, now).await
    }

    /// Carries the verdict out: counts it, writes what it asks for, and says what was done.
    async fn act_on(
        &self,
        asked: &Asked<'_>,
        gathered: &Gathered,
        verdict: Verdict,
        now: Timestamp,
    ) -> Answer {
        let forget = self.config.deflect_deadline * 2;
        match verdict {
            Verdict::Allow { reason, warnings } => {
                self.metrics.allow(reason.as_str());
                Answer::allow(warnings)
            }
            Verdict::Deflect {
                deployment,
                message,
            } => {
                self.denials.note(&asked.pod_uid, now, forget);
                let others_ready = gathered.census().is_some_and(|c| c.other_ready > 0);
                self.deflect(asked, &deployment, &message, others_ready)
                    .await
            }
            Verdict::DenyInFlight {
                message,
                deployment,
                ..
            } => {
                self.metrics.deny("in_flight");
                Answer::refuse(AnswerKind::Restarting, message, Some(&deployment))
            }
            Verdict::Surge {
                deployment,
                budget,
                from,
                to,
                message,
            } => {
                self.denials.note(&asked.pod_uid, now, forget);
                let surge = (budget, from, to);
                self.surge(asked, &deployment, surge, &message).await
            }
            Verdict::DenySurging {
                ref message,
                ref deployment,
                ..
            } => {
                self.denials.note(&asked.pod_uid, now, forget);
                self.metrics.deny(denial_reason(&verdict));
                Answer::refuse(AnswerKind::Surging, message, Some(deployment))
            }
            // Plain refusals: remembered for the deadline, counted under their reason, 429.
            Verdict::DenyHpa { ref message, .. }
            | Verdict::DenyPdb { ref message, .. }
            | Verdict::DenyUnhealthy { ref message, .. } => {
                self.denials.note(&asked.pod_uid, now, forget);
                self.metrics.deny(denial_reason(&verdict));
                Answer::refuse(AnswerKind::Refused, message, None)
            }
        }
    }

    /// The answer when the facts could not be read: allow (never block a drain because we
    /// cannot see), with a warning.
    fn cannot_check(&self, pod_key: &str, error: Option<SourceError>) -> Answer {
        self.metrics.allow(AllowReason::Unknown.as_str());
        match error {
            Some(e) => {
                tracing::warn!(pod = %pod_key, error = %e, "cannot decide; allowing the eviction");
                self.metrics.error("lookup");
                Answer::allow(vec![format!(
                    "eviction guard could not check pod {pod_key} ({e}); allowing"
                )])
            }
            None => {
                tracing::warn!(pod = %pod_key, "reading the facts took longer than {GATHER_BUDGET:?}; allowing the eviction");
                self.metrics.error("lookup_timeout");
                Answer::allow(vec![format!(
                    "eviction guard could not check pod {pod_key} in time; allowing"
                )])
            }
        }
    }

    /// The facts and the verdict on them. An allow may come from the watch cache; anything else
    /// is decided again on a fresh read of the pod.
    async fn verdict_for(
        &self,
        eviction: &EvictionRequest,
        now: Timestamp,
    ) -> Result<(Gathered, Verdict), Option<SourceError>> {
        let deadline = tokio::time::Instant::now() + GATHER_BUDGET;
        let mut gathered = self
            .gather_by(eviction, PodLookup::PreferCache, deadline)
            .await?;
        self.metrics.pod_read(if gathered.pod_from_cache {
            "cache"
        } else {
            "api"
        });
        self.mark_evicting(&mut gathered, now);
        let mut verdict = self.decide(eviction, &gathered, now);
        if gathered.pod_from_cache && !matches!(verdict, Verdict::Allow { .. }) {
            self.metrics.pod_read("recheck");
            gathered = self.gather_by(eviction, PodLookup::Fresh, deadline).await?;
            self.mark_evicting(&mut gathered, now);
            verdict = self.decide(eviction, &gathered, now);
        }
        Ok((gathered, verdict))
    }

    /// Takes a token from the namespace's budget for a write to `deployment` (`namespace/name`):
    /// its namespace and name, or the answer to give when the budget is empty.
    fn take_token<'d>(
        &self,
        asked: &'d Asked<'_>,
        deployment: &'d str,
        write: &GuardedWrite,
    ) -> Result<(&'d str, &'d str), Answer> {
        let (namespace, name) = deployment
            .split_once('/')
            .unwrap_or((&asked.eviction.namespace, deployment));
        let Err(empty) = self.budget.try_take(namespace) else {
            return Ok((namespace, name));
        };
        self.metrics.deny(write.metric);
        let msg = self
            .budget
            .exhausted_message(write.what, &asked.pod_key, &empty);
        tracing::warn!(pod = %asked.pod_key, deployment = %deployment, path = asked.caller.path.as_str(), audit = %asked.caller.audit, "{} budget empty; refusing without {}", write.what, write.action);
        Err(Answer::refuse(AnswerKind::Retry, msg, None))
    }

    /// Rule A: take a token, start the rolling restart of `deployment` and answer with the
    /// deflection message (a retry when the budget is empty or the restart failed).
    async fn deflect(
        &self,
        asked: &Asked<'_>,
        deployment: &str,
        message: &str,
        others_ready: bool,
    ) -> Answer {
        let pod_key = &asked.pod_key;
        let (namespace, name) = match self.take_token(asked, deployment, &RESTART) {
            Ok(target) => target,
            Err(refused) => return refused,
        };
        let outcome = self
            .restarter
            .restart(RestartRequest {
                namespace: namespace.to_owned(),
                deployment: name.to_owned(),
                pod: asked.eviction.name.clone(),
                pod_uid: asked.pod_uid.clone(),
                requested_by: asked.caller.requested_by.clone(),
                audit: asked.caller.audit.clone(),
            })
            .await;
        if matches!(outcome, RestartOutcome::InFlight { .. }) {
            // Nothing was patched: the restart someone else started is rolling.
            self.budget.refund(namespace);
        }
        match outcome {
            RestartOutcome::Restarted { .. } | RestartOutcome::InFlight { .. } => {
                self.metrics.deflect();
                self.metrics.deny("deflected");
                self.metrics.rule_action(if others_ready {
                    "ready_replicas_leaving"
                } else {
                    "last_ready_replica"
                });
                Answer::refuse(AnswerKind::Restarting, message, Some(deployment))
            }
            RestartOutcome::Failed { error } => {
                self.metrics.deny("restart_failed");
                let msg = format!(
                    "Cannot evict pod {pod_key} yet: the kube-descheduler eviction guard could not start a rolling restart of Deployment {deployment} ({error}). Retry the eviction."
                );
                Answer::refuse(AnswerKind::Retry, msg, Some(deployment))
            }
        }
    }

    /// Rule B: take a token, raise `deployment`'s replicas (`surge`: the budget, from, to) and
    /// answer with the refusal's text (a retry when the budget is empty or the surge failed).
    async fn surge(
        &self,
        asked: &Asked<'_>,
        deployment: &str,
        (budget, from, to): (String, i32, i32),
        message: &str,
    ) -> Answer {
        let pod_key = &asked.pod_key;
        let (namespace, name) = match self.take_token(asked, deployment, &SURGE) {
            Ok(target) => target,
            Err(refused) => return refused,
        };
        let outcome = self
            .restarter
            .surge(SurgeRequest {
                namespace: namespace.to_owned(),
                deployment: name.to_owned(),
                from,
                to,
                budget,
                pod: asked.eviction.name.clone(),
                pod_uid: asked.pod_uid.clone(),
                requested_by: asked.caller.requested_by.clone(),
                audit: asked.caller.audit.clone(),
            })
            .await;
        if matches!(outcome, SurgeOutcome::InFlight) {
            self.budget.refund(namespace);
        }
        match outcome {
            SurgeOutcome::Surged { .. } | SurgeOutcome::InFlight => {
                self.metrics.deny("pdb_surge");
                Answer::refuse(AnswerKind::Surging, message, Some(deployment))
            }
            SurgeOutcome::Failed { error } => {
                self.metrics.deny("pdb_surge_failed");
                let msg = format!(
                    "Cannot evict pod {pod_key} yet: a PodDisruptionBudget allows no disruption and the kube-descheduler eviction guard could not raise the replicas of Deployment {deployment} ({error}). Retry the eviction."
                );
                Answer::refuse(AnswerKind::Retry, msg, Some(deployment))
            }
        }
    }
}

/// The `reason` label of a plain refusal's denial metric.
fn denial_reason(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::DenySurging { .. } => "pdb_surging",
        Verdict::DenyHpa { .. } => "pdb_surge_hpa",
        Verdict::DenyPdb { .. } => "pdb",
        Verdict::DenyUnhealthy { .. } => "unhealthy",
        _ => "denied",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::rate::{RateLimits, parse_rate};
    use crate::testing::{RecordingRestarter, single_replica_source};

    fn state(restarter: Arc<RecordingRestarter>, namespace_burst: u32) -> GuardState {
        let source = single_replica_source();
        let rate = parse_rate("1/1h").expect("a rate");
        let limits = RateLimits {
            rate,
            burst: 100,
            namespace_rate: rate,
            namespace_burst,
        };
        GuardState::new(Arc::new(source), restarter, crate::GuardConfig::default())
            .with_rate_limits(limits)
    }

    fn eviction() -> EvictionRequest {
        EvictionRequest {
            namespace: "shop".into(),
            name: "web-7d9f-abcde".into(),
            uid_precondition: Some("pod-uid".into()),
            dry_run: false,
        }
    }

    fn caller(path: EvictionPath) -> Caller {
        Caller {
            requested_by: "evictionrequest:acme.io/drainer".into(),
            audit: RequestAudit::default(),
            path,
        }
    }

    fn metrics_text(state: &GuardState) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &state.registry).expect("encodes");
        out
    }

    #[tokio::test]
    async fn an_eviction_request_restarts_like_a_review_counted_under_its_path() {
        let restarter = Arc::new(RecordingRestarter::default());
        let state = state(restarter.clone(), 25);
        let answer = state
            .answer(&eviction(), &caller(EvictionPath::EvictionRequest))
            .await;
        assert_eq!(answer.kind, AnswerKind::Restarting, "{answer:?}");
        assert_eq!(answer.deployment.as_deref(), Some("shop/web"));
        assert!(
            crate::is_deflection_message(&answer.message),
            "{}",
            answer.message
        );
        let seen = restarter.0.lock().expect("lock").clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].deployment, "web");
        assert_eq!(seen[0].requested_by, "evictionrequest:acme.io/drainer");
        let text = metrics_text(&state);
        assert!(
            text.contains(
                r#"kube_descheduler_guard_answers_total{path="evictionRequest",outcome="restarting"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("kube_descheduler_guard_deflections_total 1"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn both_paths_share_the_namespaces_token_bucket() {
        let restarter = Arc::new(RecordingRestarter::default());
        let state = state(restarter.clone(), 1);
        let first = state
            .answer(&eviction(), &caller(EvictionPath::Webhook))
            .await;
        assert_eq!(first.kind, AnswerKind::Restarting);
        let second = state
            .answer(&eviction(), &caller(EvictionPath::EvictionRequest))
            .await;
        assert_eq!(second.kind, AnswerKind::Retry, "{second:?}");
        assert_eq!(restarter.count(), 1, "one restart");
        let text = metrics_text(&state);
        assert!(
            text.contains(
                r#"kube_descheduler_guard_answers_total{path="webhook",outcome="restarting"} 1"#
            ) && text.contains(
                r#"kube_descheduler_guard_answers_total{path="evictionRequest",outcome="retry"} 1"#
            ),
            "{text}"
        );
    }
}
