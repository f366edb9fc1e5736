//! Benchmark: `kube-descheduler plan` with all ten plugins on synthetic clusters of
//! 500/15,000, 1,000/30,000 and 5,000/150,000 nodes/pods. Reports wall time (load, cycle, total)
//! of the whole `plan` process (start to exit, JSON output written) and peak RSS of the real binary,
//! best of three runs. Run: `cargo bench --bench plan_scale`.
//! Set `PLAN_SCALE_SIZES=500x15000` to choose sizes and `PLAN_SCALE_POLICY=FILE` for another policy.
//! A last run per size adds `--explain` for the first planned pod and reports what it cost.

use std::path::PathBuf;
use std::process::Command;

use kube_descheduler::synth::{Shape, write_cluster};

fn main() {
    let sizes: Vec<(usize, usize)> = std::env::var("PLAN_SCALE_SIZES")
        .unwrap_or_else(|_| "500x15000,1000x30000,5000x150000".into())
        .split(',')
        .filter_map(|s| s.split_once('x'))
        .filter_map(|(n, p)| Some((n.trim().parse().ok()?, p.trim().parse().ok()?)))
        .collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target").join("bench-data");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    let policy = std::env::var("PLAN_SCALE_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("benches").join("all-plugins-policy.yaml"));
    println!(
        "| nodes | pods | snapshot | load s | cycle s | load + cycle s | process wall s | peak RSS MiB | eviction attempts | --explain 1 pod: explain s / wall s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (nodes, pods) in sizes {
        let file = dir.join(format!("cluster-{nodes}-{pods}.json"));
        if !file.exists() {
            let mut out = std::io::BufWriter::new(match std::fs::File::create(&file) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("cannot write {}: {e}", file.display());
                    std::process::exit(1);
                }
            });
            if let Err(e) = write_cluster(
                Shape {
                    nodes,
                    pods,
                    seed: 42,
                },
                &mut out,
            ) {
                eprintln!("generating {}: {e}", file.display());
                std::process::exit(1);
            }
        }
        let size_mib = std::fs::metadata(&file)
            .map(|m| m.len() as f64 / 1048576.0)
            .unwrap_or(0.0);
        let mut best: Option<(serde_json::Value, f64)> = None;
        let mut explain: Option<String> = None;
        let mut explained: Option<(serde_json::Value, f64)> = None;
        for run in 0..4 {
            if run == 3 && explain.is_none() {
                break;
            }
            let started = std::time::Instant::now();
            let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
                .args([
                    "plan",
                    "--stats",
                    "-o",
                    "json",
                    "--now",
                    "2026-02-01T00:00:00Z",
                    "--policy",
                ])
                .arg(&policy)
                .arg("--snapshot")
                .arg(&file)
                .args(
                    explain
                        .iter()
                        .filter(|_| run == 3)
                        .flat_map(|p| ["--explain", p]),
                )
                .output();
            let wall = started.elapsed().as_secs_f64();
            let out = match out {
                Ok(o) if o.status.success() => o,
                Ok(o) => {
                    eprintln!("plan failed: {}", String::from_utf8_lossy(&o.stderr));
                    std::process::exit(1);
                }
                Err(e) => {
                    eprintln!("cannot run plan: {e}");
                    std::process::exit(1);
                }
            };
            let stderr = String::from_utf8_lossy(&out.stderr);
            let Some(stats) = stderr
                .lines()
                .rev()
                .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            else {
                eprintln!("no stats line in: {stderr}");
                std::process::exit(1);
            };
            if run == 3 {
                explained = Some((stats, wall));
                continue;
            }
            if explain.is_none() {
                explain = first_pod(&out.stdout);
            }
            if best.as_ref().is_none_or(|(_, w)| wall < *w) {
                best = Some((stats, wall));
            }
        }
        let Some((s, wall)) = best else { continue };
        let explain_cost = explained.map_or("-".to_string(), |(e, w)| {
            format!(
                "{:.4} / {w:.3}",
                e["explainSeconds"].as_f64().unwrap_or(0.0)
            )
        });
        println!(
            "| {nodes} | {pods} | {size_mib:.0} MiB | {:.3} | {:.3} | {:.3} | {wall:.3} | {:.0} | {} | {explain_cost} |",
            s["loadSeconds"].as_f64().unwrap_or(0.0),
            s["cycleSeconds"].as_f64().unwrap_or(0.0),
            s["totalSeconds"].as_f64().unwrap_or(0.0),
            s["peakRssKiB"].as_f64().unwrap_or(0.0) / 1024.0,
            s["evictions"]
        );
    }
}

/// `namespace/name` of the first eviction of a JSON plan.
fn first_pod(plan: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(plan).ok()?;
    let e = v["evictions"].get(0)?;
    Some(format!(
        "{}/{}",
        e["namespace"].as_str()?,
        e["name"].as_str()?
    ))
}
