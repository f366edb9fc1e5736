//! Node usage before and after the plan, for each node-usage plugin run (LowNodeUtilization,
//! HighNodeUtilization): the plugin records its levels when it classifies the nodes
//! ([`NodeUsageReport`]); this module takes each node's usage without the pods the plan moves (the
//! snapshot's own sums, which the cycle keeps up to date), adds those pods back for the usage
//! before, and classifies both by the plugin's levels.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;
use serde::Serialize;

use kube_descheduler_engine::evictor::NodeUsageReport;
use kube_descheduler_engine::evictor::usage::NodeClass;
use kube_descheduler_engine::framework::parallel::map_node_chunks;
use kube_descheduler_engine::snapshot::{NodeId, NodeUsage, Pod, PodId, Snapshot};

/// Usage of one node at one moment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageAt {
    /// under / appropriate / over.
    pub class: NodeClass,
    /// Usage per resource in percent of allocatable (null: the node lacks the resource).
    pub percent: BTreeMap<String, Option<f64>>,
}

/// One node's usage before and after the planned evictions.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeUsageRow {
    /// Node name.
    pub node: String,
    /// Pods the plan moves off this node (all plugins).
    pub moved_pods: usize,
    /// Before the plan.
    pub before: UsageAt,
    /// After the planned evictions (the moved pods' requests leave the node).
    pub after: UsageAt,
}

/// How one node-usage plugin run saw the nodes.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeUsageTable {
    /// Profile.
    pub profile: String,
    /// Plugin.
    pub plugin: String,
    /// Resources in column order.
    pub resources: Vec<String>,
    /// Underutilization levels per resource (percent).
    pub low: BTreeMap<String, f64>,
    /// Overutilization levels per resource (percent; empty for HighNodeUtilization).
    pub high: BTreeMap<String, f64>,
    /// Nodes, the interesting ones first (class changed, then over, then under, then by moved
    /// pods and usage).
    pub nodes: Vec<NodeUsageRow>,
}

fn occupies(pod: &Pod) -> bool {
    !pod.is_terminal()
}

/// What a pod uses of resource `name` (a pod uses one `pods`; `MetricResource` is not a request).
fn request(pod: &Pod, name: &str) -> i64 {
    match name {
        "pods" => 1,
        "MetricResource" => 0,
        other => pod.requests.get(other),
    }
}

/// What the pods counted in `usage` use of resource `name`, as [`request`] counts each pod.
fn used(usage: &NodeUsage, name: &str) -> i64 {
    match name {
        "pods" => usage.pods,
        "MetricResource" => 0,
        other => usage.requested.get(other),
    }
}

/// The node's allocatable `name` (`None`: the node lacks it; `MetricResource` is 100 everywhere).
fn capacity(snapshot: &Snapshot, node: NodeId, name: &str) -> Option<i64> {
    let a = &snapshot.node(node).allocatable;
    match name {
        "MetricResource" => Some(100),
        "cpu" | "memory" | "pods" | "ephemeral-storage" => Some(a.get(name)),
        other => a.has(other).then(|| a.get(other)),
    }
}

fn percent(used: i64, cap: Option<i64>) -> Option<f64> {
    let cap = cap?;
    Some(if cap > 0 {
        used as f64 / cap as f64 * 100.0
    } else {
        0.0
    })
}

/// Builds the before/after tables. `moved` are the pods the plan moves; the snapshot still lists
/// them on their nodes (the cycle only marks them evicted).
pub fn usage_tables(
    snapshot: &Snapshot,
    reports: &[NodeUsageReport],
    moved: &FxHashSet<PodId>,
) -> Vec<NodeUsageTable> {
    reports.iter().map(|r| table(snapshot, r, moved)).collect()
}

/// One plugin run's table: a row per node it classified, the interesting rows first.
fn table(
    snapshot: &Snapshot,
    report: &NodeUsageReport,
    moved: &FxHashSet<PodId>,
) -> NodeUsageTable {
    let res = &report.resources;
    let moved_by_node = moved_by_node(snapshot, moved);
    // Rows of large clusters are built on several threads; chunks come back in node order.
    let chunks = map_node_chunks(snapshot, &report.nodes, |nodes| {
        nodes
            .iter()
            .map(|&n| {
                let gone = moved_by_node.get(&n).map_or(&[][..], Vec::as_slice);
                node_row(snapshot, report, n, gone)
            })
            .collect::<Vec<_>>()
    });
    let mut rows: Vec<(NodeUsageRow, f64)> = chunks.into_iter().flatten().collect();
    sort_rows(&mut rows);
    let levels = |l: &[Option<f64>]| -> BTreeMap<String, f64> {
        res.iter()
            .zip(l)
            .filter_map(|(n, v)| Some((n.clone(), (*v)?)))
            .collect()
    };
    NodeUsageTable {
        profile: report.profile.clone(),
        plugin: report.plugin.to_string(),
        resources: res.clone(),
        low: levels(&report.low),
        high: levels(&report.high),
        nodes: rows.into_iter().map(|(r, _)| r).collect(),
    }
}

/// The moved pods per node. The cycle marked them evicted: `pods_on_node` no longer lists them.
fn moved_by_node(
    snapshot: &Snapshot,
    moved: &FxHashSet<PodId>,
) -> rustc_hash::FxHashMap<NodeId, Vec<PodId>> {
    let mut by_node: rustc_hash::FxHashMap<NodeId, Vec<PodId>> = Default::default();
    for &p in moved {
        if let Some(n) = snapshot.pod(p).node {
            by_node.entry(n).or_default().push(p);
        }
    }
    by_node
}

/// Adds the requests of the occupying `pods` to `into` (one slot per resource of `res`).
fn add_requests(
    snapshot: &Snapshot,
    res: &[String],
    pods: impl Iterator<Item = PodId>,
    into: &mut [i64],
) {
    for p in pods {
        let pod = snapshot.pod(p);
        if occupies(pod) {
            for (slot, name) in into.iter_mut().zip(res) {
                *slot = slot.saturating_add(request(pod, name));
            }
        }
    }
}

/// Node `n`'s row (before: with the `gone` pods, after: without them) and its peak percentage
/// before the plan. After is the snapshot's usage of the node: its non-terminal pods that the
/// cycle did not mark evicted, summed once and shared by every table.
fn node_row(
    snapshot: &Snapshot,
    report: &NodeUsageReport,
    n: NodeId,
    gone: &[PodId],
) -> (NodeUsageRow, f64) {
    let res = &report.resources;
    let usage = snapshot.node_usage(n);
    let after: Vec<i64> = res.iter().map(|name| used(&usage, name)).collect();
    let mut before = after.clone();
    add_requests(snapshot, res, gone.iter().copied(), &mut before);
    let caps: Vec<Option<i64>> = res.iter().map(|r| capacity(snapshot, n, r)).collect();
    let at = |used: &[i64]| {
        let pct: Vec<Option<f64>> = used
            .iter()
            .zip(&caps)
            .map(|(&u, &c)| percent(u, c))
            .collect();
        UsageAt {
            class: NodeClass::of(&pct, &report.low, &report.high),
            percent: res.iter().cloned().zip(pct).collect(),
        }
    };
    let before = at(&before);
    let peak = before
        .percent
        .values()
        .flatten()
        .fold(0.0f64, |a, &b| a.max(b));
    (
        NodeUsageRow {
            node: snapshot.node(n).name.clone(),
            moved_pods: gone.len(),
            after: at(&after),
            before,
        },
        peak,
    )
}

/// Orders the rows: class changed first, then over, under, appropriate, then by moved pods, peak
/// usage (higher first) and name.
fn sort_rows(rows: &mut [(NodeUsageRow, f64)]) {
    rows.sort_by(|(a, pa), (b, pb)| {
        let changed = |r: &NodeUsageRow| r.before.class != r.after.class;
        let rank = |c: NodeClass| match c {
            NodeClass::Over => 0,
            NodeClass::Under => 1,
            NodeClass::Appropriate => 2,
        };
        changed(b)
            .cmp(&changed(a))
            .then(rank(a.before.class).cmp(&rank(b.before.class)))
            .then(b.moved_pods.cmp(&a.moved_pods))
            .then(pb.total_cmp(pa))
            .then(a.node.cmp(&b.node))
    });
}
