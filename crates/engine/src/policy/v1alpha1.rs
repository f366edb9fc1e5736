//! `descheduler/v1alpha1` (strategies + params), converted to v1alpha2 the way upstream v0.30 did:
//! each enabled strategy becomes a profile `strategy-<Name>-profile` with a DefaultEvictor built
//! from the top-level booleans plus the strategy's `nodeFit` (ignored for PodLifeTime) and priority
//! threshold. Upstream removed v1alpha1 in v0.31; we keep old files working.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::ConfigError;
use crate::evictor::LimitValue;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyV1alpha1 {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    strategies: BTreeMap<String, Strategy>,
    #[serde(default)]
    node_selector: Option<String>,
    #[serde(default)]
    evict_failed_bare_pods: Option<bool>,
    #[serde(default)]
    evict_local_storage_pods: Option<bool>,
    #[serde(default)]
    evict_system_critical_pods: Option<bool>,
    #[serde(default)]
    evict_daemon_set_pods: Option<bool>,
    #[serde(default)]
    ignore_pvc_pods: Option<bool>,
    #[serde(default)]
    max_no_of_pods_to_evict_per_node: Option<LimitValue>,
    #[serde(default)]
    max_no_of_pods_to_evict_per_namespace: Option<LimitValue>,
    #[serde(default)]
    max_no_of_pods_to_evict_total: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Strategy {
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    #[allow(dead_code)]
    weight: Option<i64>,
    #[serde(default)]
    params: Option<Params>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Params {
    #[serde(default)]
    node_resource_utilization_thresholds: Option<NodeUtilization>,
    #[serde(default)]
    node_affinity_type: Option<Vec<String>>,
    #[serde(default)]
    pods_having_too_many_restarts: Option<TooManyRestarts>,
    #[serde(default)]
    pod_life_time: Option<PodLifeTime>,
    #[serde(default)]
    remove_duplicates: Option<RemoveDuplicates>,
    #[serde(default)]
    failed_pods: Option<FailedPods>,
    #[serde(default)]
    include_soft_constraints: bool,
    #[serde(default)]
    namespaces: Option<Value>,
    #[serde(default)]
    threshold_priority: Option<i32>,
    #[serde(default)]
    threshold_priority_class_name: Option<String>,
    #[serde(default)]
    label_selector: Option<Value>,
    #[serde(default)]
    node_fit: bool,
    #[serde(default)]
    include_prefer_no_schedule: bool,
    #[serde(default)]
    excluded_taints: Option<Vec<String>>,
    #[serde(default)]
    included_taints: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NodeUtilization {
    #[serde(default)]
    use_deviation_thresholds: bool,
    #[serde(default)]
    thresholds: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    target_thresholds: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    number_of_nodes: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TooManyRestarts {
    #[serde(default)]
    pod_restart_threshold: Option<i32>,
    #[serde(default)]
    including_init_containers: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodLifeTime {
    #[serde(default)]
    max_pod_life_time_seconds: Option<u64>,
    #[serde(default)]
    states: Option<Vec<String>>,
    #[serde(default)]
    pod_status_phases: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RemoveDuplicates {
    #[serde(default)]
    exclude_owner_kinds: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FailedPods {
    #[serde(default)]
    exclude_owner_kinds: Option<Vec<String>>,
    #[serde(default)]
    min_pod_lifetime_seconds: Option<u64>,
    #[serde(default)]
    reasons: Option<Vec<String>>,
    #[serde(default)]
    including_init_containers: bool,
}

/// Strategy names v1alpha1 accepted, and whether each was a Balance plugin.
const STRATEGIES: &[(&str, bool)] = &[
    ("HighNodeUtilization", true),
    ("LowNodeUtilization", true),
    ("PodLifeTime", false),
    ("RemoveDuplicates", true),
    ("RemoveFailedPods", false),
    ("RemovePodsHavingTooManyRestarts", false),
    ("RemovePodsViolatingInterPodAntiAffinity", false),
    ("RemovePodsViolatingNodeAffinity", false),
    ("RemovePodsViolatingNodeTaints", false),
    ("RemovePodsViolatingTopologySpreadConstraint", true),
];

fn insert_opt<T: serde::Serialize>(m: &mut Map<String, Value>, key: &str, v: Option<T>) {
    if let Some(v) = v
        && let Ok(v) = serde_json::to_value(v)
    {
        m.insert(key.to_string(), v);
    }
}

/// The v1alpha2 args of the plugin `name`, built from its v1alpha1 strategy params.
fn plugin_args(name: &str, p: &Params) -> Value {
    let mut a = Map::new();
    match name {
        "RemovePodsViolatingNodeTaints" => node_taints_args(&mut a, p),
        "RemoveFailedPods" => failed_pods_args(&mut a, p),
        "RemovePodsViolatingNodeAffinity" => {
            insert_scope(&mut a, p);
            insert_opt(&mut a, "nodeAffinityType", p.node_affinity_type.clone());
        }
        "RemovePodsViolatingInterPodAntiAffinity" => insert_scope(&mut a, p),
        "RemovePodsHavingTooManyRestarts" => too_many_restarts_args(&mut a, p),
        "PodLifeTime" => pod_life_time_args(&mut a, p),
        "RemoveDuplicates" => {
            insert_opt(&mut a, "namespaces", p.namespaces.clone());
            insert_opt(
                &mut a,
                "excludeOwnerKinds",
                p.remove_duplicates
                    .as_ref()
                    .and_then(|r| r.exclude_owner_kinds.clone()),
            );
        }
        "RemovePodsViolatingTopologySpreadConstraint" => {
            let mut constraints = vec!["DoNotSchedule"];
            if p.include_soft_constraints {
                constraints.push("ScheduleAnyway");
            }
            insert_scope(&mut a, p);
            a.insert("constraints".into(), json!(constraints));
            a.insert("topologyBalanceNodeFit".into(), json!(true));
        }
        "HighNodeUtilization" | "LowNodeUtilization" => {
            utilization_args(&mut a, p, name == "LowNodeUtilization")
        }
        _ => {}
    }
    Value::Object(a)
}

/// The `namespaces` and `labelSelector` most plugins take, when the params set them.
fn insert_scope(a: &mut Map<String, Value>, p: &Params) {
    insert_opt(a, "namespaces", p.namespaces.clone());
    insert_opt(a, "labelSelector", p.label_selector.clone());
}

fn node_taints_args(a: &mut Map<String, Value>, p: &Params) {
    insert_scope(a, p);
    a.insert(
        "includePreferNoSchedule".into(),
        json!(p.include_prefer_no_schedule),
    );
    insert_opt(a, "excludedTaints", p.excluded_taints.clone());
    insert_opt(a, "includedTaints", p.included_taints.clone());
}

fn failed_pods_args(a: &mut Map<String, Value>, p: &Params) {
    let f = p.failed_pods.as_ref();
    insert_scope(a, p);
    a.insert(
        "includingInitContainers".into(),
        json!(f.is_some_and(|f| f.including_init_containers)),
    );
    insert_opt(
        a,
        "minPodLifetimeSeconds",
        f.and_then(|f| f.min_pod_lifetime_seconds),
    );
    insert_opt(
        a,
        "excludeOwnerKinds",
        f.and_then(|f| f.exclude_owner_kinds.clone()),
    );
    insert_opt(a, "reasons", f.and_then(|f| f.reasons.clone()));
}

fn too_many_restarts_args(a: &mut Map<String, Value>, p: &Params) {
    let r = p.pods_having_too_many_restarts.as_ref();
    insert_scope(a, p);
    a.insert(
        "podRestartThreshold".into(),
        json!(r.and_then(|r| r.pod_restart_threshold).unwrap_or(0)),
    );
    a.insert(
        "includingInitContainers".into(),
        json!(r.is_some_and(|r| r.including_init_containers)),
    );
}

/// PodLifeTime args; v1alpha1's `podStatusPhases` and `states` merge into `states`.
fn pod_life_time_args(a: &mut Map<String, Value>, p: &Params) {
    let l = p.pod_life_time.as_ref();
    let mut states: Vec<String> = Vec::new();
    if let Some(l) = l {
        states.extend(l.pod_status_phases.iter().flatten().cloned());
        states.extend(l.states.iter().flatten().cloned());
    }
    insert_scope(a, p);
    insert_opt(
        a,
        "maxPodLifeTimeSeconds",
        l.and_then(|l| l.max_pod_life_time_seconds),
    );
    if !states.is_empty() {
        a.insert("states".into(), json!(states));
    }
}

/// HighNodeUtilization args, plus the target and deviation settings when `low` (LowNodeUtilization).
fn utilization_args(a: &mut Map<String, Value>, p: &Params, low: bool) {
    let t = p.node_resource_utilization_thresholds.as_ref();
    if let Some(ns) = p.namespaces.clone() {
        a.insert("evictableNamespaces".into(), ns);
    }
    a.insert(
        "thresholds".into(),
        json!(t.and_then(|t| t.thresholds.clone()).unwrap_or_default()),
    );
    insert_opt(a, "numberOfNodes", t.and_then(|t| t.number_of_nodes));
    if low {
        a.insert(
            "targetThresholds".into(),
            json!(
                t.and_then(|t| t.target_thresholds.clone())
                    .unwrap_or_default()
            ),
        );
        a.insert(
            "useDeviationThresholds".into(),
            json!(t.is_some_and(|t| t.use_deviation_thresholds)),
        );
    }
}

/// Converts a v1alpha1 policy to an equivalent v1alpha2 document, with notes about the conversion.
pub fn convert(value: &Value) -> Result<(Value, Vec<String>), ConfigError> {
    let old: PolicyV1alpha1 = serde_path_to_error::deserialize(value)
        .map_err(|e| ConfigError::new(format!("{}: {}", e.path(), e.inner())))?;
    let mut profiles = Vec::new();
    for (name, strategy) in &old.strategies {
        let is_balance = strategy_is_balance(name)?;
        if !strategy.enabled {
            continue;
        }
        let empty = Params::default();
        let params = strategy.params.as_ref().unwrap_or(&empty);
        check_priority_threshold(name, params)?;
        let evictor = evictor_args(&old, name, params);
        profiles.push(strategy_profile(name, is_balance, evictor, params));
    }
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("descheduler/v1alpha2"));
    out.insert("kind".into(), json!("DeschedulerPolicy"));
    out.insert("profiles".into(), Value::Array(profiles));
    insert_opt(&mut out, "nodeSelector", old.node_selector);
    insert_opt(
        &mut out,
        "maxNoOfPodsToEvictPerNode",
        old.max_no_of_pods_to_evict_per_node,
    );
    insert_opt(
        &mut out,
        "maxNoOfPodsToEvictPerNamespace",
        old.max_no_of_pods_to_evict_per_namespace,
    );
    insert_opt(
        &mut out,
        "maxNoOfPodsToEvictTotal",
        old.max_no_of_pods_to_evict_total,
    );
    let notes = vec!["descheduler/v1alpha1 policy converted to descheduler/v1alpha2 (one profile per enabled strategy)".to_string()];
    Ok((Value::Object(out), notes))
}

/// Whether the strategy `name` was a Balance plugin; an error naming the known strategies when unknown.
fn strategy_is_balance(name: &str) -> Result<bool, ConfigError> {
    match STRATEGIES.iter().find(|(n, _)| *n == name) {
        Some(&(_, is_balance)) => Ok(is_balance),
        None => {
            let known: Vec<&str> = STRATEGIES.iter().map(|(n, _)| *n).collect();
            Err(ConfigError::new(format!(
                "strategies.{name}: unknown strategy (known strategies: {})",
                known.join(", ")
            )))
        }
    }
}

/// Rejects params that set both `thresholdPriority` and a non-empty `thresholdPriorityClassName`.
fn check_priority_threshold(name: &str, params: &Params) -> Result<(), ConfigError> {
    if params.threshold_priority.is_some()
        && params
            .threshold_priority_class_name
            .as_deref()
            .is_some_and(|s| !s.is_empty())
    {
        return Err(ConfigError::new(format!(
            "strategies.{name}.params: priority threshold misconfigured, only one of thresholdPriority and thresholdPriorityClassName can be set"
        )));
    }
    Ok(())
}

/// The DefaultEvictor args of one strategy's profile: the policy's true booleans, the strategy's
/// `nodeFit` (not for PodLifeTime) and its priority threshold.
fn evictor_args(old: &PolicyV1alpha1, name: &str, params: &Params) -> Map<String, Value> {
    let mut evictor = Map::new();
    insert_opt(
        &mut evictor,
        "evictLocalStoragePods",
        old.evict_local_storage_pods.filter(|b| *b),
    );
    insert_opt(
        &mut evictor,
        "evictSystemCriticalPods",
        old.evict_system_critical_pods.filter(|b| *b),
    );
    insert_opt(
        &mut evictor,
        "evictDaemonSetPods",
        old.evict_daemon_set_pods.filter(|b| *b),
    );
    insert_opt(
        &mut evictor,
        "ignorePvcPods",
        old.ignore_pvc_pods.filter(|b| *b),
    );
    insert_opt(
        &mut evictor,
        "evictFailedBarePods",
        old.evict_failed_bare_pods.filter(|b| *b),
    );
    if name != "PodLifeTime" && params.node_fit {
        evictor.insert("nodeFit".into(), json!(true));
    }
    if let Some(v) = params.threshold_priority {
        evictor.insert("priorityThreshold".into(), json!({ "value": v }));
    } else if let Some(n) = params
        .threshold_priority_class_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        evictor.insert("priorityThreshold".into(), json!({ "name": n }));
    }
    evictor
}

/// The profile `strategy-<name>-profile`: DefaultEvictor plus the strategy's plugin at its extension point.
fn strategy_profile(
    name: &str,
    is_balance: bool,
    evictor: Map<String, Value>,
    params: &Params,
) -> Value {
    let point = if is_balance { "balance" } else { "deschedule" };
    json!({
        "name": format!("strategy-{name}-profile"),
        "pluginConfig": [
            { "name": "DefaultEvictor", "args": Value::Object(evictor) },
            { "name": name, "args": plugin_args(name, params) },
        ],
        "plugins": {
            "filter": { "enabled": ["DefaultEvictor"] },
            "preevictionfilter": { "enabled": ["DefaultEvictor"] },
            point: { "enabled": [name] },
        },
    })
}
