//! The guard's decision: a pure function of the eviction request, facts, clock and config.
//!
//! No I/O happens here, so the webhook, the offline `plan` report and a future EvictionRequest
//! responder (KEP-4563) can all share it.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::replicas::ReplicaCensus;
use kube_descheduler_engine::workload::facts::{
    DeploymentFacts, OwnerFacts, PdbFacts, PodFacts, PodPhase, PvcFacts, ReplicaSetFacts, Strategy,
};

mod surge;
pub use surge::pdb_surge_enabled;

/// The phrase upstream descheduler recognises as a handed-off ("background") eviction. Every
/// deflection and in-flight denial message contains it.
pub const DEFLECTION_PHRASE: &str = "Eviction triggered evacuation";

/// True when an eviction error message (ours, possibly wrapped by the API server as
/// `admission webhook "…" denied the request: …`) reports a deflection: the pod is being moved
/// by a rolling restart. Combine with HTTP status 429. Other 429s (budgets) are not deflections.
pub fn is_deflection_message(message: &str) -> bool {
    message.contains(DEFLECTION_PHRASE)
}

/// Guard configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardConfig {
    /// How long denials last: after this much time since our restart (or since the first denial
    /// of the pod), evictions are allowed so a drain never hangs forever.
    pub deflect_deadline: Duration,
    /// Deny evictions that would break a PodDisruptionBudget or deepen an outage.
    pub health_guard: bool,
    /// Rule B: when a PodDisruptionBudget blocks the drain of an opted-in Deployment, raise its
    /// replicas instead of refusing forever (`--pdb-surge`).
    pub pdb_surge: bool,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            deflect_deadline: Duration::from_secs(600),
            health_guard: true,
            pdb_surge: false,
        }
    }
}

/// What the eviction request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionRequest {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// `deleteOptions.preconditions.uid`.
    pub uid_precondition: Option<String>,
    /// Dry run (query `dryRun` or `deleteOptions.dryRun: [All]`).
    pub dry_run: bool,
}

/// Everything the decision looks at besides the request, clock and config.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    /// The pod; `None` when it does not exist.
    pub pod: Option<&'a PodFacts>,
    /// The pod's controlling ReplicaSet, when known.
    pub replica_set: Option<&'a ReplicaSetFacts>,
    /// The ReplicaSet's controlling Deployment, when known.
    pub deployment: Option<&'a DeploymentFacts>,
    /// PodDisruptionBudgets of the pod's namespace (non-matching ones are ignored).
    pub pdbs: &'a [&'a PdbFacts],
    /// Claims mounted by the pod (by name); a claim not listed counts as single-node.
    pub pvcs: &'a [PvcFacts],
    /// When this guard first refused to evict this pod (bounds health-guard denials and failed
    /// restarts by the deadline); `None` if never.
    pub first_denied_at: Option<Timestamp>,
    /// Where the Deployment's replicas are; `None` when unknown (then the Deployment's
    /// `status.readyReplicas` stands in, every other Ready replica counted as staying).
    pub census: Option<ReplicaCensus>,
    /// The [`super::annotations::PDB_SURGE`] annotation of the pod's namespace.
    pub namespace_pdb_surge: Option<bool>,
    /// `namespace/name` of a HorizontalPodAutoscaler that scales the Deployment, if any.
    pub hpa: Option<&'a str>,
}

/// Why an eviction is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllowReason {
    /// The pod does not exist.
    PodNotFound,
    /// `deleteOptions.preconditions.uid` names another pod.
    UidMismatch,
    /// The pod is already terminating.
    Terminating,
    /// The pod has Succeeded or Failed.
    Terminal,
    /// The pod is Pending.
    Pending,
    /// The pod is not Ready.
    NotReady,
    /// The Pod or its Deployment opted out.
    OptOut,
    /// Dry run: nothing happens; a warning says what would have.
    DryRun,
    /// The deadline for denials has passed.
    DeadlineExpired,
    /// The Deployment reports ProgressDeadlineExceeded.
    ProgressDeadlineExceeded,
    /// No rule applies.
    NotGuarded,
    /// The guard could not tell (caches not synced, API error); it does not block drains.
    Unknown,
}

impl AllowReason {
    /// Stable label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            AllowReason::PodNotFound => "pod_not_found",
            AllowReason::UidMismatch => "uid_mismatch",
            AllowReason::Terminating => "terminating",
            AllowReason::Terminal => "terminal",
            AllowReason::Pending => "pending",
            AllowReason::NotReady => "not_ready",
            AllowReason::OptOut => "opt_out",
            AllowReason::DryRun => "dry_run",
            AllowReason::DeadlineExpired => "deadline_expired",
            AllowReason::ProgressDeadlineExceeded => "progress_deadline_exceeded",
            AllowReason::NotGuarded => "not_guarded",
            AllowReason::Unknown => "unknown",
        }
    }
}

/// The guard's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the eviction through.
    Allow {
        /// Why.
        reason: AllowReason,
        /// Warnings to return to the caller.
        warnings: Vec<String>,
    },
    /// Restart the Deployment (rolling, surge first) and refuse the eviction with 429.
    Deflect {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// The 429 message to return once the restart is started (or found in flight).
        message: String,
    },
    /// Our restart of the Deployment is still rolling: refuse with 429, write nothing.
    DenyInFlight {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// When we restarted it.
        restarted_at: Timestamp,
        /// The 429 message.
        message: String,
    },
    /// A matching PodDisruptionBudget allows no disruption now: refuse with 429.
    DenyPdb {
        /// `namespace/name` of the budget.
        budget: String,
        /// The 429 message.
        message: String,
    },
    /// Rule B: a budget allows no disruption; raise the Deployment from `from` to `to` replicas
    /// (compare-and-set, recorded in annotations) and refuse with 429.
    Surge {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// `namespace/name` of the blocking budget.
        budget: String,
        /// `spec.replicas` now.
        from: i32,
        /// `spec.replicas` to set.
        to: i32,
        /// The 429 message.
        message: String,
    },
    /// Rule B: our surge is in place and the budget still allows no disruption: refuse with 429,
    /// write nothing.
    DenySurging {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// `namespace/name` of the blocking budget.
        budget: String,
        /// The 429 message.
        message: String,
    },
    /// Rule B would surge, but a HorizontalPodAutoscaler owns the replica count: refuse with 429
    /// and tell the user what to do (the guard writes nothing).
    DenyHpa {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// `namespace/name` of the autoscaler.
        hpa: String,
        /// The 429 message.
        message: String,
    },
    /// The pod's controller is already short of ready replicas and no budget covers the pod.
    DenyUnhealthy {
        /// `Kind namespace/name` of the controller.
        controller: String,
        /// Ready replicas.
        ready: i32,
        /// Desired replicas.
        desired: i32,
        /// The 429 message.
        message: String,
    },
}

impl Verdict {
    /// Stable label for metrics and the `plan` report: `allowed`, `deflected`, `in_flight`,
    /// `surged`, `surging`, `denied_hpa`, `denied_pdb`, `denied_unhealthy`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Verdict::Allow { .. } => "allowed",
            Verdict::Deflect { .. } => "deflected",
            Verdict::DenyInFlight { .. } => "in_flight",
            Verdict::Surge { .. } => "surged",
            Verdict::DenySurging { .. } => "surging",
            Verdict::DenyHpa { .. } => "denied_hpa",
            Verdict::DenyPdb { .. } => "denied_pdb",
            Verdict::DenyUnhealthy { .. } => "denied_unhealthy",
        }
    }

    /// The deny message, or `None` for Allow.
    pub fn message(&self) -> Option<&str> {
        match self {
            Verdict::Allow { .. } => None,
            Verdict::Deflect { message, .. }
            | Verdict::DenyInFlight { message, .. }
            | Verdict::Surge { message, .. }
            | Verdict::DenySurging { message, .. }
            | Verdict::DenyHpa { message, .. }
            | Verdict::DenyPdb { message, .. }
            | Verdict::DenyUnhealthy { message, .. } => Some(message),
        }
    }

    fn allow(reason: AllowReason) -> Self {
        Verdict::Allow {
            reason,
            warnings: Vec::new(),
        }
    }
}

/// Decides what to do with an eviction. See the crate docs for the rules.
pub fn decide(
    req: &EvictionRequest,
    facts: &Facts<'_>,
    now: Timestamp,
    config: &GuardConfig,
) -> Verdict {
    let verdict = decide_inner(req, facts, now, config);
    if !req.dry_run {
        return verdict;
    }
    let pod = format!("{}/{}", req.namespace, req.name);
    let would = match &verdict {
        Verdict::Allow { reason, .. } => {
            format!(
                "dry run: the eviction guard would allow the eviction of pod {pod} ({})",
                reason.as_str()
            )
        }
        Verdict::Deflect { deployment, .. } => format!(
            "dry run: the eviction guard would refuse the eviction of pod {pod} with 429 and start a rolling restart of Deployment {deployment}"
        ),
        Verdict::Surge {
            deployment,
            budget,
            from,
            to,
            ..
        } => format!(
            "dry run: the eviction guard would refuse the eviction of pod {pod} with 429 and raise Deployment {deployment} from {from} to {to} replicas because PodDisruptionBudget {budget} allows no disruption"
        ),
        other => format!(
            "dry run: the eviction guard would refuse the eviction with 429: {}",
            other.message().unwrap_or_default()
        ),
    };
    let mut warnings = match verdict {
        Verdict::Allow { warnings, .. } => warnings,
        _ => Vec::new(),
    };
    warnings.insert(0, would);
    Verdict::Allow {
        reason: AllowReason::DryRun,
        warnings,
    }
}

fn decide_inner(
    req: &EvictionRequest,
    facts: &Facts<'_>,
    now: Timestamp,
    config: &GuardConfig,
) -> Verdict {
    let Some(pod) = facts.pod else {
        return Verdict::allow(AllowReason::PodNotFound);
    };
    if let Some(v) = unguarded_pod(req, pod) {
        return v;
    }
    let rs = owned_replica_set(pod, facts.replica_set);
    let deployment = rs.and_then(|rs| owning_deployment(rs, facts.deployment));
    if let (Some(rs), Some(d)) = (rs, deployment) {
        if d.opt_out {
            return Verdict::allow(AllowReason::OptOut);
        }
        if let Some(v) = rolling_restart(pod, rs, d, facts, now, config) {
            return v;
        }
        if let Some(v) = surge::decide(pod, rs, d, facts, now, config) {
            return v;
        }
    }
    if !config.health_guard {
        return Verdict::allow(AllowReason::NotGuarded);
    }
    health_guard(pod, rs, deployment, facts, now, config)
}

/// Rule 1: the pods the guard lets go at once (missing uid match, terminating, not running, not
/// Ready, opted out).
fn unguarded_pod(req: &EvictionRequest, pod: &PodFacts) -> Option<Verdict> {
    if let Some(uid) = &req.uid_precondition
        && !uid.is_empty()
        && *uid != pod.uid
    {
        return Some(Verdict::allow(AllowReason::UidMismatch));
    }
    if pod.terminating {
        return Some(Verdict::allow(AllowReason::Terminating));
    }
    match pod.phase {
        PodPhase::Succeeded | PodPhase::Failed => {
            return Some(Verdict::allow(AllowReason::Terminal));
        }
        PodPhase::Pending => return Some(Verdict::allow(AllowReason::Pending)),
        PodPhase::Running | PodPhase::Unknown => {}
    }
    if !pod.ready {
        return Some(Verdict::allow(AllowReason::NotReady));
    }
    if pod.opt_out {
        return Some(Verdict::allow(AllowReason::OptOut));
    }
    None
}

/// Whether the deflect deadline has passed since `t`.
fn expired_since(t: Timestamp, now: Timestamp, config: &GuardConfig) -> bool {
    let deadline = SignedDuration::try_from(config.deflect_deadline).unwrap_or(SignedDuration::MAX);
    now.duration_since(t) >= deadline
}

/// Rules 2 and 3: a rolling restart we started is still in flight (deny again, or allow once it is
/// stuck or past the deadline), or the pod is the Deployment's last Ready replica (deflect).
fn rolling_restart(
    pod: &PodFacts,
    rs: &ReplicaSetFacts,
    d: &DeploymentFacts,
    facts: &Facts<'_>,
    now: Timestamp,
    config: &GuardConfig,
) -> Option<Verdict> {
    // Formatted only on the paths that report it (most evictions are simply allowed).
    let pod_key = || format!("{}/{}", pod.namespace, pod.name);
    let current = pod_in_current_replica_set(pod, rs, d);
    if let Some(restart) = &d.restart
        && (d.rollout_in_progress() || !current)
    {
        if d.progress_deadline_exceeded {
            return Some(allow_warn(
                AllowReason::ProgressDeadlineExceeded,
                format!(
                    "eviction guard: the rolling restart of Deployment {} exceeded its progress deadline; allowing the eviction",
                    d.key()
                ),
            ));
        }
        if expired_since(restart.at, now, config) {
            return Some(allow_warn(
                AllowReason::DeadlineExpired,
                format!(
                    "eviction guard: the rolling restart of Deployment {} started at {} has not finished within {}; allowing the eviction",
                    d.key(),
                    restart.at,
                    fmt_duration(config.deflect_deadline)
                ),
            ));
        }
        return Some(Verdict::DenyInFlight {
            deployment: d.key(),
            restarted_at: restart.at,
            message: format!(
                "{DEFLECTION_PHRASE}: a rolling restart is in progress for Deployment {} (started {} by the kube-descheduler eviction guard); pod {} will be replaced by the rollout. Retry later; the guard allows the eviction once the rollout ends or after {}.",
                d.key(),
                restart.at,
                pod_key(),
                fmt_duration(config.deflect_deadline)
            ),
        });
    }
    if !(current && deflectable(pod, d, facts.pvcs) && no_ready_replica_stays(d, facts.census)) {
        return None;
    }
    if let Some(first) = facts.first_denied_at
        && expired_since(first, now, config)
    {
        return Some(allow_warn(
            AllowReason::DeadlineExpired,
            format!(
                "eviction guard: could not hand pod {} over to a rolling restart of Deployment {} within {}; allowing the eviction",
                pod_key(),
                d.key(),
                fmt_duration(config.deflect_deadline)
            ),
        ));
    }
    Some(Verdict::Deflect {
        deployment: d.key(),
        message: format!(
            "{DEFLECTION_PHRASE}: the kube-descheduler eviction guard started a rolling restart of Deployment {}; a rolling restart is in progress and a replacement pod starts before pod {} is removed. Retry later; the guard allows the eviction once the rollout ends or after {}.",
            d.key(),
            pod_key(),
            fmt_duration(config.deflect_deadline)
        ),
    })
}

/// Rule 5, the health guard: deny while a matching budget allows no disruption, or while no
/// budget covers the pod and its controller is already short of Ready replicas; bounded by the
/// deadline counted from the first denial.
fn health_guard(
    pod: &PodFacts,
    rs: Option<&ReplicaSetFacts>,
    deployment: Option<&DeploymentFacts>,
    facts: &Facts<'_>,
    now: Timestamp,
    config: &GuardConfig,
) -> Verdict {
    let pod_key = || format!("{}/{}", pod.namespace, pod.name);
    let bounded = facts
        .first_denied_at
        .is_some_and(|t| expired_since(t, now, config));
    let mut matching = facts.pdbs.iter().filter(|p| p.matches(pod)).peekable();
    let covered = matching.peek().is_some();
    if let Some(pdb) = matching.find(|p| p.disruptions_allowed <= 0) {
        if bounded {
            return deadline_allow(&pod_key(), config);
        }
        let budget = format!("{}/{}", pdb.namespace, pdb.name);
        return Verdict::DenyPdb {
            message: format!(
                "Cannot evict pod {}: PodDisruptionBudget {budget} allows no disruption right now (kube-descheduler eviction guard). Retry later.",
                pod_key()
            ),
            budget,
        };
    }
    if !covered {
        let health = match (deployment, rs) {
            (Some(d), _) => Some((d.ready_replicas, d.replicas)),
            (None, Some(rs)) => Some((rs.ready, rs.desired)),
            (None, None) => None,
        };
        if let Some((ready, desired)) = health
            && ready < desired
        {
            if bounded {
                return deadline_allow(&pod_key(), config);
            }
            let controller = match (deployment, rs) {
                (Some(d), _) => format!("Deployment {}", d.key()),
                (None, Some(rs)) => format!("ReplicaSet {}/{}", rs.namespace, rs.name),
                (None, None) => String::new(),
            };
            return Verdict::DenyUnhealthy {
                message: format!(
                    "Cannot evict pod {}: {controller} has only {ready} of {desired} replicas ready and no PodDisruptionBudget covers the pod, so evicting it would deepen an outage (kube-descheduler eviction guard). Retry later; the guard stops refusing after {}.",
                    pod_key(),
                    fmt_duration(config.deflect_deadline)
                ),
                controller,
                ready,
                desired,
            };
        }
    }
    Verdict::allow(AllowReason::NotGuarded)
}

pub(super) fn allow_warn(reason: AllowReason, warning: String) -> Verdict {
    Verdict::Allow {
        reason,
        warnings: vec![warning],
    }
}

fn deadline_allow(pod_key: &str, config: &GuardConfig) -> Verdict {
    allow_warn(
        AllowReason::DeadlineExpired,
        format!(
            "eviction guard: pod {pod_key} has been refused for {}; allowing the eviction",
            fmt_duration(config.deflect_deadline)
        ),
    )
}

/// The pod's controlling ReplicaSet, if `rs` is it.
pub(super) fn owned_replica_set<'a>(
    pod: &PodFacts,
    rs: Option<&'a ReplicaSetFacts>,
) -> Option<&'a ReplicaSetFacts> {
    let owner = pod.owner.as_ref().filter(|o| o.kind == "ReplicaSet")?;
    rs.filter(|rs| is_owner(owner, &pod.namespace, &rs.namespace, &rs.name, &rs.uid))
}

/// The ReplicaSet's controlling Deployment, if `d` is it.
fn owning_deployment<'a>(
    rs: &ReplicaSetFacts,
    d: Option<&'a DeploymentFacts>,
) -> Option<&'a DeploymentFacts> {
    let owner = rs.owner.as_ref().filter(|o| o.kind == "Deployment")?;
    d.filter(|d| is_owner(owner, &rs.namespace, &d.namespace, &d.name, &d.uid))
}

/// Whether the object `namespace/name` (uid `uid`) is `owner` of an object in `owned_namespace`:
/// same namespace and name, and the same uid when both are known.
fn is_owner(
    owner: &OwnerFacts,
    owned_namespace: &str,
    namespace: &str,
    name: &str,
    uid: &str,
) -> bool {
    name == owner.name
        && namespace == owned_namespace
        && (owner.uid.is_empty() || uid.is_empty() || uid == owner.uid)
}

/// The pod belongs to the Deployment's current ReplicaSet: the ReplicaSet's revision equals the
/// Deployment's, and the pod's `pod-template-hash` equals the ReplicaSet's. Unknown values do not
/// disqualify (the snapshot may lack them).
pub fn pod_in_current_replica_set(
    pod: &PodFacts,
    rs: &ReplicaSetFacts,
    d: &DeploymentFacts,
) -> bool {
    let revision_ok = match (rs.revision, d.revision) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let hash_ok = match (&pod.pod_template_hash, &rs.pod_template_hash) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    revision_ok && hash_ok
}

/// Rule A's replica condition: every Ready replica of the Deployment other than the evicted pod
/// sits on an unschedulable node or is being evicted itself (for one replica: there is no other).
/// Without a census, the Deployment's `status.readyReplicas` stands in and every other Ready
/// replica is assumed to stay (so only the N = 1 case deflects: the safe side).
pub fn no_ready_replica_stays(d: &DeploymentFacts, census: Option<ReplicaCensus>) -> bool {
    match census {
        Some(c) => c.other_ready_staying == 0,
        None => d.ready_replicas <= 1,
    }
}

/// The Deployment can replace the pod surge-first: RollingUpdate resolving (for its replica
/// count) to surge ≥ 1 and unavailable == 0, not paused, progressing, and no single-node volume.
/// Whether it should (no other Ready replica stays) is [`no_ready_replica_stays`].
pub fn deflectable(pod: &PodFacts, d: &DeploymentFacts, pvcs: &[PvcFacts]) -> bool {
    if d.replicas < 1 || d.paused || d.progress_deadline_exceeded {
        return false;
    }
    match d.strategy {
        Strategy::Recreate => return false,
        s => match s.resolve(d.replicas) {
            Some((surge, unavailable)) if surge >= 1 && unavailable == 0 => {}
            _ => return false,
        },
    }
    if pod.ephemeral_single_node_volume {
        return false;
    }
    pod.claims.iter().all(|claim| {
        pvcs.iter()
            .find(|p| &p.name == claim)
            .is_some_and(|p| !p.single_node())
    })
}

/// Formats a duration the way the flags take it: `10m`, `90s`, `1h30m`.
pub fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod rules_tests;
