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

/// Rule B opt-in on a Deployment or Namespace: `kube-descheduler.io/pdb-surge: "enabled"` lets
/// the guard (started with `--pdb-surge`) raise the Deployment's replicas when a
/// PodDisruptionBudget blocks a drain; `"disabled"` on a Deployment opts it out of an opted-in
/// namespace.
pub const PDB_SURGE: &str = "kube-descheduler.io/pdb-surge";
/// On a Deployment we surged: its `spec.replicas` before the surge.
pub const SURGE_ORIGINAL_REPLICAS: &str = "kube-descheduler.io/surge-original-replicas";
/// On a Deployment we surged: the `spec.replicas` we set.
pub const SURGE_REPLICAS: &str = "kube-descheduler.io/surge-replicas";
/// On a Deployment we surged: when (RFC 3339 UTC).
pub const SURGE_AT: &str = "kube-descheduler.io/surge-at";
/// On a Deployment we surged: why (the budget and the eviction).
pub const SURGE_REASON: &str = "kube-descheduler.io/surge-reason";

/// Reads a [`PDB_SURGE`] value: `Some(true)` for `enabled`/`true`/`on`, `Some(false)` for
/// `disabled`/`false`/`off`, `None` when absent or unrecognised.
pub fn pdb_surge_opt_in(annotations: Option<&BTreeMap<String, String>>) -> Option<bool> {
    let v = annotations.and_then(|a| a.get(PDB_SURGE))?.trim();
    let is = |words: [&str; 3]| words.iter().any(|w| v.eq_ignore_ascii_case(w));
    if is(["enabled", "true", "on"]) {
        Some(true)
    } else if is(["disabled", "false", "off"]) {
        Some(false)
    } else {
        None
    }
}
