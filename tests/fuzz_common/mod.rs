//! Fuzzing on the stable toolchain, shared by the short run in `cargo test` (`tests/fuzz.rs`)
//! and the long run (`cargo bench --bench fuzz`).

#![allow(dead_code)]

pub mod engine;
#[path = "../review_common/mod.rs"]
mod review_common;
pub mod targets;

/// Prints a report line and each panic with its input (escaped).
pub fn describe(report: &engine::Report) -> String {
    let mut out = format!(
        "{:<18} {:>10} inputs {:>10} accepted {:>9.0}/s {:>3} panics",
        report.name,
        report.inputs,
        report.accepted,
        report.rate(),
        report.panics.len()
    );
    for (message, input) in report.panics.iter().take(5) {
        out.push_str(&format!(
            "\n  panic: {message}\n  input: {:?}",
            String::from_utf8_lossy(&input[..input.len().min(2000)])
        ));
    }
    out
}
