//! `plan --explain` through the binary with the C ports' `kd_explain` (modules rebuilt from
//! source with clang, as the docs say): for the same pods and args, each port says word for word
//! what its native plugin says (`PodLifeTime`, `RemovePodsHavingTooManyRestarts`), in each of the
//! native plugin's not-selected sentences.

mod explain_common;
mod wasm_common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// A one-profile policy enabling `plugin` with `args` (YAML flow text).
fn policy(plugin: &str, args: &str) -> String {
    format!(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: {plugin}\n    args: {args}\n  plugins:\n    deschedule:\n      enabled: [{plugin}]\n"
    )
}

/// `plan -o json --explain` of `policy` (written to `dir`) on the bundled cluster at 2026-01-10:
/// per asked pod, the plugin's verdict and detail.
fn explain(dir: &Path, policy: &str, pods: &[&str]) -> Vec<(String, String, String)> {
    let file = dir.join("policy.yaml");
    std::fs::write(&file, policy).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"));
    cmd.args(["plan", "--policy"])
        .arg(&file)
        .args(["--snapshot", "examples/cluster.yaml"])
        .args(["--now", "2026-01-10T00:00:00Z", "-o", "json"])
        .current_dir(wasm_common::root());
    for p in pods {
        cmd.args(["--explain", p]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "plan failed: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    explain_common::verdicts(&v, pods.len())
}

/// Runs `native` and the C port `name` (as plugin `Wasm`) with the same `args` on `pods`, asserts
/// the answers are equal and returns them.
fn same_answers(
    dir: &Path,
    native: &str,
    name: &str,
    args: &str,
    pods: &[&str],
) -> Vec<(String, String, String)> {
    let want = explain(dir, &policy(native, args), pods);
    let got = explain(
        dir,
        &policy("Wasm", &format!("{{module: {name}.wasm, args: {args}}}")),
        pods,
    );
    assert_eq!(got, want, "{name} port vs native {native} with {args}");
    want
}

fn details(answers: &[(String, String, String)]) -> Vec<&str> {
    answers.iter().map(|(_, _, d)| d.as_str()).collect()
}

#[test]
fn the_podlifetime_port_explains_as_the_native_plugin() {
    let dir = tempfile::tempdir().unwrap();
    wasm_common::build_c("podlifetime", dir.path());
    let answers = same_answers(
        dir.path(),
        "PodLifeTime",
        "podlifetime",
        "{maxPodLifeTimeSeconds: 604800, namespaces: {include: [shop, monitoring]}}",
        &[
            "shop/api-6f4b9d7c8-q9r2t",
            "batch/nightly-import-9qz7d",
            "batch/report-runner-7d6c5b4a3-w2e3r",
        ],
    );
    // Both not-selected sentences of the native plugin are covered (ages 3d and 5h, and a pod
    // older than the max in a namespace the args leave out).
    assert_eq!(
        details(&answers),
        [
            "not selected: age 3d <= maxPodLifeTimeSeconds 604800 (7d)",
            "not selected: age 5h <= maxPodLifeTimeSeconds 604800 (7d)",
            "not selected: its namespace, labels, states, conditions or owner kind do not match the plugin's args",
        ]
    );
}

#[test]
fn the_toomanyrestarts_port_explains_as_the_native_plugin() {
    let dir = tempfile::tempdir().unwrap();
    wasm_common::build_c("toomanyrestarts", dir.path());
    let answers = same_answers(
        dir.path(),
        "RemovePodsHavingTooManyRestarts",
        "toomanyrestarts",
        "{podRestartThreshold: 10, includingInitContainers: true, namespaces: {include: [batch]}}",
        &[
            "shop/cart-worker-59d8f7c6b4-t6v1c",
            "shop/cart-worker-59d8f7c6b4-m2x8d",
        ],
    );
    assert_eq!(
        details(&answers),
        [
            "not selected: restarts 1 < podRestartThreshold 10 (init containers counted)",
            "not selected: the plugin's namespaces / labelSelector exclude it",
        ]
    );
    let answers = same_answers(
        dir.path(),
        "RemovePodsHavingTooManyRestarts",
        "toomanyrestarts",
        "{podRestartThreshold: 1, states: [CrashLoopBackOff, CrashLoopBackOff]}",
        &["shop/cart-worker-59d8f7c6b4-t6v1c"],
    );
    assert_eq!(
        details(&answers),
        [
            "not selected: restarts 1 >= podRestartThreshold 1, but it is in none of the states [\"CrashLoopBackOff\"]"
        ]
    );
}
