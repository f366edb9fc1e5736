//! Scoring under a `KubeSchedulerConfiguration`: kube-scheduler's documented examples (the
//! numbers in the comments of `noderesources/{least_allocated,most_allocated,
//! balanced_allocation,requested_to_capacity_ratio}_test.go`, `helper/shape_score_test.go` and
//! `tainttoleration/taint_toleration_test.go`), decoding errors, and placements.
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, Node, Pod, PodSpec, PodStatus, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::config::{self, ResourceWeight, ScoringStrategy, StrategyKind};
use super::score::*;
use super::{NodeInfo, Resources, reconcile};
use crate::controllers::testing::{Sim, node};
use crate::controllers::{Action, ClusterState};

fn res(cpu: i128, mem: i128) -> Resources {
    [("cpu".to_string(), cpu), ("memory".to_string(), mem)].into()
}

fn info(n: &Node, alloc: (i128, i128), used: (i128, i128)) -> NodeInfo<'_> {
    NodeInfo {
        node: n,
        allocatable: res(alloc.0, alloc.1),
        requested: res(used.0, used.1),
        pods: 0,
    }
}

fn strategy(kind: StrategyKind, weights: (i64, i64)) -> ScoringStrategy {
    ScoringStrategy {
        kind,
        resources: vec![
            ResourceWeight {
                name: "cpu".into(),
                weight: weights.0,
            },
            ResourceWeight {
                name: "memory".into(),
                weight: weights.1,
            },
        ],
    }
}

/// The scores `kind` gives a pod asking 3000 / 5000 on kube-scheduler's example nodes: 4000 /
/// 10000 and 6000 / 10000 with equal weights, then 10000 / 20000 with 3000 cpu in use and memory
/// weighted 2.
fn kube_scheduler_examples(kind: StrategyKind) -> [i64; 3] {
    let n = node("n", "1", "1Gi");
    let (s, w) = (strategy(kind.clone(), (1, 1)), strategy(kind, (1, 2)));
    let pod = res(3000, 5000);
    [
        fit_score(&s, &info(&n, (4000, 10000), (0, 0)), &pod),
        fit_score(&s, &info(&n, (6000, 10000), (0, 0)), &pod),
        fit_score(&w, &info(&n, (10000, 20000), (3000, 0)), &pod),
    ]
}

#[test]
fn least_allocated_matches_kube_scheduler_examples() {
    // "nothing scheduled, resources requested, differently sized nodes": cpu (4000-3000)*100/4000
    // = 25, memory (10000-5000)*100/10000 = 50 → 37; the 6000-cpu node: 50, 50 → 50.
    // Weighted (cpu 1, memory 2): cpu 40, memory 75 → (40 + 150) / 3 = 63.
    let scores = kube_scheduler_examples(StrategyKind::LeastAllocated);
    assert_eq!(scores, [37, 50, 63]);
    // Requests above capacity score 0 for that resource.
    assert_eq!(least_requested(5000, 4000), 0);
    assert_eq!(least_requested(0, 0), 0);
}

#[test]
fn most_allocated_matches_kube_scheduler_examples() {
    // cpu 3000*100/4000 = 75, memory 5000*100/10000 = 50 → 62; the 6000-cpu node: 50, 50 → 50.
    // Weighted (cpu 1, memory 2): cpu 60, memory 25 → (60 + 50) / 3 = 36.
    let scores = kube_scheduler_examples(StrategyKind::MostAllocated);
    assert_eq!(scores, [62, 50, 36]);
    // Overcommitted: requests above capacity count as full (100), not 0.
    assert_eq!(most_requested(5000, 4000), 100);
}

#[test]
fn pods_without_requests_count_the_non_zero_defaults() {
    let n = node("n", "1", "1Gi");
    let s = strategy(StrategyKind::MostAllocated, (1, 0));
    let s = ScoringStrategy {
        resources: s.resources[..1].to_vec(),
        ..s
    };
    // 100m of 1000m: 10.
    assert_eq!(
        fit_score(&s, &info(&n, (1000, 10000), (0, 0)), &Resources::new()),
        10
    );
}

#[test]
fn broken_linear_function_matches_kube_scheduler_examples() {
    let one = [(10, 1), (90, 9)];
    for (p, want) in [
        (-10, 1),
        (0, 1),
        (9, 1),
        (10, 1),
        (15, 1),
        (20, 2),
        (89, 8),
        (90, 9),
        (99, 9),
        (100, 9),
        (110, 9),
    ] {
        assert_eq!(broken_linear(&one, p), want, "utilization {p}");
    }
    let two = [(0, 2), (40, 10), (100, 0)];
    for (p, want) in [
        (-10, 2),
        (0, 2),
        (20, 6),
        (30, 8),
        (40, 10),
        (70, 5),
        (100, 0),
        (110, 0),
    ] {
        assert_eq!(broken_linear(&two, p), want, "utilization {p}");
    }
}

#[test]
fn requested_to_capacity_ratio_scores_on_the_scaled_shape() {
    let n = node("n", "1", "1Gi");
    // The default-like shape {0: 0, 100: 10} is bin packing: utilization × 1.
    let s = strategy(
        StrategyKind::RequestedToCapacityRatio(vec![(0, 0), (100, 100)]),
        (1, 1),
    );
    // cpu 3000/4000 = 75, memory 5000/10000 = 50 → round(125 / 2) = 63 (kube-scheduler rounds).
    assert_eq!(
        fit_score(&s, &info(&n, (4000, 10000), (0, 0)), &res(3000, 5000)),
        63
    );
    // Resources scoring 0 are left out of the average: memory 0 % → cpu alone.
    assert_eq!(
        fit_score(&s, &info(&n, (4000, 10000), (0, 0)), &res(3000, 1)),
        75
    );
}

#[test]
fn balanced_allocation_matches_kube_scheduler_examples() {
    let n = node("n", "1", "1Gi");
    let r = strategy(StrategyKind::LeastAllocated, (1, 1)).resources;
    // cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5: std 0.125 → 87; equal shares → 100.
    assert_eq!(
        balanced_score(&r, &info(&n, (4000, 10000), (0, 0)), &res(3000, 5000)),
        87
    );
    assert_eq!(
        balanced_score(&r, &info(&n, (6000, 10000), (0, 0)), &res(3000, 5000)),
        100
    );
}

fn tainted(name: &str, taints: &[&str]) -> Node {
    let mut n = node(name, "4", "8Gi");
    n.spec.get_or_insert_with(Default::default).taints = Some(
        taints
            .iter()
            .map(|k| Taint {
                key: (*k).into(),
                value: Some("v".into()),
                effect: "PreferNoSchedule".into(),
                time_added: None,
            })
            .collect(),
    );
    n
}

#[test]
fn taint_toleration_prefers_fewer_intolerable_prefer_no_schedule_taints() {
    let nodes = [
        tainted("a", &[]),
        tainted("b", &["k1"]),
        tainted("c", &["k1", "k2"]),
    ];
    let mut pod = Pod::default();
    let mut counts: Vec<i64> = nodes
        .iter()
        .map(|n| intolerable_prefer_no_schedule(&pod, n))
        .collect();
    assert_eq!(counts, [0, 1, 2]);
    normalize_reverse(&mut counts);
    assert_eq!(counts, [100, 50, 0]);
    // A toleration for k1 (effect PreferNoSchedule) leaves only k2.
    pod.spec = Some(PodSpec {
        tolerations: Some(vec![Toleration {
            key: Some("k1".into()),
            operator: Some("Equal".into()),
            value: Some("v".into()),
            effect: Some("PreferNoSchedule".into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    assert_eq!(intolerable_prefer_no_schedule(&pod, &nodes[2]), 1);
    // No intolerable taint anywhere: every node gets the maximum.
    let mut zeros = [0, 0];
    normalize_reverse(&mut zeros);
    assert_eq!(zeros, [100, 100]);
}

const MOST: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources:
              - {name: cpu, weight: 1}
              - {name: memory, weight: 1}
  - schedulerName: spread
"#;

#[test]
fn decoding_resolves_profiles_defaults_and_weights() {
    let c = config::parse(MOST).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.profiles.len(), 2);
    let most = &c.profiles["default-scheduler"];
    assert_eq!(
        most.fit.as_ref().map(|(w, s)| (*w, s.kind.clone())),
        Some((1, StrategyKind::MostAllocated))
    );
    assert_eq!(most.balanced.as_ref().map(|(w, _)| *w), Some(1));
    assert_eq!(most.taint_toleration, Some(3));
    assert_eq!(
        most.unmodelled,
        [
            "ImageLocality",
            "InterPodAffinity",
            "NodeAffinity",
            "PodTopologySpread"
        ]
    );
    let spread = &c.profiles["spread"];
    assert_eq!(
        spread.fit.as_ref().map(|(_, s)| s.kind.clone()),
        Some(StrategyKind::LeastAllocated)
    );
    // No profiles: one default profile.
    let d = config::parse(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.profiles.keys().collect::<Vec<_>>(), ["default-scheduler"]);
    // Weights and disabled plugins; JSON works too.
    let w = config::parse(
        r#"{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"KubeSchedulerConfiguration",
            "percentageOfNodesToScore":30,
            "profiles":[{"plugins":{"score":{"disabled":[{"name":"*"}],
              "enabled":[{"name":"NodeResourcesFit","weight":5},{"name":"TaintToleration"}]}}}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let p = &w.profiles["default-scheduler"];
    assert_eq!(p.fit.as_ref().map(|(w, _)| *w), Some(5));
    assert_eq!(p.taint_toleration, Some(1));
    assert_eq!(p.balanced, None);
    assert!(p.unmodelled.is_empty());
    assert_eq!(p.percentage_of_nodes_to_score, Some(30));
}

#[test]
fn decoding_errors_name_the_field() {
    let head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    for (body, want) in [
        (
            "profiles:\n  - schedulerNme: x\n",
            "profiles[0].schedulerNme: unknown field `schedulerNme`",
        ),
        (
            "profiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args:\n          scoringStrategy:\n            type: Packed\n",
            "profiles[0].pluginConfig[0].args.scoringStrategy.type: \"Packed\"",
        ),
        (
            "profiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args:\n          scoringStrategy:\n            resources: [{name: cpu, weight: 101}]\n",
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: 101",
        ),
        (
            "profiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args:\n          scoringStrategy:\n            type: RequestedToCapacityRatio\n            requestedToCapacityRatio:\n              shape: [{utilization: 50, score: 1}, {utilization: 40, score: 2}]\n",
            "requestedToCapacityRatio.shape[1].utilization: 40 must be greater",
        ),
        (
            "profiles:\n  - plugins:\n      score:\n        enabled: [{name: Packing}]\n",
            "profiles[0].plugins.score.enabled[0].name: \"Packing\"",
        ),
        (
            "profiles:\n  - {}\n  - schedulerName: default-scheduler\n",
            "profiles[1].schedulerName: \"default-scheduler\" is used",
        ),
        (
            "percentageOfNodesToScore: 101\n",
            "percentageOfNodesToScore: 101",
        ),
    ] {
        let err = config::parse(&format!("{head}{body}"))
            .err()
            .unwrap_or_default();
        assert!(err.contains(want), "{body}: {err}");
    }
    let err = config::parse(
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
    )
    .err()
    .unwrap_or_default();
    assert!(
        err.starts_with("apiVersion: \"kubescheduler.config.k8s.io/v1beta3\""),
        "{err}"
    );
    assert!(config::parse("- a\n").is_err());
}

fn pending(name: &str, cpu: &str, scheduler: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: scheduler.map(str::to_string),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        [
                            ("cpu".to_string(), Quantity(cpu.into())),
                            ("memory".to_string(), Quantity("100Mi".into())),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        }),
    }
}

fn running_on(mut p: Pod, node: &str) -> Pod {
    p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
    p.status.get_or_insert_with(Default::default).phase = Some("Running".into());
    p
}

/// Where each pending pod is bound (pod name → node), with `config` (None: built-in scoring).
fn placements(config: Option<&str>, pods: Vec<Pod>) -> Vec<(String, String)> {
    let mut st = Sim::with_nodes(vec![]).state;
    st.nodes = vec![
        node("n1", "4", "8Gi"),
        node("n2", "4", "8Gi"),
        node("n3", "4", "8Gi"),
    ];
    st.pods = vec![running_on(pending("busy", "2", None), "n2")];
    st.pods.extend(pods);
    st.config.scheduler =
        config.map(|c| Arc::new(config::parse(c).unwrap_or_else(|e| panic!("{e}"))));
    reconcile(&st)
        .into_iter()
        .filter_map(|a| match a {
            Action::Update(v) => Some((
                v["metadata"]["name"].as_str()?.to_string(),
                v["spec"]["nodeName"].as_str()?.to_string(),
            )),
            _ => None,
        })
        .collect()
}

fn pair(pod: &str, node: &str) -> (String, String) {
    (pod.to_string(), node.to_string())
}

#[test]
fn the_profile_decides_the_node_and_unknown_scheduler_names_stay_pending() {
    let pods = || {
        vec![
            pending("a", "500m", None),
            pending("b", "500m", Some("spread")),
            pending("c", "500m", Some("nobody")),
        ]
    };
    // Built-in: the emptiest node (n1, then n3: tie broken by name, then less used); `spread`
    // and `nobody` are other schedulers' pods.
    assert_eq!(placements(None, pods()), [pair("a", "n1")]);
    // MostAllocated packs onto the used node; the `spread` profile (LeastAllocated) spreads;
    // no profile serves `nobody`: it is left alone (no PodScheduled condition either).
    assert_eq!(
        placements(Some(MOST), pods()),
        [pair("a", "n2"), pair("b", "n1")]
    );
}

/// The nodes one reconcile of `st` under scheduler configuration `cfg` binds pods to.
fn bound_with(cfg: &str, st: &mut ClusterState) -> Vec<String> {
    let parsed = config::parse(cfg).unwrap_or_else(|e| panic!("{e}"));
    st.config.scheduler = Some(Arc::new(parsed));
    let node = |a: Action| match a {
        Action::Update(v) => v["spec"]["nodeName"].as_str().map(str::to_string),
        _ => None,
    };
    reconcile(st).into_iter().filter_map(node).collect()
}

#[test]
fn a_prefer_no_schedule_taint_outweighs_a_small_resource_difference() {
    let cfg = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let mut st = Sim::with_nodes(vec![]).state;
    st.nodes = vec![tainted("n1", &["k"]), tainted("n2", &[])];
    // n2 is slightly busier: LeastAllocated alone would pick n1.
    st.pods = vec![
        running_on(pending("busy", "200m", None), "n2"),
        pending("new", "100m", None),
    ];
    let bound = bound_with(cfg, &mut st);
    assert_eq!(bound, ["n2"]);
    // Without TaintToleration the free share wins.
    let off = format!(
        "{cfg}profiles:\n  - plugins:\n      score:\n        disabled: [{{name: TaintToleration}}]\n"
    );
    let bound = bound_with(&off, &mut st);
    assert_eq!(bound, ["n1"]);
}
