//! Rendering a [`Plan`] for people (a table) or programs (one JSON object).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::Plan;
use super::refusals::{LimitRefusal, PlacementRefusal};

/// Writes the plan as exactly one JSON object (pretty-printed for readability) and a newline,
/// streamed to `out` (a plan at 150,000 pods is tens of megabytes of JSON).
pub fn write_json(plan: &Plan, out: &mut impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, plan)?;
    out.write_all(b"\n")
}

pub(super) fn table_of(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(c);
                let pad = widths[i] - c.chars().count() + 2;
                l.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// Nodes per node-usage table unless all are asked for.
pub const TOP_NODES: usize = 20;

/// A human-readable report: one row per eviction, then per-plugin and per-node totals, then node
/// usage before and after for each node-usage plugin (the first [`TOP_NODES`] nodes unless
/// `all_nodes`).
pub fn table(plan: &Plan, all_nodes: bool) -> String {
    let mut out = evictions_table(plan);
    for refused in [
        refusals_table(&plan.limit_refusals),
        placement_refusals_table(&plan.placement_refusals),
    ] {
        if !refused.is_empty() {
            out.push('\n');
            out.push_str(&refused);
        }
    }
    for t in &plan.node_usage {
        out.push('\n');
        out.push_str(&usage_table(
            t,
            if all_nodes { usize::MAX } else { TOP_NODES },
        ));
    }
    out
}

/// The node-usage table of one plugin run: usage per resource and class, before → after.
pub fn usage_table(t: &super::nodes::NodeUsageTable, limit: usize) -> String {
    let fmt_levels = |l: &std::collections::BTreeMap<String, f64>| {
        l.iter()
            .map(|(k, v)| {
                format!(
                    "{k} {}",
                    kube_descheduler_engine::evictor::reason::percent(*v)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = format!(
        "{} ({}): node usage (requests) before → after the plan; low {}",
        t.plugin,
        t.profile,
        fmt_levels(&t.low)
    );
    if !t.high.is_empty() {
        let _ = write!(out, ", high {}", fmt_levels(&t.high));
    }
    out.push('\n');
    let mut headers: Vec<String> = vec!["NODE".into(), "CLASS".into()];
    headers.extend(t.resources.iter().map(|r| r.to_uppercase()));
    headers.push("MOVED".into());
    let pct = |v: Option<&Option<f64>>| match v.copied().flatten() {
        Some(p) => kube_descheduler_engine::evictor::reason::percent(p),
        None => "-".to_string(),
    };
    let rows: Vec<Vec<String>> = t
        .nodes
        .iter()
        .take(limit)
        .map(|n| {
            let mut row = vec![
                n.node.clone(),
                if n.before.class == n.after.class {
                    n.before.class.as_str().to_string()
                } else {
                    format!("{} → {}", n.before.class.as_str(), n.after.class.as_str())
                },
            ];
            for r in &t.resources {
                let (b, a) = (pct(n.before.percent.get(r)), pct(n.after.percent.get(r)));
                row.push(if a == b { b } else { format!("{b} → {a}") });
            }
            row.push(n.moved_pods.to_string());
            row
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    out.push_str(&table_of(&headers, &rows));
    if t.nodes.len() > limit {
        let _ = writeln!(
            out,
            "… {} more nodes (--all-nodes shows every node)",
            t.nodes.len() - limit
        );
    }
    out
}

/// The text plan's main section: the evictions, the totals, the measured usage and the pods moved
/// per plugin and per node.
fn evictions_table(plan: &Plan) -> String {
    let s = &plan.summary;
    let mut out = String::new();
    if let Some(reason) = &s.skipped {
        let _ = writeln!(out, "cycle skipped: {reason}");
    }
    if plan.evictions.is_empty() {
        let _ = writeln!(out, "No pods would be evicted.");
    } else {
        let rows: Vec<Vec<String>> = plan.evictions.iter().map(eviction_row).collect();
        out.push_str(&table_of(
            &["POD", "NODE", "PROFILE", "PLUGIN", "OUTCOME", "REASON"],
            &rows,
        ));
    }
    let _ = writeln!(
        out,
        "\n{} evicted, {} deflected, {} denied, {} errors — {} of {} nodes considered, {} pods",
        s.evicted, s.deflected, s.denied, s.errors, s.ready_nodes, s.nodes, s.pods
    );
    if !plan.measured_usage.is_empty() {
        let rows: Vec<Vec<String>> = plan.measured_usage.iter().map(measured_row).collect();
        let _ = write!(
            out,
            "\n{}",
            table_of(&["NODE", "USAGE SOURCE", "MEASURED USAGE"], &rows)
        );
    }
    if !s.by_plugin.is_empty() {
        let counts = |m: &BTreeMap<String, usize>| -> Vec<Vec<String>> {
            m.iter()
                .map(|(k, v)| vec![k.clone(), v.to_string()])
                .collect()
        };
        let _ = write!(
            out,
            "\n{}",
            table_of(&["PLUGIN", "PODS MOVED"], &counts(&s.by_plugin))
        );
        let _ = write!(
            out,
            "\n{}",
            table_of(&["NODE", "PODS MOVED"], &counts(&s.by_node))
        );
    }
    out
}

/// One eviction's row: pod, node, profile, plugin, outcome and the reason with the guard's
/// message and the predicted placement.
fn eviction_row(e: &super::PlannedEviction) -> Vec<String> {
    let text = match &e.message {
        Some(m) => format!("{} ({m})", e.reason.text),
        None => e.reason.text.clone(),
    };
    let reason = match &e.placement {
        Some(p) => format!("{text} [placement {}]", p.summary()),
        None => text,
    };
    vec![
        format!("{}/{}", e.namespace, e.name),
        e.node.to_string(),
        e.profile.to_string(),
        e.plugin.to_string(),
        e.outcome.to_string(),
        reason,
    ]
}

/// One node's measured usage row: node, usage source (with its query) and the usage.
fn measured_row(u: &super::measured::NodeUsageReport) -> Vec<String> {
    let usage = match (&u.error, u.utilization, u.cpu_milli, u.memory_bytes) {
        (Some(e), ..) => format!("none: {e}"),
        (None, Some(v), ..) => format!("{:.1} %", v * 100.0),
        (None, None, Some(c), Some(m)) => format!("cpu {c}m, memory {m}"),
        _ => "-".into(),
    };
    let source = match &u.query {
        Some(q) => format!("{} ({q})", u.source),
        None => u.source.to_string(),
    };
    vec![u.node.clone(), source, usage]
}

/// The refusals as a table section (empty without refusals).
pub(super) fn refusals_table(refusals: &[LimitRefusal]) -> String {
    let rows = refusals.iter().map(|r| {
        let pod = format!("{}/{}", r.namespace, r.name);
        [
            pod,
            r.node.clone(),
            r.plugin.clone(),
            r.effect.to_string(),
            r.message.clone(),
        ]
    });
    refusal_section("LIMIT REFUSALS", "", &["EFFECT", "LIMIT"], rows)
}

/// The placement refusals as a table section (empty without refusals).
pub(super) fn placement_refusals_table(refusals: &[PlacementRefusal]) -> String {
    let rows = refusals.iter().map(|r| {
        let pod = format!("{}/{}", r.namespace, r.name);
        [
            pod,
            r.node.clone(),
            r.plugin.clone(),
            r.code.to_string(),
            r.message.clone(),
        ]
    });
    refusal_section(
        "PLACEMENT REFUSALS",
        ": not evicted, counted against no limit",
        &["CODE", "WHY"],
        rows,
    )
}

/// A refusal section: `TITLE (n)SUFFIX` over a table of POD, NODE, PLUGIN and `last` columns
/// (empty without rows).
fn refusal_section(
    title: &str,
    suffix: &str,
    last: &[&str; 2],
    rows: impl Iterator<Item = [String; 5]>,
) -> String {
    let rows: Vec<Vec<String>> = rows.map(Vec::from).collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "{title} ({}){suffix}\n{}",
        rows.len(),
        table_of(&["POD", "NODE", "PLUGIN", last[0], last[1]], &rows)
    )
}
