//! Annotation keys. Everything we read or write lives under one prefix, [`PREFIX`].

use std::collections::BTreeMap;

/// The prefix of every annotation kube-descheduler reads or writes.
pub const PREFIX: &str = "kube-descheduler.io/";

/// Opt-out: `kube-descheduler.io/eviction-guard: "disabled"` on a Pod or Deployment makes the
/// guard allow every eviction of it (the API server still enforces PodDisruptionBudgets).
pub const OPT_OUT: &str = "kube-descheduler.io/eviction-guard";
/// The value of [`OPT_OUT`] that opts out.
pub const OPT_OUT_VALUE: &str = "disabled";

/// On a Deployment we restarted: when (RFC 3339 UTC, equal to the template's `restartedAt`).
pub const RESTARTED_AT: &str = "kube-descheduler.io/restarted-at";
/// On a Deployment we restarted: who (webhook instance, requesting user).
pub const RESTARTED_BY: &str = "kube-descheduler.io/restarted-by";
/// On a Deployment we restarted: why (the eviction that was deflected).
pub const RESTART_REASON: &str = "kube-descheduler.io/restart-reason";

/// The pod-template annotation `kubectl rollout restart` sets; changing it starts a rollout.
pub const TEMPLATE_RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
/// The Deployment controller's revision annotation on Deployments and ReplicaSets.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// True when the annotations carry the opt-out (`disabled`, `false`, `off`, case-insensitive).
pub fn is_opt_out(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.and_then(|a| a.get(OPT_OUT)).is_some_and(|v| {
        let v = v.trim();
        v.eq_ignore_ascii_case(OPT_OUT_VALUE)
            || v.eq_ignore_ascii_case("false")
            || v.eq_ignore_ascii_case("off")
    })
}
