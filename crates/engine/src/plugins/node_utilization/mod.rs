//! Machinery shared by LowNodeUtilization and HighNodeUtilization (upstream `nodeutilization`):
//! request-based node usage, percentages of allocatable, static or deviation thresholds,
//! classification helpers, capacity caps and the eviction loop that moves pods from source nodes
//! while the destinations have room.
//!
//! Usage is computed once per run in flat per-node arrays; the eviction loop sorts each source
//! node's pods once and filters them lazily, so a run is O(pods + nodes · resources).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Taint;

use std::sync::Arc;

use crate::evictor::reason::percent;
use crate::evictor::{EvictionReason, NodeUsageReport};
use crate::framework::Handle;
use crate::framework::args::Namespaces;
use crate::framework::parallel;
use crate::framework::sort::priority_low_to_high;
use crate::scheduling::taints;
use crate::snapshot::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use crate::snapshot::{Node, NodeId, Pod, PodId, Resources, Snapshot};

mod args;
pub use args::{METRIC_RESOURCE, Thresholds, validate_evictable_namespaces, validate_thresholds};

/// A resource the plugins track: every thresholded one plus cpu, memory and pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tracked {
    /// CPU in millicores.
    Cpu,
    /// Memory in bytes.
    Memory,
    /// Pod count (a pod uses one).
    Pods,
    /// Ephemeral storage in bytes.
    EphemeralStorage,
    /// Upstream's `MetricResource` (capacity 100 on every node).
    Metric,
    /// An extended or other resource.
    Scalar(String),
}

impl Tracked {
    fn from_name(name: &str) -> Self {
        match name {
            CPU => Tracked::Cpu,
            MEMORY => Tracked::Memory,
            PODS => Tracked::Pods,
            EPHEMERAL_STORAGE => Tracked::EphemeralStorage,
            METRIC_RESOURCE => Tracked::Metric,
            other => Tracked::Scalar(other.to_string()),
        }
    }

    /// The resource name.
    pub fn name(&self) -> &str {
        match self {
            Tracked::Cpu => CPU,
            Tracked::Memory => MEMORY,
            Tracked::Pods => PODS,
            Tracked::EphemeralStorage => EPHEMERAL_STORAGE,
            Tracked::Metric => METRIC_RESOURCE,
            Tracked::Scalar(n) => n,
        }
    }

    /// What one pod with `requests` uses of this resource (pods: one).
    fn request(&self, requests: &Resources) -> i64 {
        match self {
            Tracked::Cpu => requests.cpu_milli,
            Tracked::Memory => requests.memory,
            Tracked::Pods => 1,
            Tracked::EphemeralStorage => requests.ephemeral_storage,
            Tracked::Metric | Tracked::Scalar(_) => requests.get(self.name()),
        }
    }

    /// The node's allocatable amount; `None` when the node does not know the resource.
    fn capacity(&self, node: &Node) -> Option<i64> {
        let a = &node.allocatable;
        match self {
            Tracked::Cpu => Some(a.cpu_milli),
            Tracked::Memory => Some(a.memory),
            Tracked::Pods => Some(a.pods),
            Tracked::EphemeralStorage => Some(a.ephemeral_storage),
            Tracked::Metric => Some(100),
            Tracked::Scalar(n) => a.has(n).then(|| a.get(n)),
        }
    }
}

/// The tracked resources for `threshold_names`: those plus cpu, memory and pods, deduplicated.
pub fn tracked_resources<'a>(threshold_names: impl IntoIterator<Item = &'a str>) -> Vec<Tracked> {
    let mut out = vec![Tracked::Cpu, Tracked::Memory, Tracked::Pods];
    for name in threshold_names {
        let t = Tracked::from_name(name);
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// A percentage level per tracked resource (`None`: no threshold for that resource).
pub type Levels = Vec<Option<f64>>;

/// Request-based usage of every node of a run (pods not Succeeded/Failed, evictable or not).
#[derive(Debug)]
pub struct Usage {
    /// Tracked resources (columns).
    pub resources: Vec<Tracked>,
    /// The nodes (rows), in the order the plugin received them.
    pub nodes: Vec<NodeId>,
    used: Vec<i64>,
    capacity: Vec<Option<i64>>,
}

/// Whether a pod occupies resources on its node (Succeeded and Failed pods do not).
pub fn occupies(pod: &Pod) -> bool {
    !pod.is_terminal()
}

impl Usage {
    /// Sums the requests of the pods on each of `nodes` that occupy resources ([`occupies`]).
    /// The sums are the snapshot's per-node usage ([`Snapshot::node_usage`]), computed once per
    /// node and cycle for every plugin until a pod on the node is evicted (LowNodeUtilization
    /// and HighNodeUtilization in one cycle read every pod once). Nodes are read on several
    /// threads (rows come back in node order).
    pub fn compute(snapshot: &Snapshot, nodes: &[NodeId], resources: Vec<Tracked>) -> Self {
        let r = resources.len();
        let parts = parallel::map_node_chunks(snapshot, nodes, |chunk| {
            let mut used = vec![0i64; chunk.len() * r];
            let mut capacity = Vec::with_capacity(chunk.len() * r);
            for (i, &n) in chunk.iter().enumerate() {
                let row = &mut used[i * r..(i + 1) * r];
                let usage = snapshot.node_usage(n);
                for (slot, res) in row.iter_mut().zip(&resources) {
                    *slot = match res {
                        Tracked::Pods => usage.pods,
                        _ => res.request(&usage.requested),
                    };
                }
                let node = snapshot.node(n);
                capacity.extend(resources.iter().map(|res| res.capacity(node)));
            }
            (used, capacity)
        });
        let mut used = Vec::with_capacity(nodes.len() * r);
        let mut capacity = Vec::with_capacity(nodes.len() * r);
        for (u, c) in parts {
            used.extend(u);
            capacity.extend(c);
        }
        Usage {
            resources,
            nodes: nodes.to_vec(),
            used,
            capacity,
        }
    }

    /// Replaces the usage of row `i`, column `r` (measured usage instead of requests).
    pub fn set_used(&mut self, i: usize, r: usize, value: i64) {
        let n = self.resources.len();
        self.used[i * n + r] = value;
    }

    /// Index of the column for `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.resources.iter().position(|t| t.name() == name)
    }

    /// Raw usage of node row `i`, resource column `r`.
    pub fn used(&self, i: usize, r: usize) -> i64 {
        self.used[i * self.resources.len() + r]
    }

    /// Usage of row `i`, column `r` as a percentage of allocatable (0 when allocatable is 0);
    /// `None` when the node does not have the resource.
    pub fn percent(&self, i: usize, r: usize) -> Option<f64> {
        let cap = self.capacity[i * self.resources.len() + r]?;
        let used = self.used(i, r);
        Some(if cap > 0 {
            used as f64 / cap as f64 * 100.0
        } else {
            0.0
        })
    }

    /// Sum of all raw usages of row `i` (cpu in millicores), upstream's node sort key.
    pub fn total(&self, i: usize) -> i64 {
        let r = self.resources.len();
        self.used[i * r..(i + 1) * r]
            .iter()
            .fold(0i64, |acc, &v| acc.saturating_add(v))
    }

    /// `thresholds` as levels over the tracked resources.
    pub fn levels(&self, thresholds: &Thresholds) -> Levels {
        self.resources
            .iter()
            .map(|t| thresholds.get(t.name()).copied())
            .collect()
    }

    /// Deviation mode: the mean usage of each thresholded resource (over the nodes that have it),
    /// minus `low` and plus `high`, clamped to [0, 100]. A resource no node has gets no level.
    pub fn deviation_levels(&self, low: &Thresholds, high: &Thresholds) -> (Levels, Levels) {
        let mut lows = vec![None; self.resources.len()];
        let mut highs = vec![None; self.resources.len()];
        for (r, res) in self.resources.iter().enumerate() {
            let (Some(&lo), Some(&hi)) = (low.get(res.name()), high.get(res.name())) else {
                continue;
            };
            let (mut sum, mut count) = (0.0f64, 0u32);
            for i in 0..self.nodes.len() {
                if let Some(p) = self.percent(i, r) {
                    sum += p;
                    count += 1;
                }
            }
            if count == 0 {
                continue;
            }
            let mean = sum / count as f64;
            lows[r] = Some((mean - lo).clamp(0.0, 100.0));
            highs[r] = Some((mean + hi).clamp(0.0, 100.0));
        }
        (lows, highs)
    }

    /// Every thresholded resource of row `i` is at or below its level (upstream
    /// `isNodeBelowThreshold`; a resource the node lacks counts as 0 %).
    pub fn is_below(&self, i: usize, levels: &Levels) -> bool {
        levels
            .iter()
            .enumerate()
            .all(|(r, level)| level.is_none_or(|l| l >= self.percent(i, r).unwrap_or(0.0)))
    }

    /// Some thresholded resource of row `i` is above its level (upstream `isNodeAboveThreshold`).
    pub fn is_above(&self, i: usize, levels: &Levels) -> bool {
        !levels
            .iter()
            .enumerate()
            .all(|(r, level)| level.is_none_or(|l| l >= self.percent(i, r).unwrap_or(0.0)))
    }

    /// Allocatable of row `i`, column `r` capped to `level` (truncated: 50 % of 9 pods is 4);
    /// the full allocatable without a level (so unthresholded cpu / memory / pods act as 100 % in
    /// the stop conditions; classification ignores them, as upstream v0.36); 0 when the node lacks
    /// the resource.
    fn capped(&self, i: usize, r: usize, level: Option<f64>) -> i64 {
        let Some(cap) = self.capacity[i * self.resources.len() + r] else {
            return 0;
        };
        match level {
            None => cap,
            Some(t) => (t * 0.01 * cap as f64) as i64,
        }
    }
}

/// Upstream `PodToleratesTaints` over the destination nodes: the pod tolerates every taint (any
/// effect) of at least one destination, and has at least as many tolerations as it has taints.
struct DestinationTaints<'a> {
    any_untainted: bool,
    distinct: Vec<&'a [Taint]>,
}

impl<'a> DestinationTaints<'a> {
    fn new(snapshot: &'a Snapshot, nodes: impl Iterator<Item = NodeId>) -> Self {
        let mut seen: HashSet<Vec<(&str, Option<&str>, &str)>> = HashSet::new();
        let mut out = DestinationTaints {
            any_untainted: false,
            distinct: Vec::new(),
        };
        for n in nodes {
            let t = snapshot.node(n).taints.as_slice();
            if t.is_empty() {
                out.any_untainted = true;
                continue;
            }
            let key = t
                .iter()
                .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
                .collect();
            if seen.insert(key) {
                out.distinct.push(t);
            }
        }
        out
    }

    fn tolerated_by(&self, pod: &Pod) -> bool {
        self.any_untainted
            || self.distinct.iter().any(|ts| {
                pod.tolerations.len() >= ts.len()
                    && taints::tolerates_all(&pod.tolerations, ts, |_| true)
            })
    }
}

/// What an evicted pod takes off its node and the destinations' spare capacity.
pub enum PodUsage<'a> {
    /// Its requests (one pod for `pods`).
    Requests,
    /// Measured usage per tracked resource (one pod for `pods`); `None`: the pod has no usable
    /// sample and is skipped, as upstream skips a pod whose usage it cannot get.
    Measured(&'a dyn Fn(&Pod) -> Option<Vec<i64>>),
    /// Unknown (Prometheus gives node usage only): nothing is subtracted, and without a node
    /// limit at most one pod is evicted per node, as upstream.
    Unconstrained,
}

/// How [`evict_from_sources`] runs.
pub struct EvictionSpec<'a> {
    /// Rows of the source nodes, in eviction order.
    pub sources: Vec<usize>,
    /// Rows of the destination nodes.
    pub destinations: Vec<usize>,
    /// Per-resource levels capping every node's allocatable (the target / high thresholds).
    pub caps: &'a Levels,
    /// Pods in these namespaces are not evicted.
    pub excluded_namespaces: &'a [String],
    /// At most this many evictions per source node by this plugin (`evictionLimits.node`).
    pub node_limit: Option<u64>,
    /// Also stop a node once no resource is above its capped allocatable (LowNodeUtilization).
    pub stop_under_target: bool,
    /// An extra pod filter (HighNodeUtilization's `OnlyThresholdingResources`).
    pub pod_filter: &'a dyn Fn(&Pod) -> bool,
    /// What an evicted pod uses.
    pub pod_usage: PodUsage<'a>,
    /// Why pods of source row `i` are evicted (built once per source node, when its first pod is
    /// attempted).
    pub describe: &'a dyn Fn(&Usage, usize) -> EvictionReason,
}

/// Each thresholded resource of row `i` against `levels`: `cpu 91% > 80%, memory 62% <= 80%`.
pub fn usage_text(u: &Usage, i: usize, levels: &Levels) -> String {
    u.resources
        .iter()
        .enumerate()
        .filter_map(|(r, res)| {
            let level = levels.get(r).copied().flatten()?;
            let pct = u.percent(i, r).unwrap_or(0.0);
            let op = if pct > level { ">" } else { "<=" };
            Some(format!(
                "{} {} {op} {}",
                res.name(),
                percent(pct),
                percent(level)
            ))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `reason` with the usage of row `i` as fields (`cpuPercent`, `memoryPercent`, `podsPercent`)
/// and the levels (`cpuLevel`, …).
fn with_usage(mut reason: EvictionReason, u: &Usage, i: usize, levels: &Levels) -> EvictionReason {
    for (r, res) in u.resources.iter().enumerate() {
        let (pct, lvl) = match res {
            Tracked::Cpu => ("cpuPercent", "cpuLevel"),
            Tracked::Memory => ("memoryPercent", "memoryLevel"),
            Tracked::Pods => ("podsPercent", "podsLevel"),
            _ => continue,
        };
        if let Some(p) = u.percent(i, r) {
            reason = reason.with(pct, p);
        }
        if let Some(l) = levels.get(r).copied().flatten() {
            reason = reason.with(lvl, l);
        }
    }
    reason
}

/// LowNodeUtilization's reason for row `i`: over its target (usage from `basis`: requests or a
/// metrics source), moving to `destinations` nodes.
pub fn over_target_reason(
    snapshot: &Snapshot,
    u: &Usage,
    i: usize,
    levels: &Levels,
    destinations: usize,
    basis: &str,
) -> EvictionReason {
    let text = |node: &str, usage: &str| {
        format!(
            "{node} over target: {usage} ({basis}); moving to {destinations} underutilized nodes"
        )
    };
    let details = |r: EvictionReason| {
        r.with("usageSource", basis)
            .with("underutilizedNodes", destinations)
    };
    node_reason(snapshot, (u, i, levels), "NodeOverTarget", text, details)
}

/// HighNodeUtilization's reason for row `i`: underutilized, its pods go to `destinations` nodes.
pub fn underutilized_reason(
    snapshot: &Snapshot,
    u: &Usage,
    i: usize,
    levels: &Levels,
    destinations: usize,
) -> EvictionReason {
    let text = |node: &str, usage: &str| {
        format!(
            "{node} underutilized: {usage} (requests); moving its pods to {destinations} other nodes"
        )
    };
    let details = |r: EvictionReason| r.with("destinationNodes", destinations);
    node_reason(snapshot, (u, i, levels), "NodeUnderutilized", text, details)
}

/// The reason `code` for row `i` of `u`: `text` of the node's name and usage, then the node, the
/// plugin's `details` and the usage per resource.
fn node_reason(
    snapshot: &Snapshot,
    (u, i, levels): (&Usage, usize, &Levels),
    code: &'static str,
    text: impl FnOnce(&str, &str) -> String,
    details: impl FnOnce(EvictionReason) -> EvictionReason,
) -> EvictionReason {
    let node = &snapshot.node(u.nodes[i]).name;
    let reason = EvictionReason::new(code, text(node, &usage_text(u, i, levels)));
    with_usage(details(reason.with("node", node.as_str())), u, i, levels)
}

/// What a node-usage plugin records for `plan`'s before/after table.
pub fn usage_report(u: &Usage, low: &Levels, high: &Levels) -> NodeUsageReport {
    NodeUsageReport {
        profile: String::new(),
        plugin: String::new(),
        resources: u.resources.iter().map(|t| t.name().to_string()).collect(),
        low: low.clone(),
        high: high.clone(),
        nodes: u.nodes.clone(),
    }
}

/// Where a run of either plugin stands once its nodes are classified.
pub struct Classified {
    /// How many nodes are underutilized.
    pub underutilized: usize,
    /// The plugin's `numberOfNodes`.
    pub number_of_nodes: i64,
    /// How many nodes the run looked at.
    pub nodes: usize,
    /// Source nodes go least used first (HighNodeUtilization) rather than most used first.
    pub ascending: bool,
}

/// The steps both plugins take after classifying the nodes: nothing is evicted unless both sides
/// have nodes and the underutilized nodes are more than `numberOfNodes` but not all of them; then
/// the sources are marked as being emptied, ordered by usage and evicted from.
pub fn evict_if_unbalanced(
    h: &mut Handle<'_>,
    usage: &mut Usage,
    mut spec: EvictionSpec<'_>,
    run: &Classified,
) {
    if spec.sources.is_empty()
        || spec.destinations.is_empty()
        || (run.underutilized as i64) <= run.number_of_nodes
        || run.underutilized == run.nodes
    {
        return;
    }
    h.mark_emptying(
        spec.sources
            .iter()
            .filter_map(|&i| usage.nodes.get(i).copied()),
    );
    sort_rows_by_usage(usage, &mut spec.sources, run.ascending);
    evict_from_sources(h, usage, &spec);
}

/// The namespaces whose pods the plugin never evicts (`evictableNamespaces.exclude`).
pub fn excluded_namespaces(ns: Option<&Namespaces>) -> &[String] {
    ns.map(|n| n.exclude.as_slice()).unwrap_or(&[])
}

/// Evicts pods from the source nodes, lowest priority first, while the pooled spare capacity of the
/// destinations (capped allocatable minus usage, per resource) stays above zero for every tracked
/// resource, and — with `stop_under_target` — while the source is above its capped allocatable.
/// Node and total limits end the node and the run, as upstream.
pub fn evict_from_sources(h: &mut Handle<'_>, usage: &mut Usage, spec: &EvictionSpec<'_>) {
    let snapshot = h.snapshot;
    let nres = usage.resources.len();
    let mut room = Destinations {
        pooled: pooled_room(usage, spec),
        taints: DestinationTaints::new(snapshot, spec.destinations.iter().map(|&d| usage.nodes[d])),
    };
    let mut pods: Vec<PodId> = Vec::new();
    for &src in &spec.sources {
        if room.is_full() {
            // No destination room left: no later node can continue either.
            return;
        }
        let caps: Vec<i64> = (0..nres)
            .map(|r| usage.capped(src, r, spec.caps[r]))
            .collect();
        if spec.stop_under_target && !above_target(usage, src, &caps) {
            continue;
        }
        pods.clear();
        pods.extend(
            snapshot
                .pods_on_node(usage.nodes[src])
                .filter(|&p| occupies(snapshot.pod(p))),
        );
        pods.sort_by(|&a, &b| priority_low_to_high(snapshot, a, b));
        let source = Source {
            row: src,
            caps: &caps,
            pods: &pods,
        };
        if !evict_from_node(h, usage, spec, &mut room, &source) {
            return;
        }
    }
}

/// The destinations as the eviction loop sees them: their pooled spare capacity per resource and
/// the taint sets a pod must tolerate (one of) to move there.
struct Destinations<'a> {
    pooled: Vec<i64>,
    taints: DestinationTaints<'a>,
}

impl Destinations<'_> {
    /// No room left for some tracked resource.
    fn is_full(&self) -> bool {
        self.pooled.iter().any(|&p| p <= 0)
    }
}

/// One source node: its row, its capped allocatable per resource and its occupying pods, lowest
/// priority first.
struct Source<'a> {
    row: usize,
    caps: &'a [i64],
    pods: &'a [PodId],
}

/// The destinations' pooled spare capacity per resource: capped allocatable minus usage, summed.
fn pooled_room(usage: &Usage, spec: &EvictionSpec<'_>) -> Vec<i64> {
    let mut pooled = vec![0i64; usage.resources.len()];
    for &d in &spec.destinations {
        for (r, p) in pooled.iter_mut().enumerate() {
            *p = p
                .saturating_add(usage.capped(d, r, spec.caps[r]))
                .saturating_sub(usage.used(d, r));
        }
    }
    pooled
}

/// Whether some resource of row `src` is used above its capped allocatable `caps`.
fn above_target(usage: &Usage, src: usize, caps: &[i64]) -> bool {
    caps.iter()
        .enumerate()
        .any(|(r, &cap)| cap < usage.used(src, r))
}

/// Evicts from one source node until its node limit, the destinations' room or (with
/// `stop_under_target`) its target ends it; false when the total limit ends the whole run.
fn evict_from_node(
    h: &mut Handle<'_>,
    usage: &mut Usage,
    spec: &EvictionSpec<'_>,
    room: &mut Destinations<'_>,
    source: &Source<'_>,
) -> bool {
    let snapshot = h.snapshot;
    let src = source.row;
    let mut evicted = 0u64;
    let mut reason: Option<Arc<EvictionReason>> = None;
    for &p in source.pods {
        if spec.node_limit.is_some_and(|l| evicted >= l) {
            break;
        }
        let pod = snapshot.pod(p);
        if !h.filter(p) || !(spec.pod_filter)(pod) || !room.taints.tolerated_by(pod) {
            continue;
        }
        if spec
            .excluded_namespaces
            .iter()
            .any(|n| **n == *pod.namespace)
        {
            continue;
        }
        let Some(measured) = measured_usage(spec, pod) else {
            continue;
        };
        let why = reason
            .get_or_insert_with(|| Arc::new((spec.describe)(usage, src)))
            .clone();
        match h.evict_because(p, why) {
            Ok(_) => {}
            Err(e) if e.is_total_limit() => return false,
            Err(e) if e.is_node_limit() => break,
            Err(_) => continue,
        }
        if matches!(spec.pod_usage, PodUsage::Unconstrained) {
            // Upstream: without a per-node limit, a single eviction per node.
            if spec.node_limit.is_none() {
                break;
            }
            evicted += 1;
            continue;
        }
        evicted += 1;
        take_off(usage, &mut room.pooled, src, pod, measured.as_deref());
        if room.is_full() || (spec.stop_under_target && !above_target(usage, src, source.caps)) {
            break;
        }
    }
    true
}

/// The pod's measured usage per tracked resource with [`PodUsage::Measured`] (`Some(None)` with
/// the other kinds); `None` when it has no usable sample and is skipped, as upstream.
fn measured_usage(spec: &EvictionSpec<'_>, pod: &Pod) -> Option<Option<Vec<i64>>> {
    match &spec.pod_usage {
        PodUsage::Measured(of) => match of(pod) {
            Some(amounts) => Some(Some(amounts)),
            None => {
                tracing::debug!(pod = %format_args!("{}/{}", pod.namespace, pod.name), "unable to get pod usage; not evicting it");
                None
            }
        },
        _ => Some(None),
    }
}

/// Takes an evicted pod's usage (`measured`, else its requests) off row `src` and off the
/// destinations' pooled room.
fn take_off(
    usage: &mut Usage,
    pooled: &mut [i64],
    src: usize,
    pod: &Pod,
    measured: Option<&[i64]>,
) {
    let row = src * usage.resources.len();
    for (r, res) in usage.resources.iter().enumerate() {
        let amount = match measured {
            Some(m) => m.get(r).copied().unwrap_or(0),
            None => res.request(&pod.requests),
        };
        usage.used[row + r] = usage.used[row + r].saturating_sub(amount);
        pooled[r] = pooled[r].saturating_sub(amount);
    }
}

/// Sorts rows by total usage, descending (LowNodeUtilization) or ascending (HighNodeUtilization);
/// ties keep the input order.
pub fn sort_rows_by_usage(usage: &Usage, rows: &mut [usize], ascending: bool) {
    rows.sort_by(|&a, &b| {
        let o = usage.total(a).cmp(&usage.total(b));
        if ascending { o } else { o.reverse() }
    });
}

#[cfg(test)]
mod tests;
