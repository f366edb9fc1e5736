//! Running the real `kube-descheduler` binary from a test: the command (run from the repository
//! root, where the bundled example and the test files are), its success checked with its stderr
//! in the failure message, and its stdout read as one JSON object.
#![allow(dead_code)]

use std::process::{Command, Output};

use serde_json::Value;

/// The `--now` the bundled example's plans are pinned to.
pub const NOW: &str = "2026-01-10T00:00:00Z";

/// The binary, run from the repository root.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// Runs `cmd` (the binary, or any other program) and fails the test, with the child's stderr,
/// unless it exits 0.
pub fn succeeds(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The child's stdout, which must be exactly one JSON object.
pub fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

/// `plan -o json --now NOW` with `extra` (the bundled example unless `extra` names other files),
/// which must succeed.
pub fn plan_json(extra: &[&str]) -> Value {
    json_of(&succeeds(
        bin().args(["plan", "-o", "json", "--now", NOW]).args(extra),
    ))
}

/// The row of `node` in a plan's `nodeUsage` table.
pub fn node_row<'a>(table: &'a Value, node: &str) -> &'a Value {
    table["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["node"] == node)
        .unwrap_or_else(|| panic!("{node} in {table}"))
}

/// A plan's evictions.
pub fn evictions(plan: &Value) -> &Vec<Value> {
    plan["evictions"].as_array().expect("evictions")
}

/// Runs `cmd`, which must fail as a configuration error (exit code 2); its stderr.
pub fn config_error(cmd: &mut Command) -> String {
    let out = cmd.output().expect("kube-descheduler runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `kube-descheduler ARGS FILE`, FILE holding `text` (named `name`, in a temporary directory),
/// which must fail as a configuration error (exit code 2); its stderr.
pub fn config_error_with_file(args: &[&str], name: &str, text: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), name, text);
    config_error(bin().args(args).arg(&path))
}

/// Writes `text` to the file `name` in `dir`; its path.
pub fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write a test file");
    p
}

/// The kinds a snapshot file of `plan` holds, in the order `kubectl get … -o json` lists them
/// (HorizontalPodAutoscalers aside).
pub const SNAPSHOT_KINDS: &[(&str, &str)] = &[
    ("v1", "Node"),
    ("v1", "Namespace"),
    ("v1", "Pod"),
    ("v1", "PersistentVolumeClaim"),
    ("policy/v1", "PodDisruptionBudget"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
];

/// Writes the objects of `kinds` that `sim` serves to `path` as one List, in the API's order
/// (what `kubectl get … -o json` gives); the items written.
pub fn export_list(
    sim: &kube_sim::SimHandle,
    kinds: &[(&str, &str)],
    path: &std::path::Path,
) -> Vec<Value> {
    let mut items = Vec::new();
    for (api_version, kind) in kinds {
        for mut o in sim.list(api_version, kind, None) {
            o["apiVersion"] = serde_json::json!(api_version);
            o["kind"] = serde_json::json!(kind);
            items.push(o);
        }
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(path, serde_json::to_vec(&list).expect("serializable")).expect("written");
    items
}

/// `plan --policy POLICY --snapshot SNAPSHOT`, to add flags to and run.
pub fn plan_with(policy: &std::path::Path, snapshot: &std::path::Path) -> Command {
    let mut cmd = bin();
    cmd.args(["plan", "--policy"])
        .arg(policy)
        .arg("--snapshot")
        .arg(snapshot);
    cmd
}
