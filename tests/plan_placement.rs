//! Placement prediction: the DefaultEvictor's `placement: Report` in `plan` — every eviction
//! names the node its replacement is predicted to land on, with ties and scores; without the
//! argument the JSON is unchanged; `--scheduler-config` changes the prediction as the cluster's
//! kube-scheduler would.

mod cli_common;

use cli_common::{bin, config_error_with_file, evictions, succeeds};
use serde_json::Value;

fn plan(extra: &[&str]) -> Value {
    cli_common::plan_json(extra)
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
    // The old report runner on node-5 may be rescheduled onto node-5: still terminating there,
    // it leaves node-5 tied with node-3 (the first of the ties by node order).
    let old = find(&p, "report-runner-");
    assert_eq!(old["predictedNode"], "node-3");
    assert_eq!(
        old["predictedTies"],
        serde_json::json!(["node-3", "node-5"])
    );
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
fn the_ping_pong_scenario_least_allocated_returns_most_allocated_packs() {
    let base = [
        "--policy",
        "tests/placement/hnu-report-policy.yaml",
        "--snapshot",
        "tests/placement/ping-pong-cluster.json",
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
    let err = config_error_with_file(
        &["plan", "--scheduler-config"],
        "bad.yaml",
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args: {scoringStrategy: {type: Packed}}\n",
    );
    assert!(
        err.contains("profiles[0].pluginConfig[0].args.scoringStrategy.type")
            && err.contains("Packed"),
        "{err}"
    );
}

#[test]
fn an_unknown_placement_mode_is_rejected_naming_the_field() {
    let err = config_error_with_file(
        &["plan", "--policy"],
        "policy.yaml",
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n  - name: p\n    pluginConfig:\n      - name: DefaultEvictor\n        args: {placement: Sometimes}\n    plugins: {}\n",
    );
    assert!(
        err.contains("placement") && err.contains("Sometimes"),
        "{err}"
    );
}

/// `plan` with `extra` arguments; its standard output.
fn plan_text(extra: &[&str]) -> String {
    let out = succeeds(bin().args(["plan", "--now", cli_common::NOW]).args(extra));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const ENFORCE: [&str; 4] = [
    "--policy",
    "tests/placement/hnu-enforce-policy.yaml",
    "--snapshot",
    "tests/placement/ping-pong-cluster.json",
];

#[test]
fn enforce_refuses_the_ping_pong_loop_and_every_surface_shows_the_refusal() {
    // JSON: no eviction; both small pods listed under placementRefusals with code and sentence.
    let p = plan(&ENFORCE);
    assert!(evictions(&p).is_empty(), "{p}");
    assert_eq!(p["summary"]["evicted"], 0);
    let refused = p["placementRefusals"]
        .as_array()
        .expect("placementRefusals");
    assert_eq!(refused.len(), 2, "{refused:?}");
    for (r, (pod, node)) in refused.iter().zip([("small-5", "n5"), ("small-6", "n6")]) {
        assert_eq!(r["namespace"], "default");
        assert_eq!(r["name"], pod);
        assert_eq!(r["node"], node);
        assert_eq!(r["profile"], "binpack");
        assert_eq!(r["plugin"], "HighNodeUtilization");
        assert_eq!(r["code"], "PlacementReturn");
        assert_eq!(r["predictedNode"], node);
        let msg = r["message"].as_str().expect("message");
        assert!(
            msg.starts_with(&format!("would be scheduled back onto {node}: score "))
                && msg.contains("LeastAllocated")
                && msg.ends_with(
                    "; use MostAllocated in the scheduler configuration, or disable HighNodeUtilization"
                ),
            "{msg}"
        );
        assert!(
            r["reason"]
                .as_str()
                .is_some_and(|t| t.contains("underutilized")),
            "{r}"
        );
    }
    // Report would have made the same refusals its verdicts: the sentences are equal.
    let mut report_args = ENFORCE.to_vec();
    report_args[1] = "tests/placement/hnu-report-policy.yaml";
    let report = plan(&report_args);
    let verdicts: Vec<&Value> = evictions(&report)
        .iter()
        .map(|e| &e["placementVerdict"]["message"])
        .collect();
    let messages: Vec<&Value> = refused.iter().map(|r| &r["message"]).collect();
    assert_eq!(verdicts, messages);
    assert!(
        report.get("placementRefusals").is_none(),
        "Report refuses nothing"
    );

    // The table.
    let table = plan_text(&ENFORCE);
    assert!(table.contains("No pods would be evicted."), "{table}");
    assert!(
        table.contains("PLACEMENT REFUSALS (2): not evicted, counted against no limit"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("default/small-5"))
        .unwrap_or_else(|| panic!("no row for small-5:\n{table}"));
    assert!(
        row.contains("HighNodeUtilization")
            && row.contains("PlacementReturn")
            && row.contains("would be scheduled back onto n5: score "),
        "{row}"
    );

    // --explain.
    let mut explain = ENFORCE.to_vec();
    explain.extend(["--explain", "default/small-6"]);
    let text = plan_text(&explain);
    assert!(
        text.contains(
            "HighNodeUtilization: selected (n6 underutilized"
        ) && text.contains(
            "but refused by placement: Enforce (PlacementReturn): would be scheduled back onto n6: score "
        ),
        "{text}"
    );
    let j = plan(&explain);
    let verdict = &j["explanations"][0]["profiles"][0]["plugins"][0];
    assert_eq!(verdict["verdict"], "placement", "{j}");

    // The HTML report.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("plan.html");
    let file_arg = file.to_string_lossy().into_owned();
    let mut html = ENFORCE.to_vec();
    html.extend(["-o", "html", &file_arg]);
    plan_text(&html);
    let page = std::fs::read_to_string(&file).expect("report written");
    assert!(
        page.contains("<section id=\"placement-refusals\"><h2>Placement refusals (2)</h2>"),
        "no placement section"
    );
    assert!(page.contains("would be scheduled back onto n6: score "));
}

#[test]
fn enforce_with_most_allocated_evicts_exactly_what_report_evicts() {
    let mut args = ENFORCE.to_vec();
    args.extend(["--scheduler-config", "tests/placement/most-allocated.yaml"]);
    let enforced = plan(&args);
    args[1] = "tests/placement/hnu-report-policy.yaml";
    let reported = plan(&args);
    assert_eq!(enforced["evictions"], reported["evictions"]);
    let all = evictions(&enforced);
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["predictedNode"], "n1");
    assert_eq!(all[1]["predictedNode"], "n2");
    assert!(enforced.get("placementRefusals").is_none(), "{enforced}");
}

#[test]
fn report_and_enforce_show_the_prediction_in_the_table_and_explain() {
    let mut args = ENFORCE.to_vec();
    args[1] = "tests/placement/hnu-report-policy.yaml";
    args.extend(["--explain", "default/small-5"]);
    let text = plan_text(&args);
    let row = text
        .lines()
        .find(|l| l.starts_with("default/small-5"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("[placement → n5 score "), "{row}");
    assert!(
        text.contains("→ evicted [placement → n5 score ")
            && text.contains("; placement: Enforce would refuse it (PlacementReturn): would be scheduled back onto n5"),
        "{text}"
    );
}
