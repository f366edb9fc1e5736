//! ABI v1.1's reading of one node's pods with WAT guests: `node_pod_count`, `node_pod_offset`,
//! `node_pod_column` and `pod_namespace` answer as the table's order says, a guest nominates
//! through them, and malformed requests (unknown nodes, here and in `node_name` / `node_taints`,
//! columns, counts, pointers, pods) fail the guest's run with a sentence while the native plugin
//! next to it still evicts.

mod wasm_common;

use wasm_common::*;

/// The v1.1 imports of these guests, and v1.0's other reads of a node by index.
const IMPORTS: &str = r#"
  (import "kube_descheduler" "node_pod_count" (func $node_pod_count (param i32) (result i32)))
  (import "kube_descheduler" "node_pod_offset" (func $node_pod_offset (param i32) (result i32)))
  (import "kube_descheduler" "node_pod_column" (func $node_pod_column (param i32 i32 i32 i32) (result i32)))
  (import "kube_descheduler" "pod_namespace" (func $pod_namespace (param i32 i32 i32) (result i32)))
  (import "kube_descheduler" "node_name" (func $node_name (param i32 i32 i32) (result i32)))
  (import "kube_descheduler" "node_taints" (func $node_taints (param i32 i32 i32) (result i32)))
"#;

/// `(if cond (then (return (i32.const code))))`: the guest returns `code` when `cond` holds.
fn fail_if(cond: &str, code: i32) -> String {
    format!("(if {cond} (then (return (i32.const {code}))))")
}

/// Runs `body` as plugin `Wat` after native PodLifeTime on the small cluster (given nodes n1,
/// n2; n3 is not Ready): the moved pods and the failures.
fn run(body: &str) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    write_wat(dir.path(), "guest.wasm", &guest(IMPORTS, body, 1));
    let text = policy(&[
        ("Wat", "{module: guest.wasm}"),
        ("PodLifeTime", "{maxPodLifeTimeSeconds: 86400}"),
    ]);
    let policy = load(&text, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut snap = small_cluster();
    let report = cycle(&policy, &mut snap);
    let failures = report
        .plugin_failures
        .iter()
        .map(|f| f.error.clone())
        .collect();
    (moved(&report), failures)
}

#[test]
fn a_guest_reads_one_nodes_pods_and_nominates_through_them() {
    // n1 holds old-1 and young (table indexes 0, 1), n2 old-2 and old-3 (2, 3).
    let checks = [
        fail_if(
            "(i32.ne (call $node_pod_count (i32.const 0)) (i32.const 2))",
            10,
        ),
        fail_if(
            "(i32.ne (call $node_pod_offset (i32.const 0)) (i32.const 0))",
            11,
        ),
        fail_if(
            "(i32.ne (call $node_pod_count (i32.const 1)) (i32.const 2))",
            12,
        ),
        fail_if(
            "(i32.ne (call $node_pod_offset (i32.const 1)) (i32.const 2))",
            13,
        ),
        // NODE column of n2's pods: 1, 1.
        fail_if(
            "(i32.ne (call $node_pod_column (i32.const 1) (i32.const 0) (i32.const 1024) (i32.const 2)) (i32.const 2))",
            14,
        ),
        fail_if("(i64.ne (i64.load (i32.const 1024)) (i64.const 1))", 15),
        fail_if("(i64.ne (i64.load (i32.const 1032)) (i64.const 1))", 16),
        // NAMESPACE column of n2's pods (a, b) as numbered over the whole table.
        "(drop (call $node_pod_column (i32.const 1) (i32.const 5) (i32.const 1024) (i32.const 2)))"
            .into(),
        "(drop (call $pod_column (i32.const 5) (i32.const 2048) (call $pod_count)))".into(),
        fail_if(
            "(i64.ne (i64.load (i32.const 1024)) (i64.load (i32.const 2064)))",
            17,
        ),
        fail_if(
            "(i64.ne (i64.load (i32.const 1032)) (i64.load (i32.const 2072)))",
            18,
        ),
        // PHASE of n1's first pod only (count 1 of 2): Running.
        "(i64.store (i32.const 1032) (i64.const 9))".into(),
        fail_if(
            "(i32.ne (call $node_pod_column (i32.const 0) (i32.const 2) (i32.const 1024) (i32.const 1)) (i32.const 1))",
            19,
        ),
        fail_if("(i64.ne (i64.load (i32.const 1024)) (i64.const 1))", 20),
        fail_if("(i64.ne (i64.load (i32.const 1032)) (i64.const 9))", 21),
        // pod_namespace of old-3 (index 3): "b", one byte.
        fail_if(
            "(i32.ne (call $pod_namespace (i32.const 3) (i32.const 3000) (i32.const 8)) (i32.const 1))",
            22,
        ),
        fail_if("(i32.ne (i32.load8_u (i32.const 3000)) (i32.const 98))", 23),
    ];
    let body = format!(
        "{} {} (i32.const 0)",
        checks.join(" "),
        nominate("(i32.add (call $node_pod_offset (i32.const 1)) (i32.const 1))")
    );
    let (moved, failures) = run(&body);
    assert!(failures.is_empty(), "{failures:?}");
    // The guest nominates old-3 (n2's second pod) before native PodLifeTime runs.
    assert_eq!(moved, ["b/old-3", "a/old-2", "a/old-1"]);
}

#[test]
fn a_count_of_zero_writes_nothing() {
    // Zero bytes at the very end of the guest's one page are inside its memory.
    let body = format!(
        "{} (i32.const 0)",
        fail_if(
            "(i32.ne (call $node_pod_column (i32.const 0) (i32.const 1) (i32.const 65536) (i32.const 0)) (i32.const 0))",
            30,
        )
    );
    let (_, failures) = run(&body);
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn malformed_node_pod_requests_fail_the_run_and_evict_nothing_of_the_guests() {
    let cases = [
        (
            "(drop (call $node_pod_count (i32.const -1)))",
            "node_pod_count: unknown node index -1",
        ),
        (
            "(drop (call $node_pod_offset (i32.const 2)))",
            "node_pod_offset: unknown node index 2",
        ),
        (
            "(drop (call $node_pod_column (i32.const 9) (i32.const 1) (i32.const 0) (i32.const 1)))",
            "node_pod_column: unknown node index 9",
        ),
        (
            "(drop (call $node_pod_column (i32.const 0) (i32.const 77) (i32.const 0) (i32.const 1)))",
            "node_pod_column: unknown column 77",
        ),
        (
            "(drop (call $node_pod_column (i32.const 0) (i32.const 1) (i32.const 0) (i32.const 3)))",
            "node_pod_column: count 3 is not within 0..=2",
        ),
        (
            "(drop (call $node_pod_column (i32.const 0) (i32.const 1) (i32.const -8) (i32.const 1)))",
            "negative pointer",
        ),
        (
            "(drop (call $node_pod_column (i32.const 0) (i32.const 1) (i32.const 65530) (i32.const 2)))",
            "outside the guest's memory",
        ),
        (
            "(drop (call $node_name (i32.const 2) (i32.const 0) (i32.const 64)))",
            "node_name: unknown node index 2",
        ),
        (
            "(drop (call $node_taints (i32.const -1) (i32.const 0) (i32.const 64)))",
            "node_taints: unknown node index -1",
        ),
        (
            "(drop (call $pod_namespace (i32.const 99999) (i32.const 0) (i32.const 8)))",
            "pod_namespace: pod index 99999 is out of range (the call has 5 pods)",
        ),
        (
            "(drop (call $pod_namespace (i32.const 0) (i32.const 65530) (i32.const 100)))",
            "outside the guest's memory",
        ),
    ];
    for (body, want) in cases {
        let body = format!("{} {body} (i32.const 0)", nominate("(i32.const 0)"));
        let (moved, failures) = run(&body);
        assert_eq!(failures.len(), 1, "{body}: {failures:?}");
        assert!(
            failures[0].contains("malformed answer") && failures[0].contains(want),
            "{body}: {:?} should contain {want:?}",
            failures[0]
        );
        // Nothing of the guest's (its valid first nomination included) is evicted.
        assert_eq!(moved, ["a/old-2", "a/old-1", "b/old-3"], "{body}");
    }
}
