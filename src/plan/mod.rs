//! The offline plan: run a policy over a snapshot with the planning evictor and report what would
//! be evicted, deflected or denied. The JSON shape is a contract other tools depend on.

pub mod explain;
pub mod html;
pub mod measured;
pub mod nodes;
pub mod refusals;
pub mod render;

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use kube_descheduler_engine::evictor::planner::{PlanBackend, VerdictFn};
use kube_descheduler_engine::evictor::{EvictOutcome, EvictionReason, EvictionRecord};
use kube_descheduler_engine::framework::cycle::{CycleReport, run_cycle};
use std::sync::Arc;

use kube_descheduler_engine::policy::Policy;
use kube_descheduler_engine::snapshot::Snapshot;

/// The version of the JSON contract `plan --output json` prints (`contractVersion`).
///
/// 1: the first contract (`reason` was the plugin name). 2: `reason` is the plugin's sentence with
/// the numbers, beside it `reasonCode` and `reasonDetail`; `nodeUsage[]`; `contractVersion`. Every
/// field of version 1 is still there with the same meaning, except `reason`'s text (the plugin name
/// stays in `plugin`).
pub const CONTRACT_VERSION: u32 = 2;

/// One planned eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEviction {
    /// Pod namespace.
    pub namespace: Arc<str>,
    /// Pod name.
    pub name: String,
    /// Node the pod runs on.
    pub node: Arc<str>,
    /// Profile.
    pub profile: Arc<str>,
    /// Plugin.
    pub plugin: Arc<str>,
    /// Why the plugin chose the pod (JSON: `reason` is its sentence, `reasonCode` its code,
    /// `reasonDetail` its numbers).
    pub reason: Arc<EvictionReason>,
    /// `evicted`, `deflected`, `denied` or `error`.
    pub outcome: &'static str,
    /// The guard's message for deflected / denied evictions.
    pub message: Option<String>,
    /// Where the replacement is predicted to land (DefaultEvictor `placement: Report`).
    pub placement: Option<Arc<kube_descheduler_engine::placement::PlacementReport>>,
}

/// A scored node as JSON: `{"node", "score", "plugins": {name: weighted score}}`.
fn scored_json(s: &kube_descheduler_engine::placement::ScoredNode) -> serde_json::Value {
    let plugins: serde_json::Map<String, serde_json::Value> = s
        .score
        .plugins
        .iter()
        .map(|(p, v)| (p.to_string(), serde_json::Value::from(*v)))
        .collect();
    serde_json::json!({"node": s.node, "score": s.score.total, "plugins": plugins})
}

impl Serialize for PlannedEviction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("namespace", &*self.namespace)?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry("node", &*self.node)?;
        m.serialize_entry("profile", &*self.profile)?;
        m.serialize_entry("plugin", &*self.plugin)?;
        m.serialize_entry("reason", &self.reason.text)?;
        m.serialize_entry("reasonCode", &self.reason.code)?;
        m.serialize_entry("reasonDetail", &self.reason.detail)?;
        m.serialize_entry("outcome", self.outcome)?;
        if let Some(msg) = &self.message {
            m.serialize_entry("message", msg)?;
        }
        // Optional fields, present only with `placement: Report`.
        if let Some(p) = &self.placement {
            m.serialize_entry("predictedNode", &p.predicted_node)?;
            m.serialize_entry("predictedTies", &p.ties)?;
            m.serialize_entry("predictedScore", &p.best.as_ref().map(scored_json))?;
            m.serialize_entry("currentNodeScore", &p.current.as_ref().map(scored_json))?;
            if let Some(f) = p.current_filtered {
                m.serialize_entry("currentNodeFilteredBy", f)?;
            }
            m.serialize_entry("feasibleNodes", &p.feasible)?;
            m.serialize_entry("mayReturn", &p.may_return)?;
            if let Some(why) = &p.not_predicted {
                m.serialize_entry("notPredicted", why)?;
            }
            if let Some(r) = &p.refusal {
                m.serialize_entry(
                    "placementVerdict",
                    &serde_json::json!({"code": r.code.as_str(), "message": r.message}),
                )?;
            }
        }
        m.end()
    }
}

/// Totals of a plan.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    /// Nodes in the snapshot.
    pub nodes: usize,
    /// Ready nodes matching the policy's node selector (the cycle's nodes).
    pub ready_nodes: usize,
    /// Pods in the snapshot.
    pub pods: usize,
    /// Evictions with outcome `evicted`.
    pub evicted: usize,
    /// Evictions with outcome `deflected`.
    pub deflected: usize,
    /// Evictions with outcome `denied`.
    pub denied: usize,
    /// Evictions with outcome `error`.
    pub errors: usize,
    /// Pods moved (evicted or deflected) per plugin.
    pub by_plugin: BTreeMap<String, usize>,
    /// Pods moved per node.
    pub by_node: BTreeMap<String, usize>,
    /// Why the cycle did not run, if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Snapshot inconsistencies (one line per kind), loader and policy warnings.
    pub warnings: Vec<String>,
}

/// The plan: evictions in order plus a summary.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// [`CONTRACT_VERSION`].
    pub contract_version: u32,
    /// Every eviction attempt in eviction order.
    pub evictions: Vec<PlannedEviction>,
    /// Totals.
    pub summary: PlanSummary,
    /// Per node, the measured usage the utilization plugins used and its source (only when the
    /// policy measures usage: LowNodeUtilization `metricsUtilization`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub measured_usage: Vec<measured::NodeUsageReport>,
    /// Node usage before and after the plan, per node-usage plugin run.
    pub node_usage: Vec<nodes::NodeUsageTable>,
    /// `--explain` answers (present only when asked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explanations: Vec<explain::PodExplanation>,
    /// `--explain-node` answers (present only when asked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_explanations: Vec<explain::NodeExplanation>,
    /// Evictions a limit refused, listed when the policy uses a percentage or per-workload limit
    /// (see [`refusals`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limit_refusals: Vec<refusals::LimitRefusal>,
    /// Evictions the DefaultEvictor's `placement: Enforce` refused (absent unless a profile
    /// enforces placement and refused something).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placement_refusals: Vec<refusals::PlacementRefusal>,
    /// `plan --eviction-api`: the path `run` would take for the evictions (`Eviction` or
    /// `EvictionRequest`; absent when not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_api: Option<String>,
    /// Evictions a limit refused before any attempt (not part of the JSON contract).
    #[serde(skip)]
    pub limit_hits: Vec<kube_descheduler_engine::evictor::LimitHit>,
}

/// Adds one to `key`'s count (allocating the key only the first time).
fn count(counts: &mut rustc_hash::FxHashMap<String, usize>, key: &str) {
    match counts.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            counts.insert(key.to_string(), 1);
        }
    }
}

/// Runs `policy` over `snapshot` at `now`. `verdict` predicts each eviction's outcome (the guard);
/// without it every eviction succeeds.
pub fn make_plan(
    policy: &Policy,
    snapshot: &mut Snapshot,
    now: Timestamp,
    verdict: Option<VerdictFn>,
) -> Plan {
    let backend = match verdict {
        Some(v) => PlanBackend::with_verdict(v),
        None => PlanBackend::new(),
    };
    let (report, _) = run_cycle(
        &policy.profiles,
        &policy.cycle,
        snapshot,
        now,
        Box::new(backend),
    );
    let mut summary = PlanSummary {
        nodes: snapshot.nodes.len(),
        ready_nodes: report.nodes,
        pods: snapshot.pods.len(),
        skipped: report.skipped.clone(),
        warnings: plan_warnings(policy, snapshot, &report),
        ..Default::default()
    };
    let moved: rustc_hash::FxHashSet<kube_descheduler_engine::snapshot::PodId> = report
        .records
        .iter()
        .filter(|r| r.outcome.moves_pod())
        .map(|r| r.pod)
        .collect();
    let node_usage = nodes::usage_tables(snapshot, &report.usage_reports, &moved);
    let evictions = tally_evictions(report.records, &mut summary);
    let measured_usage = measured::node_usage(
        snapshot,
        &kube_descheduler_engine::framework::cycle::ready_nodes(
            snapshot,
            policy.cycle.node_selector.as_ref(),
        ),
    );
    Plan {
        contract_version: CONTRACT_VERSION,
        evictions,
        summary,
        node_usage,
        measured_usage,
        explanations: Vec::new(),
        node_explanations: Vec::new(),
        limit_refusals: if policy.cycle.has_own_limits() {
            refusals::from_hits(&report.limit_hits)
        } else {
            Vec::new()
        },
        limit_hits: report.limit_hits,
        placement_refusals: refusals::from_placement_hits(&report.placement_refusals),
        eviction_api: None,
    }
}

/// The summary's warnings: snapshot inconsistencies, loader and policy warnings, then each plugin
/// that failed during the cycle.
fn plan_warnings(policy: &Policy, snapshot: &Snapshot, report: &CycleReport) -> Vec<String> {
    snapshot
        .inconsistencies
        .iter()
        .map(|i| format!("snapshot: {i}"))
        .chain(snapshot.warnings.iter().cloned())
        .chain(policy.warnings.iter().cloned())
        .chain(report.plugin_failures.iter().map(|f| {
            format!(
                "profile {:?}: plugin {} failed for this cycle and evicted nothing more: {}",
                f.profile, f.plugin, f.error
            )
        }))
        .collect()
}

/// Turns the cycle's records into planned evictions (in order), counting each outcome and the pods
/// moved per plugin and per node into `summary`.
fn tally_evictions(
    records: Vec<EvictionRecord>,
    summary: &mut PlanSummary,
) -> Vec<PlannedEviction> {
    // Counted in hash maps (a lookup per eviction), sorted once at the end.
    let mut by_plugin: rustc_hash::FxHashMap<String, usize> = Default::default();
    let mut by_node: rustc_hash::FxHashMap<String, usize> = Default::default();
    let evictions = records
        .into_iter()
        .map(|r| {
            count_outcome(summary, &r.outcome);
            if r.outcome.moves_pod() {
                count(&mut by_plugin, &r.plugin);
                count(&mut by_node, &r.node);
            }
            planned_eviction(r)
        })
        .collect();
    summary.by_plugin = by_plugin.into_iter().collect();
    summary.by_node = by_node.into_iter().collect();
    evictions
}

/// Adds one to the summary's count for `outcome` (evicted, deflected, denied or errors).
fn count_outcome(summary: &mut PlanSummary, outcome: &EvictOutcome) {
    match outcome {
        EvictOutcome::Evicted | EvictOutcome::Requested { .. } => summary.evicted += 1,
        EvictOutcome::Deflected { .. } | EvictOutcome::Background { .. } => summary.deflected += 1,
        EvictOutcome::Denied { .. } | EvictOutcome::BackedOff { .. } => summary.denied += 1,
        EvictOutcome::Failed { .. } | EvictOutcome::NotAttempted { .. } => summary.errors += 1,
    }
}

/// One record as a planned eviction; its `message` is the guard's message, the refusal's reason,
/// the error or the EvictionRequest's name, by outcome.
fn planned_eviction(r: EvictionRecord) -> PlannedEviction {
    let outcome = r.outcome.as_str();
    let message = match r.outcome {
        EvictOutcome::Evicted => None,
        EvictOutcome::Deflected { message } | EvictOutcome::Background { message } => Some(message),
        EvictOutcome::Denied { reason }
        | EvictOutcome::BackedOff { reason }
        | EvictOutcome::NotAttempted { reason } => Some(reason),
        EvictOutcome::Failed { error } => Some(error),
        EvictOutcome::Requested { name, .. } => Some(name),
    };
    PlannedEviction {
        namespace: r.namespace,
        name: r.name,
        node: r.node,
        profile: r.profile,
        plugin: r.plugin,
        reason: r.reason,
        outcome,
        message,
        placement: r.placement,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_descheduler_engine::framework::parallel::with_workers;

    /// Plugins split their analysis over worker threads; the plan (every attempt, in order, with
    /// its outcome) must be the same for any number of workers, with every plugin enabled.
    #[test]
    fn the_plan_does_not_depend_on_the_number_of_worker_threads() {
        let policy = kube_descheduler_engine::policy::load_str(include_str!(
            "../../benches/all-plugins-policy.yaml"
        ))
        .expect("the benchmark policy loads");
        let now: Timestamp = "2026-02-01T00:00:00Z".parse().expect("time");
        let plan_with = |workers: usize| {
            with_workers(workers, || {
                let mut snapshot =
                    kube_descheduler_engine::testing::synthetic_snapshot(80, 4_000, 21);
                let verdict = kube_descheduler_guard::answer::guard_verdict(
                    &snapshot,
                    now,
                    kube_descheduler_guard::GuardConfig::default(),
                );
                let plan = make_plan(&policy, &mut snapshot, now, Some(verdict));
                plan.evictions
                    .into_iter()
                    .map(|e| {
                        format!(
                            "{}/{} {} {} {} {:?}",
                            e.namespace, e.name, e.plugin, e.reason, e.outcome, e.message
                        )
                    })
                    .collect::<Vec<String>>()
            })
        };
        let sequential = plan_with(1);
        let plugins: std::collections::BTreeSet<&str> = sequential
            .iter()
            .filter_map(|line| line.split(' ').nth(1))
            .collect();
        assert!(
            plugins.len() >= 7,
            "most plugins evict in the synthetic cluster: {plugins:?}"
        );
        for workers in [2, 3, 4] {
            assert_eq!(plan_with(workers), sequential, "{workers} workers");
        }
    }
}
