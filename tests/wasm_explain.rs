//! The optional `kd_explain` export with WAT guests: an answer reaches the plugin's
//! `explain_pod` (at both extension points, for the asked pod's table index, the last `explain`
//! winning), a pod on none of the given nodes is answered by the host without calling the guest,
//! and every failure (trap, timeout, non-zero return, nominating, bad or oversized text) is a
//! warning in the text rather than an error; `explain` outside `kd_explain` fails that run; a
//! `kd_explain` of the wrong type is a configuration error naming `args.module`.

mod wasm_common;

use std::path::Path;

use kube_descheduler::policy::Policy;
use kube_descheduler::snapshot::{PodId, Snapshot};
use kube_descheduler::testing::now;
use kube_descheduler::wasm::adapter::NOT_ON_GIVEN_NODES;
use wasm_common::*;

/// A WAT guest whose `kd_explain` has `body` (params: args ptr, args len, now, pod; one i32 local)
/// and whose `deschedule` has `deschedule`. Memory: 16 "WatReason", 32 "picked by the WAT guest",
/// 64 "first", 128.. scratch for a pod's name, 200 invalid UTF-8 (0xff 0xfe).
fn explaining_guest(body: &str, deschedule: &str) -> String {
    format!(
        r#"(module
  (import "kube_descheduler" "nominate" (func $nominate (param i32 i32 i32 i32 i32) (result i32)))
  (import "kube_descheduler" "pod_name" (func $pod_name (param i32 i32 i32) (result i32)))
  (import "kube_descheduler" "explain" (func $explain (param i32 i32) (result i32)))
  (import "kube_descheduler" "fail" (func $fail (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "WatReason")
  (data (i32.const 32) "picked by the WAT guest")
  (data (i32.const 64) "first")
  (data (i32.const 200) "\ff\fe")
  (func (export "kd_abi_version") (result i32) (i32.const 1))
  (func (export "kd_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "deschedule") (param i32 i32 i64) (result i32)
    {deschedule})
  (func (export "kd_explain") (param i32 i32 i64 i32) (result i32) (local i32)
    {body})
)"#
    )
}

/// `explain("first")`, then `explain(<the asked pod's name>)`, return 0.
const NAMES_THE_POD: &str = "(drop (call $explain (i32.const 64) (i32.const 5))) \
     (local.set 4 (call $pod_name (local.get 3) (i32.const 128) (i32.const 64))) \
     (drop (call $explain (i32.const 128) (local.get 4))) (i32.const 0)";

/// Loads `wat` as plugin `Wat` (args `extra` after `module`) in a one-profile policy.
fn load_guest(dir: &Path, wat: &str, extra: &str) -> Policy {
    write_wat(dir, "guest.wasm", wat);
    load(
        &policy(&[("Wat", &format!("{{module: guest.wasm{extra}}}"))]),
        dir,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn pod_id(s: &Snapshot, ns: &str, name: &str) -> PodId {
    let i = s
        .pods
        .iter()
        .position(|p| &*p.namespace == ns && p.name == name)
        .unwrap_or_else(|| panic!("no pod {ns}/{name}"));
    i as PodId
}

/// What the profile's only deschedule plugin says about `ns/name` on the small cluster with its
/// Ready nodes n1 and n2.
fn explain(policy: &Policy, ns: &str, name: &str) -> Option<String> {
    let snap = small_cluster();
    let pod = pod_id(&snap, ns, name);
    policy.profiles[0].deschedule[0].explain_pod(&snap, pod, &[0, 1], now())
}

/// Asserts the guest's explain call failed with `want` in the warning.
fn assert_explain_fails(body: &str, extra: &str, want: &str) {
    let dir = tempfile::tempdir().unwrap();
    let policy = load_guest(dir.path(), &explaining_guest(body, "(i32.const 0)"), extra);
    let got = explain(&policy, "a", "young").unwrap_or_default();
    assert!(
        got.starts_with(
            "the plugin gives no per-pod explanation (WebAssembly plugin: explain failed: "
        ) && got.contains(want),
        "{got:?} should warn with {want:?}"
    );
}

#[test]
fn the_guests_explanation_names_the_asked_pod_and_the_last_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let policy = load_guest(
        dir.path(),
        &explaining_guest(NAMES_THE_POD, "(i32.const 0)"),
        "",
    );
    // Different table indices (n1: old-1, young; n2: old-2, old-3): each answer is its pod's.
    for (ns, name) in [("a", "young"), ("a", "old-2"), ("b", "old-3")] {
        assert_eq!(explain(&policy, ns, name).as_deref(), Some(name));
    }
}

#[test]
fn no_explain_call_or_no_export_gives_no_explanation() {
    let dir = tempfile::tempdir().unwrap();
    let policy = load_guest(
        dir.path(),
        &explaining_guest("(i32.const 0)", "(i32.const 0)"),
        "",
    );
    assert_eq!(explain(&policy, "a", "young"), None);
    // An empty text is no explanation either.
    let policy = load_guest(
        dir.path(),
        &explaining_guest(
            "(drop (call $explain (i32.const 64) (i32.const 0))) (i32.const 0)",
            "(i32.const 0)",
        ),
        "",
    );
    assert_eq!(explain(&policy, "a", "young"), None);
    // A module without kd_explain (the sandbox tests' guest).
    let policy = load_guest(dir.path(), &guest("", "(i32.const 0)", 1), "");
    assert_eq!(explain(&policy, "a", "young"), None);
}

#[test]
fn a_pod_on_no_given_node_is_answered_without_calling_the_guest() {
    // The guest traps if called: the host's own sentence shows it was not.
    let dir = tempfile::tempdir().unwrap();
    let policy = load_guest(
        dir.path(),
        &explaining_guest("unreachable", "(i32.const 0)"),
        "",
    );
    // a/stranded is on the not-Ready n3, which the cycle does not give the plugin.
    assert_eq!(
        explain(&policy, "a", "stranded").as_deref(),
        Some(NOT_ON_GIVEN_NODES)
    );
    // The same pod is asked about when n3 is given.
    let snap = small_cluster();
    let pod = pod_id(&snap, "a", "stranded");
    let got = policy.profiles[0].deschedule[0].explain_pod(&snap, pod, &[0, 1, 2], now());
    assert!(got.is_some_and(|g| g.contains("explain failed: trap")));
}

#[test]
fn a_trap_is_a_warning_in_the_text() {
    assert_explain_fails("unreachable", "", "trap: ");
}

#[test]
fn a_timeout_is_a_warning_in_the_text() {
    let started = std::time::Instant::now();
    assert_explain_fails(
        "(loop (br 0)) (i32.const 0)",
        ", timeout: 200ms",
        "timed out: the call ran longer than its timeout of 200ms",
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn a_non_zero_return_and_fail_are_warnings_in_the_text() {
    assert_explain_fails(
        "(drop (call $explain (i32.const 64) (i32.const 5))) (i32.const 3)",
        "",
        "the guest's kd_explain returned 3",
    );
    assert_explain_fails(
        "(call $fail (i32.const 64) (i32.const 5)) (i32.const 1)",
        "",
        "the guest failed: first)",
    );
}

#[test]
fn nominating_from_kd_explain_is_a_malformed_answer() {
    assert_explain_fails(
        &format!("{} (i32.const 0)", nominate("(local.get 3)")),
        "",
        "malformed answer: nominate: called from kd_explain (an explanation must not nominate)",
    );
}

#[test]
fn bad_utf8_or_oversized_text_is_a_malformed_answer() {
    assert_explain_fails(
        "(drop (call $explain (i32.const 200) (i32.const 2))) (i32.const 0)",
        "",
        "malformed answer: explain: text: not UTF-8",
    );
    assert_explain_fails(
        "(drop (call $explain (i32.const 0) (i32.const 1025))) (i32.const 0)",
        "",
        "malformed answer: explain: text: 1025 bytes, more than the 1024 allowed",
    );
    // Exactly 1,024 bytes is allowed (zeros are valid UTF-8).
    let dir = tempfile::tempdir().unwrap();
    let policy = load_guest(
        dir.path(),
        &explaining_guest(
            "(drop (call $explain (i32.const 1024) (i32.const 1024))) (i32.const 0)",
            "(i32.const 0)",
        ),
        "",
    );
    assert_eq!(explain(&policy, "a", "young").map(|t| t.len()), Some(1024));
}

#[test]
fn explain_outside_kd_explain_fails_that_run() {
    let dir = tempfile::tempdir().unwrap();
    let deschedule = format!(
        "{} (drop (call $explain (i32.const 64) (i32.const 5))) (i32.const 0)",
        nominate("(i32.const 0)")
    );
    let policy = load_guest(
        dir.path(),
        &explaining_guest(NAMES_THE_POD, &deschedule),
        "",
    );
    let mut snap = small_cluster();
    let report = cycle(&policy, &mut snap);
    assert_eq!(report.plugin_failures.len(), 1);
    assert!(
        report.plugin_failures[0].error.contains(
            "malformed answer: explain: called from deschedule (only kd_explain may give an explanation)"
        ),
        "{}",
        report.plugin_failures[0].error
    );
    // The malformed run evicts nothing, not even what it nominated first.
    assert!(moved(&report).is_empty());
}

#[test]
fn a_kd_explain_of_the_wrong_type_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let wat = explaining_guest("(i32.const 0)", "(i32.const 0)").replace(
        "(func (export \"kd_explain\") (param i32 i32 i64 i32)",
        "(func (export \"kd_explain\") (param i32 i32 i64)",
    );
    write_wat(dir.path(), "guest.wasm", &wat);
    let e = match load(&policy(&[("Wat", "{module: guest.wasm}")]), dir.path()) {
        Ok(_) => panic!("a kd_explain of the wrong type is refused"),
        Err(e) => e,
    };
    assert!(
        e.contains("plugin \"Wat\"")
            && e.contains("args.module")
            && e.contains("the export \"kd_explain\" has type"),
        "{e}"
    );
}

#[test]
fn a_balance_guest_explains_too() {
    let dir = tempfile::tempdir().unwrap();
    write_wat(
        dir.path(),
        "guest.wasm",
        &explaining_guest(NAMES_THE_POD, "(i32.const 0)")
            .replace("(export \"deschedule\")", "(export \"balance\")"),
    );
    let text = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: Wat\n    args: {module: guest.wasm}\n  plugins:\n    balance:\n      enabled: [Wat]\n";
    let policy = load(text, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let snap = small_cluster();
    let pod = pod_id(&snap, "a", "old-1");
    assert_eq!(
        policy.profiles[0].balance[0]
            .explain_pod(&snap, pod, &[0, 1], now())
            .as_deref(),
        Some("old-1")
    );
}
