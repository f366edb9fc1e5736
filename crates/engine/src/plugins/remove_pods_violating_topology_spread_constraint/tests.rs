//! Tests of RemovePodsViolatingTopologySpreadConstraint; the balancing table and the node-fit
//! tests are sub-modules, sharing the fixtures here.

use super::args::{DO_NOT_SCHEDULE, SCHEDULE_ANYWAY};
use super::*;
use crate::framework::Plugin;
use crate::framework::cycle::CycleConfig;

/// Namespaces are analysed in parallel chunks: choosing over every namespace at once must
/// equal concatenating the choices over any split, on a cluster with many constraints.
#[test]
fn namespace_chunks_choose_exactly_what_one_pass_chooses() {
    let s = crate::testing::synthetic_snapshot(60, 2_000, 11);
    let plugin = RemovePodsViolatingTopologySpreadConstraint::new(
        crate::framework::args::decode(
            &json!({"constraints": ["DoNotSchedule", "ScheduleAnyway"]}),
        )
        .expect("args"),
    )
    .expect("plugin");
    let nodes: Vec<NodeId> = (0..s.nodes.len() as NodeId).collect();
    let mut by_namespace: BTreeMap<&str, Vec<PodId>> = BTreeMap::new();
    for &n in &nodes {
        for p in s.active_pods_on_node(n) {
            by_namespace.entry(&s.pod(p).namespace).or_default().push(p);
        }
    }
    let namespaces: Vec<(&str, Vec<PodId>)> = by_namespace.into_iter().collect();
    assert!(namespaces.len() >= 3, "several namespaces");
    let whole = plugin.choose(&s, &nodes, &namespaces);
    assert!(
        !whole.is_empty(),
        "the synthetic cluster has skewed spreads"
    );
    for cut in 1..namespaces.len() {
        let mut split = plugin.choose(&s, &nodes, &namespaces[..cut]);
        split.extend(plugin.choose(&s, &nodes, &namespaces[cut..]));
        assert_eq!(split, whole, "split after {cut} namespaces");
    }
}
use crate::plugins::default_evictor::DefaultEvictor;
use crate::testing::{PodBuilder, evicted_names, node, pod, run_balance, run_profile, snapshot};
use k8s_openapi::api::core::v1 as core;
use serde_json::json;

/// `maxSkew`/`zone`/DoNotSchedule over `foo=bar`, edited by `f`.
fn tsc(max_skew: i32, f: impl FnOnce(&mut TopologySpreadConstraint)) -> TopologySpreadConstraint {
    let mut c = TopologySpreadConstraint {
        max_skew,
        topology_key: "zone".into(),
        when_unsatisfiable: DO_NOT_SCHEDULE.into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([("foo".to_string(), "bar".to_string())].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    f(&mut c);
    c
}

fn with_tsc(b: PodBuilder, c: TopologySpreadConstraint) -> PodBuilder {
    b.with(move |p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.topology_spread_constraints
                .get_or_insert_with(Vec::new)
                .push(c);
        }
    })
}

/// `count` pods `p<k>…` on `node`, labelled `foo=bar`, each with constraint `c`.
fn pods(
    first: usize,
    count: usize,
    node_name: &str,
    c: &TopologySpreadConstraint,
    f: impl Fn(PodBuilder) -> PodBuilder,
) -> Vec<core::Pod> {
    (first..first + count)
        .map(|i| {
            f(with_tsc(
                pod("ns1", &format!("p{i}"), node_name).label("foo", "bar"),
                c.clone(),
            ))
            .build()
        })
        .collect()
}

fn zones(z: &[&str]) -> Vec<core::Node> {
    z.iter()
        .enumerate()
        .map(|(i, z)| node(&format!("n{}", i + 1)).label("zone", z).build())
        .collect()
}

fn run_with(
    args: serde_json::Value,
    evictor: serde_json::Value,
    nodes: Vec<core::Node>,
    pods: Vec<core::Pod>,
) -> Vec<String> {
    let Plugin::Balance(plugin) = build(&args).expect("args") else {
        panic!("not a Balance plugin");
    };
    let ev = DefaultEvictor::from_args(&evictor).expect("evictor args");
    let mut s = snapshot(nodes, pods);
    evicted_names(&run_balance(plugin, ev, &mut s))
}

fn run(args: serde_json::Value, nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Vec<String> {
    run_with(args, json!({}), nodes, pods)
}

fn cat(parts: Vec<Vec<core::Pod>>) -> Vec<core::Pod> {
    parts.into_iter().flatten().collect()
}

fn id(b: PodBuilder) -> PodBuilder {
    b
}

fn affinity_zone_in(values: &[&str]) -> core::Affinity {
    core::Affinity {
        node_affinity: Some(core::NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(core::NodeSelector {
                node_selector_terms: vec![core::NodeSelectorTerm {
                    match_expressions: Some(vec![core::NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "In".into(),
                        values: Some(values.iter().map(|v| v.to_string()).collect()),
                    }]),
                    match_fields: None,
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn counting_rules() {
    let c = tsc(1, |_| {});
    // Unevictable (bare) pods are not counted: [1,1] after filtering.
    let ps = cat(vec![
        pods(0, 2, "n1", &c, |b| b.bare()),
        pods(2, 1, "n1", &c, id),
        pods(3, 1, "n2", &c, id),
    ]);
    assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
    // Terminating pods are skipped: [2 (+2 terminating), 2].
    let ps = cat(vec![
        pods(0, 2, "n1", &c, id),
        pods(2, 2, "n1", &c, |b| b.terminating()),
        pods(4, 2, "n2", &c, id),
    ]);
    assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
    // Terminating pods that the evict annotation makes evictable are still skipped.
    let ps = cat(vec![
        pods(0, 1, "n1", &c, id),
        pods(1, 2, "n1", &c, |b| {
            b.terminating()
                .annotation("descheduler.alpha.kubernetes.io/evict", "true")
        }),
        pods(3, 1, "n2", &c, id),
    ]);
    assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
    // Pods the constraint's selector does not match are not counted.
    let ps = cat(vec![
        pods(0, 1, "n1", &c, id),
        pods(1, 3, "n1", &c, |b| b.label("foo", "other")),
        pods(4, 1, "n2", &c, id),
    ]);
    assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
    // Pods without the constraint but matching its selector are counted and may move.
    let ps = cat(vec![
        pods(0, 1, "n1", &c, id),
        (1..4)
            .map(|i| {
                pod("ns1", &format!("q{i}"), "n1")
                    .label("foo", "bar")
                    .build()
            })
            .collect(),
    ]);
    assert_eq!(
        run(json!({}), zones(&["a", "b"]), ps),
        vec!["ns1/q2", "ns1/q3"]
    );
    // Nodes without the topology key are not domains and their pods are not counted.
    let mut nodes = zones(&["a", "b"]);
    nodes.push(node("n3").build());
    let ps = cat(vec![
        pods(0, 2, "n1", &c, id),
        pods(2, 1, "n2", &c, id),
        pods(3, 5, "n3", &c, id),
    ]);
    assert!(run(json!({}), nodes, ps).is_empty());
    // A nil label selector counts nothing.
    let ps = pods(0, 4, "n1", &tsc(1, |c| c.label_selector = None), id);
    assert!(run(json!({}), zones(&["a", "b"]), ps).is_empty());
    // minDomains is ignored (as upstream): [1] over one domain stays.
    let ps = pods(0, 3, "n1", &tsc(1, |c| c.min_domains = Some(3)), id);
    assert!(run(json!({}), zones(&["a", "a"]), ps).is_empty());
}

#[test]
fn filters_and_multiple_constraints() {
    let c = tsc(1, |_| {});
    let ps = |ns: &str| -> Vec<core::Pod> {
        (0..4)
            .map(|i| {
                with_tsc(
                    pod(ns, &format!("p{i}"), "n1").label("foo", "bar"),
                    c.clone(),
                )
                .build()
            })
            .collect()
    };
    let both = || cat(vec![ps("ns1"), ps("ns2")]);
    assert_eq!(
        run(json!({}), zones(&["a", "b"]), both()),
        vec!["ns1/p2", "ns1/p3", "ns2/p2", "ns2/p3"]
    );
    assert_eq!(
        run(
            json!({"namespaces": {"exclude": ["ns1"]}}),
            zones(&["a", "b"]),
            both()
        ),
        vec!["ns2/p2", "ns2/p3"]
    );
    assert_eq!(
        run(
            json!({"namespaces": {"include": ["ns1"]}}),
            zones(&["a", "b"]),
            both()
        ),
        vec!["ns1/p2", "ns1/p3"]
    );
    // labelSelector: unselected pods are neither counted nor evicted.
    let ps = cat(vec![
        pods(0, 2, "n1", &c, |b| b.label("team", "x")),
        pods(2, 2, "n1", &c, id),
    ]);
    assert_eq!(
        run(
            json!({"labelSelector": {"matchLabels": {"team": "x"}}}),
            zones(&["a", "b"]),
            ps
        ),
        vec!["ns1/p1"]
    );
    // Two constraints (zone soft, host hard) over 6 nodes in 2 zones: one eviction.
    let nodes: Vec<core::Node> = (1..=6)
        .map(|i| {
            node(&format!("n{i}"))
                .label("zone", if i <= 3 { "a" } else { "b" })
                .build()
        })
        .collect();
    let zone = tsc(1, |c| c.when_unsatisfiable = SCHEDULE_ANYWAY.into());
    let host = tsc(1, |c| c.topology_key = "kubernetes.io/hostname".into());
    let ps: Vec<core::Pod> = (1..=4)
        .map(|i| {
            with_tsc(
                with_tsc(
                    pod("ns1", &format!("p{i}"), &format!("n{i}")).label("foo", "bar"),
                    zone.clone(),
                ),
                host.clone(),
            )
            .build()
        })
        .collect();
    let got = run(
        json!({"constraints": ["DoNotSchedule", "ScheduleAnyway"]}),
        nodes,
        ps,
    );
    assert_eq!(got.len(), 1, "{got:?}");
}

#[test]
fn big_skew_and_limits() {
    let c = tsc(1, |_| {});
    let ps = || cat(vec![pods(0, 1, "n2", &c, id), pods(1, 100, "n3", &c, id)]);
    assert_eq!(run(json!({}), zones(&["a", "b", "c"]), ps()).len(), 66);
    let plugin = RemovePodsViolatingTopologySpreadConstraint::new(Args::default()).expect("args");
    let mut s = snapshot(zones(&["a", "b", "c"]), ps());
    let r = run_profile(
        crate::testing::profile(vec![], vec![Box::new(plugin)]),
        &crate::testing::per_node_limit(5),
        &mut s,
    );
    assert_eq!(evicted_names(&r).len(), 5);
}

#[test]
fn constraint_deduplication() {
    let s = snapshot(
        zones(&["a", "b"]),
        vec![
            with_tsc(pod("ns1", "a", "n1").label("foo", "bar"), tsc(1, |_| {})).build(),
            with_tsc(pod("ns1", "b", "n1").label("foo", "bar"), tsc(1, |_| {})).build(),
            with_tsc(pod("ns1", "c", "n1").label("foo", "bar"), tsc(2, |_| {})).build(),
            with_tsc(
                pod("ns1", "d", "n1")
                    .label("foo", "bar")
                    .node_selector("zone", "a"),
                tsc(1, |_| {}),
            )
            .build(),
            with_tsc(
                pod("ns1", "e", "n1")
                    .label("foo", "bar")
                    .node_selector("zone", "a"),
                tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
            )
            .build(),
            with_tsc(
                pod("ns1", "f", "n1").label("foo", "bar"),
                tsc(1, |c| c.node_affinity_policy = Some("Ignore".into())),
            )
            .build(),
        ],
    );
    let cs: Vec<Constraint<'_>> = (0..6)
        .map(|i| {
            Constraint::new(&s.pod(i).topology_spread_constraints[0], s.pod(i)).expect("valid")
        })
        .collect();
    assert!(cs[0] == cs[1], "identical constraints");
    assert!(cs[0] != cs[2], "different maxSkew");
    assert!(cs[0] != cs[3], "Honor: node selectors differ");
    assert!(cs[4] == cs[5], "Ignore: node selectors do not matter");
}

#[test]
fn args_are_strict_validated_and_defaulted() {
    let p = RemovePodsViolatingTopologySpreadConstraint::new(Args::default()).expect("defaults");
    assert_eq!(p.constraints, vec![DO_NOT_SCHEDULE.to_string()]);
    assert!(p.node_fit);
    let p = RemovePodsViolatingTopologySpreadConstraint::new(
        crate::framework::args::decode(
            &json!({"constraints": ["ScheduleAnyway"], "topologyBalanceNodeFit": false}),
        )
        .expect("decode"),
    )
    .expect("valid");
    assert_eq!(p.constraints, vec![SCHEDULE_ANYWAY.to_string()]);
    assert!(!p.node_fit);
    let cases = [
        (json!({"bogus": 1}), "bogus"),
        (
            json!({"constraints": ["DoNotSchedule", "Sometimes"]}),
            "constraints[1]",
        ),
        (json!({"constraints": "DoNotSchedule"}), "constraints"),
        (
            json!({"topologyBalanceNodeFit": "yes"}),
            "topologyBalanceNodeFit",
        ),
        (
            json!({"namespaces": {"include": ["a"], "exclude": ["b"]}}),
            "namespaces",
        ),
        (
            json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}),
            "labelSelector",
        ),
    ];
    for (a, field) in cases {
        match build(&a) {
            Err(e) => assert_eq!(e.field, field, "{a}: {e}"),
            Ok(_) => panic!("{a} should fail"),
        }
    }
}

/// With the total limit reached before the plugin runs, namespaces are listed and balanced one
/// at a time up to the first attempt: the refusal recorded is of the pod a run without the limit
/// tries first, on a cluster with several namespaces.
#[test]
fn total_limit_already_reached_records_the_first_attempt_of_a_full_run() {
    let plugin = || -> Box<dyn crate::framework::BalancePlugin> {
        Box::new(
            RemovePodsViolatingTopologySpreadConstraint::new(
                crate::framework::args::decode(
                    &json!({"constraints": ["DoNotSchedule", "ScheduleAnyway"]}),
                )
                .expect("args"),
            )
            .expect("plugin"),
        )
    };
    let profile = || crate::testing::profile(vec![], vec![plugin()]);
    let run = |max_total| {
        let mut s = crate::testing::synthetic_snapshot(60, 2_000, 11);
        crate::framework::cycle::run_cycle(
            &[profile()],
            &CycleConfig {
                max_total,
                ..Default::default()
            },
            &mut s,
            crate::testing::now(),
            Box::new(crate::evictor::planner::PlanBackend::new()),
        )
        .0
    };
    let full = run(None);
    let first = full
        .records
        .first()
        .expect("the synthetic cluster has skewed spreads");
    let limited = run(Some(0));
    assert!(limited.records.is_empty());
    assert_eq!(limited.limit_hits.len(), 1, "{:?}", limited.limit_hits);
    let hit = &limited.limit_hits[0];
    let s = crate::testing::synthetic_snapshot(60, 2_000, 11);
    let first_pod = s.pod(first.pod);
    assert_eq!(
        (&*hit.namespace, hit.name.as_str()),
        (&*first_pod.namespace, first_pod.name.as_str())
    );
    let namespaces: std::collections::BTreeSet<&str> = full
        .records
        .iter()
        .map(|r| &*s.pod(r.pod).namespace)
        .collect();
    assert!(namespaces.len() >= 2, "several namespaces evicted from");
}

mod balancing;
mod node_fit;
