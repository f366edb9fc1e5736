//! Issue #35: the DefaultEvictor's `placement: Report` in `plan` — every eviction names the node
//! its replacement is predicted to land on, with ties and scores; without the argument the JSON is
//! unchanged; `--scheduler-config` changes the prediction as the cluster's kube-scheduler would.

use std::process::Command;

use serde_json::Value;

const NOW: &str = "2026-01-10T00:00:00Z";

fn plan(extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["plan", "-o", "json", "--now", NOW])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run plan");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn evictions(plan: &Value) -> &Vec<Value> {
    plan["evictions"].as_array().expect("evictions")
}

fn find<'a>(plan: &'a Value, name: &str) -> &'a Value {
    evictions(plan)
        .iter()
        .find(|e| e["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .unwrap_or_else(|| panic!("no eviction of {name}"))
}

#[test]
fn report_names_a_predicted_node_for_every_eviction_of_the_bundled_example() {
    let p = plan(&["--policy", "tests/placement-report-policy.yaml"]);
    let all = evictions(&p);
    assert!(all.len() >= 10, "the example evicts with every plugin");
    for e in all {
        let node = e["predictedNode"].as_str().unwrap_or_else(|| panic!("{e}"));
        let ties: Vec<&str> = e["predictedTies"]
            .as_array()
            .expect("ties")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(ties.contains(&node), "{e}");
        assert_eq!(e["predictedScore"]["node"], node, "{e}");
        assert!(e["predictedScore"]["score"].as_i64().is_some(), "{e}");
        // Either the current node is scored, or the filter rejecting it is named.
        assert!(
            e["currentNodeScore"]["score"].is_i64() || e["currentNodeFilteredBy"].is_string(),
            "{e}"
        );
    }
    // A pod on a node whose taint it does not tolerate cannot come back there.
    let tainted = find(&p, "exporter-");
    assert_eq!(tainted["currentNodeFilteredBy"], "TaintToleration");
    assert_eq!(tainted["mayReturn"], false);
    // The old report runner on node-5 would be rescheduled onto node-5: the prediction says so.
    let old = find(&p, "report-runner-");
    assert_eq!(old["predictedNode"], "node-5");
    assert_eq!(old["mayReturn"], true);
    assert_eq!(old["placementVerdict"]["code"], "PlacementReturn");
}

#[test]
fn without_placement_the_json_has_no_prediction_fields() {
    let p = plan(&[]);
    for e in evictions(&p) {
        assert!(e.get("predictedNode").is_none(), "{e}");
    }
    // Report changes no decision: the same pods, plugins and outcomes.
    let r = plan(&["--policy", "tests/placement-report-policy.yaml"]);
    let key = |v: &Value| -> Vec<String> {
        evictions(v)
            .iter()
            .map(|e| {
                format!(
                    "{} {} {} {}",
                    e["namespace"], e["name"], e["plugin"], e["outcome"]
                )
            })
            .collect()
    };
    assert_eq!(key(&p), key(&r));
}

#[test]
fn the_issue_scenario_least_allocated_returns_most_allocated_packs() {
    let base = [
        "--policy",
        "tests/placement/hnu-report-policy.yaml",
        "--snapshot",
        "tests/placement/issue-cluster.json",
    ];
    // kube-scheduler's default (LeastAllocated): each small pod comes straight back.
    let least = plan(&base);
    let all = evictions(&least);
    assert_eq!(all.len(), 2);
    for e in all {
        assert_eq!(e["predictedNode"], e["node"], "{e}");
        assert_eq!(e["mayReturn"], true);
        let verdict = &e["placementVerdict"];
        assert_eq!(verdict["code"], "PlacementReturn");
        let msg = verdict["message"].as_str().expect("message");
        assert!(
            msg.starts_with(&format!(
                "would be scheduled back onto {}: score",
                e["node"].as_str().unwrap_or("")
            )) && msg.contains("use MostAllocated"),
            "{msg}"
        );
    }
    // MostAllocated: packed onto n1–n4, and the second pod is spread off the first one's node.
    let mut args = base.to_vec();
    args.extend(["--scheduler-config", "tests/placement/most-allocated.yaml"]);
    let most = plan(&args);
    let all = evictions(&most);
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["predictedNode"], "n1");
    assert_eq!(
        all[0]["predictedTies"],
        serde_json::json!(["n1", "n2", "n3", "n4"])
    );
    assert_eq!(all[1]["predictedNode"], "n2");
    for e in all {
        assert_eq!(e["mayReturn"], false);
        assert!(e.get("placementVerdict").is_none(), "{e}");
    }
}

#[test]
fn a_bad_scheduler_configuration_is_a_config_error_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args: {scoringStrategy: {type: Packed}}\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["plan", "--scheduler-config"])
        .arg(&path)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run plan");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("profiles[0].pluginConfig[0].args.scoringStrategy.type")
            && err.contains("Packed"),
        "{err}"
    );
}

#[test]
fn an_unknown_placement_mode_is_rejected_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("policy.yaml");
    std::fs::write(
        &path,
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n  - name: p\n    pluginConfig:\n      - name: DefaultEvictor\n        args: {placement: Sometimes}\n    plugins: {}\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["plan", "--policy"])
        .arg(&path)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run plan");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("placement") && err.contains("Sometimes"),
        "{err}"
    );
}
