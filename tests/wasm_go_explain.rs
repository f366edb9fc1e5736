//! `plan --explain` through the binary with the Go ports of PodLifeTime and
//! RemovePodsViolatingNodeTaints (rebuilt with the pinned Go toolchain): for the same pods and args
//! each says word for word what its native plugin says, in each of the native plugin's
//! not-selected sentences.

mod explain_common;
mod wasm_go_common;

use std::path::Path;

use wasm_go_common::*;

/// Per asked pod: the verdict and detail of the profile's only plugin.
fn explain(dir: &Path, policy: &str, pods: &[&str]) -> Vec<(String, String, String)> {
    let mut extra = Vec::new();
    for p in pods {
        extra.extend(["--explain", p]);
    }
    let (out, v) = plan(dir, policy, &root().join("examples/cluster.yaml"), &extra);
    assert_success(&out);
    explain_common::verdicts(&v, pods.len())
}

fn same_answers(native: &str, module: &str, args: &str, pods: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let want = explain(dir.path(), &policy(native, args, ""), pods);
    let module = rebuilt().join(module);
    let got = explain(
        dir.path(),
        &policy(
            "GoPort",
            &format!(
                "{{module: {}, timeout: 60s, args: {args}}}",
                module.display()
            ),
            "",
        ),
        pods,
    );
    assert_eq!(got, want, "Go port vs native {native} with {args}");
    want.into_iter().map(|(_, _, d)| d).collect()
}

#[test]
fn the_go_podlifetime_port_explains_as_the_native_plugin() {
    let details = same_answers(
        "PodLifeTime",
        "podlifetime.wasm",
        "{maxPodLifeTimeSeconds: 604800, namespaces: {include: [shop, monitoring]}}",
        &[
            "shop/api-6f4b9d7c8-q9r2t",
            "batch/nightly-import-9qz7d",
            "batch/report-runner-7d6c5b4a3-w2e3r",
            "monitoring/db-proxy-66d5f4c3b-u6i7o",
        ],
    );
    assert_eq!(
        details,
        [
            "not selected: age 3d <= maxPodLifeTimeSeconds 604800 (7d)",
            "not selected: age 5h <= maxPodLifeTimeSeconds 604800 (7d)",
            "not selected: its namespace, labels, states, conditions or owner kind do not match the plugin's args",
            "not selected: age 1d <= maxPodLifeTimeSeconds 604800 (7d)",
        ]
    );
}

#[test]
fn the_go_nodetaints_port_explains_as_the_native_plugin() {
    let details = same_answers(
        "RemovePodsViolatingNodeTaints",
        "nodetaints.wasm",
        "{namespaces: {exclude: [monitoring]}}",
        &[
            "monitoring/exporter-5c4b3a2d1-z8x7c",
            "shop/web-7c9f8d6b5-b8n1z",
        ],
    );
    assert_eq!(
        details,
        [
            "not selected: node-6 taint dedicated=gpu:NoSchedule is not tolerated, but the plugin's namespaces / labelSelector exclude the pod",
            "not selected: it tolerates every taint of node-4 this plugin enforces",
        ]
    );
}
