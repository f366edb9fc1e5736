//! Benchmark: `kube-descheduler plan` with all ten plugins on synthetic clusters of
//! 500/15,000, 1,000/30,000 and 5,000/150,000 nodes/pods. Reports wall time (load, cycle, total)
//! of the whole `plan` process (start to exit, JSON output written) and peak RSS of the real
//! binary, best of three runs (and every run's wall time), then the growth from the first size
//! to each other: time and memory per pod.
//! Run: `cargo bench --bench plan_scale`.
//!
//! Knobs: `PLAN_SCALE_SIZES=5000x155000,20000x620000,100000x1000000` chooses sizes (the growth
//! series of docs/performance.md), `PLAN_SCALE_RUNS=N` the runs per size (best kept),
//! `PLAN_SCALE_POLICY=FILE` another policy (`limited`: all ten plugins with eviction limits of 5
//! per node and 2,000 in total, as `run_scale`), `PLAN_SCALE_DROP_FILES=1` deletes each generated
//! cluster file once its size is measured (a 100,000-node file is about 1 GB). Cluster files are
//! streamed by the generator to `target/bench-data/`, named by their parameters, and reused.
//! A last run per size adds `--explain` for the first planned pod and reports what it cost.

mod bench_common;
#[path = "plan_scale/growth.rs"]
mod growth;

use std::path::{Path, PathBuf};
use std::process::Command;

use growth::{Measured, growth_table, load_average};
use kube_descheduler::synth::{Shape, cached_cluster_file};

fn fail(msg: String) -> ! {
    eprintln!("plan_scale: {msg}");
    std::process::exit(1);
}

/// The stats line `plan --stats` prints.
type Stats = serde_json::Value;

/// One `plan` run: its stats, process wall time in seconds and the plan printed.
type PlanRun = (Stats, f64, Vec<u8>);

/// One `plan` run: its stats line (`--stats`), process wall time and output.
fn plan_once(policy: &Path, file: &Path, explain: Option<&str>) -> PlanRun {
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
        .arg(policy)
        .arg("--snapshot")
        .arg(file)
        .args(explain.iter().flat_map(|p| ["--explain", p]))
        .output();
    let wall = started.elapsed().as_secs_f64();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => fail(format!(
            "plan failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => fail(format!("cannot run plan: {e}")),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let Some(stats) = stderr
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    else {
        fail(format!("no stats line in: {stderr}"));
    };
    (stats, wall, out.stdout)
}

fn main() {
    let sizes: Vec<(usize, usize)> = std::env::var("PLAN_SCALE_SIZES")
        .unwrap_or_else(|_| "500x15000,1000x30000,5000x150000".into())
        .split(',')
        .filter_map(|s| s.split_once('x'))
        .filter_map(|(n, p)| Some((n.trim().parse().ok()?, p.trim().parse().ok()?)))
        .collect();
    let runs: usize = std::env::var("PLAN_SCALE_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
        .max(1);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target").join("bench-data");
    let policy = match std::env::var("PLAN_SCALE_POLICY").ok().as_deref() {
        None => root.join("benches").join("all-plugins-policy.yaml"),
        Some("limited") => write_limited_policy(&root, &dir),
        Some(file) => PathBuf::from(file),
    };
    println!("policy: {}", policy.display());
    let bench = Bench {
        runs,
        drop_files: std::env::var_os("PLAN_SCALE_DROP_FILES").is_some(),
        dir,
        policy,
    };
    println!(
        "| nodes | pods | snapshot | load s | cycle s | load + cycle s | process wall s | every run: wall s | peak RSS MiB | eviction attempts | --explain 1 pod: explain s / wall s | load avg (1 min) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let measured: Vec<Measured> = sizes
        .into_iter()
        .filter_map(|(nodes, pods)| bench.size(nodes, pods))
        .collect();
    if measured.len() > 1 {
        println!("\n{}", growth_table(&measured));
    }
}

/// The limited policy ([`bench_common::limited_policy_text`]) written to `dir`; its path.
fn write_limited_policy(root: &Path, dir: &Path) -> PathBuf {
    let text = bench_common::limited_policy_text(root).unwrap_or_else(|e| fail(e));
    let path = dir.join("plan-scale-limited-policy.yaml");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", path.display())));
    path
}

/// What every size is measured with.
struct Bench {
    runs: usize,
    drop_files: bool,
    dir: PathBuf,
    policy: PathBuf,
}

impl Bench {
    /// Measures one size (generating its cluster file unless cached) and prints its row.
    fn size(&self, nodes: usize, pods: usize) -> Option<Measured> {
        let shape = Shape {
            nodes,
            pods,
            seed: 42,
        };
        let generating = std::time::Instant::now();
        let file = cached_cluster_file(&self.dir, shape).unwrap_or_else(|e| fail(e.to_string()));
        let generated = generating.elapsed().as_secs_f64();
        if generated > 1.0 {
            eprintln!("generated {} in {generated:.1} s", file.display());
        }
        let size_mib = std::fs::metadata(&file)
            .map(|m| m.len() as f64 / 1048576.0)
            .unwrap_or(0.0);
        let load_before = load_average();
        let (best, every_wall, explained) = self.best_and_explained(&file);
        let load_after = load_average();
        if self.drop_files
            && let Err(e) = std::fs::remove_file(&file)
        {
            eprintln!("cannot delete {}: {e}", file.display());
        }
        let (s, wall) = best?;
        let explain_cost = explained.map_or("-".to_string(), |(e, w, _)| {
            format!(
                "{:.4} / {w:.3}",
                e["explainSeconds"].as_f64().unwrap_or(0.0)
            )
        });
        let peak_mib = s["peakRssKiB"].as_f64().unwrap_or(0.0) / 1024.0;
        let pods_loaded = s["pods"].as_u64().map_or(pods, |p| p as usize);
        let every_run = every_wall
            .iter()
            .map(|w| format!("{w:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "| {nodes} | {pods_loaded} | {size_mib:.0} MiB | {:.3} | {:.3} | {:.3} | {wall:.3} | {every_run} | {peak_mib:.0} | {} | {explain_cost} | {load_before:.2} → {load_after:.2} |",
            s["loadSeconds"].as_f64().unwrap_or(0.0),
            s["cycleSeconds"].as_f64().unwrap_or(0.0),
            s["totalSeconds"].as_f64().unwrap_or(0.0),
            s["evictions"]
        );
        Some(Measured {
            nodes,
            pods: pods_loaded,
            wall,
            peak_mib,
            load: (load_before + load_after) / 2.0,
        })
    }

    /// The stats and wall time of the fastest of `runs` plans of `file`, the wall time of every
    /// run in order, and a last run with `--explain` for the first planned pod.
    fn best_and_explained(&self, file: &Path) -> (Option<(Stats, f64)>, Vec<f64>, Option<PlanRun>) {
        let mut best: Option<(Stats, f64)> = None;
        let mut every_wall = Vec::with_capacity(self.runs);
        let mut explain: Option<String> = None;
        for _ in 0..self.runs {
            let (stats, wall, plan) = plan_once(&self.policy, file, None);
            every_wall.push(wall);
            if explain.is_none() {
                explain = first_pod(&plan);
            }
            if best.as_ref().is_none_or(|(_, w)| wall < *w) {
                best = Some((stats, wall));
            }
        }
        let explained = explain
            .as_deref()
            .map(|pod| plan_once(&self.policy, file, Some(pod)));
        (best, every_wall, explained)
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
