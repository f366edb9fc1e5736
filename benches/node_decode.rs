//! Benchmark: converting Nodes as kube-apiserver serves them from a real cluster (images,
//! managed fields, annotations, node info; `synth::served_node`) into the engine's compact
//! nodes, the lean way `run` and `plan` decode them (`snapshot::nodes::lean_node`) and the way
//! they did before (a full k8s-openapi `Node`). 5,000 nodes per round, best of seven rounds.
//! Run: `cargo bench --bench node_decode` (`NODE_DECODE_IMAGES=N` images per node, default 60).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as core;
use kube_descheduler::snapshot::SnapshotBuilder;
use kube_descheduler::snapshot::nodes::lean_node;
use kube_descheduler::synth::served_node;

const NODES: usize = 5_000;
const ROUNDS: usize = 7;

/// The best round's time to convert every node in `raws` with `decode`.
fn best(raws: &[String], decode: impl Fn(&str) -> core::Node) -> Duration {
    (0..ROUNDS)
        .map(|_| {
            let mut b = SnapshotBuilder::new();
            let started = Instant::now();
            for raw in raws {
                if let Err(e) = b.add_node(&decode(raw)) {
                    eprintln!("node_decode: {e}");
                    std::process::exit(1);
                }
            }
            let took = started.elapsed();
            assert_eq!(b.take_parts().nodes.len(), raws.len());
            took
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let images: usize = std::env::var("NODE_DECODE_IMAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let raws: Vec<String> = (0..NODES)
        .map(|i| served_node(&format!("node-{i}"), images).to_string())
        .collect();
    let bytes: usize = raws.iter().map(String::len).sum();
    let fail = |what: &str, e: String| -> ! {
        eprintln!("node_decode: {what}: {e}");
        std::process::exit(1)
    };
    let full = best(&raws, |raw| {
        serde_json::from_str::<core::Node>(raw).unwrap_or_else(|e| fail("full", e.to_string()))
    });
    let lean = best(&raws, |raw| {
        lean_node(raw).unwrap_or_else(|e| fail("lean", e))
    });
    let per_node = |d: Duration| d.as_secs_f64() * 1e6 / NODES as f64;
    println!(
        "{NODES} nodes, {images} images each, {:.1} KiB of JSON per node",
        bytes as f64 / NODES as f64 / 1024.0
    );
    println!("| decode | all nodes ms | per node µs |");
    println!("|---|---:|---:|");
    println!(
        "| full k8s-openapi Node (before) | {:.1} | {:.1} |",
        full.as_secs_f64() * 1e3,
        per_node(full)
    );
    println!(
        "| lean (`snapshot::nodes::lean_node`) | {:.1} | {:.1} |",
        lean.as_secs_f64() * 1e3,
        per_node(lean)
    );
    println!(
        "lean / full: {:.2}",
        lean.as_secs_f64() / full.as_secs_f64()
    );
}
