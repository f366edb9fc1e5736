//! `plan` through this crate's binary on the bundled example: the RetireNodes evictions with
//! their reason and numbers (table and JSON), `--explain` for the pods the plugin or the
//! MinAgeEvictor leaves alone, and a policy error naming the plugin and field.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const NOW: &str = "2026-01-10T00:00:00Z";

fn file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn plan(extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_descheduler-node-retirement"))
        .arg("plan")
        .arg("--policy")
        .arg(file("policy.yaml"))
        .arg("--snapshot")
        .arg(file("cluster.yaml"))
        .args(["--now", NOW])
        .args(extra)
        .output()
        .expect("run the binary")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const REASON: &str = "node pool-v1-a is retiring (lifecycle.example.com/retire=true): node 1 of 1 drained this cycle, 2 retiring in all, 3 pods on it";

#[test]
fn the_table_names_the_plugin_and_its_reason() {
    let out = stdout(&plan(&[]));
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("shop/")).collect();
    assert_eq!(rows.len(), 1, "{out}");
    let cols: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(
        cols[..5],
        [
            "shop/web-7f9c-a1b2c",
            "pool-v1-a",
            "node-retirement",
            "RetireNodes",
            "evicted"
        ],
        "{out}"
    );
    assert!(rows[0].ends_with(REASON), "{out}");
    assert!(
        out.contains("1 evicted, 0 deflected, 0 denied, 0 errors"),
        "{out}"
    );
}

#[test]
fn the_json_carries_the_reason_code_and_numbers() {
    let out = stdout(&plan(&["-o", "json"]));
    let v: Value = serde_json::from_str(&out).expect("JSON");
    let ev = v["evictions"].as_array().expect("evictions");
    assert_eq!(ev.len(), 1, "{out}");
    let e = &ev[0];
    assert_eq!(e["plugin"], "RetireNodes");
    assert_eq!(e["name"], "web-7f9c-a1b2c");
    assert_eq!(e["reason"], REASON);
    assert_eq!(e["reasonCode"], "NodeRetiring");
    assert_eq!(e["reasonDetail"]["retiringNodes"], 2);
    assert_eq!(e["reasonDetail"]["podsOnNode"], 3);
    assert_eq!(v["summary"]["byPlugin"]["RetireNodes"], 1);
}

#[test]
fn explain_says_why_the_other_pods_stay() {
    let out = stdout(&plan(&[
        "--explain",
        "shop/search-7f9c-d4e5f",
        "--explain",
        "shop/payments-7f9c-g7h8i",
        "--explain",
        "shop/web-7f9c-j1k2l",
    ]));
    let section = |pod: &str| {
        let start = out
            .find(&format!("explain shop/{pod}"))
            .unwrap_or_else(|| panic!("no section for {pod}:\n{out}"));
        let rest = &out[start + 1..];
        rest[..rest.find("\nexplain ").map_or(rest.len(), |e| e + 1)].to_string()
    };
    let expected = [
        // The MinAgeEvictor (Filter, next to the DefaultEvictor) keeps the young and the labelled
        // pod.
        (
            "search-7f9c-d4e5f",
            "the pod is 4m old, younger than minPodAge 10m",
        ),
        // The verdict is labelled with the profile's evictors, not with the DefaultEvictor alone.
        (
            "search-7f9c-d4e5f",
            "DefaultEvictor+MinAgeEvictor Filter stops it: the pod is 4m old",
        ),
        (
            "web-7f9c-j1k2l",
            "DefaultEvictor+MinAgeEvictor Filter: passes",
        ),
        (
            "payments-7f9c-g7h8i",
            "label descheduler.example.com/protected=true protects the pod",
        ),
        // The plugin's own explanation: the second retiring node waits for the next cycle.
        (
            "web-7f9c-j1k2l",
            "RetireNodes: not selected: node pool-v1-b is retiring, number 2 in drain order; this cycle drains the first 1 of 2",
        ),
    ];
    for (pod, text) in expected {
        assert!(section(pod).contains(text), "{pod}: {text:?}\n{out}");
    }
}

#[test]
fn a_bad_arg_is_a_config_error_naming_profile_plugin_and_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = std::fs::read_to_string(file("policy.yaml"))
        .expect("policy")
        .replace("nodesPerCycle: 1", "nodesPerCycle: 0");
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, policy).expect("write");
    let o = Command::new(env!("CARGO_BIN_EXE_descheduler-node-retirement"))
        .arg("plan")
        .arg("--policy")
        .arg(&path)
        .arg("--snapshot")
        .arg(file("cluster.yaml"))
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("profile \"node-retirement\": plugin \"RetireNodes\": args.nodesPerCycle: must be at least 1"),
        "{err}"
    );
}

#[test]
fn the_stock_subcommands_are_all_there() {
    let o = Command::new(env!("CARGO_BIN_EXE_descheduler-node-retirement"))
        .arg("--help")
        .output()
        .expect("run");
    let help = String::from_utf8_lossy(&o.stdout);
    for sub in ["plan", "run", "webhook", "certs", "completions"] {
        assert!(help.contains(sub), "{help}");
    }
}
