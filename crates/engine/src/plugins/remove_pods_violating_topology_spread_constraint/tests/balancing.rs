//! The balancing table: which pods the plugin evicts, by subject of the cases.

use super::*;

/// One case of `balancing_table`: its name, the plugin's args, the nodes, the pods, and the pods
/// evicted, in order.
type Case = (
    &'static str,
    serde_json::Value,
    Vec<core::Node>,
    Vec<core::Pod>,
    Vec<&'static str>,
);

/// Domains of different sizes against maxSkew 1 and 2.
fn skew_cases() -> Vec<Case> {
    let c1 = tsc(1, |_| {});
    let none = json!({});
    vec![
        (
            "[2,1] maxSkew 1: balanced",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![pods(0, 2, "n1", &c1, id), pods(2, 1, "n2", &c1, id)]),
            vec![],
        ),
        (
            "[3,1]: move 1 (the last pod of the big domain)",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![pods(0, 3, "n1", &c1, id), pods(3, 1, "n2", &c1, id)]),
            vec!["ns1/p2"],
        ),
        (
            "[3,1] maxSkew 2: within skew",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![
                pods(0, 3, "n1", &tsc(2, |_| {}), id),
                pods(3, 1, "n2", &tsc(2, |_| {}), id),
            ]),
            vec![],
        ),
        (
            "[4,0]: move 2",
            none.clone(),
            zones(&["a", "b"]),
            pods(0, 4, "n1", &c1, id),
            vec!["ns1/p2", "ns1/p3"],
        ),
        (
            "[5,2]: move 1",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![pods(0, 5, "n1", &c1, id), pods(5, 2, "n2", &c1, id)]),
            vec!["ns1/p4"],
        ),
        (
            "[0,1,3,5]: move 3",
            none.clone(),
            zones(&["a", "b", "c", "d"]),
            cat(vec![
                pods(0, 1, "n2", &c1, id),
                pods(1, 3, "n3", &c1, id),
                pods(4, 5, "n4", &c1, id),
            ]),
            vec!["ns1/p7", "ns1/p8", "ns1/p6"],
        ),
        (
            "[2,6] maxSkew 2: move 1",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![
                pods(0, 2, "n1", &tsc(2, |_| {}), id),
                pods(2, 6, "n2", &tsc(2, |_| {}), id),
            ]),
            vec!["ns1/p7"],
        ),
    ]
}

/// Hard and soft constraints, and which the `constraints` arg enables.
fn when_unsatisfiable_cases() -> Vec<Case> {
    let c1 = tsc(1, |_| {});
    let none = json!({});
    vec![
        (
            "soft constraint ignored by default",
            none.clone(),
            zones(&["a", "b"]),
            pods(
                0,
                4,
                "n1",
                &tsc(1, |c| c.when_unsatisfiable = SCHEDULE_ANYWAY.into()),
                id,
            ),
            vec![],
        ),
        (
            "soft constraint balanced when enabled",
            json!({"constraints": ["ScheduleAnyway"]}),
            zones(&["a", "b"]),
            pods(
                0,
                4,
                "n1",
                &tsc(1, |c| c.when_unsatisfiable = SCHEDULE_ANYWAY.into()),
                id,
            ),
            vec!["ns1/p2", "ns1/p3"],
        ),
        (
            "hard constraint ignored when only ScheduleAnyway is enabled",
            json!({"constraints": ["ScheduleAnyway"]}),
            zones(&["a", "b"]),
            pods(0, 4, "n1", &c1, id),
            vec![],
        ),
    ]
}

/// Which pods of a domain go first.
fn eviction_order_cases() -> Vec<Case> {
    let c1 = tsc(1, |_| {});
    let none = json!({});
    vec![
        (
            "pods with nodeSelector/affinity go last and must fit elsewhere",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![
                pods(0, 2, "n1", &c1, |b| b.node_selector("zone", "a")),
                pods(2, 1, "n1", &c1, |b| b.affinity(affinity_zone_in(&["a"]))),
                pods(3, 1, "n1", &c1, id),
            ]),
            vec!["ns1/p3"],
        ),
        (
            "highest priority of the plain pods goes first (upstream order)",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![
                pods(0, 1, "n1", &c1, |b| b.priority(100)),
                pods(1, 1, "n1", &c1, |b| b.priority(5)),
                pods(2, 1, "n1", &c1, |b| b.priority(50)),
                pods(3, 1, "n2", &c1, id),
            ]),
            vec!["ns1/p0"],
        ),
    ]
}

/// `matchLabelKeys`: a constraint per value of the keys.
fn match_label_keys_cases() -> Vec<Case> {
    let none = json!({});
    vec![
        (
            "matchLabelKeys: same hash counted together",
            none.clone(),
            zones(&["a", "b"]),
            pods(
                0,
                2,
                "n1",
                &tsc(1, |c| {
                    c.match_label_keys = Some(vec!["pod-template-hash".into()])
                }),
                |b| b.label("pod-template-hash", "h1"),
            ),
            vec!["ns1/p1"],
        ),
        (
            "matchLabelKeys: different hashes are separate constraints",
            none.clone(),
            zones(&["a", "b"]),
            cat(vec![
                pods(
                    0,
                    1,
                    "n1",
                    &tsc(1, |c| {
                        c.match_label_keys = Some(vec!["pod-template-hash".into()])
                    }),
                    |b| b.label("pod-template-hash", "h1"),
                ),
                pods(
                    1,
                    1,
                    "n1",
                    &tsc(1, |c| {
                        c.match_label_keys = Some(vec!["pod-template-hash".into()])
                    }),
                    |b| b.label("pod-template-hash", "h2"),
                ),
            ]),
            vec![],
        ),
    ]
}

/// `nodeAffinityPolicy` and `topologyBalanceNodeFit`: which zones are domains, and where a pod fits.
fn node_affinity_policy_cases() -> Vec<Case> {
    let c1 = tsc(1, |_| {});
    let none = json!({});
    // Two pods in zone a, one in zone b, all required to stay in a or b; the constraint ignores
    // that affinity when counting domains.
    let ignored_affinity = || {
        let tsc_ignore = tsc(1, |c| c.node_affinity_policy = Some("Ignore".into()));
        cat(vec![
            pods(0, 2, "n1", &tsc_ignore, |b| {
                b.affinity(affinity_zone_in(&["a", "b"]))
            }),
            pods(2, 1, "n2", &tsc_ignore, |b| {
                b.affinity(affinity_zone_in(&["a", "b"]))
            }),
        ])
    };
    vec![
        (
            "nodeAffinityPolicy Honor: excluded zone is no domain",
            json!({"topologyBalanceNodeFit": false}),
            zones(&["a", "b", "c"]),
            cat(vec![
                pods(0, 2, "n1", &c1, |b| {
                    b.affinity(affinity_zone_in(&["a", "b"]))
                }),
                pods(2, 1, "n2", &c1, |b| {
                    b.affinity(affinity_zone_in(&["a", "b"]))
                }),
            ]),
            vec![],
        ),
        (
            "nodeAffinityPolicy Ignore: every zone is a domain",
            json!({"topologyBalanceNodeFit": false}),
            zones(&["a", "b", "c"]),
            ignored_affinity(),
            vec!["ns1/p1"],
        ),
        (
            "nodeAffinityPolicy Ignore, topologyBalanceNodeFit: the pod fits no node of zone c",
            none.clone(),
            zones(&["a", "b", "c"]),
            ignored_affinity(),
            vec![],
        ),
    ]
}

#[test]
fn balancing_table() {
    let cases = [
        skew_cases(),
        when_unsatisfiable_cases(),
        eviction_order_cases(),
        match_label_keys_cases(),
        node_affinity_policy_cases(),
    ]
    .into_iter()
    .flatten();
    for (name, args, nodes, pods, want) in cases {
        assert_eq!(run(args, nodes, pods), want, "{name}");
    }
}
