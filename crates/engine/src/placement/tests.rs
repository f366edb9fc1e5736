//! Unit tables for the placement simulator: each Score plugin's arithmetic with kube-scheduler's
//! documented examples, each Filter plugin on a crafted cluster, the ping-pong scenario
//! (HighNodeUtilization empties nodes that LeastAllocated scoring refills), the incremental
//! state, and the scheduler configuration's strict decoding.

use super::predict::{Caches, predict};
use super::profile::{SchedulerProfile, ScoringStrategy};
use super::score::*;
use super::state::ClusterState;
use super::*;
use crate::testing::{node, pod, snapshot};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn r(requested: i64, allocatable: i64, weight: i64) -> ResourceUse {
    ResourceUse {
        requested,
        allocatable,
        weight,
    }
}

#[test]
fn least_and_most_allocated_match_kube_scheduler_examples() {
    // least_allocated_test.go / most_allocated_test.go, "nothing scheduled, resources requested,
    // differently sized nodes": the pod requests 3000m / 5000; node1 4000m / 10000, node2
    // 6000m / 10000.
    let node1 = [r(3000, 4000, 1), r(5000, 10000, 1)];
    let node2 = [r(3000, 6000, 1), r(5000, 10000, 1)];
    let cases: [(&ScoringStrategy, &[ResourceUse], i64); 4] = [
        (&ScoringStrategy::LeastAllocated, &node1, 37), // (25 + 50) / 2
        (&ScoringStrategy::LeastAllocated, &node2, 50),
        (&ScoringStrategy::MostAllocated, &node1, 62), // (75 + 50) / 2
        (&ScoringStrategy::MostAllocated, &node2, 50),
    ];
    for (s, res, want) in cases {
        assert_eq!(fit_score(s, res), want, "{s:?} {res:?}");
    }
    // Over capacity: LeastAllocated scores 0, MostAllocated caps at 100.
    assert_eq!(least_requested(5000, 4000), 0);
    assert_eq!(most_requested(5000, 4000), 100);
    // A resource the node lacks is skipped, not scored 0.
    assert_eq!(
        fit_score(
            &ScoringStrategy::LeastAllocated,
            &[r(1000, 4000, 1), r(1, 0, 1)]
        ),
        75
    );
}

#[test]
fn requested_to_capacity_ratio_follows_the_documented_bin_packing_example() {
    // "Resource Bin Packing" (kubernetes.io docs): shape {0,0},{100,10}; weights foo 5, memory 1,
    // cpu 3; node 1: foo 3 of 4, memory 512Mi of 1Gi, cpu 3 of 8 → utilizations 75, 50, 37,
    // scored on kube-scheduler's 0–100 scale: round((75·5 + 50·1 + 37·3) / 9) = 60.
    let shape = ScoringStrategy::RequestedToCapacityRatio {
        shape: vec![(0, 0), (100, 10)],
    };
    let gi = 1024 * 1024 * 1024;
    let node1 = [r(3, 4, 5), r(gi / 2, gi, 1), r(3000, 8000, 3)];
    assert_eq!(fit_score(&shape, &node1), 60);
    // Node 2: foo 4 of 8, memory 768Mi of 1Gi, cpu 4 of 8 → 50, 75, 50 → round(475 / 9) = 53.
    let node2 = [r(4, 8, 5), r(gi * 3 / 4, gi, 1), r(4000, 8000, 3)];
    assert_eq!(fit_score(&shape, &node2), 53);
    // A descending shape (bin packing reversed) and a point between two shape points.
    let down = ScoringStrategy::RequestedToCapacityRatio {
        shape: vec![(0, 10), (50, 5), (100, 0)],
    };
    assert_eq!(fit_score(&down, &[r(25, 100, 1)]), 75);
}

#[test]
fn balanced_allocation_matches_kube_scheduler_examples() {
    // balanced_allocation_test.go: 3000m / 5000 on node1 (4000m / 10000): fractions 0.75 and
    // 0.5, deviation 0.125 → 87; on node2 (6000m / 10000): 0.5 and 0.5 → 100.
    assert_eq!(balanced_score(&[r(3000, 4000, 1), r(5000, 10000, 1)]), 87);
    assert_eq!(balanced_score(&[r(3000, 6000, 1), r(5000, 10000, 1)]), 100);
    // Fractions are capped at 1.
    assert_eq!(balanced_score(&[r(8000, 4000, 1), r(5000, 10000, 1)]), 75);
}

#[test]
fn balanced_allocation_scores_the_change_in_balance_from_kube_scheduler_1_36() {
    // Measured on kube-scheduler 1.37.2 (-v=10): a 600m / 256Mi pod onto a 4-cpu, 8Gi node
    // holding 300m / 1664Mi — 93 without the pod, 99 with it — scores 50 + (50 + 99 − 93) / 2.
    let gi = 1024 * 1024 * 1024;
    let mi = 1024 * 1024;
    let without = balanced_score(&[r(300, 4000, 1), r(1664 * mi, 8 * gi, 1)]);
    let with = balanced_score(&[r(900, 4000, 1), r(1920 * mi, 8 * gi, 1)]);
    assert_eq!((without, with), (93, 99));
    assert_eq!(balanced_change(with, without), 78);
    // No change: 75; from fully imbalanced to balanced: 100; the reverse: 50.
    assert_eq!(balanced_change(90, 90), 75);
    assert_eq!(balanced_change(100, 50), 100);
    assert_eq!(balanced_change(50, 100), 50);
    // Only from 1.36 on.
    let profiles = SchedulerProfiles::default();
    assert!(!profiles.clone().for_version(1, 35).0[0].balanced_change);
    assert!(profiles.for_version(1, 37).0[0].balanced_change);
}

#[test]
fn normalisations_match_kube_scheduler() {
    // DefaultNormalizeScore (TaintToleration reverses: fewer intolerable taints is better).
    let mut s = vec![0, 1, 2];
    default_normalize(&mut s, true);
    assert_eq!(s, vec![100, 50, 0]);
    let mut s = vec![0, 0];
    default_normalize(&mut s, true);
    assert_eq!(s, vec![100, 100]);
    let mut s = vec![0, 5, 10];
    default_normalize(&mut s, false);
    assert_eq!(s, vec![0, 50, 100]);
    // PodTopologySpread: 100·(max + min − s) / max; ignored nodes 0.
    assert_eq!(
        spread_normalize(&[Some(4), Some(6), None]),
        vec![100, 66, 0]
    );
    assert_eq!(spread_normalize(&[Some(0), Some(0)]), vec![100, 100]);
    // InterPodAffinity: min–max.
    let mut s = vec![-10, 0, 10];
    min_max_normalize(&mut s);
    assert_eq!(s, vec![0, 50, 100]);
    // scoreForCount: count · ln(domains + 2) + maxSkew − 1 = ln 8 + 2.
    assert_eq!(spread_score_for_count(1, 3, 6).round() as i64, 4);
    assert_eq!(spread_score_for_count(0, 5, 3).round() as i64, 4);
}

/// Six 4-CPU nodes; `big` (2.4 CPU) on n1–n4, `small` (200m) on n5 and n6 — the issue's cluster.
fn issue_cluster() -> crate::snapshot::Snapshot {
    let nodes = (1..=6).map(|i| node(&format!("n{i}")).build()).collect();
    let mut pods = Vec::new();
    for i in 1..=4 {
        pods.push(
            pod("default", &format!("big-{i}"), &format!("n{i}"))
                .owner("ReplicaSet", "big")
                .label("app", "big")
                .requests("2400m", "1Gi")
                .build(),
        );
    }
    for i in 5..=6 {
        pods.push(
            pod("default", &format!("small-{i}"), &format!("n{i}"))
                .owner("ReplicaSet", "small")
                .label("app", "small")
                .requests("200m", "128Mi")
                .build(),
        );
    }
    snapshot(nodes, pods)
}

fn names(s: &crate::snapshot::Snapshot, ids: &[crate::snapshot::NodeId]) -> Vec<String> {
    ids.iter().map(|&n| s.node(n).name.clone()).collect()
}

fn pod_id(s: &crate::snapshot::Snapshot, name: &str) -> crate::snapshot::PodId {
    (0..s.pods.len() as u32)
        .find(|&p| s.pod(p).name == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

fn most_allocated() -> Arc<SchedulerProfiles> {
    Arc::new(SchedulerProfiles(vec![SchedulerProfile {
        strategy: ScoringStrategy::MostAllocated,
        ..Default::default()
    }]))
}

#[test]
fn least_allocated_sends_the_small_pod_back_where_it_was() {
    let s = issue_cluster();
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    let small = pod_id(&s, "small-5");
    let p = sim.evaluate(&s, small).expect("predicted");
    assert_eq!(names(&s, &p.ties), vec!["n5"]);
    let cur = p.current_score.clone().expect("n5 fits");
    let (other, runner) = p.runner_up.clone().expect("another node fits");
    // The best other node: n6 (less free room) or n1 (no `small` pod yet, spreading) — not n5.
    assert_ne!(s.node(other).name, "n5");
    assert!(cur.total > runner.total, "{cur:?} vs {runner:?}");
    // LeastAllocated on n5, which still holds the terminating small-5 (kube-scheduler counts it
    // until it is gone): 400m of 4 cpu → 90, 256Mi of memory → 98 (rounded down) → 94.
    assert_eq!(cur.plugin("NodeResourcesFit"), 94);
    let report = judge(&s, small, "HighNodeUtilization", Ok(p), &Default::default());
    let refusal = report.refusal.expect("refused");
    assert_eq!(refusal.code, RefusalCode::PlacementReturn);
    assert!(
        refusal
            .message
            .starts_with("would be scheduled back onto n5: score")
            && refusal.message.contains("LeastAllocated 94 vs")
            && refusal.message.contains("use MostAllocated"),
        "{}",
        refusal.message
    );
}

#[test]
fn most_allocated_packs_the_small_pods_onto_the_big_nodes_and_spreads_them() {
    let s = issue_cluster();
    let mut sim = Simulator::new(&s, &Default::default(), most_allocated());
    let first = pod_id(&s, "small-5");
    let p = sim.evaluate(&s, first).expect("predicted");
    assert_eq!(names(&s, &p.ties), vec!["n1", "n2", "n3", "n4"]);
    let report = judge(
        &s,
        first,
        "HighNodeUtilization",
        Ok(p.clone()),
        &Default::default(),
    );
    assert_eq!(report.refusal, None);
    assert_eq!(report.predicted_node.as_deref(), Some("n1"));
    sim.commit(&s, first, p.best);
    // The second small pod sees the first on n1: spreading (system default, hostname) moves it on.
    let second = pod_id(&s, "small-6");
    let p2 = sim.evaluate(&s, second).expect("predicted");
    assert_eq!(names(&s, &p2.ties), vec!["n2", "n3", "n4"]);
    // n6 is being emptied too: were it the target, Enforce would refuse.
    let emptying = [5u32].into_iter().collect();
    let mut on_n6 = p2.clone();
    on_n6.ties = vec![5];
    on_n6.best = Some(5);
    let r = judge(&s, first, "HighNodeUtilization", Ok(on_n6), &emptying);
    assert_eq!(
        r.refusal.map(|r| r.code),
        Some(RefusalCode::PlacementTargetEmptied)
    );
}

#[test]
fn abandoning_an_eviction_restores_the_node() {
    let s = issue_cluster();
    let mut sim = Simulator::new(&s, &Default::default(), most_allocated());
    let small = pod_id(&s, "small-5");
    let uid = s.pod(small).controller().expect("owned").uid.to_string();
    let before = sim.state.loads[4].clone();
    assert_eq!(sim.state.owner_counts(&s, &uid)[4], 1);
    let _ = sim.evaluate(&s, small);
    // Evicted, it terminates on n5: the load keeps it, the spreading counts drop it.
    assert_eq!(sim.state.loads[4].pods, before.pods);
    assert_eq!(sim.state.owner_counts(&s, &uid)[4], 0);
    sim.abandon(&s, small);
    assert_eq!(sim.state.loads[4].pods, before.pods);
    assert_eq!(sim.state.loads[4].requested, before.requested);
    assert_eq!(sim.state.owner_counts(&s, &uid)[4], 1);
}

/// The prediction for `p` on a cluster of `nodes` and `others`.
fn predict_one(
    nodes: Vec<core::Node>,
    candidate: core::Pod,
    others: Vec<core::Pod>,
) -> Vec<String> {
    let mut pods = vec![candidate];
    pods.extend(others);
    let s = snapshot(nodes, pods);
    let mut state = ClusterState::new(&s, &Default::default());
    state.remove(&s, 0);
    let p = predict(
        &s,
        &mut state,
        &mut Caches::default(),
        &SchedulerProfile::default(),
        0,
    );
    names(&s, &p.ties)
}

fn label_selector(k: &str, v: &str) -> LabelSelector {
    crate::testing::match_labels(&[(k, v)])
}

fn anti_affinity(k: &str, v: &str, key: &str) -> core::Affinity {
    crate::testing::required_anti_affinity(vec![crate::testing::affinity_term(&[(k, v)], key)])
}

fn affinity(k: &str, v: &str, key: &str) -> core::Affinity {
    crate::testing::required_affinity(vec![crate::testing::affinity_term(&[(k, v)], key)])
}

fn spread(key: &str, max_skew: i32, when: &str) -> core::TopologySpreadConstraint {
    core::TopologySpreadConstraint {
        label_selector: Some(label_selector("app", "web")),
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        ..Default::default()
    }
}

#[test]
fn filter_plugins_table() {
    let web = |name: &str, on: &str| pod("ns", name, on).label("app", "web").bare();
    let three = || crate::testing::zoned_nodes(&[("n1", "a"), ("n2", "a"), ("n3", "b")]);
    // (name, nodes, candidate on n1, other pods, predicted ties)
    type Case = (
        &'static str,
        Vec<core::Node>,
        core::Pod,
        Vec<core::Pod>,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "NodeUnschedulable: a cordoned node is skipped",
            vec![node("n1").unschedulable().build(), node("n2").build()],
            web("p", "n1").build(),
            vec![],
            vec!["n2"],
        ),
        (
            // n2 still holds the terminating candidate: the cordoned n1 wins.
            "NodeUnschedulable: tolerated by the unschedulable taint's toleration",
            vec![node("n1").unschedulable().build(), node("n2").build()],
            web("p", "n2")
                .toleration(
                    "node.kubernetes.io/unschedulable",
                    "Exists",
                    None,
                    Some("NoSchedule"),
                )
                .build(),
            vec![],
            vec!["n1"],
        ),
        (
            "TaintToleration: NoSchedule without toleration",
            vec![
                node("n1").build(),
                node("n2").taint("gpu", None, "NoSchedule").build(),
            ],
            web("p", "n1").build(),
            vec![],
            vec!["n1"],
        ),
        (
            "NodeAffinity: nodeSelector",
            vec![node("n1").build(), node("n2").label("disk", "ssd").build()],
            web("p", "n1").node_selector("disk", "ssd").build(),
            vec![],
            vec!["n2"],
        ),
        (
            "NodeResourcesFit: not enough cpu on n2",
            vec![node("n1").build(), node("n2").build()],
            web("p", "n1").requests("2", "1Gi").build(),
            vec![pod("ns", "hog", "n2").requests("3", "1Gi").build()],
            vec!["n1"],
        ),
        (
            "PodTopologySpread DoNotSchedule: zone a holds 2, zone b 0, maxSkew 1",
            three(),
            web("p", "n1")
                .with(|p| {
                    if let Some(s) = p.spec.as_mut() {
                        s.topology_spread_constraints =
                            Some(vec![spread("zone", 1, "DoNotSchedule")]);
                    }
                })
                .build(),
            vec![web("w2", "n1").build(), web("w3", "n2").build()],
            vec!["n3"],
        ),
        (
            "InterPodAffinity: required anti-affinity by zone",
            three(),
            web("p", "n1")
                .affinity(anti_affinity("app", "db", "zone"))
                .build(),
            vec![pod("ns", "db", "n1").label("app", "db").build()],
            vec!["n3"],
        ),
        (
            "InterPodAffinity: an existing pod's anti-affinity forbids its zone",
            three(),
            web("p", "n3").build(),
            vec![
                pod("ns", "db", "n3")
                    .label("app", "db")
                    .affinity(anti_affinity("app", "web", "zone"))
                    .build(),
            ],
            vec!["n1", "n2"],
        ),
        (
            "InterPodAffinity: required affinity to the zone of a db pod",
            three(),
            web("p", "n1")
                .affinity(affinity("app", "db", "zone"))
                .build(),
            vec![pod("ns", "db", "n3").label("app", "db").build()],
            vec!["n3"],
        ),
        (
            "no node fits",
            vec![node("n1").build(), node("n2").build()],
            web("p", "n1").requests("5", "1Gi").build(),
            vec![],
            vec![],
        ),
    ];
    for (name, nodes, candidate, others, want) in cases {
        assert_eq!(predict_one(nodes, candidate, others), want, "{name}");
    }
}

/// `b` resized in place: its container `app` allocated (and actuated) `cpu`, and its resize
/// `PodResizePending` with `reason` when given.
fn resized(b: crate::testing::PodBuilder, cpu: &str, reason: Option<&str>) -> core::Pod {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    b.with(|p| {
        let status = p.status.get_or_insert_with(Default::default);
        let list: std::collections::BTreeMap<String, Quantity> =
            [("cpu".to_string(), Quantity(cpu.into()))].into();
        let statuses = status.container_statuses.get_or_insert_with(Vec::new);
        if !statuses.iter().any(|c| c.name == "app") {
            statuses.push(core::ContainerStatus {
                name: "app".into(),
                ..Default::default()
            });
        }
        for c in statuses.iter_mut().filter(|c| c.name == "app") {
            c.allocated_resources = Some(list.clone());
            c.resources = Some(core::ResourceRequirements {
                requests: Some(list.clone()),
                ..Default::default()
            });
        }
        if let Some(reason) = reason {
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(core::PodCondition {
                    type_: "PodResizePending".into(),
                    status: "True".into(),
                    reason: Some(reason.into()),
                    ..Default::default()
                });
        }
    })
    .build()
}

/// How many nodes pass the filters for the replacement of `candidate` (pod 0).
fn feasible(nodes: Vec<core::Node>, candidate: core::Pod, others: Vec<core::Pod>) -> usize {
    let mut pods = vec![candidate];
    pods.extend(others);
    let s = snapshot(nodes, pods);
    let mut state = ClusterState::new(&s, &Default::default());
    state.remove(&s, 0);
    predict(
        &s,
        &mut state,
        &mut Caches::default(),
        &SchedulerProfile::default(),
        0,
    )
    .feasible
}

#[test]
fn node_resources_fit_counts_pods_resized_in_place_as_kube_scheduler_does() {
    // Nodes of 4 CPU; the candidate (on n1, moving) asks for 2.
    let nodes = || vec![node("n1").build(), node("n2").build()];
    let candidate = || {
        pod("ns", "p", "n1")
            .label("app", "web")
            .bare()
            .requests("2", "1Gi")
            .build()
    };
    let hog = |cpu: &str| pod("ns", "hog", "n2").requests(cpu, "1Gi");
    // Resized down from 3 to 1 CPU but still holding 3 (allocated and actuated): kube-scheduler
    // counts max(spec, allocated, actuated) = 3, so n2 (1 CPU free) is infeasible.
    assert_eq!(feasible(nodes(), candidate(), vec![hog("1").build()]), 2);
    assert_eq!(
        feasible(nodes(), candidate(), vec![resized(hog("1"), "3", None)]),
        1
    );
    assert_eq!(
        predict_one(nodes(), candidate(), vec![resized(hog("1"), "3", None)]),
        ["n1"]
    );
    // Resized up to 3.5 CPU, which the kubelet found Infeasible: kube-scheduler counts what runs
    // (1 CPU), not the spec, so n2 has room.
    assert_eq!(
        feasible(nodes(), candidate(), vec![hog("3500m").build()]),
        1
    );
    assert_eq!(
        feasible(
            nodes(),
            candidate(),
            vec![resized(hog("3500m"), "1", Some("Infeasible"))]
        ),
        2
    );
    // The same resize merely Deferred: the spec (3.5 CPU) counts, n2 is full.
    assert_eq!(
        feasible(
            nodes(),
            candidate(),
            vec![resized(hog("3500m"), "1", Some("Deferred"))]
        ),
        1
    );
}

#[test]
fn score_plugins_on_a_cluster() {
    let plain = |name: &str| pod("ns", name, "n1").bare();
    // TaintToleration: an intolerable PreferNoSchedule taint loses 3 × 100.
    assert_eq!(
        predict_one(
            vec![
                node("n1").taint("x", None, "PreferNoSchedule").build(),
                node("n2").build()
            ],
            plain("p").build(),
            vec![],
        ),
        vec!["n2"]
    );
    // NodeAffinity preferred.
    let preferred = core::Affinity {
        node_affinity: Some(core::NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                core::PreferredSchedulingTerm {
                    weight: 10,
                    preference: core::NodeSelectorTerm {
                        match_expressions: Some(vec![core::NodeSelectorRequirement {
                            key: "disk".into(),
                            operator: "In".into(),
                            values: Some(vec!["ssd".into()]),
                        }]),
                        ..Default::default()
                    },
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        predict_one(
            vec![node("n1").build(), node("n2").label("disk", "ssd").build()],
            plain("p").affinity(preferred).build(),
            vec![],
        ),
        vec!["n2"]
    );
    // PodTopologySpread ScheduleAnyway: n1 already has a web pod.
    let soft = |p: &mut core::Pod| {
        if let Some(s) = p.spec.as_mut() {
            s.topology_spread_constraints =
                Some(vec![spread("kubernetes.io/hostname", 1, "ScheduleAnyway")]);
        }
    };
    assert_eq!(
        predict_one(
            vec![node("n1").build(), node("n2").build()],
            plain("p").label("app", "web").with(soft).build(),
            vec![
                pod("ns", "w", "n1")
                    .label("app", "web")
                    .requests("0", "0")
                    .build()
            ],
        ),
        vec!["n2"]
    );
    // InterPodAffinity preferred: towards the node with a db pod, despite its load.
    let preferred_pod = core::Affinity {
        pod_affinity: Some(core::PodAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                core::WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: core::PodAffinityTerm {
                        label_selector: Some(label_selector("app", "db")),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..Default::default()
                    },
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        predict_one(
            vec![node("n1").build(), node("n2").build()],
            plain("p").affinity(preferred_pod).build(),
            vec![
                pod("ns", "db", "n2")
                    .label("app", "db")
                    .requests("1", "1Gi")
                    .build()
            ],
        ),
        vec!["n2"]
    );
    // Equal nodes tie; n1 still holds the terminating candidate (its non-zero default requests).
    assert_eq!(
        predict_one(
            vec![node("n1").build(), node("n2").build(), node("n3").build()],
            plain("p").build(),
            vec![],
        ),
        vec!["n2", "n3"]
    );
}

#[test]
fn scheduler_configuration_is_read_strictly() {
    let ok = config::load_str(
        r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
  - schedulerName: default-scheduler
    plugins:
      score:
        disabled: [{name: "*"}]
        enabled: [{name: NodeResourcesFit, weight: 5}]
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
  - schedulerName: ratio
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: RequestedToCapacityRatio
            requestedToCapacityRatio:
              shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]
"#,
    )
    .expect("valid");
    let d = ok.get("default-scheduler").expect("default profile");
    assert_eq!(d.strategy, ScoringStrategy::MostAllocated);
    assert_eq!(d.weights.node_resources_fit, 5);
    assert_eq!(d.weights.balanced_allocation, 0);
    assert_eq!(d.weights.taint_toleration, 0);
    assert_eq!(
        d.fit_resources,
        vec![("cpu".into(), 2), ("memory".into(), 1)]
    );
    assert!(
        d.filters.node_resources_fit,
        "score disables leave filters on"
    );
    let ratio = ok.get("ratio").expect("ratio profile");
    assert_eq!(
        ratio.strategy,
        ScoringStrategy::RequestedToCapacityRatio {
            shape: vec![(0, 10), (100, 0)]
        }
    );
    assert_eq!(ratio.weights, profile::Weights::default());
    assert!(ok.get("other").is_none());

    let head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let errors = [
        (
            "profiles: [{schedulerName: a, plugin: {}}]",
            "profiles[0].plugin: unknown field `plugin`",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: Most}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {typo: 1}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.typo: unknown field `typo`",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 50, score: 1}, {utilization: 40, score: 2}]}}}}]}]",
            "requestedToCapacityRatio.shape[1].utilization",
        ),
        (
            "profiles: [{plugins: {score: {enabled: [{name: X, weight: 101}]}}}]",
            "profiles[0].plugins.score.enabled[0].weight",
        ),
        ("profiles: [{}, {}]", "profiles[1].schedulerName: duplicate"),
        ("bogus: 1", "unknown field `bogus`"),
    ];
    for (body, want) in errors {
        let e = config::load_str(&format!("{head}{body}")).expect_err(body);
        assert!(e.0.contains(want), "{body}: {}", e.0);
    }
    let e = config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
    )
    .expect_err("old version");
    assert!(e.0.contains("apiVersion"), "{}", e.0);
}

#[test]
fn the_placement_mode_reads_names_and_a_bare_yaml_off() {
    let read = |v: serde_json::Value| serde_json::from_value::<PlacementMode>(v);
    assert_eq!(
        read(serde_json::json!("Off")).ok(),
        Some(PlacementMode::Off)
    );
    assert_eq!(
        read(serde_json::json!("Report")).ok(),
        Some(PlacementMode::Report)
    );
    assert_eq!(
        read(serde_json::json!("Enforce")).ok(),
        Some(PlacementMode::Enforce)
    );
    // `placement: Off` unquoted: YAML 1.1 reads the boolean false.
    assert_eq!(
        read(serde_json::json!(false)).ok(),
        Some(PlacementMode::Off)
    );
    let err = read(serde_json::json!(true)).err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("Off") && e.contains("true")));
    let err = read(serde_json::json!("Sometimes"))
        .err()
        .map(|e| e.to_string());
    assert!(
        err.is_some_and(|e| e.contains("Sometimes")),
        "unknown names are refused"
    );
}

#[test]
fn round_score_equals_f64_round() {
    use super::score::round_score;
    let edge = [
        0.0,
        0.49999999999999994,
        0.5,
        1.5,
        2.5,
        2.4999999999999996,
        4503599627370495.5,
        4503599627370497.0,
        -0.5,
        -2.5,
        f64::NAN,
        f64::INFINITY,
    ];
    for x in edge {
        assert_eq!(round_score(x), x.round() as i64, "{x}");
    }
    // Spread scores: counts times ln(domains + 2) plus skew parts.
    for domains in 0..300usize {
        let w = ((domains + 2) as f64).ln();
        for count in 0..200i64 {
            for skew in 1..6i64 {
                let x = count as f64 * w + (skew - 1) as f64 * w;
                assert_eq!(round_score(x), x.round() as i64, "{x}");
            }
        }
    }
}
