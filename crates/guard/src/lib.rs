//! kube-descheduler's eviction guard: a validating admission webhook on `pods/eviction` that makes drains of
//! Deployments zero-downtime, and otherwise gets out of the way.
//!
//! Rules (see [`decision::decide`]):
//! 1. Allow at once when the pod is missing, the uid precondition does not match, the pod is
//!    terminating, Succeeded, Failed, Pending or not Ready, or it (or its Deployment) carries the
//!    opt-out annotation [`annotations::OPT_OUT`]` = "disabled"`.
//! 2. While a rolling restart we started is in flight (pod on an old ReplicaSet, or the rollout
//!    not complete): deny 429 again without writing, until `--deflect-deadline` has passed since
//!    the restart or the Deployment reports ProgressDeadlineExceeded; then allow.
//! 3. Rule A — deflect (restart, then deny 429 with [`decision::DEFLECTION_PHRASE`]) when every
//!    Ready replica of the Deployment other than this pod is on a cordoned node or being evicted
//!    ([`replicas`], [`in_flight`]; always true for one replica), its RollingUpdate resolves to
//!    surge ≥ 1 and unavailable 0, it is not paused, has not exceeded its progress deadline, the
//!    pod is in the current ReplicaSet and mounts no ReadWriteOnce/ReadWriteOncePod claim.
//! 4. Rule B (`--pdb-surge`, opted in by annotation) — when a matching budget allows no
//!    disruption, raise the Deployment's replicas by its pods on cordoned nodes and deny 429;
//!    [`surge_reconciler`] restores the recorded count.
//! 5. Health guard (switchable): deny 429 when a matching PodDisruptionBudget allows no
//!    disruption, or when no budget covers the pod and its controller already has fewer ready
//!    replicas than desired. Bounded by the same deadline, counted from the first denial.
//! 6. Dry run → no side effects, allow with a warning saying what would have happened.
//! 7. Everything else, and whenever the guard cannot tell: allow.

pub mod answer;
pub mod answering;
pub mod cache;
pub mod decision;
pub mod in_flight;
pub mod metrics;
pub mod mutate;
pub mod peer;
pub mod pod_cache;
pub mod rate;
pub mod replicas;
pub mod responder;
pub mod restart;
pub mod review;
pub mod server;
pub mod source;
pub mod state;
pub mod surge_reconciler;
pub mod testing;

pub use decision::{
    AllowReason, DEFLECTION_PHRASE, EvictionRequest, Facts, GuardConfig, Verdict, decide,
    is_deflection_message,
};
/// The workload facts the guard decides on live in [`kube_descheduler_engine::workload`]; re-exported here so
/// `kube_descheduler_guard::facts`, `kube_descheduler_guard::annotations` and `kube_descheduler_guard::DeploymentFacts` keep working.
pub use kube_descheduler_engine::workload::{
    DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts,
};
pub use kube_descheduler_engine::workload::{annotations, facts};
