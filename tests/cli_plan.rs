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

#[test]
fn the_bundled_example_exercises_every_plugin_and_the_guard() {
    let out = bin()
        .args(["plan", "-o", "json", "--now", "2026-01-10T00:00:00Z"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<(String, String, String)> = v["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                format!(
                    "{}/{}",
                    e["namespace"].as_str().unwrap(),
                    e["name"].as_str().unwrap()
                ),
                e["plugin"].as_str().unwrap().to_string(),
                e["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let has = |pod: &str, plugin: &str, outcome: &str| {
        rows.iter()
            .any(|(p, pl, o)| p.starts_with(pod) && pl == plugin && o == outcome)
    };
    assert!(
        has("batch/nightly-import", "RemoveFailedPods", "evicted"),
        "{rows:?}"
    );
    assert!(has(
        "shop/cart-worker-59d8f7c6b4-m2x8d",
        "RemovePodsHavingTooManyRestarts",
        "evicted"
    ));
    assert!(has("batch/report-runner", "PodLifeTime", "evicted"));
    assert!(has(
        "monitoring/exporter",
        "RemovePodsViolatingNodeTaints",
        "evicted"
    ));
    assert!(has(
        "shop/search-8b7d6c5f4-h5j6k",
        "RemovePodsViolatingNodeAffinity",
        "evicted"
    ));
    assert!(has(
        "monitoring/db-proxy",
        "RemovePodsViolatingInterPodAntiAffinity",
        "evicted"
    ));
    assert!(has("shop/web-", "RemoveDuplicates", "evicted"));
    // The web budget allows one disruption: the second web eviction is denied.
    assert!(has("shop/web-", "RemoveDuplicates", "denied"));
    assert!(has(
        "shop/cache-",
        "RemovePodsViolatingTopologySpreadConstraint",
        "denied"
    ));
    // The single-replica Deployment is deflected into a rolling restart; the RWO-volume one is not.
    assert!(has("shop/api-", "LowNodeUtilization", "deflected"));
    assert!(has("shop/ledger-", "LowNodeUtilization", "evicted"));
    let deflection = v["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["outcome"] == "deflected")
        .unwrap();
    assert!(
        deflection["message"]
            .as_str()
            .unwrap()
            .contains("Eviction triggered evacuation")
    );
    assert_eq!(v["summary"]["deflected"], 1);

    // Without the guard every attempt is an eviction.
    let out = bin()
        .args([
            "plan",
            "-o",
            "json",
            "--no-guard",
            "--now",
            "2026-01-10T00:00:00Z",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["evictions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["outcome"] == "evicted")
    );
    assert_eq!(v["summary"]["deflected"], 0);
}
