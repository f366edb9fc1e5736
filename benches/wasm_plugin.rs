//! Benchmark: native plugins against their WebAssembly ports with the same args, on the synthetic
//! 5,000-node / 150,000-pod cluster (seed 42) with a creation time on every pod: PodLifeTime
//! against the C port (examples/wasm-plugins/podlifetime.wasm) and the Go port
//! (go/podlifetime.wasm), RemovePodsViolatingNodeTaints against the Go port (go/nodetaints.wasm).
//! For each pair: the module's compile time at policy load, the RSS a loaded plugin adds, each
//! plugin's cycle time (median and fastest of `WASM_BENCH_RUNS`, default 7, alternated), asserting
//! that both evict exactly the same pods with the same reasons; then the time of one
//! `plan --explain` answer of each (the port's `kd_explain`), asserting the same sentences. Run:
//! `cargo bench --bench wasm_plugin`; `WASM_BENCH_SIZE=500x15000` chooses another size,
//! `WASM_BENCH_PAIRS=Go` only the pairs whose label contains `Go` (case-sensitive).

mod bench_common;
#[path = "../tests/wasm_common/mod.rs"]
mod wasm_common;

use std::time::{Duration, Instant};

use kube_descheduler::evictor::planner::PlanBackend;
use kube_descheduler::framework::cycle::run_cycle;

/// The binary's allocator (see `src/main.rs`), so the cycle allocates as `run` does.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A `const char *` jemalloc reads its options from at start-up.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[repr(transparent)]
pub struct AllocatorOptions(*const std::ffi::c_char);

// SAFETY: the pointer is to a `'static` string that is never written.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe impl Sync for AllocatorOptions {}

/// The binary's jemalloc options (`src/main.rs`): freed pages go back to the OS at once, so the
/// RSS a loaded module adds is what the binary keeps (compiling's freed memory not included).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
// SAFETY: jemalloc reads this symbol, a NUL-terminated option string, once at start-up.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static ALLOCATOR_OPTIONS: AllocatorOptions = AllocatorOptions(
    c"narenas:1,background_thread:true,dirty_decay_ms:0,muzzy_decay_ms:0".as_ptr(),
);

fn fail(msg: String) -> ! {
    eprintln!("wasm_plugin: {msg}");
    std::process::exit(1);
}

/// Resident set size of this process in bytes (Linux), 0 when unknown.
fn rss() -> u64 {
    status_kib("VmRSS:")
}

/// Peak resident set size of this process so far in bytes (Linux), 0 when unknown.
fn peak_rss() -> u64 {
    status_kib("VmHWM:")
}

/// One `/proc/self/status` field given in kB, in bytes; 0 when unknown.
fn status_kib(field: &str) -> u64 {
    bench_common::proc_kib(std::process::id(), field).map_or(0, |kb| kb * 1024)
}

const LIFETIME_ARGS: &str = "{maxPodLifeTimeSeconds: 864000, namespaces: {exclude: [kube-system]}}";
const TAINTS_ARGS: &str = "{namespaces: {exclude: [kube-system]}}";

/// A native plugin and its port, with the same args.
struct Pair {
    label: &'static str,
    native: &'static str,
    module: &'static str,
    args: &'static str,
}

const PAIRS: &[Pair] = &[
    Pair {
        label: "PodLifeTime, C port",
        native: "PodLifeTime",
        module: "examples/wasm-plugins/podlifetime.wasm",
        args: LIFETIME_ARGS,
    },
    Pair {
        label: "PodLifeTime, Go port",
        native: "PodLifeTime",
        module: "examples/wasm-plugins/go/podlifetime.wasm",
        args: LIFETIME_ARGS,
    },
    Pair {
        label: "RemovePodsViolatingNodeTaints, Go port",
        native: "RemovePodsViolatingNodeTaints",
        module: "examples/wasm-plugins/go/nodetaints.wasm",
        args: TAINTS_ARGS,
    },
];

fn main() {
    let (nodes, pods) = bench_common::size_from_env("WASM_BENCH_SIZE");
    let runs: usize = bench_common::env_number("WASM_BENCH_RUNS", 7).max(1);
    let only = std::env::var("WASM_BENCH_PAIRS").unwrap_or_default();
    let t = Instant::now();
    let cluster = wasm_common::synthetic_with_ages(nodes, pods, 42);
    let mut snapshot = kube_descheduler::snapshot::load::load_bytes(&cluster)
        .unwrap_or_else(|e| fail(format!("the synthetic cluster: {}", e.0)));
    drop(cluster);
    eprintln!(
        "wasm_plugin: {nodes} nodes / {pods} pods loaded in {:.1?}",
        t.elapsed()
    );
    println!("wasm_plugin: {nodes} nodes, {pods} pods, {runs} alternated runs per pair");
    for pair in PAIRS.iter().filter(|p| p.label.contains(only.as_str())) {
        bench_pair(pair, &mut snapshot, runs);
    }
}

type Policy = kube_descheduler::policy::Policy;
type Snapshot = kube_descheduler::snapshot::Snapshot;
/// An eviction as the bench compares them: pod, reason code, text and detail.
type Decision = (
    kube_descheduler::snapshot::PodId,
    String,
    String,
    kube_descheduler::evictor::reason::ReasonDetail,
);

/// A pair's two policies and what loading the port's cost.
struct Loaded {
    native: Policy,
    wasm: Policy,
    /// Policy load with the module (read, compile, checks, `kd_validate`).
    load_time: Duration,
    /// RSS before and after loading the port's policy.
    rss_before: u64,
    rss_loaded: u64,
}

/// The native policy, then the port's, with RSS read around the port's load.
fn load_pair(pair: &Pair) -> Loaded {
    let root = wasm_common::root();
    let module = root.join(pair.module);
    let args = pair.args;
    let native = wasm_common::load(&wasm_common::policy(&[(pair.native, args)]), &root)
        .unwrap_or_else(|e| fail(e));
    let rss_before = rss();
    let t = Instant::now();
    let wasm = wasm_common::load(
        &wasm_common::policy(&[(
            "WasmPort",
            &format!("{{module: {}, args: {args}}}", module.display()),
        )]),
        &root,
    )
    .unwrap_or_else(|e| fail(e));
    Loaded {
        native,
        wasm,
        load_time: t.elapsed(),
        rss_before,
        rss_loaded: rss(),
    }
}

/// The pods a cycle moved, with their reasons; a plugin failure ends the bench.
fn decisions(report: &kube_descheduler::framework::cycle::CycleReport) -> Vec<Decision> {
    if !report.plugin_failures.is_empty() {
        fail(format!("a plugin failed: {:?}", report.plugin_failures));
    }
    report
        .records
        .iter()
        .filter(|r| r.outcome.moves_pod())
        .map(|r| {
            (
                r.pod,
                r.reason.code.to_string(),
                r.reason.text.clone(),
                r.reason.detail.clone(),
            )
        })
        .collect()
}

/// One dry-run cycle of `policy` on a fresh copy of the snapshot's evictions: its time and
/// decisions.
fn cycle(policy: &Policy, snapshot: &mut Snapshot) -> (Duration, Vec<Decision>) {
    snapshot.reset_evictions();
    let t = Instant::now();
    let (report, _) = run_cycle(
        &policy.profiles,
        &policy.cycle,
        &mut *snapshot,
        kube_descheduler::testing::now(),
        Box::new(PlanBackend::new()),
    );
    (t.elapsed(), decisions(&report))
}

/// Cycle times of `runs` alternated native and port cycles, asserting equal decisions; and how
/// many pods each evicted.
fn alternate(
    l: &Loaded,
    snapshot: &mut Snapshot,
    runs: usize,
) -> (Vec<Duration>, Vec<Duration>, usize) {
    let (mut native_times, mut wasm_times, mut evicted) = (Vec::new(), Vec::new(), 0);
    for _ in 0..runs {
        let (tn, dn) = cycle(&l.native, snapshot);
        let (tw, dw) = cycle(&l.wasm, snapshot);
        if dn != dw {
            let first = dn.iter().zip(&dw).position(|(a, b)| a != b);
            fail(format!(
                "evictions differ: native {} pods, wasm {} pods, first difference at {first:?}",
                dn.len(),
                dw.len()
            ));
        }
        evicted = dn.len();
        native_times.push(tn);
        wasm_times.push(tw);
    }
    (native_times, wasm_times, evicted)
}

/// Measures one pair (see the module's documentation).
fn bench_pair(pair: &Pair, snapshot: &mut Snapshot, runs: usize) {
    let l = load_pair(pair);
    // Peak RSS: one native cycle first, so the peak it leaves is what the cycle itself needs;
    // what the first WebAssembly cycle raises the peak by is what the running plugin adds
    // (its instance's linear memory, the columnar buffers and the guest's answer).
    drop(cycle(&l.native, snapshot));
    let peak_native = peak_rss();
    drop(cycle(&l.wasm, snapshot));
    let peak_wasm = peak_rss();
    let (mut native_times, mut wasm_times, evicted) = alternate(&l, snapshot, runs);
    let fastest = |v: &[Duration]| v.iter().min().copied().unwrap_or_default();
    let (nf, wf) = (fastest(&native_times), fastest(&wasm_times));
    let (nm, wm) = (
        bench_common::median(&mut native_times),
        bench_common::median(&mut wasm_times),
    );
    println!("{}: {}, args {}", pair.label, pair.module, pair.args);
    println!("  evictions identical: {evicted} pods, same order and reasons");
    println!("  native cycle:    median {nm:.1?}, fastest {nf:.1?}");
    println!("  wasm port cycle: median {wm:.1?}, fastest {wf:.1?}");
    println!(
        "  ratio wasm/native: median {:.2}x, fastest {:.2}x (target <= 3x)",
        wm.as_secs_f64() / nm.as_secs_f64().max(1e-9),
        wf.as_secs_f64() / nf.as_secs_f64().max(1e-9)
    );
    println!(
        "  module compile time: {:.1?}; policy load with the module (read, compile, checks, kd_validate): {:.1?}",
        compile_time(pair),
        l.load_time
    );
    report_memory(&l, peak_native, peak_wasm);
    explain_cost(snapshot, &l.native, &l.wasm, runs);
}

/// The port's compile time at policy load (a fresh load of its module).
fn compile_time(pair: &Pair) -> Duration {
    let module = wasm_common::root().join(pair.module);
    let wire: serde_json::Value = serde_saphyr::from_str(pair.args)
        .unwrap_or_else(|e| fail(format!("the bench's args: {e}")));
    let config = kube_descheduler::wasm::decode_config(
        &serde_json::json!({"module": module, "args": wire}),
        None,
    )
    .unwrap_or_else(|e| fail(e.to_string()));
    let guest = kube_descheduler::wasm::load::load(
        &config,
        "WasmPort",
        kube_descheduler::framework::registry::ExtensionPoint::Deschedule,
    )
    .unwrap_or_else(|e| fail(e.to_string()));
    guest.compile_time
}

/// The RSS the port adds: once loaded, and while a cycle runs it (the larger of the two is the
/// figure against the target).
fn report_memory(l: &Loaded, peak_native: u64, peak_wasm: u64) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let added = l
        .rss_loaded
        .saturating_sub(l.rss_before)
        .max(peak_wasm.saturating_sub(peak_native));
    println!(
        "  RSS: {:.1} MiB before loading the plugin, +{:.1} MiB once loaded; peak {:.1} MiB after a native cycle, {:.1} MiB after a wasm cycle (+{:.1} MiB while it runs)",
        mib(l.rss_before),
        mib(l.rss_loaded.saturating_sub(l.rss_before)),
        mib(peak_native),
        mib(peak_wasm),
        mib(peak_wasm.saturating_sub(peak_native)),
    );
    println!(
        "  RSS added by the plugin: {:.1} MiB (target <= 64 MiB)",
        mib(added)
    );
}

/// `plan --explain` for pods neither plugin selects: the same sentence from the native plugin and
/// the port's `kd_explain`, and the time of one answer (median over `runs` pods spread over the
/// cluster).
fn explain_cost(snapshot: &Snapshot, native: &Policy, wasm: &Policy, runs: usize) {
    let nodes = kube_descheduler::framework::cycle::ready_nodes(snapshot, None);
    let now = kube_descheduler::testing::now();
    // Pods young enough for neither PodLifeTime to select (any pod for the other plugins).
    let young: Vec<kube_descheduler::snapshot::PodId> = snapshot
        .live_pods()
        .filter(|&p| {
            snapshot
                .pod(p)
                .creation_timestamp
                .is_some_and(|c| now.duration_since(c).as_secs() <= 864_000)
        })
        .collect();
    let step = (young.len() / runs).max(1);
    let (mut native_times, mut wasm_times) = (Vec::new(), Vec::new());
    for &pod in young.iter().step_by(step).take(runs) {
        let t = Instant::now();
        let n = native.profiles[0].deschedule[0].explain_pod(snapshot, pod, &nodes, now);
        native_times.push(t.elapsed());
        let t = Instant::now();
        let w = wasm.profiles[0].deschedule[0].explain_pod(snapshot, pod, &nodes, now);
        wasm_times.push(t.elapsed());
        if n != w {
            fail(format!(
                "explanations differ for pod {pod}: native {n:?}, wasm {w:?}"
            ));
        }
    }
    println!(
        "  plan --explain, one pod: native {:.1?}, wasm kd_explain {:.1?} (median of {}; same sentences)",
        bench_common::median(&mut native_times),
        bench_common::median(&mut wasm_times),
        wasm_times.len()
    );
}
