//! Rendering a [`Plan`] for people (a table) or programs (one JSON object).

use std::fmt::Write;

use super::Plan;

/// Writes the plan as exactly one JSON object (pretty-printed for readability) and a newline,
/// streamed to `out` (a plan at 150,000 pods is tens of megabytes of JSON).
pub fn write_json(plan: &Plan, out: &mut impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, plan)?;
    out.write_all(b"\n")
}

fn table_of(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{:<w$}  ", c, w = widths[i]);
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

/// A human-readable report: one row per eviction, then per-plugin and per-node totals (the
/// warnings go to stderr, see `cli::plan`).
pub fn table(plan: &Plan) -> String {
    let s = &plan.summary;
    let mut out = String::new();
    if let Some(reason) = &s.skipped {
        let _ = writeln!(out, "cycle skipped: {reason}");
    }
    if plan.evictions.is_empty() {
        let _ = writeln!(out, "No pods would be evicted.");
    } else {
        let rows: Vec<Vec<String>> = plan
            .evictions
            .iter()
            .map(|e| {
                vec![
                    format!("{}/{}", e.namespace, e.name),
                    e.node.to_string(),
                    e.profile.to_string(),
                    e.plugin.to_string(),
                    e.outcome.to_string(),
                    match &e.message {
                        Some(m) => format!("{} ({m})", e.reason),
                        None => e.reason.to_string(),
                    },
                ]
            })
            .collect();
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
    if !plan.node_usage.is_empty() {
        let rows: Vec<Vec<String>> = plan
            .node_usage
            .iter()
            .map(|u| {
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
            })
            .collect();
        let _ = write!(
            out,
            "\n{}",
            table_of(&["NODE", "USAGE SOURCE", "MEASURED USAGE"], &rows)
        );
    }
    if !s.by_plugin.is_empty() {
        let rows: Vec<Vec<String>> = s
            .by_plugin
            .iter()
            .map(|(k, v)| vec![k.clone(), v.to_string()])
            .collect();
        let _ = write!(out, "\n{}", table_of(&["PLUGIN", "PODS MOVED"], &rows));
        let rows: Vec<Vec<String>> = s
            .by_node
            .iter()
            .map(|(k, v)| vec![k.clone(), v.to_string()])
            .collect();
        let _ = write!(out, "\n{}", table_of(&["NODE", "PODS MOVED"], &rows));
    }
    out
}
