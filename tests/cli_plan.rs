//! The `plan` command as users run it: exit codes, output contract, bundled defaults.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const EMPTY_POLICY: &str =
    "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n";

#[test]
fn json_output_is_exactly_one_object_and_config_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(&dir, "p.yaml", EMPTY_POLICY);
    let out = bin()
        .args(["plan", "--policy"])
        .arg(&policy)
        .args(["--now", "2026-01-10T00:00:00Z", "-o", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert_eq!(v["evictions"], serde_json::json!([]));
    assert_eq!(v["summary"]["nodes"], 7);
    assert_eq!(v["summary"]["pods"], 28);

    let bad = write(
        &dir,
        "bad.yaml",
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofile: []\n",
    );
    let out = bin().args(["plan", "--policy"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown field `profile`") && err.contains("bad.yaml"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout on error");

    let out = bin()
        .args(["plan", "--snapshot", "/no/such/file", "--policy"])
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/file"));

    let out = bin().args(["plan", "--now", "yesterday"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--now"));

    let out = bin().args(["plan", "--output", "xml"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "bad flags are configuration errors"
    );
}

#[test]
fn bundled_examples_are_used_outside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(&dir, "p.yaml", EMPTY_POLICY);
    let out = bin()
        .args(["plan", "-o", "json", "--policy"])
        .arg(&policy)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["nodes"], 7, "the bundled example cluster");
}

#[test]
fn table_output_reports_a_skipped_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(&dir, "p.yaml", EMPTY_POLICY);
    let snap = write(
        &dir,
        "s.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: only}\n  status:\n    conditions: [{type: Ready, status: 'True'}]\n",
    );
    let out = bin()
        .args(["plan", "--policy"])
        .arg(&policy)
        .arg("--snapshot")
        .arg(&snap)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cycle skipped") && text.contains("No pods would be evicted"),
        "{text}"
    );
}
