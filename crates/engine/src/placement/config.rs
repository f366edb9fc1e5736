//! `--scheduler-config FILE`: a `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`)
//! read as kube-scheduler reads it, reduced to what the placement simulator models: profiles by
//! `schedulerName`, `NodeResourcesFit`'s `scoringStrategy`, `NodeResourcesBalancedAllocation`'s
//! resources, `PodTopologySpread`'s `defaultingType`, Score weights and disabled plugins (`*`
//! too). Decoding is strict (an unknown field is an error naming it); fields kube-scheduler has
//! but the simulator does not model (leader election, client connection, extenders, …) are accepted
//! and ignored.

use serde::Deserialize;
use serde_json::Value;

use super::profile::{SchedulerProfile, SchedulerProfiles, ScoringStrategy, Weights};
use crate::error::ConfigError;

/// The API version read.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Wire {
    api_version: String,
    kind: String,
    #[serde(default)]
    profiles: Option<Vec<WireProfile>>,
    #[serde(default)]
    parallelism: Option<Value>,
    #[serde(default)]
    leader_election: Option<Value>,
    #[serde(default)]
    client_connection: Option<Value>,
    #[serde(default)]
    healthz_bind_address: Option<Value>,
    #[serde(default)]
    metrics_bind_address: Option<Value>,
    #[serde(default)]
    enable_profiling: Option<Value>,
    #[serde(default)]
    enable_contention_profiling: Option<Value>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<Value>,
    #[serde(default)]
    pod_initial_backoff_seconds: Option<Value>,
    #[serde(default)]
    pod_max_backoff_seconds: Option<Value>,
    #[serde(default)]
    extenders: Option<Value>,
    #[serde(default)]
    delay_cache_until_active: Option<Value>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireProfile {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<Value>,
    #[serde(default)]
    plugins: Option<WirePlugins>,
    #[serde(default)]
    plugin_config: Vec<WirePluginConfig>,
}

#[allow(dead_code)]
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WirePlugins {
    #[serde(default)]
    multi_point: PluginSet,
    #[serde(default)]
    filter: PluginSet,
    #[serde(default)]
    score: PluginSet,
    #[serde(default)]
    pre_enqueue: Option<Value>,
    #[serde(default)]
    queue_sort: Option<Value>,
    #[serde(default)]
    pre_filter: Option<Value>,
    #[serde(default)]
    post_filter: Option<Value>,
    #[serde(default)]
    pre_score: Option<Value>,
    #[serde(default)]
    reserve: Option<Value>,
    #[serde(default)]
    permit: Option<Value>,
    #[serde(default)]
    pre_bind: Option<Value>,
    #[serde(default)]
    bind: Option<Value>,
    #[serde(default)]
    post_bind: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<WirePlugin>,
    #[serde(default)]
    disabled: Vec<WirePlugin>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePlugin {
    name: String,
    #[serde(default)]
    weight: Option<i32>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePluginConfig {
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FitArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    ignored_resources: Option<Value>,
    #[serde(default)]
    ignored_resource_groups: Option<Value>,
    #[serde(default)]
    scoring_strategy: Option<WireStrategy>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireStrategy {
    #[serde(default, rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    resources: Option<Vec<WireResource>>,
    #[serde(default)]
    requested_to_capacity_ratio: Option<WireRatio>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireResource {
    name: String,
    #[serde(default)]
    weight: Option<i64>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRatio {
    shape: Vec<WirePoint>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePoint {
    utilization: i64,
    score: i64,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BalancedArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    resources: Option<Vec<WireResource>>,
}

// Fields kube-scheduler has but the simulator does not model are decoded (so a typo is an error)
// and not read.
#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SpreadArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    default_constraints: Option<Vec<Value>>,
    #[serde(default)]
    defaulting_type: Option<String>,
}

fn err(field: impl std::fmt::Display, msg: impl std::fmt::Display) -> ConfigError {
    ConfigError::new(format!("scheduler configuration: {field}: {msg}"))
}

fn decode<T: serde::de::DeserializeOwned>(value: &Value, at: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." || path.is_empty() {
            at.to_string()
        } else if at.is_empty() {
            path
        } else {
            format!("{at}.{path}")
        };
        err(field, e.into_inner())
    })
}

/// Reads a `KubeSchedulerConfiguration` file.
pub fn load_file(path: &std::path::Path) -> Result<SchedulerProfiles, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new(format!(
            "cannot read scheduler configuration {}: {e}",
            path.display()
        ))
    })?;
    load_str(&text).map_err(|e| ConfigError::new(format!("{}: {}", path.display(), e.0)))
}

/// Reads a `KubeSchedulerConfiguration` from text (YAML or JSON).
pub fn load_str(text: &str) -> Result<SchedulerProfiles, ConfigError> {
    let value: Value = serde_saphyr::from_str(text)
        .map_err(|e| ConfigError::new(format!("scheduler configuration: invalid YAML: {e}")))?;
    let wire: Wire = decode(&value, "")?;
    if wire.kind != "KubeSchedulerConfiguration" {
        return Err(err(
            "kind",
            format!(
                "expected \"KubeSchedulerConfiguration\", got {:?}",
                wire.kind
            ),
        ));
    }
    if wire.api_version != API_VERSION {
        return Err(err(
            "apiVersion",
            format!("expected {API_VERSION:?}, got {:?}", wire.api_version),
        ));
    }
    let wire_profiles = wire.profiles.unwrap_or_default();
    if wire_profiles.is_empty() {
        // kube-scheduler's default: one default-scheduler profile.
        return Ok(SchedulerProfiles::default());
    }
    let mut profiles = Vec::new();
    for (i, wp) in wire_profiles.into_iter().enumerate() {
        let at = format!("profiles[{i}]");
        let p = profile(wp, &at)?;
        if profiles
            .iter()
            .any(|q: &SchedulerProfile| q.scheduler_name == p.scheduler_name)
        {
            return Err(err(
                format!("{at}.schedulerName"),
                format!("duplicate profile {:?}", p.scheduler_name),
            ));
        }
        profiles.push(p);
    }
    Ok(SchedulerProfiles(profiles))
}

/// The score weight slot of a plugin (`None`: a plugin the simulator does not score).
fn weight_slot<'a>(w: &'a mut Weights, name: &str) -> Option<&'a mut i64> {
    Some(match name {
        "NodeResourcesFit" => &mut w.node_resources_fit,
        "NodeResourcesBalancedAllocation" => &mut w.balanced_allocation,
        "ImageLocality" => &mut w.image_locality,
        "TaintToleration" => &mut w.taint_toleration,
        "NodeAffinity" => &mut w.node_affinity,
        "PodTopologySpread" => &mut w.pod_topology_spread,
        "InterPodAffinity" => &mut w.inter_pod_affinity,
        _ => return None,
    })
}

/// Sets `name`'s filter flag (unknown plugins are not modelled and ignored).
fn set_filter(p: &mut SchedulerProfile, name: &str, on: bool) {
    let f = &mut p.filters;
    match name {
        "NodeUnschedulable" => f.node_unschedulable = on,
        "TaintToleration" => f.taint_toleration = on,
        "NodeAffinity" => f.node_affinity = on,
        "NodePorts" => f.node_ports = on,
        "NodeResourcesFit" => f.node_resources_fit = on,
        "PodTopologySpread" => f.pod_topology_spread = on,
        "InterPodAffinity" => f.inter_pod_affinity = on,
        _ => {}
    }
}

const FILTERS: [&str; 7] = [
    "NodeUnschedulable",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
];
const SCORES: [&str; 7] = [
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
    "TaintToleration",
    "NodeAffinity",
    "PodTopologySpread",
    "InterPodAffinity",
];

fn apply_set(
    p: &mut SchedulerProfile,
    set: &PluginSet,
    filter: bool,
    score: bool,
    at: &str,
) -> Result<(), ConfigError> {
    for (j, d) in set.disabled.iter().enumerate() {
        if d.weight.is_some() {
            return Err(err(
                format!("{at}.disabled[{j}].weight"),
                "a disabled plugin takes no weight",
            ));
        }
        let names: Vec<&str> = if d.name == "*" {
            FILTERS.iter().chain(SCORES.iter()).copied().collect()
        } else {
            vec![d.name.as_str()]
        };
        for name in names {
            if filter {
                set_filter(p, name, false);
            }
            if score && let Some(w) = weight_slot(&mut p.weights, name) {
                *w = 0;
            }
        }
    }
    for (j, e) in set.enabled.iter().enumerate() {
        if e.name == "*" {
            return Err(err(
                format!("{at}.enabled[{j}].name"),
                "\"*\" is only valid in disabled",
            ));
        }
        if let Some(w) = e.weight
            && !(0..=100).contains(&w)
        {
            return Err(err(
                format!("{at}.enabled[{j}].weight"),
                format!("{w} is out of range (0–100)"),
            ));
        }
        if filter {
            set_filter(p, &e.name, true);
        }
        if score && let Some(slot) = weight_slot(&mut p.weights, &e.name) {
            // kube-scheduler: a weight of 0 (unset) counts as 1.
            *slot = i64::from(e.weight.unwrap_or(0).max(1));
        }
    }
    Ok(())
}

fn resources(list: Vec<WireResource>, at: &str) -> Result<Vec<(String, i64)>, ConfigError> {
    list.into_iter()
        .enumerate()
        .map(|(j, r)| {
            let w = r.weight.unwrap_or(1);
            if !(1..=100).contains(&w) {
                return Err(err(
                    format!("{at}[{j}].weight"),
                    format!("{w} is out of range (1–100)"),
                ));
            }
            Ok((r.name, w))
        })
        .collect()
}

fn profile(wp: WireProfile, at: &str) -> Result<SchedulerProfile, ConfigError> {
    let mut p = SchedulerProfile {
        scheduler_name: wp
            .scheduler_name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| super::profile::DEFAULT_SCHEDULER.to_string()),
        ..Default::default()
    };
    let plugins = wp.plugins.unwrap_or_default();
    apply_set(
        &mut p,
        &plugins.multi_point,
        true,
        true,
        &format!("{at}.plugins.multiPoint"),
    )?;
    apply_set(
        &mut p,
        &plugins.filter,
        true,
        false,
        &format!("{at}.plugins.filter"),
    )?;
    apply_set(
        &mut p,
        &plugins.score,
        false,
        true,
        &format!("{at}.plugins.score"),
    )?;
    for (j, pc) in wp.plugin_config.iter().enumerate() {
        let at = format!("{at}.pluginConfig[{j}].args");
        let Some(args) = &pc.args else { continue };
        apply_args(&mut p, &pc.name, args, &at)?;
    }
    Ok(p)
}

/// Applies the pluginConfig args of plugin `name` at `at` to `p`.
fn apply_args(
    p: &mut SchedulerProfile,
    name: &str,
    args: &Value,
    at: &str,
) -> Result<(), ConfigError> {
    match name {
        "NodeResourcesFit" => {
            let a: FitArgs = decode(args, at)?;
            if let Some(s) = a.scoring_strategy {
                apply_scoring_strategy(p, s, &format!("{at}.scoringStrategy"))?;
            }
        }
        "NodeResourcesBalancedAllocation" => {
            let a: BalancedArgs = decode(args, at)?;
            if let Some(r) = a.resources {
                p.balanced_resources = resources(r, &format!("{at}.resources"))?;
            }
        }
        "PodTopologySpread" => {
            let a: SpreadArgs = decode(args, at)?;
            match a.defaulting_type.as_deref() {
                None | Some("System") => {}
                Some("List") => {
                    // Listed default constraints are not modelled: none are applied.
                    p.system_default_spread = false;
                }
                Some(other) => {
                    return Err(err(
                        format!("{at}.defaultingType"),
                        format!("{other:?} is not one of System, List"),
                    ));
                }
            }
        }
        // Args of plugins the simulator does not model are kube-scheduler's business.
        _ => {}
    }
    Ok(())
}

/// Applies NodeResourcesFit's `scoringStrategy` (at `sat`) to `p`: its resources and its type.
fn apply_scoring_strategy(
    p: &mut SchedulerProfile,
    s: WireStrategy,
    sat: &str,
) -> Result<(), ConfigError> {
    if let Some(r) = s.resources {
        p.fit_resources = resources(r, &format!("{sat}.resources"))?;
    }
    p.strategy = match s.type_.as_deref().unwrap_or("LeastAllocated") {
        "LeastAllocated" => ScoringStrategy::LeastAllocated,
        "MostAllocated" => ScoringStrategy::MostAllocated,
        "RequestedToCapacityRatio" => {
            let Some(r) = s.requested_to_capacity_ratio else {
                return Err(err(
                    format!("{sat}.requestedToCapacityRatio"),
                    "required with type RequestedToCapacityRatio",
                ));
            };
            let shape = shape(r.shape, &format!("{sat}.requestedToCapacityRatio.shape"))?;
            ScoringStrategy::RequestedToCapacityRatio { shape }
        }
        other => {
            return Err(err(
                format!("{sat}.type"),
                format!(
                    "{other:?} is not one of LeastAllocated, MostAllocated, RequestedToCapacityRatio"
                ),
            ));
        }
    };
    Ok(())
}

/// Validates a RequestedToCapacityRatio shape as kube-scheduler does: utilization 0–100 strictly
/// increasing, score 0–10.
fn shape(points: Vec<WirePoint>, at: &str) -> Result<Vec<(i64, i64)>, ConfigError> {
    if points.is_empty() {
        return Err(err(at, "at least one point is required"));
    }
    let mut prev = -1;
    for (j, pt) in points.iter().enumerate() {
        if !(0..=100).contains(&pt.utilization) {
            return Err(err(
                format!("{at}[{j}].utilization"),
                format!("{} is out of range (0–100)", pt.utilization),
            ));
        }
        if pt.utilization <= prev {
            return Err(err(
                format!("{at}[{j}].utilization"),
                "utilization values must be sorted in increasing order",
            ));
        }
        prev = pt.utilization;
        if !(0..=10).contains(&pt.score) {
            return Err(err(
                format!("{at}[{j}].score"),
                format!("{} is out of range (0–10)", pt.score),
            ));
        }
    }
    Ok(points
        .into_iter()
        .map(|p| (p.utilization, p.score))
        .collect())
}
