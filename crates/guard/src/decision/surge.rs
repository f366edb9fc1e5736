//! Rule B: a PodDisruptionBudget that allows no disruption would deadlock a drain; for an
//! opted-in, otherwise healthy Deployment the guard raises `spec.replicas` by the number of its
//! pods on unschedulable nodes instead, refuses with 429 until the budget allows the disruption
//! (the API server's budget check still decides), and a reconciler restores the recorded count.

use jiff::{SignedDuration, Timestamp};

use super::{
    AllowReason, Facts, GuardConfig, Verdict, allow_warn, fmt_duration, pod_in_current_replica_set,
};
use crate::facts::{DeploymentFacts, PdbFacts, PodFacts, RecordedSurge, ReplicaSetFacts};

/// Rule B applies to `d`: the webhook runs with `--pdb-surge`, and the Deployment opted in (or
/// its namespace did and the Deployment did not opt out).
pub fn pdb_surge_enabled(
    config: &GuardConfig,
    d: &DeploymentFacts,
    namespace: Option<bool>,
) -> bool {
    config.pdb_surge && d.pdb_surge.or(namespace).unwrap_or(false)
}

/// Rule B's verdict, or `None` when it does not apply (the other rules decide).
pub(super) fn decide(
    pod: &PodFacts,
    rs: &ReplicaSetFacts,
    d: &DeploymentFacts,
    facts: &Facts<'_>,
    now: Timestamp,
    config: &GuardConfig,
) -> Option<Verdict> {
    if !pdb_surge_enabled(config, d, facts.namespace_pdb_surge) {
        return None;
    }
    let blocking: &PdbFacts = facts
        .pdbs
        .iter()
        .find(|p| p.matches(pod) && p.disruptions_allowed <= 0)?;
    let budget = format!("{}/{}", blocking.namespace, blocking.name);
    let deadline = SignedDuration::try_from(config.deflect_deadline).unwrap_or(SignedDuration::MAX);
    let expired_since = |t: Timestamp| now.duration_since(t) >= deadline;
    let pod_key = format!("{}/{}", pod.namespace, pod.name);

    if let Some(s) = &d.surge {
        let expired = expired_since(s.at) || d.progress_deadline_exceeded;
        return Some(surging(d, s, expired, budget, &pod_key, config));
    }

    // Only a healthy Deployment, settled on its current spec, is surged; a short one is the
    // health guard's business.
    let healthy = !d.paused
        && !d.progress_deadline_exceeded
        && !d.rollout_in_progress()
        && d.ready_replicas >= d.replicas
        && pod_in_current_replica_set(pod, rs, d);
    let on_unschedulable = facts.census.map_or(0, |c| c.on_unschedulable);
    if !healthy || on_unschedulable == 0 {
        return None;
    }
    if let Some(first) = facts.first_denied_at
        && expired_since(first)
    {
        return Some(allow_warn(
            AllowReason::DeadlineExpired,
            format!(
                "eviction guard: pod {pod_key} has been refused for {}; allowing the eviction (PodDisruptionBudget {budget} still decides)",
                fmt_duration(config.deflect_deadline)
            ),
        ));
    }
    Some(raise(d, on_unschedulable, facts.hpa, budget, &pod_key))
}

/// The verdict while the surge `s` of `d` is on: refuse until the budget allows the eviction, or
/// allow it with a warning once the surge has `expired`.
fn surging(
    d: &DeploymentFacts,
    s: &RecordedSurge,
    expired: bool,
    budget: String,
    pod_key: &str,
    config: &GuardConfig,
) -> Verdict {
    if expired {
        return allow_warn(
            AllowReason::DeadlineExpired,
            format!(
                "eviction guard: the surge of Deployment {} (started {}) has not let PodDisruptionBudget {budget} allow the eviction within {}; allowing it (the budget still decides)",
                d.key(),
                s.at,
                fmt_duration(config.deflect_deadline)
            ),
        );
    }
    Verdict::DenySurging {
        message: format!(
            "Cannot evict pod {pod_key} yet: PodDisruptionBudget {budget} allows no disruption; the kube-descheduler eviction guard raised Deployment {} from {} to {} replicas (since {}) so the budget can allow it once the new pods are Ready. Retry later.",
            d.key(),
            s.original_replicas,
            s.surged_replicas,
            s.at
        ),
        deployment: d.key(),
        budget,
    }
}

/// The verdict raising `d` by its `on_unschedulable` pods: a surge, or the refusal naming the
/// autoscaler `hpa` that scales it.
fn raise(
    d: &DeploymentFacts,
    on_unschedulable: u32,
    hpa: Option<&str>,
    budget: String,
    pod_key: &str,
) -> Verdict {
    let add = i32::try_from(on_unschedulable).unwrap_or(i32::MAX);
    let to = d.replicas.saturating_add(add);
    if let Some(hpa) = hpa {
        return Verdict::DenyHpa {
            message: format!(
                "Cannot evict pod {pod_key}: PodDisruptionBudget {budget} allows no disruption and Deployment {} is scaled by HorizontalPodAutoscaler {hpa}, so the kube-descheduler eviction guard does not change its replicas. Raise the autoscaler's minReplicas by {add} (to at least {to}) until the drain is done, or relax the budget. Retry later.",
                d.key()
            ),
            deployment: d.key(),
            hpa: hpa.to_owned(),
        };
    }
    Verdict::Surge {
        message: format!(
            "Cannot evict pod {pod_key} yet: PodDisruptionBudget {budget} allows no disruption; the kube-descheduler eviction guard is raising Deployment {} from {} to {to} replicas ({add} on unschedulable nodes) so the budget can allow it once the new pods are Ready, and restores {} replicas afterwards. Retry later.",
            d.key(),
            d.replicas,
            d.replicas
        ),
        deployment: d.key(),
        budget,
        from: d.replicas,
        to,
    }
}
