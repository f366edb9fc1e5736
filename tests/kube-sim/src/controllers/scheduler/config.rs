//! `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`, YAML or JSON) as kube-sim's
//! scheduler reads it: profiles by `schedulerName`, the score plugins kube-sim models with their
//! weights (`NodeResourcesFit` with its `scoringStrategy`, `NodeResourcesBalancedAllocation`,
//! `TaintToleration`), disabled score plugins and `percentageOfNodesToScore`.
//!
//! Decoding is strict (an unknown field is an error naming its path). Defaults follow
//! kube-scheduler's `apis/config/v1` (`default_plugins.go`, `defaults.go`): the default profile's
//! score plugins and weights are TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1,
//! PodTopologySpread 2, InterPodAffinity 2, NodeResourcesBalancedAllocation 1, ImageLocality 1;
//! NodeResourcesFit scores `LeastAllocated` over cpu and memory, weight 1 each; a score plugin
//! enabled with weight 0 gets weight 1 (as the framework does). Plugins of other extension
//! points are accepted and ignored (kube-sim's filters are fixed).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// The only `apiVersion` accepted.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// The profile name a pod without `schedulerName` is served by.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Score plugins of kube-scheduler's default profile, with their default weights.
const DEFAULT_SCORE_PLUGINS: [(&str, i64); 7] = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
];
/// In-tree score plugins that are not in the default profile but may be enabled.
const OTHER_SCORE_PLUGINS: [&str; 1] = ["VolumeBinding"];

/// How a profile's scheduler scores a node for a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerConfig {
    /// Profiles by `schedulerName`.
    pub profiles: BTreeMap<String, Profile>,
}

/// One profile, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// `percentageOfNodesToScore` (profile's, else the configuration's; `None`: adaptive).
    pub percentage_of_nodes_to_score: Option<u32>,
    /// `NodeResourcesFit` score: weight and strategy (`None`: disabled).
    pub fit: Option<(i64, ScoringStrategy)>,
    /// `NodeResourcesBalancedAllocation` score: weight and resources (`None`: disabled).
    pub balanced: Option<(i64, Vec<ResourceWeight>)>,
    /// `TaintToleration` score weight (`None`: disabled).
    pub taint_toleration: Option<i64>,
    /// Enabled score plugins kube-sim does not model (they add nothing to any node).
    pub unmodelled: Vec<String>,
}

/// A resource and its weight in a strategy.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceWeight {
    /// Resource name, e.g. `cpu`.
    pub name: String,
    /// Weight (1–100).
    #[serde(default)]
    pub weight: i64,
}

/// `NodeResourcesFitArgs.scoringStrategy`, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoringStrategy {
    /// Which function.
    pub kind: StrategyKind,
    /// Resources scored and their weights.
    pub resources: Vec<ResourceWeight>,
}

/// The scoring function of `NodeResourcesFit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrategyKind {
    /// Prefers nodes with the most free share.
    LeastAllocated,
    /// Prefers the fullest nodes (bin packing).
    MostAllocated,
    /// A broken-linear function of utilization: `(utilization %, score 0–100)` points, the
    /// configured scores (0–10) already multiplied by 10 as kube-scheduler does.
    RequestedToCapacityRatio(Vec<(i64, i64)>),
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: StrategyKind::LeastAllocated,
            resources: default_resources(),
        }
    }
}

fn default_resources() -> Vec<ResourceWeight> {
    ["cpu", "memory"]
        .into_iter()
        .map(|name| ResourceWeight {
            name: name.into(),
            weight: 1,
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Wire {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    parallelism: Option<i64>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<i64>,
    #[serde(default)]
    pod_initial_backoff_seconds: Option<i64>,
    #[serde(default)]
    pod_max_backoff_seconds: Option<i64>,
    #[serde(default)]
    profiles: Vec<WireProfile>,
    #[serde(default)]
    extenders: Vec<Value>,
    #[serde(default)]
    leader_election: Option<Value>,
    #[serde(default)]
    client_connection: Option<Value>,
    #[serde(default)]
    enable_profiling: Option<bool>,
    #[serde(default)]
    enable_contention_profiling: Option<bool>,
    #[serde(default)]
    delay_cache_until_active: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireProfile {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<i64>,
    #[serde(default)]
    plugins: Option<WirePlugins>,
    #[serde(default)]
    plugin_config: Vec<WirePluginConfig>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WirePlugins {
    #[serde(default)]
    pre_enqueue: Option<WirePluginSet>,
    #[serde(default)]
    queue_sort: Option<WirePluginSet>,
    #[serde(default)]
    pre_filter: Option<WirePluginSet>,
    #[serde(default)]
    filter: Option<WirePluginSet>,
    #[serde(default)]
    post_filter: Option<WirePluginSet>,
    #[serde(default)]
    pre_score: Option<WirePluginSet>,
    #[serde(default)]
    score: Option<WirePluginSet>,
    #[serde(default)]
    reserve: Option<WirePluginSet>,
    #[serde(default)]
    permit: Option<WirePluginSet>,
    #[serde(default)]
    pre_bind: Option<WirePluginSet>,
    #[serde(default)]
    bind: Option<WirePluginSet>,
    #[serde(default)]
    post_bind: Option<WirePluginSet>,
    #[serde(default)]
    multi_point: Option<WirePluginSet>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct WirePluginSet {
    #[serde(default)]
    enabled: Vec<WirePlugin>,
    #[serde(default)]
    disabled: Vec<WirePlugin>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct WirePlugin {
    name: String,
    #[serde(default)]
    weight: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePluginConfig {
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FitArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    #[serde(default)]
    scoring_strategy: Option<WireStrategy>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireStrategy {
    #[serde(default, rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    resources: Option<Vec<ResourceWeight>>,
    #[serde(default)]
    requested_to_capacity_ratio: Option<WireRatio>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRatio {
    #[serde(default)]
    shape: Vec<WirePoint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePoint {
    utilization: i64,
    score: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BalancedArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    resources: Option<Vec<ResourceWeight>>,
}

/// Reads and decodes a configuration file.
pub fn load_file(path: &Path) -> Result<SchedulerConfig, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Decodes a configuration from YAML or JSON text.
pub fn parse(text: &str) -> Result<SchedulerConfig, String> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| format!("YAML: {e}"))?;
    decode(value)
}

/// `T` from `value`, errors naming the path below `at`.
fn strict<T: serde::de::DeserializeOwned>(value: Value, at: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let full = match (at.is_empty(), path == ".") {
            (true, _) => path,
            (false, true) => at.to_string(),
            (false, false) => format!("{at}.{path}"),
        };
        format!("{full}: {}", e.into_inner())
    })
}

/// Decodes and validates a configuration given as JSON.
pub fn decode(value: Value) -> Result<SchedulerConfig, String> {
    if !value.is_object() {
        return Err("a KubeSchedulerConfiguration must be a mapping".into());
    }
    let wire: Wire = strict(value, "")?;
    match wire.api_version.as_deref() {
        Some(API_VERSION) => {}
        Some(other) => {
            return Err(format!(
                "apiVersion: {other:?} is not supported (only {API_VERSION})"
            ));
        }
        None => return Err(format!("apiVersion: missing (want {API_VERSION})")),
    }
    if wire.kind.as_deref() != Some("KubeSchedulerConfiguration") {
        return Err(format!(
            "kind: {:?}, want \"KubeSchedulerConfiguration\"",
            wire.kind.unwrap_or_default()
        ));
    }
    if !wire.extenders.is_empty() {
        return Err("extenders: scheduler extenders are not modelled by kube-sim".into());
    }
    let _ = (
        wire.parallelism,
        wire.pod_initial_backoff_seconds,
        wire.pod_max_backoff_seconds,
        wire.leader_election,
        wire.client_connection,
        wire.enable_profiling,
        wire.enable_contention_profiling,
        wire.delay_cache_until_active,
    );
    let global = percentage(
        wire.percentage_of_nodes_to_score,
        "percentageOfNodesToScore",
    )?;
    let mut profiles = BTreeMap::new();
    let wire_profiles = if wire.profiles.is_empty() {
        vec![WireProfile {
            scheduler_name: None,
            percentage_of_nodes_to_score: None,
            plugins: None,
            plugin_config: Vec::new(),
        }]
    } else {
        wire.profiles
    };
    for (i, p) in wire_profiles.into_iter().enumerate() {
        let at = format!("profiles[{i}]");
        let name = p
            .scheduler_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_SCHEDULER.to_string());
        let profile = resolve_profile(p, global, &at)?;
        if profiles.insert(name.clone(), profile).is_some() {
            return Err(format!(
                "{at}.schedulerName: {name:?} is used by an earlier profile"
            ));
        }
    }
    Ok(SchedulerConfig { profiles })
}

fn percentage(v: Option<i64>, at: &str) -> Result<Option<u32>, String> {
    match v {
        None | Some(0) => Ok(None),
        Some(p) if (1..=100).contains(&p) => Ok(Some(p as u32)),
        Some(p) => Err(format!("{at}: {p} is not in 0–100")),
    }
}

/// The score plugins enabled in `p` with their weights, in kube-scheduler's merge order: the
/// defaults, minus `disabled` (`*`: all), with `enabled` ones added or replacing a default.
fn score_plugins(p: &WirePlugins, at: &str) -> Result<BTreeMap<String, i64>, String> {
    let mut out: BTreeMap<String, i64> = DEFAULT_SCORE_PLUGINS
        .iter()
        .map(|(n, w)| (n.to_string(), *w))
        .collect();
    for (set, point) in [(&p.multi_point, "multiPoint"), (&p.score, "score")] {
        let Some(set) = set else {
            continue;
        };
        for (j, d) in set.disabled.iter().enumerate() {
            if d.name == "*" {
                out.clear();
            } else if known(&d.name) {
                out.remove(&d.name);
            } else if point == "score" {
                return Err(format!(
                    "{at}.plugins.{point}.disabled[{j}].name: {:?} is not a score plugin",
                    d.name
                ));
            }
        }
        for (j, e) in set.enabled.iter().enumerate() {
            let field = format!("{at}.plugins.{point}.enabled[{j}]");
            if !known(&e.name) {
                if point == "score" {
                    return Err(format!(
                        "{field}.name: {:?} is not a score plugin kube-scheduler has",
                        e.name
                    ));
                }
                continue;
            }
            let weight = match e.weight {
                // Listed without a weight it replaces the default entry, and the framework
                // gives weight 0 the weight 1.
                None | Some(0) => 1,
                Some(w) if w > 0 => w,
                Some(w) => return Err(format!("{field}.weight: {w} must not be negative")),
            };
            out.insert(e.name.clone(), weight);
        }
    }
    Ok(out)
}

fn known(name: &str) -> bool {
    DEFAULT_SCORE_PLUGINS.iter().any(|(n, _)| *n == name) || OTHER_SCORE_PLUGINS.contains(&name)
}

fn resolve_profile(p: WireProfile, global: Option<u32>, at: &str) -> Result<Profile, String> {
    let own = percentage(
        p.percentage_of_nodes_to_score,
        &format!("{at}.percentageOfNodesToScore"),
    )?;
    let plugins = p.plugins.unwrap_or_default();
    let _ = (
        &plugins.pre_enqueue,
        &plugins.queue_sort,
        &plugins.pre_filter,
        &plugins.filter,
        &plugins.post_filter,
        &plugins.pre_score,
        &plugins.reserve,
        &plugins.permit,
        &plugins.pre_bind,
        &plugins.bind,
        &plugins.post_bind,
    );
    let mut weights = score_plugins(&plugins, at)?;
    let mut strategy = ScoringStrategy::default();
    let mut balanced_resources = default_resources();
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in p.plugin_config.into_iter().enumerate() {
        let field = format!("{at}.pluginConfig[{i}]");
        if !seen.insert(c.name.clone()) {
            return Err(format!("{field}.name: {:?} is configured twice", c.name));
        }
        let args = c.args.unwrap_or(Value::Object(Default::default()));
        match c.name.as_str() {
            "NodeResourcesFit" => {
                let a: FitArgs = strict(args, &format!("{field}.args"))?;
                check_args_kind(&a.api_version, &a.kind, "NodeResourcesFitArgs", &field)?;
                let _ = (a.ignored_resources, a.ignored_resource_groups);
                if let Some(s) = a.scoring_strategy {
                    strategy = resolve_strategy(s, &format!("{field}.args.scoringStrategy"))?;
                }
            }
            "NodeResourcesBalancedAllocation" => {
                let a: BalancedArgs = strict(args, &format!("{field}.args"))?;
                check_args_kind(
                    &a.api_version,
                    &a.kind,
                    "NodeResourcesBalancedAllocationArgs",
                    &field,
                )?;
                if let Some(r) = a.resources {
                    balanced_resources =
                        resolve_resources(r, &format!("{field}.args.resources"), false)?;
                }
            }
            // Other plugins' arguments configure what kube-sim does not model.
            _ => {}
        }
    }
    let fit = weights.remove("NodeResourcesFit").map(|w| (w, strategy));
    let balanced = weights
        .remove("NodeResourcesBalancedAllocation")
        .map(|w| (w, balanced_resources));
    let taint_toleration = weights.remove("TaintToleration");
    Ok(Profile {
        percentage_of_nodes_to_score: own.or(global),
        fit,
        balanced,
        taint_toleration,
        unmodelled: weights.into_keys().collect(),
    })
}

fn check_args_kind(
    api_version: &Option<String>,
    kind: &Option<String>,
    want: &str,
    at: &str,
) -> Result<(), String> {
    if let Some(v) = api_version
        && v != API_VERSION
    {
        return Err(format!("{at}.args.apiVersion: {v:?}, want {API_VERSION:?}"));
    }
    if let Some(k) = kind
        && k != want
    {
        return Err(format!("{at}.args.kind: {k:?}, want {want:?}"));
    }
    Ok(())
}

/// Validates resources as kube-scheduler's `validateResources`: a name each, once, weight
/// 1–100 (an omitted weight is 1 for the fit strategies, as `SetDefaults_NodeResourcesFitArgs`).
fn resolve_resources(
    list: Vec<ResourceWeight>,
    at: &str,
    default_weight_one: bool,
) -> Result<Vec<ResourceWeight>, String> {
    let mut out: Vec<ResourceWeight> = Vec::with_capacity(list.len());
    for (i, mut r) in list.into_iter().enumerate() {
        if r.name.is_empty() {
            return Err(format!("{at}[{i}].name: must not be empty"));
        }
        if out.iter().any(|o| o.name == r.name) {
            return Err(format!("{at}[{i}].name: {:?} is listed twice", r.name));
        }
        if r.weight == 0 && default_weight_one {
            r.weight = 1;
        }
        if !(1..=100).contains(&r.weight) {
            return Err(format!("{at}[{i}].weight: {} is not in 1–100", r.weight));
        }
        out.push(r);
    }
    Ok(out)
}

fn resolve_strategy(s: WireStrategy, at: &str) -> Result<ScoringStrategy, String> {
    let resources = match s.resources {
        Some(r) => resolve_resources(r, &format!("{at}.resources"), true)?,
        None => default_resources(),
    };
    let kind = match s.type_.as_deref().unwrap_or("LeastAllocated") {
        "LeastAllocated" => StrategyKind::LeastAllocated,
        "MostAllocated" => StrategyKind::MostAllocated,
        "RequestedToCapacityRatio" => {
            let Some(ratio) = s.requested_to_capacity_ratio else {
                return Err(format!(
                    "{at}.requestedToCapacityRatio: required for type RequestedToCapacityRatio"
                ));
            };
            StrategyKind::RequestedToCapacityRatio(resolve_shape(
                ratio.shape,
                &format!("{at}.requestedToCapacityRatio.shape"),
            )?)
        }
        other => {
            return Err(format!(
                "{at}.type: {other:?} is not one of LeastAllocated, MostAllocated, RequestedToCapacityRatio"
            ));
        }
    };
    Ok(ScoringStrategy { kind, resources })
}

/// Validates a shape as kube-scheduler's `validateFunctionShape` (not empty, utilization 0–100
/// strictly increasing, score 0–10) and scales its scores to 0–100.
fn resolve_shape(shape: Vec<WirePoint>, at: &str) -> Result<Vec<(i64, i64)>, String> {
    if shape.is_empty() {
        return Err(format!("{at}: at least one point is required"));
    }
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(shape.len());
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            return Err(format!(
                "{at}[{i}].utilization: {} is not in 0–100",
                p.utilization
            ));
        }
        if let Some((prev, _)) = out.last()
            && p.utilization <= *prev
        {
            return Err(format!(
                "{at}[{i}].utilization: {} must be greater than the previous point's {prev}",
                p.utilization
            ));
        }
        if !(0..=10).contains(&p.score) {
            return Err(format!("{at}[{i}].score: {} is not in 0–10", p.score));
        }
        out.push((p.utilization, p.score * 10));
    }
    Ok(out)
}
