//! The long fuzz run: `cargo bench --bench fuzz` runs 1,000,000 inputs per target
//! (`FUZZ_INPUTS=N` to change, `FUZZ_TARGET=name` for one target, `FUZZ_SEED=n` for another
//! sequence). Prints inputs per second and every panic with its input, writes panicking inputs
//! to `target/fuzz-crashes/`, and exits 1 when anything panicked.

#[path = "../tests/fuzz_common/mod.rs"]
mod fuzz_common;

use fuzz_common::{describe, engine, targets};

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let inputs: u64 = std::env::var("FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed);
    let only = std::env::var("FUZZ_TARGET").ok();
    let mut failed = false;
    for target in targets::all() {
        if only.as_deref().is_some_and(|o| o != target.name) {
            continue;
        }
        let report = engine::fuzz(&target, inputs, seed);
        println!("{}", describe(&report));
        if !report.panics.is_empty() {
            failed = true;
            let dir = std::path::Path::new("target/fuzz-crashes");
            let _ = std::fs::create_dir_all(dir);
            for (i, (_, input)) in report.panics.iter().enumerate() {
                let _ = std::fs::write(dir.join(format!("{}-{i}", target.name)), input);
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
