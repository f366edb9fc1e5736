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

/// Plans the policy; returns the summary's warnings, the pods evicted by PodLifeTime and the
/// evictions of the guest (pod, reason code, outcome).
fn run(mode: &str, limits: &str) -> (String, Vec<String>, Vec<(String, String, String)>) {
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
    let of = |plugin: &str| -> Vec<&serde_json::Value> {
        v["evictions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["plugin"] == plugin)
            .collect()
    };
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let native = of("PodLifeTime")
        .iter()
        .map(|e| format!("{}/{}", e["namespace"], e["name"]))
        .collect();
    let guest = of("GoMisbehave")
        .iter()
        .map(|e| {
            (
                format!("{}/{}", text(&e["namespace"]), text(&e["name"])),
                text(&e["reasonCode"]),
                text(&e["outcome"]),
            )
        })
        .collect();
    (v["summary"]["warnings"].to_string(), native, guest)
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
    let (warnings, native, _) = run(mode, limits);
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

/// The guest's nomination goes through the profile's DefaultEvictor like a native plugin's: the
/// pod it names is evicted with its reason, beside the native PodLifeTime of the same profile.
/// (Without `pod`, the guest nominates the table's first pod on a node, kube-system's
/// kube-apiserver-cp-1 on cp-1, the first node in the snapshot's order: a static, system-critical
/// pod the DefaultEvictor refuses, so nothing of the guest's appears in the plan.)
#[test]
fn the_guest_nominates_when_asked_to() {
    let (warnings, native, guest) = run("ok, pod: batch/nightly-import-9qz7d", "");
    assert!(!warnings.contains("GoMisbehave"), "{warnings}");
    assert_eq!(
        guest,
        [(
            "batch/nightly-import-9qz7d".to_string(),
            "Misbehave".to_string(),
            "evicted".to_string()
        )]
    );
    assert_eq!(native, native_alone(), "the native plugin evicts as alone");
}

/// Without `pod`, the guest's first pod on a node is refused by the DefaultEvictor (see above):
/// the plan has no eviction of the guest's, and no failure.
#[test]
fn a_nomination_the_default_evictor_refuses_evicts_nothing() {
    let (warnings, native, guest) = run("ok", "");
    assert!(!warnings.contains("GoMisbehave"), "{warnings}");
    assert!(guest.is_empty(), "{guest:?}");
    assert_eq!(native, native_alone());
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
