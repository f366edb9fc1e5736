//! The growth of `plan`'s cost with the cluster's size: time and memory per pod, and each size's
//! ratios to the first one measured.

/// One size's best run.
pub struct Measured {
    pub nodes: usize,
    pub pods: usize,
    /// Process wall time, seconds.
    pub wall: f64,
    /// Peak RSS, MiB.
    pub peak_mib: f64,
    /// The 1-minute load average around the runs.
    pub load: f64,
}

/// The 1-minute load average (`/proc/loadavg`), or 0 where there is none.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// A Markdown table: per size, µs and KiB per pod, and time, memory and pods as multiples of the
/// first size's.
pub fn growth_table(sizes: &[Measured]) -> String {
    let mut out = String::from(
        "| nodes / pods | wall s | peak RSS MiB | µs per pod | KiB per pod | × pods | × wall | × peak RSS | load avg |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let Some(first) = sizes.first() else {
        return out;
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    for m in sizes {
        let pods = m.pods.max(1) as f64;
        out.push_str(&format!(
            "| {} / {} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            m.nodes,
            m.pods,
            m.wall,
            m.peak_mib,
            m.wall * 1e6 / pods,
            m.peak_mib * 1024.0 / pods,
            ratio(m.pods as f64, first.pods as f64),
            ratio(m.wall, first.wall),
            ratio(m.peak_mib, first.peak_mib),
            m.load
        ));
    }
    out
}
