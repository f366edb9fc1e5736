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
            "{{module: {}, args: {args}}}",
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
    assert_eq!(limited, 50);
}

#[test]
fn podlifetime_refuses_what_abi_v1_cannot_see() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [(
        "{maxPodLifeTimeSeconds: 1, conditions: [{type: Ready}]}",
        "args.conditions: not supported by the WebAssembly port",
    )] {
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
