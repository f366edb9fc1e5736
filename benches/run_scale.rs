//! Benchmark: `kube-descheduler run` (the release binary, as a child process) against the API
//! stand-in (kube-sim, in this process, controllers off) serving the synthetic cluster
//! (default 5,000 nodes / 150,000 pods; `RUN_SCALE_SIZE=500x15000` for another size).
//!
//! 1. once, dry-run (`--descheduling-interval 0`): wall, time to the first cycle's end, cycle
//!    time, peak RSS (VmHWM of the child, polled from /proc), CPU (user / kernel);
//!    `RUN_SCALE_ONCE_RUNS=N` makes it N times, `RUN_SCALE_COMPARE_BIN=/path/to/kube-descheduler`
//!    alternates them with another build (an A/B of a change; `RUN_SCALE_CYCLES=0` then skips
//!    the steady state), and `RUN_SCALE_ONCE_PAUSE=secs` pauses before each run after the first;
//! 2. steady state: `--descheduling-interval 1s` for 30 cycles (`RUN_SCALE_CYCLES`) while a driver
//!    changes 1 % of the pods per second (status flips, new pods, deletions): cycle time p50/p99
//!    and RSS after each cycle.
//!
//! Also measures how long kube-sim takes to serve the initial list (nodes and pods, paginated as
//! `run` lists them). With `UPSTREAM_DESCHEDULER=/path/to/descheduler`, that binary is run once
//! the same way. Run: `cargo bench --bench run_scale`.
//!
//! With `RUN_SCALE_STATE=1`, only the cluster state's own cost is measured, in this process
//! (see `run_scale/state.rs`; `RUN_SCALE_CYCLES` rounds).

mod bench_common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "run_scale/lists.rs"]
mod lists;
#[path = "run_scale/state.rs"]
mod state;

use kube_sim::{Sim, SimHandle, SimOptions};
use lists::{bare_client, initial_list_seconds, streaming_list_seconds};
use serde_json::Value;

/// Numbers to compare with (same cluster and policy, same machine): an earlier build of `run`
/// and upstream.
const TODAY_RUN: &str =
    "run before the compact state: 1,913 MiB peak RSS, 15.9 s wall, 0.38 s cycle";
const UPSTREAM_V036: &str =
    "upstream descheduler v0.36.0: 4,786 MiB peak RSS, 545 s wall, ≈ 520 s cycle";

fn fail(msg: String) -> ! {
    eprintln!("run_scale: {msg}");
    std::process::exit(1);
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A cycle as the child logged it.
struct CycleLine {
    at: Duration,
    cycle_seconds: f64,
    snapshot_seconds: f64,
    evicted: u64,
}

/// `RUN_SCALE_LOG`: a file every line the children log is appended to (for diagnosis, e.g.
/// with `RUST_LOG=info,kube_descheduler::framework::cycle=debug` for per-plugin timings).
fn raw_log() -> Option<std::fs::File> {
    let path = std::env::var_os("RUN_SCALE_LOG")?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| eprintln!("RUN_SCALE_LOG {}: {e}", Path::new(&path).display()))
        .ok()
}

/// Spawns the child with JSON logs; its "cycle finished" lines arrive on the channel.
fn spawn(bin: &Path, args: &[String]) -> (Child, mpsc::Receiver<CycleLine>) {
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(format!("cannot start {}: {e}", bin.display())));
    let (tx, rx) = mpsc::channel();
    for out in bench_common::child_outputs(&mut child).into_iter() {
        let tx = tx.clone();
        let mut raw = raw_log();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(f) = raw.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    if line.contains("error") {
                        eprintln!("child: {line}");
                    }
                    continue;
                };
                let f = &v["fields"];
                let msg = f["message"].as_str().unwrap_or_default();
                if msg == "descheduling cycle finished" {
                    let _ = tx.send(CycleLine {
                        at: started.elapsed(),
                        cycle_seconds: f["duration_seconds"].as_f64().unwrap_or(0.0),
                        snapshot_seconds: f["snapshot_seconds"].as_f64().unwrap_or(0.0),
                        evicted: f["evicted"].as_u64().unwrap_or(0),
                    });
                } else if v["level"] == "ERROR" || v["level"] == "WARN" {
                    eprintln!("child: {line}");
                }
            }
        });
    }
    (child, rx)
}

/// Polls VmHWM until the child exits; returns (wall, peak KiB).
fn wait_polling(child: &mut Child, started: Instant) -> (Duration, u64) {
    let pid = child.id();
    let mut peak = 0;
    loop {
        if let Some(k) = bench_common::proc_kib(pid, "VmHWM:") {
            peak = peak.max(k);
        }
        match child.try_wait() {
            Ok(Some(_)) => return (started.elapsed(), peak),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => fail(format!("waiting for the child: {e}")),
        }
        if started.elapsed() > Duration::from_secs(1800) {
            let _ = child.kill();
            fail("the child ran for 30 minutes".into());
        }
    }
}

/// One once run of a build: its bar (initial list + 1 s), wall, peak RSS, CPU and first cycle.
struct OnceRun {
    label: &'static str,
    round: usize,
    bar: f64,
    wall: Duration,
    peak: u64,
    cpu: ChildCpu,
    first: Option<CycleLine>,
}

/// CPU seconds of this process's waited-for children, in user and in kernel mode.
#[derive(Debug, Clone, Copy, Default)]
struct ChildCpu {
    user: f64,
    sys: f64,
}

impl ChildCpu {
    /// So far (`getrusage(RUSAGE_CHILDREN)`: children count once waited for).
    fn now() -> Self {
        // SAFETY: rusage is plain integers, for which all zeros is a valid value.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid, writable rusage; getrusage only writes it.
        if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
            return ChildCpu::default();
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        ChildCpu {
            user: secs(u.ru_utime),
            sys: secs(u.ru_stime),
        }
    }

    fn since(self, before: ChildCpu) -> ChildCpu {
        ChildCpu {
            user: self.user - before.user,
            sys: self.sys - before.sys,
        }
    }
}

impl OnceRun {
    fn first_ok(&self) -> bool {
        self.first
            .as_ref()
            .is_some_and(|c| c.at.as_secs_f64() <= self.bar)
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Changes `count` pods: a third flip their Ready condition, a third are deleted, a third are
/// new (copies of existing pods under new names).
fn drive(sim: &SimHandle, pods: &mut Vec<Value>, count: usize, round: &mut u64) {
    let def = kube_sim::crds::lookup_kind(sim.store(), "v1", "Pod")
        .unwrap_or_else(|| fail("kube-sim has no Pod kind".into()));
    for i in 0..count {
        *round += 1;
        let idx = (*round as usize * 7919) % pods.len().max(1);
        match i % 3 {
            0 => {
                let mut p = pods[idx].clone();
                state::flip_ready(&mut p);
                if let Some(m) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                if sim.apply(p.clone()).is_ok() {
                    pods[idx] = p;
                }
            }
            1 => {
                let p = pods.swap_remove(idx);
                let ns = p
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let name = p
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let opts = kube_sim::store::DeleteOpts {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                };
                let _ = sim.store().delete(def, ns, name, &opts);
            }
            _ => {
                let mut p = pods[idx].clone();
                if let Some(m) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                    let name = format!("bench-{round}");
                    m.insert("name".into(), Value::from(name.clone()));
                    m.insert("uid".into(), Value::from(format!("uid-{name}")));
                    m.remove("resourceVersion");
                    m.remove("creationTimestamp");
                }
                if sim.apply(p.clone()).is_ok() {
                    pods.push(p);
                }
            }
        }
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (nodes, pod_count) = bench_common::size_from_env("RUN_SCALE_SIZE");
    let cycles: usize = bench_common::env_number("RUN_SCALE_CYCLES", 30);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target").join("bench-data");
    let _ = std::fs::create_dir_all(&dir);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_kube-descheduler"));
    let policy = write_policy(&root, &dir);
    let objects = bench_common::synth_objects(nodes, pod_count, 42).unwrap_or_else(|e| fail(e));
    if std::env::var_os("RUN_SCALE_STATE").is_some() {
        state::run(objects, cycles);
        return;
    }
    let mut pods: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Pod")
        .cloned()
        .collect();
    let pods_total = pods.len();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("runtime: {e}")));
    let loading = Instant::now();
    let kubeconfig = dir.join("run-scale-kubeconfig.yaml");
    let sim = start_sim(&rt, objects, &kubeconfig);
    println!(
        "kube-sim serving {nodes} nodes / {pods_total} pods (controllers off), loaded in {:.1} s",
        loading.elapsed().as_secs_f64()
    );
    let lists = rt.block_on(initial_list_seconds(&sim));
    println!(
        "kube-sim initial list to a bare client: nodes + pods, pages of 500, one after the other: {:.2} s; \
         all 11 kinds run lists, concurrently, pages of 500: {:.2} s; the same as streaming lists: {:.2} s",
        lists.nodes_pods_paged, lists.all_kinds_paged, lists.all_kinds_streaming
    );
    // The bar for the first cycle: the fastest way kube-sim serves everything `run` lists.
    let list_s = lists.all_kinds_paged.min(lists.all_kinds_streaming);
    let args = |interval: &str| run_args(&kubeconfig, &policy, interval);

    // 1. Once.
    let builds = once_builds(&bin);
    let runs = once_runs(&rt, &sim, &builds, list_s, &args("0"));
    print_once_table(&runs);
    if let Ok(up) = std::env::var("UPSTREAM_DESCHEDULER") {
        run_upstream(&up, &kubeconfig, &policy);
    }
    let this_build: Vec<&OnceRun> = runs.iter().filter(|r| r.label == "this build").collect();
    for (label, _) in builds.iter().skip(1) {
        print_compared(&runs, label);
    }
    if cycles == 0 {
        rt.block_on(sim.shutdown());
        return;
    }

    // 2. Steady state.
    let per_second = (pods_total / 100).max(1);
    let (seen, hwm) = steady_state(&sim, &bin, &args("1s"), &mut pods, cycles);
    let steady = print_steady(&seen, cycles, per_second, hwm);
    print_targets(&this_build, cycles, steady);
    rt.block_on(sim.shutdown());
}

/// The run_scale policy (the limited one: all ten plugins, 5 evictions per node, 2,000 in
/// total), written to `dir`; its path.
fn write_policy(root: &Path, dir: &Path) -> PathBuf {
    let policy_text = bench_common::limited_policy_text(root).unwrap_or_else(|e| fail(e));
    let policy = dir.join("run-scale-policy.yaml");
    std::fs::write(&policy, policy_text).unwrap_or_else(|e| fail(format!("policy: {e}")));
    policy
}

/// kube-sim serving `objects` (controllers off), its kubeconfig written to `kubeconfig`.
fn start_sim(rt: &tokio::runtime::Runtime, objects: Vec<Value>, kubeconfig: &Path) -> SimHandle {
    rt.block_on(Sim::start(SimOptions {
        objects,
        controllers: false,
        kubeconfig_path: Some(kubeconfig.to_path_buf()),
        watch_history: 1_000_000,
        ..Default::default()
    }))
    .unwrap_or_else(|e| fail(format!("kube-sim: {e}")))
}

/// `run`'s arguments: dry-run, JSON logs, no secure port, every `interval`.
fn run_args(kubeconfig: &Path, policy: &Path, interval: &str) -> Vec<String> {
    let mut args = vec!["run".to_string()];
    args.extend(dry_run_flags(kubeconfig, policy, interval));
    args.extend(["--logging-format".to_string(), "json".to_string()]);
    args
}

/// The flags `run` and upstream's descheduler share: the cluster, the policy, dry-run, every
/// `interval`, no secure port.
fn dry_run_flags(kubeconfig: &Path, policy: &Path, interval: &str) -> Vec<String> {
    [
        "--kubeconfig",
        &kubeconfig.to_string_lossy(),
        "--policy-config-file",
        &policy.to_string_lossy(),
        "--dry-run",
        "--descheduling-interval",
        interval,
        "--secure-port",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The builds the once runs alternate: this one and, with `RUN_SCALE_COMPARE_BIN`, that build
/// (an A/B of a change on a machine whose speed drifts).
fn once_builds(bin: &Path) -> Vec<(&'static str, PathBuf)> {
    let compare = std::env::var_os("RUN_SCALE_COMPARE_BIN").map(PathBuf::from);
    std::iter::once(("this build", bin.to_path_buf()))
        .chain(compare.map(|c| ("compared build", c)))
        .collect()
}

/// The once runs (`RUN_SCALE_ONCE_RUNS` rounds of every build). Each run after the first is
/// held to a bar measured just before it (`list_s`: the first run's list time).
fn once_runs(
    rt: &tokio::runtime::Runtime,
    sim: &SimHandle,
    builds: &[(&'static str, PathBuf)],
    list_s: f64,
    args: &[String],
) -> Vec<OnceRun> {
    let once_runs: usize = bench_common::env_number("RUN_SCALE_ONCE_RUNS", 1).max(1);
    // `RUN_SCALE_ONCE_PAUSE=secs`: a pause before each run after the first (on a VM whose
    // balloon reports free pages to the host, memory left free that long is no longer backed, as
    // before the first run).
    let pause = std::env::var("RUN_SCALE_ONCE_PAUSE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64);
    let mut runs: Vec<OnceRun> = Vec::new();
    for round in 0..once_runs {
        for (label, build) in builds {
            if let (Some(p), false) = (pause, runs.is_empty()) {
                std::thread::sleep(p);
            }
            let list_s = if runs.is_empty() {
                list_s
            } else {
                let client = rt.block_on(bare_client(sim));
                list_s.min(rt.block_on(streaming_list_seconds(&client)))
            };
            let cpu_before = ChildCpu::now();
            let started = Instant::now();
            let (mut child, rx) = spawn(build, args);
            let (wall, peak) = wait_polling(&mut child, started);
            runs.push(OnceRun {
                label,
                round,
                bar: list_s + 1.0,
                wall,
                peak,
                cpu: ChildCpu::now().since(cpu_before),
                first: rx.try_iter().next(),
            });
        }
    }
    runs
}

/// The once runs as a table, with the numbers to compare with.
fn print_once_table(runs: &[OnceRun]) {
    println!("\n## once, dry-run\n");
    println!(
        "| program | wall s | first cycle done s (bar) | snapshot s | cycle s | peak RSS MiB | evicted | CPU user / kernel s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in runs {
        let name = if runs.len() > 1 {
            format!("kube-descheduler run, {} #{}", r.label, r.round + 1)
        } else {
            "kube-descheduler run (compact state)".to_string()
        };
        match &r.first {
            Some(c) => println!(
                "| {name} | {:.2} | {:.2} ({:.2}) | {:.3} | {:.3} | {:.0} | {} | {:.2} / {:.2} |",
                r.wall.as_secs_f64(),
                c.at.as_secs_f64(),
                r.bar,
                c.snapshot_seconds,
                c.cycle_seconds,
                mib(r.peak),
                c.evicted,
                r.cpu.user,
                r.cpu.sys
            ),
            None => println!(
                "| {name} | {:.2} | no cycle logged | | | {:.0} | | {:.2} / {:.2} |",
                r.wall.as_secs_f64(),
                mib(r.peak),
                r.cpu.user,
                r.cpu.sys
            ),
        }
    }
    println!("| {TODAY_RUN} |");
    println!("| {UPSTREAM_V036} |");
}

/// Runs upstream's descheduler (`UPSTREAM_DESCHEDULER`) once the same way; prints its row.
fn run_upstream(up: &str, kubeconfig: &Path, policy: &Path) {
    let started = Instant::now();
    let mut c = Command::new(up)
        .args(dry_run_flags(kubeconfig, policy, "0"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| fail(format!("cannot start {up}: {e}")));
    let (wall, peak) = wait_polling(&mut c, started);
    println!(
        "| upstream ({up}) | {:.2} | | | | {:.0} | |",
        wall.as_secs_f64(),
        mib(peak)
    );
}

/// How the compared build `label` did: first cycles within their bar, peak RSS.
fn print_compared(runs: &[OnceRun], label: &str) {
    let theirs = runs.iter().filter(|r| r.label == label);
    let met = theirs.clone().filter(|r| r.first_ok()).count();
    println!(
        "\n{label}: first cycle done ≤ its bar in {met} of {} runs; peak RSS {:.0} MiB",
        theirs.clone().count(),
        mib(theirs.map(|r| r.peak).max().unwrap_or(0))
    );
}

/// `run` every second while the driver changes 1 % of the pods per second, until `cycles`
/// cycles are logged: each cycle with the RSS after it, and the peak RSS (KiB).
fn steady_state(
    sim: &SimHandle,
    bin: &Path,
    args: &[String],
    pods: &mut Vec<Value>,
    cycles: usize,
) -> (Vec<(CycleLine, u64)>, u64) {
    let started = Instant::now();
    let (mut child, rx) = spawn(bin, args);
    let pid = child.id();
    let per_second = (pods.len() / 100).max(1);
    let mut round = 0u64;
    let mut seen: Vec<(CycleLine, u64)> = Vec::new();
    let mut next_drive = Instant::now();
    while seen.len() < cycles {
        if started.elapsed() > Duration::from_secs(1200) {
            let _ = child.kill();
            fail(format!("only {} cycles in 20 minutes", seen.len()));
        }
        if let Ok(Some(status)) = child.try_wait() {
            fail(format!("the child exited: {status}"));
        }
        // The driver starts with the first cycle (the cluster state has synced by then).
        if !seen.is_empty() && Instant::now() >= next_drive {
            drive(sim, pods, per_second / 10, &mut round);
            next_drive += Duration::from_millis(100);
        }
        if let Ok(c) = rx.recv_timeout(Duration::from_millis(10)) {
            let rss = bench_common::proc_kib(pid, "VmRSS:").unwrap_or(0);
            if seen.is_empty() {
                next_drive = Instant::now();
            }
            // Printed as they come, so a run stopped early still shows what it measured.
            eprintln!(
                "cycle {}: snapshot {:.3} s, engine {:.3} s, RSS {:.0} MiB",
                seen.len() + 1,
                c.snapshot_seconds,
                c.cycle_seconds,
                mib(rss)
            );
            seen.push((c, rss));
        }
    }
    let hwm = bench_common::proc_kib(pid, "VmHWM:").unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    (seen, hwm)
}

/// The steady state's figures: cycle time p99 and the RSS drift from cycle 1 to the last (%).
#[derive(Clone, Copy)]
struct Steady {
    p99: f64,
    drift: f64,
}

/// The steady state's cycles as a table and its summary line (`hwm`: peak RSS, KiB).
fn print_steady(seen: &[(CycleLine, u64)], cycles: usize, per_second: usize, hwm: u64) -> Steady {
    let mut times: Vec<f64> = seen
        .iter()
        .map(|(c, _)| c.cycle_seconds + c.snapshot_seconds)
        .collect();
    times.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));
    println!(
        "\n## steady state: --descheduling-interval 1s, {cycles} cycles, {per_second} pod changes/s\n"
    );
    println!("| cycle | snapshot s | engine s | RSS MiB |");
    println!("|---:|---:|---:|---:|");
    for (i, (c, rss)) in seen.iter().enumerate() {
        println!(
            "| {} | {:.3} | {:.3} | {:.0} |",
            i + 1,
            c.snapshot_seconds,
            c.cycle_seconds,
            mib(*rss)
        );
    }
    let rss1 = mib(seen.first().map_or(0, |s| s.1));
    let rss_last = mib(seen.last().map_or(0, |s| s.1));
    let drift = if rss1 > 0.0 {
        (rss_last - rss1) / rss1 * 100.0
    } else {
        0.0
    };
    println!(
        "\ncycle (snapshot + engine) p50 {p50:.3} s, p99 {p99:.3} s; RSS after cycle 1 {rss1:.0} MiB, after cycle {cycles} {rss_last:.0} MiB ({drift:+.1} %); peak {:.0} MiB",
        mib(hwm)
    );
    Steady { p99, drift }
}

/// The targets, each met or MISSED: this build's once peak RSS and first cycles, the steady
/// state's p99 and RSS drift.
fn print_targets(this_build: &[&OnceRun], cycles: usize, Steady { p99, drift }: Steady) {
    let first_met = this_build.iter().filter(|r| r.first_ok()).count();
    let peak = this_build.iter().map(|r| r.peak).max().unwrap_or(0);
    let peak_ok = mib(peak) <= 300.0;
    let mark = |ok: bool| if ok { "met" } else { "MISSED" };
    println!("\n## targets\n");
    println!(
        "- peak RSS ≤ 300 MiB (once): {:.0} MiB — {}",
        mib(peak),
        mark(peak_ok)
    );
    let firsts: Vec<String> = this_build
        .iter()
        .map(|r| {
            r.first.as_ref().map_or("none".into(), |c| {
                format!("{:.2} s (bar {:.2} s)", c.at.as_secs_f64(), r.bar)
            })
        })
        .collect();
    println!(
        "- first cycle done ≤ initial list + 1 s: {} — {}",
        firsts.join(", "),
        if first_met == this_build.len() {
            "met".to_string()
        } else {
            format!("MISSED ({first_met} of {} met)", this_build.len())
        }
    );
    println!(
        "- steady cycle p99 ≤ 0.3 s: {p99:.3} s — {}",
        mark(p99 <= 0.3)
    );
    println!(
        "- RSS after cycle {cycles} within 5 % of after cycle 1: {drift:+.1} % — {}",
        mark(drift.abs() <= 5.0)
    );
}
