//! What an eviction would get in a cluster, answered from a snapshot alone: the eviction guard's
//! decision ([`guard`]) and, for what the guard lets through, the API server's
//! PodDisruptionBudget rules ([`api`]). `plan` and `run --dry-run` both ask here, so they decide
//! the same on the same cluster; both build their budget lookups on one index ([`budgets`]).

pub mod api;
pub mod budgets;
pub mod guard;

use jiff::Timestamp;
use kube_descheduler_engine::evictor::EvictOutcome;
use kube_descheduler_engine::evictor::planner::VerdictFn;
use kube_descheduler_engine::snapshot::Snapshot;

use crate::GuardConfig;

pub use api::{ApiBudgets, PDB_VIOLATION, pdb_verdict};
pub use guard::{guard_verdict, pod_facts};

/// The answer to each eviction of one cycle: the guard's decision (one guard state for the whole
/// cycle, so budgets are spent as evictions would spend them), then, for what it allows, the API
/// server's PodDisruptionBudget check.
pub fn api_and_guard_verdict(
    snapshot: &Snapshot,
    now: Timestamp,
    config: GuardConfig,
) -> VerdictFn {
    let mut guard = guard_verdict(snapshot, now, config);
    let mut budgets = ApiBudgets::new(snapshot);
    // kube-apiserver calls the validating webhooks of an eviction before its storage checks the
    // budgets, so the guard's refusal is what the client sees — a rule A deflection or a rule B
    // surge while a budget allows no disruption, the guard's own budget denial — and only an
    // eviction the guard allows meets the API server's budget check.
    Box::new(move |s, p| match guard(s, p) {
        EvictOutcome::Evicted => budgets.verdict(s, p),
        refused => refused,
    })
}
