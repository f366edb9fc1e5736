//! Inconsistent snapshots (hand-edited or merged files): each kind is found, resolved the
//! documented way, reported by `plan` on stderr (one line per kind, count and first three
//! examples) and under `summary.warnings`, and refused with `--strict`.

use std::process::Command;

use kube_descheduler::snapshot::consistency::InconsistencyKind;
use kube_descheduler::snapshot::load::load_bytes;
use serde_json::{Value, json};

fn node(name: &str, cpu: &str, memory: &str, pods: &str) -> Value {
    json!({"kind": "Node", "metadata": {"name": name},
           "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn pod(ns: &str, name: &str, uid: &str, node: &str) -> Value {
    json!({"kind": "Pod", "metadata": {"namespace": ns, "name": name, "uid": uid},
           "spec": {"nodeName": node, "containers": [{"name": "c"}]},
           "status": {"phase": "Running"}})
}

fn inconsistent_list() -> Value {
    json!({"kind": "List", "apiVersion": "v1", "items": [
        node("a", "4", "8Gi", "110"),
        node("b", "-2", "8Gi", "0"),
        node("c", "4", "0", "110"),
        // Same namespace/name four times: the last one (on b) is kept.
        pod("x", "dup", "u1", "a"), pod("x", "dup", "u2", "a"),
        pod("x", "dup", "u3", "a"), pod("x", "dup", "u4", "b"),
        // Same UID, different names: the later one is kept.
        pod("x", "first", "same", "a"), pod("y", "second", "same", "c"),
        // Unknown nodes.
        pod("x", "lost-1", "l1", "ghost"), pod("x", "lost-2", "l2", "ghost"),
        pod("x", "lost-3", "l3", "gone"), pod("x", "lost-4", "l4", "gone"),
    ]})
}

#[test]
fn each_kind_is_counted_with_three_examples_and_resolved() {
    let snap = load_bytes(&serde_json::to_vec(&inconsistent_list()).unwrap()).unwrap();
    let found: Vec<_> = snap
        .inconsistencies
        .iter()
        .map(|i| (i.kind, i.count, i.examples.clone()))
        .collect();
    assert_eq!(
        found,
        vec![
            (
                InconsistencyKind::DuplicatePodName,
                3,
                vec!["x/dup".to_owned(), "x/dup".into(), "x/dup".into()]
            ),
            (
                InconsistencyKind::DuplicatePodUid,
                1,
                vec!["same (x/first and y/second)".to_owned()]
            ),
            (
                InconsistencyKind::PodOnUnknownNode,
                4,
                vec![
                    "x/lost-1 on ghost".to_owned(),
                    "x/lost-2 on ghost".into(),
                    "x/lost-3 on gone".into()
                ]
            ),
            (
                InconsistencyKind::NonPositiveAllocatable,
                2,
                vec![
                    "node b (cpu=-2000, pods=0)".to_owned(),
                    "node c (memory=0)".into()
                ]
            ),
        ]
    );
    // Later duplicates win.
    let names: Vec<(String, String)> = snap
        .pods
        .iter()
        .map(|p| (p.name.clone(), p.uid.clone()))
        .collect();
    assert_eq!(names.iter().filter(|(n, _)| n == "dup").count(), 1);
    assert!(names.contains(&("dup".into(), "u4".into())), "{names:?}");
    assert!(!names.iter().any(|(n, _)| n == "first"), "{names:?}");
    assert!(names.contains(&("second".into(), "same".into())));
    let b = snap.node_id("b").unwrap();
    assert_eq!(
        snap.node(b).allocatable.cpu_milli,
        0,
        "negative counts as 0"
    );
    assert_eq!(
        snap.pods_on_node(b)
            .map(|p| snap.pod(p).name.clone())
            .collect::<Vec<_>>(),
        ["dup"]
    );
    // Pods on unknown nodes stay, on no node.
    let lost = snap.pods.iter().filter(|p| p.name.starts_with("lost-"));
    assert!(lost.clone().count() == 4 && lost.into_iter().all(|p| p.node.is_none()));
    let text = snap.inconsistencies[2].to_string();
    assert!(
        text.starts_with("4 pods bound to a node not in the snapshot"),
        "{text}"
    );
    assert!(text.ends_with("x/lost-3 on gone, …"), "{text}");
}

#[test]
fn a_consistent_snapshot_has_no_inconsistencies() {
    let snap = load_bytes(include_bytes!("../examples/cluster.yaml")).unwrap();
    assert!(
        snap.inconsistencies.is_empty(),
        "{:?}",
        snap.inconsistencies
    );
}

fn plan(snapshot: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["plan", "--now", "2026-01-10T00:00:00Z", "--snapshot"])
        .arg(snapshot)
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

#[test]
fn plan_warns_on_stderr_and_in_json_and_strict_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, serde_json::to_vec(&inconsistent_list()).unwrap()).unwrap();

    let out = plan(&path, &["-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: snapshot:"))
        .collect();
    assert_eq!(lines.len(), 4, "one line per kind: {stderr}");
    for kind in [
        "[duplicate-pod-name]",
        "[duplicate-pod-uid]",
        "[pod-on-unknown-node]",
        "[non-positive-allocatable]",
    ] {
        assert_eq!(
            lines.iter().filter(|l| l.contains(kind)).count(),
            1,
            "{stderr}"
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    let warnings = v["summary"]["warnings"].as_array().unwrap();
    assert_eq!(
        warnings
            .iter()
            .filter(|w| w.as_str().unwrap().starts_with("snapshot: "))
            .count(),
        4,
        "{warnings:?}"
    );
    assert_eq!(
        v["summary"]["pods"], 6,
        "ten pods, three duplicates by name and one by UID dropped"
    );

    let out = plan(&path, &["--strict"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--strict") && stderr.contains("[duplicate-pod-name]"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no plan printed");
}

#[test]
fn the_bundled_example_passes_strict() {
    let out = plan(std::path::Path::new("examples/cluster.yaml"), &["--strict"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning: snapshot:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
