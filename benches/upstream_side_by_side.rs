//! Benchmark: this project's `run --dry-run` and upstream descheduler v0.36 side by side, one
//! cycle each, with the same policy (`benches/all-plugins-policy.yaml`: all ten plugins,
//! upstream's v1alpha2 format) against the same synthetic cluster served by kube-sim (in this
//! process, controllers off), at 1,000 / 30,000 and 5,000 / 150,000 nodes / pods. Prints each
//! binary's wall time (start to exit), peak RSS (VmHWM, polled) and evictions, and
//! upstream's multiples of ours. Run: `cargo bench --bench upstream_side_by_side`.
//!
//! Upstream is built once from the Go module proxy, in a Go module of its own made at bench time
//! (it requires `sigs.k8s.io/descheduler` and repeats upstream's own `replace` directives, read from
//! its go.mod), and cached in `${KD_CACHE:-~/.cache/kube-descheduler}/upstream-descheduler/`.
//! Nothing of upstream is kept in this repository. Knobs: `SIDE_BY_SIDE_SIZES=1000x30000`,
//! `SIDE_BY_SIDE_RUNS=3` (runs per size, the two binaries alternating),
//! `SIDE_BY_SIDE_UPSTREAM_RUNS=1` (fewer upstream runs for the slow large size: upstream runs
//! `min(RUNS, UPSTREAM_RUNS)` times at sizes of 5,000 nodes or more), `SIDE_BY_SIDE_TIMEOUT`
//! (seconds per run, default 1800: a binary still running then is stopped, and its row shows
//! lower bounds), `UPSTREAM_DESCHEDULER=/path` (a binary built elsewhere).

#[path = "upstream_side_by_side/report.rs"]
mod report;
#[path = "upstream_side_by_side/upstream.rs"]
mod upstream;

mod bench_common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_descheduler::synth::{Shape, write_cluster};
use kube_sim::{Sim, SimOptions};
use report::{Compared, Run};

fn fail(msg: String) -> ! {
    eprintln!("upstream_side_by_side: {msg}");
    std::process::exit(1);
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The peak RSS (VmHWM) of `pid` so far, in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    bench_common::proc_kib(pid, "VmHWM:")
}

/// How a measured child ended: on its own (successfully), or stopped at the timeout.
enum Ended {
    Exited,
    TimedOut,
}

/// Waits for the child, polling its VmHWM (every 20 ms) so the wait is bounded; returns its peak
/// RSS in KiB and whether it exited or was stopped after `timeout` (its peak so far then).
/// (`ru_maxrss` from `wait4` would not do: a child spawned with `CLONE_VM` carries this
/// process's peak — kube-sim and its cluster — across its exec.)
fn wait_peak(child: &mut std::process::Child, timeout: Duration) -> Result<(u64, Ended), String> {
    let pid = child.id();
    let started = Instant::now();
    let mut peak = 0;
    loop {
        if let Some(k) = vm_hwm_kib(pid) {
            peak = peak.max(k);
        }
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok((peak, Ended::Exited)),
            Ok(Some(status)) => return Err(format!("exited with {status}")),
            Ok(None) => {}
            Err(e) => return Err(format!("waiting: {e}")),
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Ok((peak, Ended::TimedOut));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `bin args` to its exit, or stops it after `timeout` (the run is then a lower bound, its
/// last lines printed); `evictions` reads each output line for the count.
fn measure(
    bin: &Path,
    args: &[String],
    evictions: fn(&str) -> Option<u64>,
    timeout: Duration,
) -> Run {
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(format!("cannot start {}: {e}", bin.display())));
    let found: Arc<Mutex<Option<u64>>> = Arc::default();
    let tail: Arc<Mutex<Vec<String>>> = Arc::default();
    let readers: Vec<_> = bench_common::child_outputs(&mut child)
        .into_iter()
        .map(|out| {
            let (found, tail) = (found.clone(), tail.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Some(n) = evictions(&line)
                        && let Ok(mut f) = found.lock()
                    {
                        *f = Some(n);
                    }
                    if let Ok(mut t) = tail.lock() {
                        if t.len() == 20 {
                            t.remove(0);
                        }
                        t.push(line);
                    }
                }
            })
        })
        .collect();
    let peak = wait_peak(&mut child, timeout);
    let wall = started.elapsed().as_secs_f64();
    for r in readers {
        let _ = r.join();
    }
    let last_lines = || tail.lock().map(|t| t.join("\n")).unwrap_or_default();
    let (peak, ended) = peak.unwrap_or_else(|e| {
        fail(format!(
            "{}: {e}; its last lines:\n{}",
            bin.display(),
            last_lines()
        ))
    });
    let finished = matches!(ended, Ended::Exited);
    if !finished {
        eprintln!(
            "{}: still running after {} s, stopped (the row shows a lower bound); its last lines:\n{}",
            bin.display(),
            timeout.as_secs(),
            last_lines()
        );
    }
    Run {
        wall_s: wall,
        peak_rss_mib: peak as f64 / 1024.0,
        evictions: found.lock().ok().and_then(|f| *f).filter(|_| finished),
        finished,
    }
}

fn sizes() -> Vec<(usize, usize)> {
    std::env::var("SIDE_BY_SIDE_SIZES")
        .unwrap_or_else(|_| "1000x30000,5000x150000".into())
        .split(',')
        .filter_map(|s| s.split_once('x'))
        .filter_map(|(n, p)| Some((n.trim().parse().ok()?, p.trim().parse().ok()?)))
        .collect()
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let runs: usize = bench_common::env_number("SIDE_BY_SIDE_RUNS", 1).max(1);
    let theirs = match std::env::var_os("UPSTREAM_DESCHEDULER") {
        Some(p) => PathBuf::from(p),
        None => upstream::binary().unwrap_or_else(|e| fail(e)),
    };
    println!("upstream: {}", theirs.display());
    let dir = root.join("target").join("bench-data");
    let _ = std::fs::create_dir_all(&dir);
    let bench = Bench {
        runs,
        upstream_runs: bench_common::env_number("SIDE_BY_SIDE_UPSTREAM_RUNS", runs).max(1),
        timeout: Duration::from_secs(bench_common::env_number("SIDE_BY_SIDE_TIMEOUT", 1800)),
        ours: PathBuf::from(env!("CARGO_BIN_EXE_kube-descheduler")),
        theirs,
        policy: root.join("benches/all-plugins-policy.yaml"),
        kubeconfig: dir.join("side-by-side-kubeconfig.yaml"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("runtime: {e}")));
    let compared: Vec<Compared> = sizes()
        .into_iter()
        .map(|(nodes, pods)| bench.size(&rt, nodes, pods))
        .collect();
    println!("\n{}", report::table(&compared));
}

/// The binaries, policy and run counts every size is measured with.
struct Bench {
    runs: usize,
    upstream_runs: usize,
    timeout: Duration,
    ours: PathBuf,
    theirs: PathBuf,
    policy: PathBuf,
    kubeconfig: PathBuf,
}

impl Bench {
    /// Serves the cluster of `nodes` / `pods` from kube-sim and runs both binaries on it.
    fn size(&self, rt: &tokio::runtime::Runtime, nodes: usize, pods: usize) -> Compared {
        let mut json = Vec::new();
        write_cluster(
            Shape {
                nodes,
                pods,
                seed: 42,
            },
            &mut json,
        )
        .unwrap_or_else(|e| fail(format!("synth: {e}")));
        let objects = bench_common::list_items(json).unwrap_or_else(|e| fail(e));
        let pods_total = objects.iter().filter(|o| o["kind"] == "Pod").count();
        let sim = rt
            .block_on(Sim::start(SimOptions {
                objects,
                controllers: false,
                kubeconfig_path: Some(self.kubeconfig.clone()),
                ..Default::default()
            }))
            .unwrap_or_else(|e| fail(format!("kube-sim: {e}")));
        let c = self.rounds(nodes, pods_total);
        rt.block_on(sim.shutdown());
        c
    }

    /// The arguments both binaries take, then `extra`.
    fn common_args(&self, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--kubeconfig".into(),
            self.kubeconfig.to_string_lossy().into_owned(),
            "--policy-config-file".into(),
            self.policy.to_string_lossy().into_owned(),
            "--dry-run".into(),
            "--descheduling-interval".into(),
            "0".into(),
            "--secure-port".into(),
            "0".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    /// The rounds at one size: ours then upstream's in each (upstream in fewer at 5,000 nodes
    /// or more, when asked).
    fn rounds(&self, nodes: usize, pods: usize) -> Compared {
        let our_args = {
            let mut a = vec!["run".to_string()];
            a.extend(self.common_args(&["--logging-format", "json"]));
            a
        };
        let their_args = self.common_args(&["--v", "1"]);
        let their_runs = if nodes >= 5000 {
            self.runs.min(self.upstream_runs)
        } else {
            self.runs
        };
        let load_before = load_average();
        let mut c = Compared {
            nodes,
            pods,
            ours: Vec::new(),
            upstream: Vec::new(),
            load: 0.0,
        };
        for round in 0..self.runs {
            let r = measure(&self.ours, &our_args, report::own_evictions, self.timeout);
            eprintln!(
                "{nodes} nodes, round {}: ours {r:?} (load {:.2})",
                round + 1,
                load_average()
            );
            c.ours.push(r);
            if round < their_runs {
                let r = measure(
                    &self.theirs,
                    &their_args,
                    report::upstream_evictions,
                    self.timeout,
                );
                eprintln!(
                    "{nodes} nodes, round {}: upstream {r:?} (load {:.2})",
                    round + 1,
                    load_average()
                );
                c.upstream.push(r);
            }
        }
        c.load = (load_before + load_average()) / 2.0;
        c
    }
}
