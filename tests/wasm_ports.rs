//! The C ports under examples/wasm-plugins/, rebuilt from source with clang: the committed
//! modules are the rebuilt ones, and PodLifeTime and RemovePodsHavingTooManyRestarts evict exactly
//! the pods their native plugins evict with the same args on the same cluster and clock, in the
//! same order, with the same reasons (code, text and numbers).

mod wasm_common;

use kube_descheduler::evictor::EvictionRecord;
use wasm_common::*;

/// (pod, code, text, numbers as JSON) of every moved pod, in order.
fn decisions(records: &[EvictionRecord]) -> Vec<(String, String, String, String)> {
    records
        .iter()
        .filter(|r| r.outcome.moves_pod())
        .map(|r| {
            (
                format!("{}/{}", r.namespace, r.name),
                r.reason.code.to_string(),
                r.reason.text.clone(),
                serde_json::to_string(&r.reason.detail).unwrap_or_default(),
            )
        })
        .collect()
}

/// Runs the native plugin `native` and the wasm module `module` with the same `args` (YAML flow
/// text) on `cluster` (JSON List bytes) under the policy-wide `limits` lines; asserts identical
/// decisions and returns how many pods moved.
fn assert_equivalent(
    native: &str,
    module: &std::path::Path,
    args: &str,
    cluster: &[u8],
    limits: &str,
) -> usize {
    let run = |plugin: (&str, String)| {
        let text = format!("{}{limits}", policy(&[(plugin.0, &plugin.1)]));
        let policy = load(&text, module.parent().unwrap()).unwrap_or_else(|e| panic!("{e}"));
        let mut snap = kube_descheduler::snapshot::load::load_bytes(cluster).unwrap();
        let report = cycle(&policy, &mut snap);
        assert!(
            report.plugin_failures.is_empty(),
            "{:?}",
            report.plugin_failures
        );
        decisions(&report.records)
    };
    let want = run((native, args.to_string()));
    let got = run((
        "WasmPort",
        format!("{{module: {}, args: {args}}}", module.display()),
    ));
    assert_eq!(got.len(), want.len(), "{native} {args}: counts differ");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{native} {args}");
    }
    want.len()
}

#[test]
fn the_committed_modules_are_the_rebuilt_ones() {
    let out = tempfile::tempdir().unwrap();
    for name in ["podlifetime", "toomanyrestarts"] {
        let rebuilt = std::fs::read(build_c(name, out.path())).unwrap();
        let committed = std::fs::read(root().join(format!("examples/wasm-plugins/{name}.wasm")))
            .unwrap_or_else(|e| panic!("examples/wasm-plugins/{name}.wasm: {e}"));
        assert!(
            rebuilt == committed,
            "examples/wasm-plugins/{name}.wasm differs from the module built from c/{name}.c: rebuild it (docs/wasm-plugins.md)"
        );
    }
}

#[test]
fn podlifetime_port_matches_the_native_plugin() {
    let out = tempfile::tempdir().unwrap();
    let module = build_c("podlifetime", out.path());
    let cluster = synthetic_with_ages(40, 1500, 7);
    let cases = [
        "{maxPodLifeTimeSeconds: 864000}",
        "{maxPodLifeTimeSeconds: 3000000}",
        "{maxPodLifeTimeSeconds: 86400, namespaces: {include: [team-a, batch]}}",
        "{maxPodLifeTimeSeconds: 86400, namespaces: {exclude: [team-a, kube-system]}}",
        "{states: [Failed]}",
        "{maxPodLifeTimeSeconds: 600, states: [Running, Pending]}",
        "{states: [CrashLoopBackOff]}",
        "{maxPodLifeTimeSeconds: 999999999}",
    ];
    let mut total = 0;
    for args in cases {
        total += assert_equivalent("PodLifeTime", &module, args, &cluster, "");
    }
    assert!(total > 1000, "the cases evict pods ({total})");
    // With limits, the order decides which pods go.
    let limited = assert_equivalent(
        "PodLifeTime",
        &module,
        "{maxPodLifeTimeSeconds: 86400}",
        &cluster,
        "maxNoOfPodsToEvictPerNode: 3\nmaxNoOfPodsToEvictTotal: 50\n",
    );
    assert_eq!(limited, 50);
}

#[test]
fn podlifetime_port_matches_on_hand_made_cases() {
    use kube_descheduler::testing::*;
    let out = tempfile::tempdir().unwrap();
    let module = build_c("podlifetime", out.path());
    let owned = |ns: &str, name: &str, node: &str| pod(ns, name, node).owner("ReplicaSet", "rs");
    let pods = vec![
        owned("a", "exactly-max", "n1").age(3600).build(),
        owned("a", "one-over", "n1").age(3601).build(),
        owned("a", "no-creation-time", "n2")
            .with(|p| p.metadata.creation_timestamp = None)
            .build(),
        owned("a", "future", "n2").age(-50).build(),
        owned("b", "crashing", "n2")
            .age(7200)
            .waiting("CrashLoopBackOff")
            .build(),
        owned("b", "oom", "n1")
            .age(7200)
            .terminated("OOMKilled", 137)
            .build(),
        owned("b", "not-ready-node", "n3").age(99999).build(),
        pod("b", "bare", "n1").bare().age(99999).build(),
    ];
    let nodes = vec![
        node("n1").build(),
        node("n2").build(),
        node("n3").not_ready().build(),
    ];
    let cluster = cluster_json(nodes, pods);
    for args in [
        "{maxPodLifeTimeSeconds: 3600}",
        "{maxPodLifeTimeSeconds: 3600, states: [CrashLoopBackOff, OOMKilled]}",
        "{states: [OOMKilled]}",
        "{maxPodLifeTimeSeconds: 0, namespaces: {include: [b]}}",
    ] {
        assert_equivalent("PodLifeTime", &module, args, &cluster, "");
    }
    // The one-over pod goes, the exactly-max one stays (strictly older, as upstream).
    assert_eq!(
        assert_equivalent(
            "PodLifeTime",
            &module,
            "{maxPodLifeTimeSeconds: 3600}",
            &cluster,
            ""
        ),
        4
    );
}

#[test]
fn toomanyrestarts_port_matches_the_native_plugin() {
    let out = tempfile::tempdir().unwrap();
    let module = build_c("toomanyrestarts", out.path());
    let cluster = synthetic_with_ages(40, 3000, 11);
    let mut total = 0;
    for args in [
        "{podRestartThreshold: 5}",
        "{podRestartThreshold: 100}",
        "{podRestartThreshold: 50, includingInitContainers: true}",
        "{podRestartThreshold: 5, states: [CrashLoopBackOff]}",
        "{podRestartThreshold: 5, states: [Running]}",
        "{podRestartThreshold: 5, namespaces: {exclude: [team-b]}}",
    ] {
        total += assert_equivalent(
            "RemovePodsHavingTooManyRestarts",
            &module,
            args,
            &cluster,
            "",
        );
    }
    assert!(total > 50, "the cases evict pods ({total})");
    let limited = assert_equivalent(
        "RemovePodsHavingTooManyRestarts",
        &module,
        "{podRestartThreshold: 5}",
        &cluster,
        "maxNoOfPodsToEvictPerNode: 1\n",
    );
    assert!(limited > 0);
}

#[test]
fn toomanyrestarts_port_matches_on_hand_made_cases() {
    use k8s_openapi::api::core::v1 as core;
    use kube_descheduler::testing::*;
    let out = tempfile::tempdir().unwrap();
    let module = build_c("toomanyrestarts", out.path());
    let owned = |ns: &str, name: &str, node: &str| pod(ns, name, node).owner("ReplicaSet", "rs");
    let pods = vec![
        owned("a", "r3", "n1").restarts(3).build(),
        owned("a", "r10", "n1").restarts(10).build(),
        owned("a", "r10-crash", "n1")
            .restarts(10)
            .waiting("CrashLoopBackOff")
            .build(),
        owned("a", "r20", "n2").restarts(20).build(),
        owned("a", "init-restarts", "n2")
            .with(|p| {
                let s = p.status.as_mut().unwrap();
                s.init_container_statuses = Some(vec![core::ContainerStatus {
                    name: "init".into(),
                    restart_count: 9,
                    state: Some(core::ContainerState {
                        waiting: Some(core::ContainerStateWaiting {
                            reason: Some("CrashLoopBackOff".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]);
            })
            .build(),
    ];
    let cluster = cluster_json(vec![node("n1").build(), node("n2").build()], pods);
    for args in [
        "{podRestartThreshold: 3}",
        "{podRestartThreshold: 9, includingInitContainers: true}",
        "{podRestartThreshold: 9, includingInitContainers: true, states: [CrashLoopBackOff]}",
        "{podRestartThreshold: 9, states: [CrashLoopBackOff]}",
    ] {
        assert_equivalent(
            "RemovePodsHavingTooManyRestarts",
            &module,
            args,
            &cluster,
            "",
        );
    }
}

#[test]
fn the_ports_refuse_args_they_do_not_implement() {
    let out = tempfile::tempdir().unwrap();
    for (name, args, want) in [
        (
            "podlifetime",
            "{maxPodLifeTimeSeconds: 1, ownerKinds: {include: [Job]}}",
            "args.ownerKinds: not supported",
        ),
        ("podlifetime", "{states: [Sleeping]}", "args.states"),
        ("podlifetime", "{}", "at least one filtering criterion"),
        ("toomanyrestarts", "{}", "podRestartThreshold"),
        ("toomanyrestarts", "{podRestartThreshold: 0}", "at least 1"),
        (
            "toomanyrestarts",
            "{podRestartThreshold: 1, states: [Pending]}",
            "args.states",
        ),
        (
            "toomanyrestarts",
            "{podRestartThreshold: 1, namespaces: {include: [a], exclude: [b]}}",
            "args.namespaces",
        ),
    ] {
        let module = build_c(name, out.path());
        let text = policy(&[(
            "Port",
            &format!("{{module: {}, args: {args}}}", module.display()),
        )]);
        match load(&text, out.path()) {
            Ok(_) => panic!("{name} {args} should be refused"),
            Err(e) => assert!(
                e.contains("plugin \"Port\"") && e.contains("args.args") && e.contains(want),
                "{name} {args}: {e}"
            ),
        }
    }
}

/// A JSON `List` of `nodes` and `pods` (what `plan --snapshot` and `load_bytes` read).
fn cluster_json(
    nodes: Vec<k8s_openapi::api::core::v1::Node>,
    pods: Vec<k8s_openapi::api::core::v1::Pod>,
) -> Vec<u8> {
    let mut items: Vec<serde_json::Value> = Vec::new();
    for n in nodes {
        let mut v = serde_json::to_value(n).unwrap();
        v["apiVersion"] = "v1".into();
        v["kind"] = "Node".into();
        items.push(v);
    }
    for p in pods {
        let mut v = serde_json::to_value(p).unwrap();
        v["apiVersion"] = "v1".into();
        v["kind"] = "Pod".into();
        items.push(v);
    }
    serde_json::to_vec(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}))
        .unwrap()
}
