//! The Go ports (examples/wasm-plugins/go/podlifetime and nodetaints, rebuilt with the pinned Go
//! toolchain) decide exactly as the native PodLifeTime and RemovePodsViolatingNodeTaints:
//! `plan -o json` with the same args evicts the same pods in the same order with the same
//! outcomes and reasons (code, text, numbers, strings), on the bundled example and on a synthetic
//! cluster of 1,000 nodes (made varied: taints, tolerations, conditions, exit codes, owners), with
//! the args varied and with limits.

mod wasm_go_common;

use std::path::Path;

use wasm_go_common::*;

/// [`assert_same`] for each of `args`; returns the evictions of all.
fn all_same(
    dir: &Path,
    native: &str,
    module: &str,
    cluster: &Path,
    args: &[&str],
) -> Vec<serde_json::Value> {
    args.iter()
        .flat_map(|a| assert_same(dir, native, module, a, cluster, ""))
        .collect()
}

// Few arg sets, each combining several args: every set costs a compilation of the module.

#[test]
fn podlifetime_matches_the_native_plugin_on_the_bundled_example() {
    let dir = tempfile::tempdir().unwrap();
    let all = all_same(
        dir.path(),
        "PodLifeTime",
        "podlifetime.wasm",
        &root().join("examples/cluster.yaml"),
        &[
            "{maxPodLifeTimeSeconds: 3600, namespaces: {include: [shop, batch, monitoring]}, ownerKinds: {include: [ReplicaSet, Job]}}",
            "{maxPodLifeTimeSeconds: 60, states: [Running, CrashLoopBackOff, Failed], includingInitContainers: true, namespaces: {exclude: [kube-system]}, labelSelector: {matchExpressions: [{key: app, operator: NotIn, values: [api]}]}}",
            "{states: [Pending, CrashLoopBackOff, Completed, Error, Running], ownerKinds: {exclude: [DaemonSet]}, labelSelector: {matchLabels: {app: cart-worker}}}",
            "{conditions: [{type: Ready, status: 'True', minTimeSinceLastTransitionSeconds: 86400}], exitCodes: [0, 1, 137], includingInitContainers: true}",
        ],
    );
    assert!(all.len() >= 3, "the cases evict pods ({})", all.len());
}

#[test]
fn podlifetime_matches_the_native_plugin_on_a_synthetic_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = varied(dir.path(), 1000, 12_000, 7);
    let all = all_same(
        dir.path(),
        "PodLifeTime",
        "podlifetime.wasm",
        &cluster,
        &[
            "{maxPodLifeTimeSeconds: 864000, namespaces: {exclude: [kube-system]}}",
            "{maxPodLifeTimeSeconds: 86400, states: [Running, CrashLoopBackOff], namespaces: {include: [team-a, batch]}, ownerKinds: {exclude: [Workflow]}, labelSelector: {matchExpressions: [{key: app, operator: Exists}]}}",
            "{states: [Failed, CrashLoopBackOff], ownerKinds: {include: [Workflow, DaemonSet]}}",
            "{conditions: [{type: Ready, status: 'False', minTimeSinceLastTransitionSeconds: 3600}, {reason: ContainersNotReady}], namespaces: {include: [team-b, team-c]}}",
            "{exitCodes: [1, 137], maxPodLifeTimeSeconds: 3600}",
            "{exitCodes: [2], includingInitContainers: true, conditions: [{status: 'True'}]}",
        ],
    );
    for (outcome, at_least) in [("evicted", 1000), ("denied", 1)] {
        assert!(
            count(&all, outcome) >= at_least,
            "the cases have {outcome} pods ({})",
            count(&all, outcome)
        );
    }
}

/// With limits, the order decides which pods go. The total limit counts the pods the cycle moves
/// (outcome `evicted`, or `deflected`: the guard's rolling restart replaces the pod), not the
/// attempts: a PodDisruptionBudget's denial is an attempt in the plan (outcome `denied`) that the
/// limit does not count, so the plugin goes on until 50 pods are moved, and stops there.
#[test]
fn podlifetime_matches_the_native_plugin_with_limits() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = synthetic(dir.path(), 1000, 12_000, 7);
    let limited = assert_same(
        dir.path(),
        "PodLifeTime",
        "podlifetime.wasm",
        "{maxPodLifeTimeSeconds: 86400}",
        &cluster,
        "maxNoOfPodsToEvictPerNode: 3\nmaxNoOfPodsToEvictTotal: 50\n",
    );
    assert_limit_reached(&limited, 50);
}

/// Exactly `limit` pods moved, every other attempt denied, the last attempt a move.
fn assert_limit_reached(attempts: &[serde_json::Value], limit: usize) {
    let moved = count(attempts, "evicted") + count(attempts, "deflected");
    assert_eq!(moved, limit, "{attempts:?}");
    assert_eq!(count(attempts, "denied"), attempts.len() - limit);
    assert_ne!(
        attempts.last().map(|a| &a["outcome"]),
        Some(&serde_json::json!("denied")),
        "the run stops at the move that reaches the limit"
    );
}

#[test]
fn podlifetime_refuses_the_args_the_native_plugin_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let args = "{conditions: [{type: Ready}, {}]}";
    let (native, _) = plan(
        dir.path(),
        &policy("PodLifeTime", args, ""),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    let (out, _) = plan(
        dir.path(),
        &policy(
            "GoPort",
            &format!(
                "{{module: {}, args: {args}}}",
                rebuilt().join("podlifetime.wasm").display()
            ),
            "",
        ),
        &root().join("examples/cluster.yaml"),
        &[],
    );
    for (who, out) in [("native", &native), ("port", &out)] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{who}: {err}");
        assert!(
            err.contains("conditions[1]") && err.contains("at least one of type, status, reason"),
            "{who}: {err}"
        );
    }
}

#[test]
fn nodetaints_matches_the_native_plugin_on_the_bundled_example() {
    let dir = tempfile::tempdir().unwrap();
    let all = all_same(
        dir.path(),
        "RemovePodsViolatingNodeTaints",
        "nodetaints.wasm",
        &root().join("examples/cluster.yaml"),
        &[
            "{}",
            "{excludedTaints: [dedicated=gpu], includePreferNoSchedule: true, namespaces: {exclude: [monitoring]}}",
            "{includedTaints: [dedicated], labelSelector: {matchExpressions: [{key: app, operator: In, values: [web, cache]}]}}",
        ],
    );
    assert!(!all.is_empty(), "the cases evict pods");
}

#[test]
fn nodetaints_matches_the_native_plugin_on_a_synthetic_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = varied(dir.path(), 1000, 12_000, 7);
    let all = all_same(
        dir.path(),
        "RemovePodsViolatingNodeTaints",
        "nodetaints.wasm",
        &cluster,
        &[
            "{}",
            "{includePreferNoSchedule: true, excludedTaints: [dedicated=batch, gpu], namespaces: {exclude: [team-a]}}",
            "{includePreferNoSchedule: true, includedTaints: [soft, level, dedicated=db], labelSelector: {matchExpressions: [{key: app, operator: NotIn, values: [app-1, app-2]}]}}",
            "{includedTaints: [], namespaces: {include: [team-b]}}",
        ],
    );
    let reasons: std::collections::BTreeSet<String> = all
        .iter()
        .filter_map(|e| e["reasonDetail"]["taint"].as_str().map(String::from))
        .collect();
    assert!(
        count(&all, "evicted") > 1000 && reasons.len() >= 5,
        "the cases evict pods for several taints ({} evicted; {reasons:?})",
        count(&all, "evicted")
    );
    // Node by node with limits: a node's limit moves on to the next node, the total ends the run.
    let limited = assert_same(
        dir.path(),
        "RemovePodsViolatingNodeTaints",
        "nodetaints.wasm",
        "{includePreferNoSchedule: true}",
        &cluster,
        "maxNoOfPodsToEvictPerNode: 2\nmaxNoOfPodsToEvictTotal: 40\n",
    );
    assert_limit_reached(&limited, 40);
}

/// One `plan --stats` with debug logs: the plugin's run in seconds (its `plugin finished` line)
/// and the stats (`loadSeconds`, `explainSeconds`, `peakRssKiB`, …).
fn measure(
    dir: &Path,
    policy_text: &str,
    snapshot: &Path,
    extra: &[&str],
) -> (f64, serde_json::Value) {
    let file = dir.join("measure.yaml");
    std::fs::write(&file, policy_text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["plan", "--stats", "--policy"])
        .arg(&file)
        .arg("--snapshot")
        .arg(snapshot)
        .args(["--now", NOW, "-o", "json"])
        .args(extra)
        .env("RUST_LOG", "kube_descheduler=debug")
        .output()
        .unwrap();
    assert_success(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    let secs = log
        .lines()
        .filter(|l| l.contains("plugin finished"))
        .filter_map(|l| l.split("seconds=").nth(1))
        .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .sum();
    let stats = log
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_default();
    (secs, stats)
}

/// Not a check: measures, with this build's binary, one cycle of the native PodLifeTime, the C
/// port and the Go port on the synthetic 5,000-node / 150,000-pod cluster (the load time, which
/// includes compiling the module, and the peak RSS), and the cost of one `kd_explain` answer (a
/// fresh instance: the Go runtime's start included). Run with
/// `cargo test --test wasm_go_ports -- --ignored --nocapture measure`.
#[test]
#[ignore]
fn measure_the_go_port() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, pods) = (5000, 150_000);
    let cluster = synthetic(dir.path(), nodes, pods, 42);
    let args = "{maxPodLifeTimeSeconds: 864000, namespaces: {exclude: [kube-system]}}";
    let c_port = root().join("examples/wasm-plugins/podlifetime.wasm");
    let go_port = rebuilt().join("podlifetime.wasm");
    for (name, module) in [
        ("native", None),
        ("C port", Some(&c_port)),
        ("Go port", Some(&go_port)),
    ] {
        let p = match module {
            None => policy("PodLifeTime", args, ""),
            Some(m) => policy(
                "Port",
                &format!("{{module: {}, args: {args}}}", m.display()),
                "",
            ),
        };
        let (secs, stats) = measure(dir.path(), &p, &cluster, &[]);
        println!(
            "{name}: cycle {secs:.3} s at {nodes} nodes / {pods} pods; load {:.2} s; peak RSS {} KiB; {} evictions",
            stats["loadSeconds"].as_f64().unwrap_or_default(),
            stats["peakRssKiB"],
            stats["evictions"]
        );
    }
    let example = root().join("examples/cluster.yaml");
    for (name, module) in [("C port", &c_port), ("Go port", &go_port)] {
        let p = policy(
            "Port",
            &format!(
                "{{module: {}, args: {{maxPodLifeTimeSeconds: 604800}}}}",
                module.display()
            ),
            "",
        );
        let many: Vec<&str> = ["--explain", "shop/api-6f4b9d7c8-q9r2t"]
            .iter()
            .copied()
            .cycle()
            .take(82)
            .collect();
        let (_, stats) = measure(dir.path(), &p, &example, &many);
        println!(
            "{name}: one kd_explain answer on the example (fresh instance) {:.2} ms",
            stats["explainSeconds"].as_f64().unwrap_or_default() * 1000.0 / 41.0
        );
    }
}
