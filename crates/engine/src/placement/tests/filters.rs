//! Each Filter plugin on a crafted cluster, and NodeResourcesFit on pods resized in place.

use super::*;

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
