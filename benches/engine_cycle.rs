//! Benchmark: the descheduling cycle alone, repeated on one loaded snapshot — what a steady `run`
//! cycle costs after its snapshot is taken, without a process, a file or a cluster around it.
//! Loads the synthetic 5,000-node / 150,000-pod cluster (seed 42, as `plan_scale` and `run_scale`)
//! once, then runs the `run_scale` policy (all ten plugins, 5 evictions per node, 2,000 in total)
//! with the guard's dry-run verdict as `run --dry-run` does, `ENGINE_CYCLE_RUNS` times (default
//! 15; evictions are forgotten between runs). Prints the cycle's and each plugin's median and
//! fastest wall time. Run: `cargo bench --bench engine_cycle`; `ENGINE_CYCLE_SIZE=500x15000`
//! chooses another size; `ENGINE_CYCLE_PLACEMENT=Report` turns on placement predictions, and a
//! list (`ENGINE_CYCLE_PLACEMENT=Off,Report,Enforce`) runs the cycle with each mode in turn (run 1
//! of every mode, then run 2 of every mode, …, so a change of the host's load hits them alike)
//! and prints them side by side, with the placement refusals of Enforce; each mode's policy is
//! written to `target/bench-data/engine-cycle-<mode>-policy.yaml` (for `plan_scale`);
//! `ENGINE_CYCLE_LIMITS=1` adds every percentage and per-workload limit to the policy
//! (percentage node and namespace limits, per-workload, unavailable, and the `run` window with a
//! history), to measure what they cost; `ENGINE_CYCLE_LIMITS=loose` adds the namespace,
//! per-workload, unavailable and window limits at 100 % (next to the integer node limit), so every
//! check runs and next to none refuses: the difference is the checks' own cost.

mod bench_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube_descheduler::evictor::planner::PlanBackend;
use kube_descheduler::framework::cycle::run_cycle;
use kube_descheduler::policy::Policy;

/// The binary's allocator (see `src/main.rs`), so the cycle allocates as `run` does.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn fail(msg: String) -> ! {
    eprintln!("engine_cycle: {msg}");
    std::process::exit(1);
}

fn main() {
    let (nodes, pods) = bench_common::size_from_env("ENGINE_CYCLE_SIZE");
    let runs: usize = bench_common::env_number("ENGINE_CYCLE_RUNS", 15).max(1);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target").join("bench-data");
    let file = bench_common::cluster_file(nodes, pods).unwrap_or_else(|e| fail(e));
    let limits_mode = std::env::var("ENGINE_CYCLE_LIMITS").unwrap_or_default();
    let scaled = limits_mode == "1" || limits_mode == "loose";
    let policy_text = base_policy(&root, &limits_mode);
    if scaled {
        println!("with every percentage and per-workload limit ({limits_mode})");
    }
    // `ENGINE_CYCLE_PLACEMENT=Report` (or a list, `Off,Report,Enforce`) sets the DefaultEvictor's
    // `placement` in both profiles (docs/placement.md).
    let modes: Vec<String> = std::env::var("ENGINE_CYCLE_PLACEMENT")
        .ok()
        .filter(|m| !m.trim().is_empty())
        .map(|m| m.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_else(|| vec!["Off".to_string()]);
    let mut policies: Vec<Policy> = modes
        .iter()
        .map(|mode| mode_policy(&policy_text, mode, &dir, scaled))
        .collect();
    let mut snapshot = kube_descheduler::snapshot::load::load_file(&file)
        .unwrap_or_else(|e| fail(format!("{}: {e}", file.display())));
    let now: jiff::Timestamp = "2026-02-01T00:00:00Z"
        .parse()
        .unwrap_or_else(|e| fail(format!("now: {e}")));

    let mut stats: Vec<ModeStats> = modes.iter().map(|_| ModeStats::default()).collect();
    for _ in 0..runs {
        for (policy, st) in policies.iter_mut().zip(&mut stats) {
            st.measure_cycle(policy, &mut snapshot, now);
        }
    }
    println!("{nodes} nodes, {pods} pods, {runs} cycles per placement mode");
    print_table(&modes, &mut stats);
}

/// The run_scale policy: all ten plugins with the run_scale limits (5 per node, 2,000 in
/// total), with the percentage and per-workload limits `ENGINE_CYCLE_LIMITS` asks for.
fn base_policy(root: &Path, limits_mode: &str) -> String {
    let policy_text = bench_common::limited_policy_text(root).unwrap_or_else(|e| fail(e));
    match limits_mode {
        // Every limit is checked, and the new ones refuse pods the plugins then look past.
        "1" => policy_text.replace(
            "maxNoOfPodsToEvictPerNode: 5\n",
            "maxNoOfPodsToEvictPerNode: \"20%\"\nmaxNoOfPodsToEvictPerNamespace: \"50%\"\nmaxNoOfPodsToEvictPerWorkload: \"50%\"\nmaxUnavailablePerWorkload: \"50%\"\nworkloadEvictionWindow: {duration: 1h, maxEvictions: \"50%\"}\n",
        ),
        // Every check runs on every attempt; at 100 % next to none refuses.
        "loose" => policy_text.replace(
            "maxNoOfPodsToEvictPerNode: 5\n",
            "maxNoOfPodsToEvictPerNode: 5\nmaxNoOfPodsToEvictPerNamespace: \"100%\"\nmaxNoOfPodsToEvictPerWorkload: \"100%\"\nmaxUnavailablePerWorkload: \"100%\"\nworkloadEvictionWindow: {duration: 1h, maxEvictions: \"100%\"}\n",
        ),
        _ => policy_text,
    }
}

/// The policy with the DefaultEvictor's `placement` set to `mode` in both profiles, written to
/// `dir/engine-cycle-<mode>-policy.yaml` and loaded (with the `run` window's history when the
/// limits are `scaled`).
fn mode_policy(policy_text: &str, mode: &str, dir: &Path, scaled: bool) -> Policy {
    let text = policy_text
        .replace(
            "nodeFit: true",
            &format!("nodeFit: true\n          placement: \"{mode}\""),
        )
        .replace(
            "      - name: \"DefaultEvictor\"\n      - name: \"HighNodeUtilization\"",
            &format!(
                "      - name: \"DefaultEvictor\"\n        args:\n          placement: \"{mode}\"\n      - name: \"HighNodeUtilization\""
            ),
        );
    let written = dir.join(format!("engine-cycle-{mode}-policy.yaml"));
    if let Err(e) = std::fs::write(&written, &text) {
        fail(format!("cannot write {}: {e}", written.display()));
    }
    let mut policy = kube_descheduler::policy::load_str(&text)
        .unwrap_or_else(|e| fail(format!("policy ({mode}): {}", e.0)));
    if scaled {
        // As `run` installs it; emptied before each repeated cycle.
        policy.cycle.scaled.window = policy.cycle.scaled.window.take().map(|w| w.with_history());
    }
    policy
}

/// Prints each plugin's and the whole cycle's median and fastest time per mode, then each
/// mode's attempts and refusals.
fn print_table(modes: &[String], stats: &mut [ModeStats]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut header = "| stage |".to_string();
    let mut rule = "|---|".to_string();
    for m in modes {
        header.push_str(&format!(" {m} median ms | {m} fastest ms |"));
        rule.push_str("---:|---:|");
    }
    println!("{header}\n{rule}");
    let names: Vec<(usize, String)> = stats
        .first()
        .map(|s| s.plugins.keys().cloned().collect())
        .unwrap_or_default();
    for key in names {
        let mut row = format!("| {} |", key.1);
        for st in stats.iter_mut() {
            let times = st.plugins.entry(key.clone()).or_default();
            let fastest = times.iter().min().copied().unwrap_or_default();
            row.push_str(&format!(
                " {:.1} | {:.1} |",
                ms(bench_common::median(times)),
                ms(fastest)
            ));
        }
        println!("{row}");
    }
    let mut row = "| cycle (guard setup + plugins) |".to_string();
    for st in stats.iter_mut() {
        let fastest = st.cycles.iter().min().copied().unwrap_or_default();
        row.push_str(&format!(
            " {:.1} | {:.1} |",
            ms(bench_common::median(&mut st.cycles)),
            ms(fastest)
        ));
    }
    println!("{row}");
    for (m, st) in modes.iter().zip(stats.iter()) {
        println!(
            "{m}: {} eviction attempts, {} placement refusals and {} limit refusals per cycle",
            st.attempts.unwrap_or(0),
            st.refusals,
            st.limit_refusals
        );
    }
}

/// One placement mode's measurements.
#[derive(Default)]
struct ModeStats {
    cycles: Vec<Duration>,
    plugins: BTreeMap<(usize, String), Vec<Duration>>,
    attempts: Option<usize>,
    refusals: usize,
    limit_refusals: usize,
}

impl ModeStats {
    /// Runs one cycle of `policy` on `snapshot` (its evictions and window forgotten first) and
    /// notes its times and counts; a repeated cycle that attempts a different number fails.
    fn measure_cycle(
        &mut self,
        policy: &mut Policy,
        snapshot: &mut kube_descheduler::snapshot::Snapshot,
        now: jiff::Timestamp,
    ) {
        snapshot.reset_evictions();
        if let Some(w) = &mut policy.cycle.scaled.window {
            // Each repeated cycle starts with an empty window, as the first cycle of `run`.
            *w = w.clone().with_history();
        }
        let started = Instant::now();
        let verdict = kube_descheduler::guard::answer::api_and_guard_verdict(
            snapshot,
            now,
            kube_descheduler::guard::GuardConfig::default(),
        );
        let (report, _) = run_cycle(
            &policy.profiles,
            &policy.cycle,
            snapshot,
            now,
            Box::new(PlanBackend::with_verdict(verdict)),
        );
        self.cycles.push(started.elapsed());
        let n = report.records.len();
        if self.attempts.is_some_and(|a| a != n) {
            fail(format!(
                "a repeated cycle made {n} attempts, the first {:?}",
                self.attempts
            ));
        }
        self.attempts = Some(n);
        self.refusals = report.placement_refusals.len();
        self.limit_refusals = report.limit_hits.len();
        for (i, t) in report.timings.iter().enumerate() {
            self.plugins
                .entry((i, format!("{}/{}", t.profile, t.plugin)))
                .or_default()
                .push(t.duration);
        }
    }
}
