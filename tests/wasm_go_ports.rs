//! The Go port of PodLifeTime (examples/wasm-plugins/go/podlifetime, rebuilt with the pinned Go
//! toolchain) decides exactly as the native plugin: `plan -o json` with the same args evicts the
//! same pods in the same order with the same reasons (code, text, numbers), on the bundled
//! example and on a synthetic cluster of 1,000 nodes, with several arg sets and with limits.

mod wasm_go_common;

use std::path::Path;

use wasm_go_common::*;

/// Plans `native` and the Go port `module` with the same `args` on `snapshot`; asserts identical
/// evictions (plugin names aside) and no plugin failure; returns how many.
fn assert_same(
    dir: &Path,
    native: &str,
    module: &str,
    args: &str,
    snapshot: &Path,
    extra: &str,
) -> usize {
    let run = |p: String| {
        let (out, v) = plan(dir, &p, snapshot, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let warnings = v["summary"]["warnings"].to_string();
        assert!(
            !warnings.contains("failed for this cycle"),
            "{args}: {warnings}"
        );
        evictions(&v)
    };
    let want = run(policy(native, args, extra));
    let got = run(policy(
        "GoPort",
        &format!(
            "{{module: {}, timeout: 60s, args: {args}}}",
            rebuilt().join(module).display()
        ),
        extra,
    ));
    assert_eq!(got.len(), want.len(), "{native} {args}: counts differ");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{native} {args}");
    }
    want.len()
}

#[test]
fn podlifetime_matches_the_native_plugin_on_the_bundled_example() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = root().join("examples/cluster.yaml");
    let mut total = 0;
    // Few arg sets, each combining several args: every set costs a compilation of the module,
    // about a minute with the dev profile's unoptimized Cranelift.
    for args in [
        "{maxPodLifeTimeSeconds: 3600, namespaces: {include: [shop, batch, monitoring]}, ownerKinds: {include: [ReplicaSet, Job]}}",
        "{maxPodLifeTimeSeconds: 60, states: [Running, CrashLoopBackOff, Failed], includingInitContainers: true, namespaces: {exclude: [kube-system]}, labelSelector: {matchExpressions: [{key: app, operator: NotIn, values: [api]}]}}",
        "{states: [Pending, CrashLoopBackOff, Completed, Error, Running], ownerKinds: {exclude: [DaemonSet]}, labelSelector: {matchLabels: {app: cart-worker}}}",
    ] {
        total += assert_same(
            dir.path(),
            "PodLifeTime",
            "podlifetime.wasm",
            args,
            &cluster,
            "",
        );
    }
    assert!(total >= 3, "the cases evict pods ({total})");
}

#[test]
fn podlifetime_matches_the_native_plugin_on_a_synthetic_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = synthetic(dir.path(), 1000, 12_000, 7);
    let mut total = 0;
    for args in [
        "{maxPodLifeTimeSeconds: 864000, namespaces: {exclude: [kube-system]}}",
        "{maxPodLifeTimeSeconds: 86400, states: [Running, CrashLoopBackOff], namespaces: {include: [team-a, batch]}, ownerKinds: {exclude: [DaemonSet]}, labelSelector: {matchExpressions: [{key: app, operator: Exists}]}}",
        "{states: [Failed, CrashLoopBackOff]}",
    ] {
        total += assert_same(
            dir.path(),
            "PodLifeTime",
            "podlifetime.wasm",
            args,
            &cluster,
            "",
        );
    }
    assert!(total > 1000, "the cases evict pods ({total})");
    // With limits, the order decides which pods go.
    let limited = assert_same(
        dir.path(),
        "PodLifeTime",
        "podlifetime.wasm",
        "{maxPodLifeTimeSeconds: 86400}",
        &cluster,
        "maxNoOfPodsToEvictPerNode: 3\nmaxNoOfPodsToEvictTotal: 50\n",
    );
    // Attempts include the ones a PodDisruptionBudget denies, which the total limit does not count.
    assert!(
        limited >= 50,
        "the total limit of 50 is reached ({limited} attempts)"
    );
}

#[test]
fn podlifetime_refuses_what_abi_v1_cannot_see() {
    let dir = tempfile::tempdir().unwrap();
    let (args, want) = (
        "{maxPodLifeTimeSeconds: 1, conditions: [{type: Ready}]}",
        "args.conditions: not supported by the WebAssembly port",
    );
    {
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
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args}: {err}");
        assert!(
            err.contains("args.args") && err.contains(want),
            "{args}: {err}"
        );
    }
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
