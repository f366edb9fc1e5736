//! The `plan` command as users run it: exit codes, output contract, bundled defaults.

mod cli_common;

use cli_common::{bin, json_of, succeeds, write};

const EMPTY_POLICY: &str =
    "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n";

#[test]
fn json_output_is_exactly_one_object_and_config_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.yaml", EMPTY_POLICY);
    let v = json_of(&succeeds(
        bin().args(["plan", "--policy"]).arg(&policy).args([
            "--now",
            cli_common::NOW,
            "-o",
            "json",
        ]),
    ));
    assert_eq!(v["evictions"], serde_json::json!([]));
    assert_eq!(v["summary"]["nodes"], 7);
    assert_eq!(v["summary"]["pods"], 28);

    let bad = write(
        dir.path(),
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
    let policy = write(dir.path(), "p.yaml", EMPTY_POLICY);
    let v = json_of(&succeeds(
        bin()
            .args(["plan", "-o", "json", "--policy"])
            .arg(&policy)
            .current_dir(dir.path()),
    ));
    assert_eq!(v["summary"]["nodes"], 7, "the bundled example cluster");
}

#[test]
fn table_output_reports_a_skipped_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.yaml", EMPTY_POLICY);
    let snap = write(
        dir.path(),
        "s.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: only}\n  status:\n    conditions: [{type: Ready, status: 'True'}]\n",
    );
    let out = cli_common::plan_with(&policy, &snap).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cycle skipped") && text.contains("No pods would be evicted"),
        "{text}"
    );
}

#[test]
fn the_bundled_example_exercises_every_plugin_and_the_guard() {
    let v = cli_common::plan_json(&[]);
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
    let v = cli_common::plan_json(&["--no-guard"]);
    assert!(
        v["evictions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["outcome"] == "evicted")
    );
    assert_eq!(v["summary"]["deflected"], 0);
}

/// Rule B in `plan`: a 3-replica Deployment spread over a cordoned (tainted) node and two others,
/// a budget with `minAvailable: 3`. Its namespace opted in to surges: the eviction is
/// `deflected` into a surge; with a HorizontalPodAutoscaler on the Deployment it is `denied`
/// with the guard's message naming the autoscaler; without the opt-in the budget denies it.
#[test]
fn plan_reports_rule_b_from_the_namespace_opt_in_and_autoscalers() {
    const POLICY: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: drain
    pluginConfig:
      - name: DefaultEvictor
      - name: RemovePodsViolatingNodeTaints
    plugins:
      deschedule:
        enabled: [RemovePodsViolatingNodeTaints]
"#;
    let node = |name: &str, cordoned: bool| {
        let taints = if cordoned {
            r#"[{"key":"node.kubernetes.io/unschedulable","effect":"NoSchedule"}]"#
        } else {
            "[]"
        };
        format!(
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}"}},"spec":{{"unschedulable":{cordoned},"taints":{taints}}},
               "status":{{"allocatable":{{"cpu":"4","memory":"8Gi","pods":"110"}},"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        )
    };
    let pod = |name: &str, node: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"shop","uid":"uid-{name}",
               "labels":{{"app":"web","pod-template-hash":"abc"}},
               "ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-abc","uid":"rs-uid","controller":true}}]}},
               "spec":{{"nodeName":"{node}","containers":[{{"name":"c","image":"i"}}]}},
               "status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        )
    };
    let snapshot = |opted_in: bool, hpa: bool| {
        let annotations = if opted_in {
            r#","annotations":{"kube-descheduler.io/pdb-surge":"enabled"}"#
        } else {
            ""
        };
        let mut items = vec![
            node("a", true),
            node("b", false),
            node("c", false),
            format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"shop"{annotations}}}}}"#),
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","uid":"d-uid","generation":1},
               "spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}}}},
               "status":{"observedGeneration":1,"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3}}"#.to_string(),
            r#"{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-abc","namespace":"shop","uid":"rs-uid",
               "labels":{"pod-template-hash":"abc"},
               "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"d-uid","controller":true}]},
               "spec":{"replicas":3},"status":{"replicas":3,"readyReplicas":3,"availableReplicas":3}}"#.to_string(),
            pod("web-a", "a"),
            pod("web-b", "b"),
            pod("web-c", "c"),
            r#"{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web","namespace":"shop"},
               "spec":{"minAvailable":3,"selector":{"matchLabels":{"app":"web"}}},
               "status":{"disruptionsAllowed":0,"currentHealthy":3,"desiredHealthy":3,"expectedPods":3}}"#.to_string(),
        ];
        if hpa {
            items.push(r#"{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web-hpa","namespace":"shop"},
               "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":3,"maxReplicas":6}}"#.to_string());
        }
        format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
            items.join(",")
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "policy.yaml", POLICY);
    let plan = |opted_in: bool, hpa: bool| -> (String, String) {
        let snap = write(dir.path(), "snapshot.json", &snapshot(opted_in, hpa));
        let out = bin()
            .args([
                "plan",
                "-o",
                "json",
                "--now",
                "2026-01-10T00:00:00Z",
                "--policy",
            ])
            .arg(&policy)
            .arg("--snapshot")
            .arg(&snap)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains("HorizontalPodAutoscaler"), "{stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let e = v["evictions"].as_array().unwrap();
        assert_eq!(e.len(), 1, "only the pod on the cordoned node: {e:?}");
        assert_eq!(e[0]["name"], "web-a");
        (
            e[0]["outcome"].as_str().unwrap().to_string(),
            e[0]["message"].as_str().unwrap_or_default().to_string(),
        )
    };
    let (outcome, message) = plan(true, false);
    assert_eq!(outcome, "deflected", "{message}");
    assert!(message.contains("from 3 to 4 replicas"), "{message}");
    let (outcome, message) = plan(true, true);
    assert_eq!(outcome, "denied", "{message}");
    assert!(
        message.contains("HorizontalPodAutoscaler shop/web-hpa"),
        "{message}"
    );
    let (outcome, message) = plan(false, false);
    assert_eq!(outcome, "denied", "{message}");
    assert!(
        message.contains("shop/web") && !message.contains("raising"),
        "{message}"
    );
}
