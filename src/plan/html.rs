//! `plan --output html FILE`: one self-contained page (inline CSS, JS and SVG; no network, no
//! external assets). The summary and the node-usage charts are rendered here; the evictions table
//! is rendered by the page's script from the embedded plan, one page of rows at a time, so a plan
//! of 150,000 pods opens at once.

use std::fmt::Write as _;
use std::io::Write;

use super::Plan;
use super::nodes::NodeUsageTable;
use super::refusals::{LimitRefusal, PlacementRefusal};

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");
/// Nodes per chart (the interesting ones: the table lists them first).
const CHART_NODES: usize = 24;

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes the report for `plan` to `out`.
pub fn write_html(plan: &Plan, out: &mut impl Write) -> std::io::Result<()> {
    let s = &plan.summary;
    let mut head = String::new();
    let _ = write!(
        head,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <title>kube-descheduler plan</title><style>{STYLE}</style></head><body>\
         <h1>kube-descheduler plan</h1>"
    );
    let _ = write!(head, "<section id=\"summary\"><h2>Summary</h2><dl>");
    for (id, label, value) in [
        ("count-evicted", "evicted", s.evicted),
        ("count-deflected", "deflected", s.deflected),
        ("count-denied", "denied", s.denied),
        ("count-errors", "errors", s.errors),
        ("count-attempts", "eviction attempts", plan.evictions.len()),
        ("count-nodes", "nodes considered", s.ready_nodes),
        ("count-pods", "pods", s.pods),
    ] {
        let _ = write!(
            head,
            "<div><dt>{label}</dt><dd id=\"{id}\">{value}</dd></div>"
        );
    }
    head.push_str("</dl>");
    if let Some(skipped) = &s.skipped {
        let _ = write!(
            head,
            "<p class=\"warn\">cycle skipped: {}</p>",
            escape(skipped)
        );
    }
    for w in &s.warnings {
        let _ = write!(head, "<p class=\"warn\">warning: {}</p>", escape(w));
    }
    if !s.by_plugin.is_empty() {
        head.push_str(
            "<table class=\"small\" id=\"by-plugin\"><tr><th>plugin</th><th>pods moved</th></tr>",
        );
        for (k, v) in &s.by_plugin {
            let _ = write!(head, "<tr><td>{}</td><td>{v}</td></tr>", escape(k));
        }
        head.push_str("</table>");
    }
    head.push_str("</section>");
    for t in &plan.node_usage {
        head.push_str(&usage_section(t));
    }
    head.push_str(&refusals_html(&plan.limit_refusals));
    head.push_str(&placement_refusals_html(&plan.placement_refusals));
    head.push_str(
        "<section id=\"evictions\"><h2>Evictions</h2><div class=\"filters\">\
         <label>plugin <select id=\"f-plugin\"><option value=\"\">all</option></select></label>\
         <label>outcome <select id=\"f-outcome\"><option value=\"\">all</option></select></label>\
         <label>node <input id=\"f-node\" placeholder=\"node name\"></label>\
         <label>pod <input id=\"f-pod\" placeholder=\"namespace/name\"></label>\
         <span id=\"shown\"></span>\
         <button id=\"prev\">&lt; prev</button><button id=\"next\">next &gt;</button></div>\
         <table id=\"rows\"><thead><tr>\
         <th data-key=\"0\">pod</th><th data-key=\"1\">node</th><th data-key=\"2\">profile</th>\
         <th data-key=\"3\">plugin</th><th data-key=\"4\">outcome</th><th data-key=\"5\">reason</th>\
         <th data-key=\"6\">guard</th></tr></thead><tbody></tbody></table></section>\
         <script id=\"plan-data\" type=\"application/json\">",
    );
    out.write_all(head.as_bytes())?;
    write_rows_json(plan, out)?;
    writeln!(out, "</script><script>{SCRIPT}</script></body></html>")
}

/// The evictions as compact rows `[pod, node, profile, plugin, outcome, reason, message]` (the
/// reason followed by `[placement → …]` when the DefaultEvictor predicts placement), with
/// `<` escaped so the JSON cannot end its script element.
fn write_rows_json(plan: &Plan, out: &mut impl Write) -> std::io::Result<()> {
    let mut buf = String::with_capacity(256);
    out.write_all(b"[")?;
    for (i, e) in plan.evictions.iter().enumerate() {
        buf.clear();
        if i > 0 {
            buf.push(',');
        }
        let pod = format!("{}/{}", e.namespace, e.name);
        // With placement on, the reason ends with the prediction, as in the table.
        let placed;
        let reason = match &e.placement {
            Some(p) => {
                placed = format!("{} [placement {}]", e.reason.text, p.summary());
                placed.as_str()
            }
            None => e.reason.text.as_str(),
        };
        let row = [
            pod.as_str(),
            &e.node,
            &e.profile,
            &e.plugin,
            e.outcome,
            reason,
            e.message.as_deref().unwrap_or(""),
        ];
        let json = serde_json::to_string(&row).map_err(std::io::Error::other)?;
        buf.push_str(&json.replace('<', "\\u003c"));
        out.write_all(buf.as_bytes())?;
    }
    out.write_all(b"]")
}

/// A node-usage section: for each resource, a bar chart of the interesting nodes (before: grey,
/// after: blue) with the plugin's levels as lines.
fn usage_section(t: &NodeUsageTable) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<section class=\"usage\"><h2>Node usage — {} ({})</h2><p>{} nodes; levels: low {}{}</p>",
        escape(&t.plugin),
        escape(&t.profile),
        t.nodes.len(),
        levels(&t.low),
        if t.high.is_empty() {
            String::new()
        } else {
            format!(", high {}", levels(&t.high))
        }
    );
    let nodes = &t.nodes[..t.nodes.len().min(CHART_NODES)];
    for res in &t.resources {
        let (w, row_h, label_w) = (560.0, 16.0, 150.0);
        let h = nodes.len() as f64 * row_h + 24.0;
        let x = |pct: f64| label_w + pct.clamp(0.0, 100.0) / 100.0 * (w - label_w - 10.0);
        let _ = write!(
            out,
            "<figure><figcaption>{}</figcaption><svg class=\"chart\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" role=\"img\">",
            escape(res)
        );
        for (i, row) in nodes.iter().enumerate() {
            let y = 4.0 + i as f64 * row_h;
            let b = row
                .before
                .percent
                .get(res)
                .copied()
                .flatten()
                .unwrap_or(0.0);
            let a = row.after.percent.get(res).copied().flatten().unwrap_or(0.0);
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
                 <rect class=\"before\" x=\"{label_w}\" y=\"{y}\" width=\"{:.1}\" height=\"6\"><title>before {:.0}%</title></rect>\
                 <rect class=\"after\" x=\"{label_w}\" y=\"{}\" width=\"{:.1}\" height=\"6\"><title>after {:.0}%</title></rect>",
                label_w - 4.0,
                y + 10.0,
                escape(&row.node),
                x(b) - label_w,
                b,
                y + 6.0,
                x(a) - label_w,
                a
            );
        }
        for (class, level) in [("low", t.low.get(res)), ("high", t.high.get(res))] {
            if let Some(&l) = level {
                let _ = write!(
                    out,
                    "<line class=\"{class}\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"0\" y2=\"{1}\"/>\
                     <text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{class} {l:.0}%</text>",
                    x(l),
                    h - 14.0,
                    h - 2.0
                );
            }
        }
        out.push_str("</svg></figure>");
    }
    out.push_str("<p class=\"legend\"><span class=\"before\">■</span> before <span class=\"after\">■</span> after the plan</p></section>");
    out
}

fn levels(l: &std::collections::BTreeMap<String, f64>) -> String {
    if l.is_empty() {
        return "none".to_string();
    }
    l.iter()
        .map(|(k, v)| format!("{} {v:.0}%", escape(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The refusals as an HTML section (empty without refusals).
pub(super) fn refusals_html(refusals: &[LimitRefusal]) -> String {
    if refusals.is_empty() {
        return String::new();
    }
    let esc = escape;
    let mut s = format!(
        "<section id=\"limit-refusals\"><h2>Limit refusals ({})</h2><table class=\"small\">\
         <tr><th>pod</th><th>node</th><th>plugin</th><th>effect</th><th>limit</th></tr>",
        refusals.len()
    );
    for r in refusals {
        let _ = write!(
            s,
            "<tr><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.namespace),
            esc(&r.name),
            esc(&r.node),
            esc(&r.plugin),
            r.effect,
            esc(&r.message)
        );
    }
    s.push_str("</table></section>");
    s
}

/// The placement refusals as an HTML section (empty without refusals).
pub(super) fn placement_refusals_html(refusals: &[PlacementRefusal]) -> String {
    if refusals.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "<section id=\"placement-refusals\"><h2>Placement refusals ({})</h2>\
         <p>Not evicted (DefaultEvictor <code>placement: Enforce</code>), counted against no limit.</p>\
         <table class=\"small\"><tr><th>pod</th><th>node</th><th>plugin</th><th>code</th>\
         <th>why</th></tr>",
        refusals.len()
    );
    for r in refusals {
        let _ = write!(
            s,
            "<tr><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.namespace),
            escape(&r.name),
            escape(&r.node),
            escape(&r.plugin),
            r.code,
            escape(&r.message)
        );
    }
    s.push_str("</table></section>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn the_embedded_rows_cannot_close_the_script_element() {
        let mut plan = Plan::default();
        plan.evictions.push(crate::plan::PlannedEviction {
            namespace: "ns".into(),
            name: "</script><b>".into(),
            node: "n".into(),
            profile: "p".into(),
            plugin: "X".into(),
            reason: std::sync::Arc::new(kube_descheduler_engine::evictor::EvictionReason::plugin(
                "X",
            )),
            outcome: "evicted",
            message: None,
            placement: None,
        });
        let mut out = Vec::new();
        write_html(&plan, &mut out).expect("write");
        let page = String::from_utf8(out).expect("utf-8");
        assert!(!page.contains("</script><b>"));
        assert!(page.contains("\\u003c/script>\\u003cb>"));
        // No external asset or network address anywhere.
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(!page.contains(" src="));
    }
}
