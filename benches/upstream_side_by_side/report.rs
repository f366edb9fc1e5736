//! What the side-by-side bench reads and prints, kept apart from the processes it runs so that a
//! cheap test checks it (`tests/upstream_side_by_side.rs`): upstream's `replace` directives, the
//! evictions each binary logs, and the table with its ratios.

/// The `replace` directives of a go.mod, one per line as `OLD => NEW` (both the one-line form and
/// the block form), with comments removed.
pub fn go_mod_replaces(go_mod: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in go_mod.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if in_block {
            if line == ")" {
                in_block = false;
            } else if line.contains("=>") {
                out.push(line.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("replace") {
            let rest = rest.trim();
            if rest == "(" {
                in_block = true;
            } else if rest.contains("=>") {
                out.push(rest.to_string());
            }
        }
    }
    out
}

/// The `go` directive of a go.mod (`1.26.0`), if any.
pub fn go_mod_go_version(go_mod: &str) -> Option<&str> {
    go_mod.lines().find_map(|l| {
        let v = l.trim().strip_prefix("go ")?.trim();
        (!v.is_empty()).then_some(v)
    })
}

/// The go.mod of a module that builds `module` at `version`: the Go version of upstream's
/// go.mod (`upstream_go_mod`) and its `replace` directives, which apply only in the main module.
pub fn build_go_mod(upstream_go_mod: &str, module: &str, version: &str) -> String {
    let mut m = format!(
        "module kube-descheduler.bench/upstream\n\ngo {}\n\nrequire {module} {version}\n",
        go_mod_go_version(upstream_go_mod).unwrap_or("1.26.0")
    );
    for r in go_mod_replaces(upstream_go_mod) {
        m.push_str(&format!("\nreplace {r}\n"));
    }
    m
}

/// The evictions upstream reports at the end of its cycle: `totalEvicted=N` of its
/// "Number of evictions/requests" line (klog, `-v 1`).
pub fn upstream_evictions(line: &str) -> Option<u64> {
    if !line.contains("Number of evictions/requests") {
        return None;
    }
    let at = line.find("totalEvicted=")? + "totalEvicted=".len();
    let digits: String = line[at..]
        .trim_start_matches('"')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The evictions of this project's `run` cycle: the `evicted` field of its JSON
/// "descheduling cycle finished" line.
pub fn own_evictions(line: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let f = &v["fields"];
    (f["message"] == "descheduling cycle finished")
        .then(|| f["evicted"].as_u64())
        .flatten()
}

/// One binary's run on one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Start to exit, or to the timeout that stopped it.
    pub wall_s: f64,
    /// Peak RSS, until exit or the timeout.
    pub peak_rss_mib: f64,
    /// What its cycle reported (`None` when it did not say, or did not finish).
    pub evictions: Option<u64>,
    /// It exited; `false`: the bench stopped it at its timeout, so its wall time and peak RSS
    /// are lower bounds.
    pub finished: bool,
}

/// A size's runs: this project's and upstream's, in the order they ran.
#[derive(Debug, Clone)]
pub struct Compared {
    pub nodes: usize,
    pub pods: usize,
    pub ours: Vec<Run>,
    pub upstream: Vec<Run>,
    /// The 1-minute load average around the runs.
    pub load: f64,
}

/// The median of `v` (the lower middle for an even count); `None` when empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// `upstream / ours`, `None` when either is missing or ours is zero.
pub fn ratio(upstream: Option<f64>, ours: Option<f64>) -> Option<f64> {
    match (upstream, ours) {
        (Some(u), Some(o)) if o > 0.0 => Some(u / o),
        _ => None,
    }
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// [`cell`], marked as a lower bound (`bound`, such as `>`) when `lower` is set.
fn bound_cell(v: Option<f64>, digits: usize, lower: bool, bound: &str) -> String {
    match v {
        Some(_) if lower => format!("{bound} {}", cell(v, digits)),
        _ => cell(v, digits),
    }
}

fn evictions_cell(runs: &[Run]) -> String {
    let mut counts: Vec<String> = runs
        .iter()
        .map(|r| match (r.finished, r.evictions) {
            (false, _) => "unfinished".into(),
            (true, e) => e.map_or("?".into(), |e| e.to_string()),
        })
        .collect();
    counts.dedup();
    counts.join(", ")
}

/// The Markdown table: per size, both binaries' median wall time and peak RSS over their runs,
/// their evictions and upstream's multiples of ours. A binary with a run stopped at the timeout
/// gets `>` on its time and `≥` on its memory (lower bounds), and so do the multiples (if only
/// our runs were stopped, the multiples are upper bounds: `<`, `≤`).
pub fn table(sizes: &[Compared]) -> String {
    let mut out = String::from(
        "| nodes / pods | runs | wall s: ours | upstream | × | peak RSS MiB: ours | upstream | × | evictions: ours | upstream | load avg |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in sizes {
        let wall = |r: &[Run]| median(r.iter().map(|r| r.wall_s).collect());
        let rss = |r: &[Run]| median(r.iter().map(|r| r.peak_rss_mib).collect());
        let (wo, wu) = (wall(&c.ours), wall(&c.upstream));
        let (ro, ru) = (rss(&c.ours), rss(&c.upstream));
        let stopped = |r: &[Run]| r.iter().any(|r| !r.finished);
        let (so, su) = (stopped(&c.ours), stopped(&c.upstream));
        // Upstream stopped: its figures and the multiples are lower bounds; only ours stopped:
        // the multiples are upper bounds; both: nothing can be said of the multiples.
        let (times, mem) = match (so, su) {
            (false, true) => ((true, ">"), (true, "≥")),
            (true, false) => ((true, "<"), (true, "≤")),
            _ => ((false, ""), (false, "")),
        };
        let multiple = |r: Option<f64>, (lower, b): (bool, &str)| {
            if so && su {
                "-".into()
            } else {
                bound_cell(r, 1, lower, b)
            }
        };
        out.push_str(&format!(
            "| {} / {} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |\n",
            c.nodes,
            c.pods,
            c.ours.len(),
            c.upstream.len(),
            bound_cell(wo, 2, so, ">"),
            bound_cell(wu, 2, su, ">"),
            multiple(ratio(wu, wo), times),
            bound_cell(ro, 0, so, "≥"),
            bound_cell(ru, 0, su, "≥"),
            multiple(ratio(ru, ro), mem),
            evictions_cell(&c.ours),
            evictions_cell(&c.upstream),
            c.load
        ));
    }
    out
}
