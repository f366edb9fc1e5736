//! Node taints and node fit: `nodeTaintsPolicy` and `topologyBalanceNodeFit`.

use super::*;

fn tainted_zones() -> Vec<core::Node> {
    vec![
        node("n1").label("zone", "a").build(),
        node("n2")
            .label("zone", "b")
            .taint("dedicated", Some("x"), "NoSchedule")
            .build(),
    ]
}

#[test]
fn node_taints_policy() {
    let honor = tsc(1, |c| c.node_taints_policy = Some("Honor".into()));
    let cases: Vec<(&str, serde_json::Value, Vec<core::Pod>, Vec<&str>)> = vec![
        (
            "Ignore (default): tainted zone counts, pod must tolerate to move",
            json!({}),
            pods(0, 2, "n1", &tsc(1, |_| {}), id),
            vec![],
        ),
        (
            "Ignore without topologyBalanceNodeFit: evicts anyway",
            json!({"topologyBalanceNodeFit": false}),
            pods(0, 2, "n1", &tsc(1, |_| {}), id),
            vec!["ns1/p1"],
        ),
        (
            "Ignore, pod tolerates the taint",
            json!({}),
            pods(0, 2, "n1", &tsc(1, |_| {}), |b| {
                b.toleration("dedicated", "Exists", None, None)
            }),
            vec!["ns1/p1"],
        ),
        (
            "Honor: untolerated zone is no domain",
            json!({"topologyBalanceNodeFit": false}),
            pods(0, 2, "n1", &honor, id),
            vec![],
        ),
        (
            "Honor: tolerated zone is a domain",
            json!({}),
            pods(0, 2, "n1", &honor, |b| {
                b.toleration("dedicated", "Equal", Some("x"), Some("NoSchedule"))
            }),
            vec!["ns1/p1"],
        ),
    ];
    for (name, args, pods, want) in cases {
        assert_eq!(run(args, tainted_zones(), pods), want, "{name}");
    }
    // PreferNoSchedule never excludes a node.
    let soft = vec![
        node("n1").label("zone", "a").build(),
        node("n2")
            .label("zone", "b")
            .taint("soft", None, "PreferNoSchedule")
            .build(),
    ];
    assert_eq!(
        run(json!({}), soft, pods(0, 2, "n1", &honor, id)),
        vec!["ns1/p1"]
    );
}

#[test]
fn topology_balance_node_fit() {
    // [2,3,4]: zone a has no cpu left, so the pod that should move fits nowhere below average.
    let nodes = || {
        vec![
            node("n1")
                .label("zone", "a")
                .allocatable("250m", "16Gi", "110")
                .build(),
            node("n2").label("zone", "b").build(),
            node("n3").label("zone", "c").build(),
        ]
    };
    let c = tsc(1, |_| {});
    let ps = || {
        cat(vec![
            pods(0, 2, "n1", &c, id),
            pods(2, 3, "n2", &c, id),
            pods(5, 4, "n3", &c, id),
        ])
    };
    assert_eq!(run(json!({}), nodes(), ps()), Vec::<String>::new());
    assert_eq!(
        run(json!({"topologyBalanceNodeFit": false}), nodes(), ps()),
        vec!["ns1/p8"]
    );
    // [[1,4],[2,1]] over two nodes per zone: one pod moves to zone b.
    let nodes = vec![
        node("a1").label("zone", "a").build(),
        node("a2").label("zone", "a").build(),
        node("b1").label("zone", "b").build(),
        node("b2").label("zone", "b").build(),
    ];
    let ps = cat(vec![
        pods(0, 1, "a1", &c, id),
        pods(1, 4, "a2", &c, id),
        pods(5, 2, "b1", &c, id),
        pods(7, 1, "b2", &c, id),
    ]);
    assert_eq!(
        run_with(json!({}), json!({"nodeFit": true}), nodes, ps),
        vec!["ns1/p4"]
    );
}
