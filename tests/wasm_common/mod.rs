//! Shared helpers of the WebAssembly plugin tests: WAT guests, policies naming them, and running a
//! cycle over a small cluster.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use kube_descheduler::evictor::planner::PlanBackend;
use kube_descheduler::framework::cycle::{CycleReport, run_cycle};
use kube_descheduler::policy::{Policy, load_str_in};
use kube_descheduler::testing::*;

/// A WAT guest of ABI v1 whose `deschedule` has `body` (locals: none; params: args ptr, args len,
/// now). `imports` are extra import lines; `version` is what `kd_abi_version` returns.
pub fn guest(imports: &str, body: &str, version: i32) -> String {
    format!(
        r#"(module
  (import "kube_descheduler" "pod_count" (func $pod_count (result i32)))
  (import "kube_descheduler" "nominate" (func $nominate (param i32 i32 i32 i32 i32) (result i32)))
  (import "kube_descheduler" "reason_number" (func $reason_number (param i32 i32 i64) (result i32)))
  (import "kube_descheduler" "pod_column" (func $pod_column (param i32 i32 i32) (result i32)))
  {imports}
  (memory (export "memory") 1)
  (data (i32.const 16) "WatReason")
  (data (i32.const 32) "picked by the WAT guest")
  (data (i32.const 64) "score")
  (func (export "kd_abi_version") (result i32) (i32.const {version}))
  (func (export "kd_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "deschedule") (param i32 i32 i64) (result i32)
    {body})
)"#
    )
}

/// `nominate(pod, "WatReason", "picked by the WAT guest")` as WAT, for a pod index expression.
pub fn nominate(pod: &str) -> String {
    format!(
        "(drop (call $nominate {pod} (i32.const 16) (i32.const 9) (i32.const 32) (i32.const 23)))"
    )
}

/// Writes `wat` compiled to a binary module as `dir/name`.
pub fn write_wat(dir: &Path, name: &str, wat: &str) -> PathBuf {
    let bytes = wat::parse_str(wat).unwrap_or_else(|e| panic!("invalid test WAT: {e}"));
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write the test module");
    path
}

/// A v1alpha2 policy with one profile `p`: the deschedule plugins `plugins` (name, args as YAML
/// flow text), in order.
pub fn policy(plugins: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n",
    );
    for (name, args) in plugins {
        s.push_str(&format!("  - name: {name}\n    args: {args}\n"));
    }
    s.push_str("  plugins:\n    deschedule:\n      enabled: [");
    s.push_str(
        &plugins
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push_str("]\n");
    s
}

/// Loads `text` with relative paths resolved against `dir`.
pub fn load(text: &str, dir: &Path) -> Result<Policy, String> {
    load_str_in(text, Some(dir)).map_err(|e| e.0)
}

/// The small cluster: Ready n1, n2 and not-Ready n3; pods a/old-1 (n1, 2 days), a/old-2 (n2,
/// 3 days), a/young (n1, 60 s), b/old-3 (n2, 2 days), a/stranded (n3, 4 days). Owned by a
/// ReplicaSet so the DefaultEvictor lets them go.
pub fn small_cluster() -> kube_descheduler::snapshot::Snapshot {
    let pod = |ns: &str, name: &str, node: &str, age: i64| {
        kube_descheduler::testing::pod(ns, name, node)
            .owner("ReplicaSet", "rs")
            .age(age)
            .build()
    };
    snapshot(
        vec![
            node("n1").build(),
            node("n2").build(),
            node("n3").not_ready().build(),
        ],
        vec![
            pod("a", "old-1", "n1", 2 * 86400),
            pod("a", "old-2", "n2", 3 * 86400),
            pod("a", "young", "n1", 60),
            pod("b", "old-3", "n2", 2 * 86400),
            pod("a", "stranded", "n3", 4 * 86400),
        ],
    )
}

/// Runs one planning cycle of `policy` on `snapshot` at the test clock.
pub fn cycle(policy: &Policy, snapshot: &mut kube_descheduler::snapshot::Snapshot) -> CycleReport {
    run_cycle(
        &policy.profiles,
        &policy.cycle,
        snapshot,
        now(),
        Box::new(PlanBackend::new()),
    )
    .0
}

/// Moved pods (`ns/name`) of a cycle, in order.
pub fn moved(report: &CycleReport) -> Vec<String> {
    evicted_names(&report.records)
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the C example `examples/wasm-plugins/c/{name}.c` with Debian's clang and lld exactly as
/// the docs say, into `out`; returns the module's path. Panics (never skips) when clang or
/// wasm-ld is missing: `.ci/run` installs them.
pub fn build_c(name: &str, out: &Path) -> PathBuf {
    let dir = root().join("examples/wasm-plugins");
    let wasm = out.join(format!("{name}.wasm"));
    let status = std::process::Command::new("clang")
        .current_dir(&dir)
        .args([
            "--target=wasm32",
            "-nostdlib",
            "-O2",
            "-Wl,--no-entry",
            "-Wl,--export-dynamic",
            "-Iinclude",
            "-o",
        ])
        .arg(&wasm)
        .arg(format!("c/{name}.c"))
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run clang ({e}): install Debian's clang and lld (.ci/run does)")
        });
    assert!(status.success(), "clang failed to build c/{name}.c");
    wasm
}

/// The synthetic cluster of `kube_descheduler::synth` with a creation time on every pod (the
/// generator writes none): pod i is `(i * 7919) % 40 days + i % 97` seconds old at
/// [`kube_descheduler::testing::now`], so ages spread over hours and days and some are equal.
pub fn synthetic_with_ages(nodes: usize, pods: usize, seed: u64) -> Vec<u8> {
    add_creation_times(&kube_descheduler::testing::synthetic_cluster_json(
        nodes, pods, seed,
    ))
}

/// Inserts `"creationTimestamp"` before every pod's `"uid":"uid-` (see [`synthetic_with_ages`]).
pub fn add_creation_times(json: &[u8]) -> Vec<u8> {
    kube_descheduler::synth::with_creation_times(json, kube_descheduler::testing::now())
}
