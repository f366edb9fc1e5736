//! `--explain` answers: each DefaultEvictor rule, nodeFit, limits (PDB and guard outcomes are
//! covered on the bundled example by the `plan_report` integration test).

use super::*;
use crate::plan::make_plan;
use kube_descheduler_engine::testing::{node, now, pod, snapshot};

fn policy(evictor_args: &str, cycle: &str) -> Policy {
    kube_descheduler_engine::policy::load_str(&format!(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n{cycle}\nprofiles:\n- name: p\n  pluginConfig:\n  - name: DefaultEvictor\n    args: {evictor_args}\n  - name: RemoveFailedPods\n    args: {{}}\n  plugins:\n    deschedule:\n      enabled: [RemoveFailedPods]\n"
    ))
    .expect("test policy")
}

fn explain(policy: &Policy, mut snap: Snapshot, pods: &[&str]) -> Vec<PodExplanation> {
    let keys: Vec<String> = pods.iter().map(|s| s.to_string()).collect();
    let prepared = prepare(policy, &snap, now(), &keys);
    let plan = make_plan(policy, &mut snap, now(), None);
    finish(prepared, policy, &plan, &plan.limit_hits)
}

fn only_verdict(a: &PodExplanation) -> &PluginVerdict {
    assert_eq!(a.profiles.len(), 1, "{a:?}");
    assert_eq!(a.profiles[0].plugins.len(), 1, "{a:?}");
    &a.profiles[0].plugins[0]
}

#[test]
fn each_default_evictor_rule_is_named() {
    let nodes = vec![node("n1").build(), node("n2").build()];
    let pods = vec![
        pod("ns", "critical", "n1")
            .phase("Failed")
            .priority(2_000_001_000)
            .build(),
        pod("ns", "local", "n1").phase("Failed").empty_dir().build(),
        pod("ns", "ds", "n1")
            .phase("Running")
            .owner("DaemonSet", "agent")
            .build(),
        pod("ns", "bare", "n1").phase("Running").bare().build(),
        pod("ns", "young", "n1").phase("Failed").age(60).build(),
        pod("ns", "failed", "n1").phase("Failed").build(),
    ];
    let policy = policy("{minPodAge: 5m}", "");
    let answers = explain(
        &policy,
        snapshot(nodes, pods),
        &[
            "ns/critical",
            "ns/local",
            "ns/ds",
            "ns/bare",
            "ns/young",
            "ns/failed",
            "ns/ghost",
        ],
    );
    let expect = [
        (
            "ns/critical",
            "system critical priority (priority 2000001000 >= 2000000000)",
        ),
        ("ns/local", "local storage (emptyDir volume `scratch`)"),
        (
            "ns/ds",
            "daemonset pods are protected (owned by DaemonSet ns/agent)",
        ),
        ("ns/bare", "ownerRefs"),
        (
            "ns/young",
            "pod is younger than minPodAge (started 1m ago < minPodAge 5m)",
        ),
    ];
    for ((key, rule), a) in expect.iter().zip(&answers) {
        assert_eq!(&a.pod, key);
        let filter = a.profiles[0].filter.join("; ");
        assert!(filter.contains(rule), "{key}: {filter}");
        let v = only_verdict(a);
        assert_eq!(v.verdict, "filtered", "{key}");
        assert!(v.detail.contains(rule), "{key}: {}", v.detail);
    }
    // The failed pod passes the Filter and RemoveFailedPods evicts it.
    let failed = &answers[5];
    assert!(failed.profiles[0].filter.is_empty(), "{failed:?}");
    let v = only_verdict(failed);
    assert_eq!(v.verdict, "selected");
    assert!(v.detail.ends_with("→ evicted"), "{}", v.detail);
    assert!(
        answers[6]
            .not_found
            .as_deref()
            .is_some_and(|e| e.contains("no pod ghost"))
    );
    let text = render_pods(&answers);
    assert!(
        text.contains("DefaultEvictor Filter stops it: pod has system critical priority"),
        "{text}"
    );
}

#[test]
fn node_fit_names_the_nodes_tried_and_their_first_failing_predicate() {
    let nodes = vec![
        node("n1").allocatable("4", "8Gi", "110").build(),
        node("n2")
            .allocatable("4", "8Gi", "110")
            .taint("dedicated", Some("gpu"), "NoSchedule")
            .build(),
        node("n3").allocatable("4", "8Gi", "110").build(),
    ];
    let pods = vec![
        pod("ns", "failed", "n1")
            .phase("Failed")
            .requests("3", "1Gi")
            .build(),
        pod("ns", "big", "n3").requests("3500m", "1Gi").build(),
    ];
    let policy = policy("{nodeFit: true}", "");
    let answers = explain(&policy, snapshot(nodes, pods), &["ns/failed"]);
    let pre = answers[0].profiles[0]
        .pre_eviction_filter
        .clone()
        .unwrap_or_default();
    assert!(pre.starts_with("nodeFit: fits no other node"), "{pre}");
    assert!(
        pre.contains("n2: taint not tolerated dedicated=gpu:NoSchedule"),
        "{pre}"
    );
    assert!(pre.contains("n3: insufficient cpu"), "{pre}");
    let v = only_verdict(&answers[0]);
    assert_eq!(v.verdict, "filtered");
    assert!(v.detail.contains("PreEvictionFilter"), "{}", v.detail);
}

#[test]
fn a_limit_that_refused_the_pod_is_named() {
    let nodes = vec![node("n1").build(), node("n2").build()];
    let pods = vec![
        pod("ns", "a", "n1").phase("Failed").build(),
        pod("ns", "b", "n1").phase("Failed").build(),
    ];
    let policy = policy("{}", "maxNoOfPodsToEvictTotal: 1");
    let answers = explain(&policy, snapshot(nodes, pods), &["ns/a", "ns/b"]);
    assert_eq!(only_verdict(&answers[0]).verdict, "selected");
    let b = only_verdict(&answers[1]);
    assert_eq!(b.verdict, "limit", "{b:?}");
    assert!(
        b.detail
            .contains("per a descheduling cycle reached (limit 1)"),
        "{}",
        b.detail
    );
}
