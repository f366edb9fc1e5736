//! The WebAssembly sandbox with WAT guests: load-time configuration errors (ABI version, exports,
//! imports, checksum, paths, limits), run-time failures (timeout, memory cap, trap, malformed and
//! hostile answers) that fail only the guest's run while a native plugin next to it still evicts,
//! and a well-behaved guest whose nominations are evicted with its reasons.

mod wasm_common;

use std::time::{Duration, Instant};

use wasm_common::*;

/// Loads a one-plugin policy naming `wat` as plugin `Wat` with extra args; returns the error.
fn load_err(wat: &str, extra: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    write_wat(dir.path(), "guest.wasm", wat);
    match load(
        &policy(&[("Wat", &format!("{{module: guest.wasm{extra}}}"))]),
        dir.path(),
    ) {
        Ok(_) => panic!("the policy should be refused"),
        Err(e) => e,
    }
}

/// Runs `wat` as plugin `Wat` after native PodLifeTime (maxPodLifeTimeSeconds one day) on the
/// small cluster; returns the moved pods and the failures.
fn run_next_to_native(wat: &str, extra: &str) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    write_wat(dir.path(), "guest.wasm", wat);
    let text = policy(&[
        ("Wat", &format!("{{module: guest.wasm{extra}}}")),
        ("PodLifeTime", "{maxPodLifeTimeSeconds: 86400}"),
    ]);
    let policy = load(&text, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut snap = small_cluster();
    let report = cycle(&policy, &mut snap);
    // `run` counts the failure in kube_descheduler_plugin_failures_total{profile,strategy}.
    let metrics = kube_descheduler::serving::metrics::Metrics::new();
    metrics.record_cycle(&report, "ok", "test");
    let want = if report.plugin_failures.is_empty() {
        0
    } else {
        1
    };
    let text = metrics.render();
    let line =
        format!("kube_descheduler_plugin_failures_total{{strategy=\"Wat\",profile=\"p\"}} {want}");
    assert!(
        want == 0 || text.lines().any(|l| l == line),
        "{line} in:\n{text}"
    );
    let failures = report
        .plugin_failures
        .iter()
        .map(|f| {
            assert_eq!((f.profile.as_str(), f.plugin.as_str()), ("p", "Wat"));
            f.error.clone()
        })
        .collect();
    (moved(&report), failures)
}

/// What native PodLifeTime evicts on the small cluster (oldest first; n3 is not Ready).
fn native_only() -> Vec<String> {
    vec!["a/old-2".into(), "a/old-1".into(), "b/old-3".into()]
}

/// Asserts the guest failed with `want` in its error while the native plugin evicted as alone.
fn assert_fails_alone(wat: &str, extra: &str, want: &str) {
    let (moved, failures) = run_next_to_native(wat, extra);
    assert_eq!(failures.len(), 1, "one failure expected: {failures:?}");
    assert!(
        failures[0].contains(want),
        "failure {:?} should contain {want:?}",
        failures[0]
    );
    assert_eq!(moved, native_only(), "the native plugin evicts as if alone");
}

#[test]
fn a_guest_nominates_and_the_host_evicts_with_its_reason() {
    let body = format!(
        "{} (drop (call $reason_number (i32.const 64) (i32.const 5) (i64.const 42))) (i32.const 0)",
        nominate("(i32.const 2)")
    );
    let dir = tempfile::tempdir().unwrap();
    write_wat(dir.path(), "guest.wasm", &guest("", &body, 1));
    let policy = load(&policy(&[("Wat", "{module: guest.wasm}")]), dir.path()).unwrap();
    let mut snap = small_cluster();
    let report = cycle(&policy, &mut snap);
    assert!(report.plugin_failures.is_empty());
    // Pod index 2 is the first pod of the second node (n1: old-1, young; n2: old-2, old-3).
    assert_eq!(moved(&report), vec!["a/old-2"]);
    let r = &report.records[0];
    assert_eq!(&*r.plugin, "Wat");
    assert_eq!(r.reason.code, "WatReason");
    assert_eq!(r.reason.text, "picked by the WAT guest");
    assert_eq!(r.reason.detail.int("score"), Some(42));
}

#[test]
fn the_profiles_evictor_still_decides() {
    // Nominating every pod: the DefaultEvictor refuses the bare pod (no owner), as for a native
    // plugin.
    let body = format!(
        "(local.set 0 (i32.const 0)) (block (loop (br_if 1 (i32.ge_s (local.get 0) (i32.const 2))) {} (local.set 0 (i32.add (local.get 0) (i32.const 1))) (br 0))) (i32.const 0)",
        nominate("(local.get 0)")
    );
    let dir = tempfile::tempdir().unwrap();
    write_wat(dir.path(), "guest.wasm", &guest("", &body, 1));
    let policy = load(&policy(&[("Wat", "{module: guest.wasm}")]), dir.path()).unwrap();
    let mut snap = kube_descheduler::testing::snapshot(
        vec![
            kube_descheduler::testing::node("n1").build(),
            kube_descheduler::testing::node("n2").build(),
        ],
        vec![
            kube_descheduler::testing::pod("a", "bare", "n1")
                .bare()
                .build(),
            kube_descheduler::testing::pod("a", "owned", "n1")
                .owner("ReplicaSet", "rs")
                .build(),
        ],
    );
    let report = cycle(&policy, &mut snap);
    assert!(
        report.plugin_failures.is_empty(),
        "{:?}",
        report.plugin_failures
    );
    assert_eq!(moved(&report), vec!["a/owned"]);
}

#[test]
fn an_infinite_loop_times_out() {
    let started = Instant::now();
    assert_fails_alone(
        &guest("", "(loop (br 0)) (i32.const 0)", 1),
        ", timeout: 200ms",
        "timed out",
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_memory_bomb_hits_the_cap() {
    let body = "(block (loop (br_if 1 (i32.eq (memory.grow (i32.const 16)) (i32.const -1))) (br 0))) (i32.const 0)";
    assert_fails_alone(
        &guest("", body, 1),
        ", memoryLimit: 2Mi",
        "memory limit exceeded",
    );
}

#[test]
fn a_trap_fails_the_run() {
    assert_fails_alone(&guest("", "unreachable", 1), "", "trap");
}

#[test]
fn a_non_zero_return_fails_the_run() {
    assert_fails_alone(&guest("", "(i32.const 7)", 1), "", "deschedule returned 7");
}

#[test]
fn the_guests_fail_message_is_reported() {
    let imports = r#"(import "kube_descheduler" "fail" (func $fail (param i32 i32)))"#;
    assert_fails_alone(
        &guest(
            imports,
            "(call $fail (i32.const 32) (i32.const 23)) (i32.const 0)",
            1,
        ),
        "",
        "the guest failed: picked by the WAT guest",
    );
}

#[test]
fn malformed_answers_fail_the_run_and_evict_nothing_of_the_guests() {
    let cases = [
        // Unknown pod index.
        (nominate("(i32.const 99999)"), "out of range"),
        (nominate("(i32.const -1)"), "out of range"),
        // The same pod twice (after a valid nomination: nothing of it is evicted).
        (
            format!("{} {}", nominate("(i32.const 0)"), nominate("(i32.const 0)")),
            "nominated twice",
        ),
        // The stranded pod is on not-Ready n3, which the call was not given (last table index).
        (
            format!(
                "{} {}",
                nominate("(i32.const 0)"),
                nominate("(i32.sub (call $pod_count) (i32.const 1))")
            ),
            "none of the nodes",
        ),
        // A huge reason length.
        (
            "(drop (call $nominate (i32.const 0) (i32.const 16) (i32.const 9) (i32.const 32) (i32.const 100000000)))".into(),
            "more than the 1024 allowed",
        ),
        // Out-of-bounds pointers.
        (
            "(drop (call $nominate (i32.const 0) (i32.const 16) (i32.const 9) (i32.const 65530) (i32.const 100)))".into(),
            "outside the guest's memory",
        ),
        (
            "(drop (call $nominate (i32.const 0) (i32.const -5) (i32.const 9) (i32.const 32) (i32.const 3)))".into(),
            "negative pointer",
        ),
        (
            "(drop (call $pod_column (i32.const 1) (i32.const 65500) (call $pod_count)))".into(),
            "outside the guest's memory",
        ),
        ("(drop (call $pod_column (i32.const 77) (i32.const 0) (i32.const 1)))".into(), "unknown column"),
        // A number with no nomination to attach it to.
        (
            "(drop (call $reason_number (i32.const 64) (i32.const 5) (i64.const 1)))".into(),
            "no nomination",
        ),
        // A reason code that is not a code.
        (
            "(drop (call $nominate (i32.const 0) (i32.const 32) (i32.const 10) (i32.const 32) (i32.const 3)))".into(),
            "not UpperCamelCase",
        ),
    ];
    for (body, want) in cases {
        let wat = guest("", &format!("{body} (i32.const 0)"), 1);
        let (moved, failures) = run_next_to_native(&wat, "");
        assert_eq!(failures.len(), 1, "{body}: {failures:?}");
        assert!(
            failures[0].contains("malformed answer") && failures[0].contains(want),
            "{body}: {:?} should contain {want:?}",
            failures[0]
        );
        assert_eq!(moved, native_only(), "{body}");
    }
}

#[test]
fn a_failed_run_fails_only_that_cycle() {
    // The guest fails when `now` is odd and evicts pod 0 otherwise: each run stands alone.
    let body = format!(
        "(if (i32.wrap_i64 (i64.rem_u (local.get 2) (i64.const 2))) (then unreachable)) {} (i32.const 0)",
        nominate("(i32.const 0)")
    );
    let dir = tempfile::tempdir().unwrap();
    write_wat(dir.path(), "guest.wasm", &guest("", &body, 1));
    let policy = load(&policy(&[("Wat", "{module: guest.wasm}")]), dir.path()).unwrap();
    let mut outcomes = Vec::new();
    for offset in [1, 2] {
        let mut snap = small_cluster();
        let now = kube_descheduler::testing::now();
        let at = jiff::Timestamp::from_second(now.as_second() / 2 * 2 + offset).unwrap();
        let (report, _) = kube_descheduler::framework::cycle::run_cycle(
            &policy.profiles,
            &policy.cycle,
            &mut snap,
            at,
            Box::new(kube_descheduler::evictor::planner::PlanBackend::new()),
        );
        outcomes.push((report.plugin_failures.len(), moved(&report)));
    }
    assert_eq!(outcomes[0], (1, vec![]));
    assert_eq!(outcomes[1], (0, vec!["a/old-1".to_string()]));
}

#[test]
fn load_time_errors_name_profile_plugin_and_field() {
    let ok_body = "(i32.const 0)";
    let cases: Vec<(String, &str, &str)> = vec![
        (guest("", ok_body, 2), "", "ABI version 2"),
        (
            guest("", ok_body, 1).replace("(export \"deschedule\")", ""),
            "",
            "does not export the function \"deschedule\"",
        ),
        (
            guest("", ok_body, 1).replace("(export \"kd_alloc\")", ""),
            "",
            "\"kd_alloc\"",
        ),
        (
            guest("", ok_body, 1).replace("(memory (export \"memory\") 1)", "(memory 1)"),
            "",
            "memory",
        ),
        (
            guest(
                r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
                ok_body,
                1,
            ),
            "",
            "imports wasi_snapshot_preview1::fd_write",
        ),
        (
            guest(
                r#"(import "kube_descheduler" "open_socket" (func))"#,
                ok_body,
                1,
            ),
            "",
            "imports kube_descheduler::open_socket",
        ),
        (
            guest("", ok_body, 1).replace(
                "(func (export \"deschedule\") (param i32 i32 i64)",
                "(func (export \"deschedule\") (param i32 i32 i32)",
            ),
            "",
            "has type",
        ),
        // Initial memory above the cap.
        (
            guest("", ok_body, 1).replace(
                "(memory (export \"memory\") 1)",
                "(memory (export \"memory\") 100)",
            ),
            ", memoryLimit: 1Mi",
            "memory limit exceeded",
        ),
        (
            guest("", ok_body, 1),
            ", sha256: 0000000000000000000000000000000000000000000000000000000000000000",
            "args.sha256",
        ),
        (
            guest("", ok_body, 1),
            ", sha256: abc",
            "args.sha256: expected 64 hexadecimal digits",
        ),
        (guest("", ok_body, 1), ", timeout: forever", "args.timeout"),
        (
            guest("", ok_body, 1),
            ", memoryLimit: lots",
            "args.memoryLimit",
        ),
        (
            guest("", ok_body, 1),
            ", memoryLimit: 8Gi",
            "args.memoryLimit",
        ),
        (
            guest("", ok_body, 1),
            ", colour: blue",
            "unknown field `colour`",
        ),
    ];
    for (wat, extra, want) in cases {
        let e = load_err(&wat, extra);
        assert!(
            e.contains("profile \"p\"") && e.contains("plugin \"Wat\"") && e.contains(want),
            "{extra} {want}: got {e:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let e = match load(&policy(&[("Wat", "{module: missing.wasm}")]), dir.path()) {
        Ok(_) => panic!("a missing module is an error"),
        Err(e) => e,
    };
    assert!(
        e.contains("args.module: cannot read") && e.contains("missing.wasm"),
        "{e}"
    );
    std::fs::write(dir.path().join("junk.wasm"), b"not wasm").unwrap();
    let e = match load(&policy(&[("Wat", "{module: junk.wasm}")]), dir.path()) {
        Ok(_) => panic!("a junk module is an error"),
        Err(e) => e,
    };
    assert!(e.contains("not a valid WebAssembly module"), "{e}");
    // A WebAssembly plugin cannot shadow a built-in plugin.
    write_wat(dir.path(), "guest.wasm", &guest("", ok_body, 1));
    let e = match load(
        &policy(&[("PodLifeTime", "{module: guest.wasm}")]),
        dir.path(),
    ) {
        Ok(_) => panic!("a built-in name is refused"),
        Err(e) => e,
    };
    assert!(e.contains("built-in plugin"), "{e}");
}

#[test]
fn the_checksum_and_relative_paths() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("mods")).unwrap();
    let path = write_wat(
        &dir.path().join("mods"),
        "g.wasm",
        &guest("", "(i32.const 0)", 1),
    );
    let sum: String = sha2::Sha256::digest(std::fs::read(&path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let text = policy(&[("Wat", &format!("{{module: mods/g.wasm, sha256: {sum}}}"))]);
    assert!(load(&text, dir.path()).is_ok());
    // Upper-case digits are the same checksum.
    let text = policy(&[(
        "Wat",
        &format!("{{module: mods/g.wasm, sha256: {}}}", sum.to_uppercase()),
    )]);
    assert!(load(&text, dir.path()).is_ok());
    // Relative to the policy's directory, not the process's.
    assert!(load(&text, &dir.path().join("elsewhere")).is_err());
    // Through load_file, the directory is the file's.
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, &text).unwrap();
    assert!(kube_descheduler::policy::load_file(&file).is_ok());
}

#[test]
fn the_guest_validates_its_args_at_load() {
    let imports = r#"(import "kube_descheduler" "fail" (func $fail (param i32 i32)))"#;
    let wat = guest(imports, "(i32.const 0)", 1).replace(
        "(func (export \"deschedule\")",
        // Refuses args longer than 10 bytes.
        "(func (export \"kd_validate\") (param i32 i32) (result i32)
           (if (i32.gt_s (local.get 1) (i32.const 10)) (then (call $fail (i32.const 32) (i32.const 23))))
           (i32.const 0))
         (func (export \"deschedule\")",
    );
    let e = load_err(&wat, ", args: {a: 123456789}");
    assert!(
        e.contains("args.args: ") && e.contains("picked by the WAT guest"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    write_wat(dir.path(), "guest.wasm", &wat);
    assert!(
        load(
            &policy(&[("Wat", "{module: guest.wasm, args: {a: 1}}")]),
            dir.path()
        )
        .is_ok()
    );
}

#[test]
fn a_guest_at_the_balance_extension_point() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!("{} (i32.const 0)", nominate("(i32.const 0)"));
    let text = |file: &str| {
        format!(
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: Wat\n    args: {{module: {file}}}\n  plugins:\n    balance:\n      enabled: [Wat]\n"
        )
    };
    write_wat(
        dir.path(),
        "balance.wasm",
        &guest("", &body, 1).replace("(export \"deschedule\")", "(export \"balance\")"),
    );
    let policy = load(&text("balance.wasm"), dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(policy.profiles[0].balance.len(), 1);
    let mut snap = small_cluster();
    let report = cycle(&policy, &mut snap);
    assert!(report.plugin_failures.is_empty());
    assert_eq!(moved(&report), vec!["a/old-1"]);
    // A module with only `deschedule` cannot be enabled under balance.
    write_wat(dir.path(), "deschedule.wasm", &guest("", &body, 1));
    let e = match load(&text("deschedule.wasm"), dir.path()) {
        Ok(_) => panic!("a deschedule-only module under balance is refused"),
        Err(e) => e,
    };
    assert!(
        e.contains("does not export the function \"balance\""),
        "{e}"
    );
}
