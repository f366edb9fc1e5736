//! `plan --explain` through the binary with the Go port of PodLifeTime (rebuilt with the pinned Go
//! toolchain): for the same pods and args it says word for word what the native PodLifeTime says,
//! in each of the native plugin's not-selected sentences.

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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers = v["explanations"].as_array().cloned().unwrap_or_default();
    assert_eq!(answers.len(), pods.len(), "{v}");
    answers
        .iter()
        .map(|a| {
            let verdict = &a["profiles"][0]["plugins"][0];
            (
                a["pod"].as_str().unwrap_or_default().to_string(),
                verdict["verdict"].as_str().unwrap_or_default().to_string(),
                verdict["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn same_answers(args: &str, pods: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let want = explain(dir.path(), &policy("PodLifeTime", args, ""), pods);
    let module = rebuilt().join("podlifetime.wasm");
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
    assert_eq!(got, want, "Go port vs native PodLifeTime with {args}");
    want.into_iter().map(|(_, _, d)| d).collect()
}

#[test]
fn the_go_podlifetime_port_explains_as_the_native_plugin() {
    let details = same_answers(
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
