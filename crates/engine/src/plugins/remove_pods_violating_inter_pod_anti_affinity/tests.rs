use super::*;
use crate::evictor::EvictionRecord;
use crate::framework::Plugin;
use crate::framework::cycle::CycleConfig;
use crate::plugins::default_evictor::DefaultEvictor;
use crate::testing::{PodBuilder, evicted_names, node, pod, run_deschedule, run_profile, snapshot};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

fn term(labels: &[(&str, &str)], key: &str, namespaces: &[&str]) -> core::PodAffinityTerm {
    core::PodAffinityTerm {
        namespaces: (!namespaces.is_empty())
            .then(|| namespaces.iter().map(|n| n.to_string()).collect()),
        ..crate::testing::affinity_term(labels, key)
    }
}

fn anti(terms: Vec<core::PodAffinityTerm>) -> core::Affinity {
    crate::testing::required_anti_affinity(terms)
}

fn preferred_only() -> core::Affinity {
    core::Affinity {
        pod_anti_affinity: Some(core::PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                core::WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: term(&[("app", "db")], "kubernetes.io/hostname", &[]),
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

const HOST: &str = "kubernetes.io/hostname";

/// Pod `ns/a` on n1 that refuses `app=db` pods in its `key` domain (of `namespaces`, else its own).
fn a_apart_from_db(key: &str, namespaces: &[&str]) -> PodBuilder {
    let term = term(&[("app", "db")], key, namespaces);
    pod("ns", "a", "n1").affinity(anti(vec![term]))
}

/// A pod `ns/name` on `node` labelled `app=db` that refuses other `app=db` pods on its host.
fn db(ns: &str, name: &str, node: &str) -> PodBuilder {
    pod(ns, name, node)
        .label("app", "db")
        .affinity(anti(vec![term(&[("app", "db")], HOST, &[])]))
}

fn run(
    args: serde_json::Value,
    evictor: serde_json::Value,
    nodes: Vec<core::Node>,
    pods: Vec<core::Pod>,
) -> Vec<String> {
    let Plugin::Deschedule(plugin) = build(&args).expect("args") else {
        panic!("not a Deschedule plugin");
    };
    let ev = DefaultEvictor::from_args(&evictor).expect("evictor args");
    let mut s = snapshot(nodes, pods);
    evicted_names(&run_deschedule(plugin, ev, &mut s))
}

fn nodes2() -> Vec<core::Node> {
    crate::testing::zoned_nodes(&[("n1", "a"), ("n2", "a"), ("n3", "b")])
}

/// name, plugin args, DefaultEvictor args, pods, evicted pods in order.
type Case = (
    &'static str,
    serde_json::Value,
    serde_json::Value,
    Vec<core::Pod>,
    Vec<&'static str>,
);

/// Which pods conflict, and which of two conflicting pods goes.
fn conflict_cases() -> Vec<Case> {
    let none = json!({});
    vec![
        (
            "no anti-affinity: nothing",
            none.clone(),
            none.clone(),
            vec![
                pod("ns", "a", "n1").label("app", "db").build(),
                pod("ns", "b", "n1").label("app", "db").build(),
            ],
            vec![],
        ),
        (
            "two conflicting pods: only the first is evicted, the second no longer conflicts",
            none.clone(),
            none.clone(),
            vec![db("ns", "a", "n1").build(), db("ns", "b", "n1").build()],
            vec!["ns/a"],
        ),
        (
            "lowest priority first",
            none.clone(),
            none.clone(),
            vec![
                db("ns", "high", "n1").priority(100).build(),
                db("ns", "low", "n1").priority(1).build(),
            ],
            vec!["ns/low"],
        ),
        (
            "only the pod with the term is a candidate",
            none.clone(),
            none.clone(),
            vec![
                pod("ns", "plain", "n1")
                    .label("app", "db")
                    .priority(1)
                    .build(),
                db("ns", "strict", "n1").priority(100).build(),
            ],
            vec!["ns/strict"],
        ),
    ]
}

/// The term's topology key: the same node, the same zone, a node lacking the key.
fn topology_cases() -> Vec<Case> {
    let none = json!({});
    vec![
        (
            "different nodes, hostname key: no conflict",
            none.clone(),
            none.clone(),
            vec![db("ns", "a", "n1").build(), db("ns", "b", "n2").build()],
            vec![],
        ),
        (
            "zone key: same zone on another node conflicts",
            none.clone(),
            none.clone(),
            vec![
                a_apart_from_db("zone", &[]).label("app", "db").build(),
                pod("ns", "b", "n2").label("app", "db").build(),
            ],
            vec!["ns/a"],
        ),
        (
            "zone key: other zone does not conflict",
            none.clone(),
            none.clone(),
            vec![
                a_apart_from_db("zone", &[]).label("app", "db").build(),
                pod("ns", "b", "n3").label("app", "db").build(),
            ],
            vec![],
        ),
        (
            "same node lacking the key still conflicts",
            none.clone(),
            none.clone(),
            vec![
                a_apart_from_db("rack", &[]).build(),
                pod("ns", "b", "n1").label("app", "db").build(),
            ],
            vec!["ns/a"],
        ),
    ]
}

/// The namespaces a term selects.
fn namespace_cases() -> Vec<Case> {
    let none = json!({});
    vec![
        (
            "other namespace is not selected by default",
            none.clone(),
            none.clone(),
            vec![
                db("ns", "a", "n1").build(),
                pod("other", "b", "n1").label("app", "db").build(),
            ],
            vec![],
        ),
        (
            "term namespaces select the other namespace",
            none.clone(),
            none.clone(),
            vec![
                a_apart_from_db(HOST, &["other"]).build(),
                pod("other", "b", "n1").label("app", "db").build(),
            ],
            vec!["ns/a"],
        ),
    ]
}

/// Preferred terms are ignored; which pods count as the other side of a conflict.
fn other_side_cases() -> Vec<Case> {
    let none = json!({});
    vec![
        (
            "preferred anti-affinity is ignored",
            none.clone(),
            none.clone(),
            vec![
                pod("ns", "a", "n1")
                    .label("app", "db")
                    .affinity(preferred_only())
                    .build(),
                pod("ns", "b", "n1").label("app", "db").build(),
            ],
            vec![],
        ),
        (
            "unevictable pods count as the other side but are not evicted",
            none.clone(),
            none.clone(),
            vec![
                db("ns", "bare", "n1").bare().priority(1).build(),
                db("ns", "b", "n1").priority(5).build(),
            ],
            vec!["ns/b"],
        ),
        (
            "terminal pods are not the other side",
            none.clone(),
            none.clone(),
            vec![
                db("ns", "a", "n1").build(),
                pod("ns", "done", "n1")
                    .label("app", "db")
                    .phase("Succeeded")
                    .build(),
            ],
            vec![],
        ),
    ]
}

/// The plugin's args: namespaces, labelSelector and nodeFit.
fn args_cases() -> Vec<Case> {
    let none = json!({});
    vec![
        (
            "namespaces.exclude hides candidates and the other side",
            json!({"namespaces": {"exclude": ["other"]}}),
            none.clone(),
            vec![
                a_apart_from_db(HOST, &["other"]).build(),
                pod("other", "b", "n1").label("app", "db").build(),
            ],
            vec![],
        ),
        (
            "namespaces.include",
            json!({"namespaces": {"include": ["ns2"]}}),
            none.clone(),
            vec![
                db("ns", "a", "n1").build(),
                db("ns", "b", "n1").build(),
                db("ns2", "c", "n2").build(),
                db("ns2", "d", "n2").build(),
            ],
            vec!["ns2/c"],
        ),
        (
            "labelSelector limits candidates and the other side",
            json!({"labelSelector": {"matchLabels": {"team": "x"}}}),
            none.clone(),
            vec![
                db("ns", "a", "n1").label("team", "x").build(),
                db("ns", "b", "n1").build(),
            ],
            vec![],
        ),
        (
            "labelSelector selecting both",
            json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
            none.clone(),
            vec![db("ns", "a", "n1").build(), db("ns", "b", "n1").build()],
            vec!["ns/a"],
        ),
        (
            "nodeFit: no other node fits, nothing evicted",
            none.clone(),
            json!({"nodeFit": true}),
            vec![
                db("ns", "a", "n1")
                    .node_selector("kubernetes.io/hostname", "n1")
                    .build(),
                db("ns", "b", "n1")
                    .node_selector("kubernetes.io/hostname", "n1")
                    .build(),
            ],
            vec![],
        ),
    ]
}

#[test]
fn evictions_table() {
    let cases = [
        conflict_cases(),
        topology_cases(),
        namespace_cases(),
        other_side_cases(),
        args_cases(),
    ]
    .into_iter()
    .flatten();
    for (name, args, ev, pods, want) in cases {
        assert_eq!(run(args, ev, nodes2(), pods), want, "{name}");
    }
}

#[test]
fn node_limit_moves_to_next_node_and_total_limit_stops() {
    let pods = || {
        vec![
            db("ns", "a1", "n1").build(),
            db("ns", "a2", "n1").build(),
            db("ns", "a3", "n1").build(),
            db("ns", "b1", "n2").build(),
            db("ns", "b2", "n2").build(),
        ]
    };
    let profile = || {
        crate::testing::profile(
            vec![Box::new(
                RemovePodsViolatingInterPodAntiAffinity::new(Args::default()).expect("args"),
            )],
            vec![],
        )
    };
    let go = |cfg: CycleConfig| -> Vec<String> {
        let mut s = snapshot(nodes2(), pods());
        let r: Vec<EvictionRecord> = run_profile(profile(), &cfg, &mut s);
        evicted_names(&r)
    };
    assert_eq!(go(CycleConfig::default()), vec!["ns/a1", "ns/a2", "ns/b1"]);
    assert_eq!(
        go(crate::testing::per_node_limit(1)),
        vec!["ns/a1", "ns/b1"]
    );
    assert_eq!(go(crate::testing::total_limit(1)), vec!["ns/a1"]);
}

#[test]
fn invalid_term_selector_is_no_violation() {
    let bad = core::PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "app".into(),
                    operator: "Bogus".into(),
                    values: None,
                },
            ]),
            ..Default::default()
        }),
        topology_key: HOST.into(),
        ..Default::default()
    };
    let pods = vec![
        pod("ns", "a", "n1")
            .label("app", "db")
            .affinity(anti(vec![bad, term(&[("app", "db")], HOST, &[])]))
            .build(),
        pod("ns", "b", "n1").label("app", "db").build(),
    ];
    assert!(run(json!({}), json!({}), nodes2(), pods).is_empty());
}

#[test]
fn args_are_strict_and_validated() {
    assert!(build(&serde_json::Value::Null).is_ok());
    let cases = [
        (json!({"bogus": 1}), "bogus"),
        (
            json!({"namespaces": {"include": ["a"], "exclude": ["b"]}}),
            "namespaces",
        ),
        (
            json!({"namespaces": {"includ": ["a"]}}),
            "namespaces.includ",
        ),
        (
            json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
            "labelSelector",
        ),
        (json!({"labelSelector": "app=x"}), "labelSelector"),
    ];
    for (args, field) in cases {
        match build(&args) {
            Err(e) => assert_eq!(e.field, field, "{args}: {e}"),
            Ok(_) => panic!("{args} should fail"),
        }
    }
    let e = build(&json!({"bogus": 1})).err().map(|e| e.message);
    assert!(e.is_some_and(|m| m.contains("bogus")));
}

/// `--explain` names each term, its domain and the pods counted there, or the pod it selects.
#[test]
fn explain_names_the_term_and_what_it_found() {
    let s = snapshot(
        vec![
            node("n1").label("zone", "a").build(),
            node("n2").label("zone", "a").build(),
            node("n3").label("zone", "b").build(),
        ],
        vec![
            // Alone with a web pod on n1: nothing matches on its host; in zone a, db-2 matches.
            pod("ns", "db-1", "n1")
                .label("app", "db")
                .affinity(anti(vec![
                    term(&[("app", "db")], HOST, &[]),
                    term(&[("app", "db")], "zone", &[]),
                ]))
                .build(),
            pod("ns", "web", "n1").label("app", "web").build(),
            pod("ns", "db-2", "n2").label("app", "db").build(),
            // n3 has no rack label: the domain is its own node, with nobody else there.
            pod("ns", "rack-1", "n3")
                .label("app", "db")
                .affinity(anti(vec![term(&[("app", "db")], "rack", &[])]))
                .build(),
            pod("other", "db-x", "n3")
                .label("app", "db")
                .affinity(anti(vec![term(&[("app", "db")], HOST, &[])]))
                .build(),
        ],
    );
    let Plugin::Deschedule(plugin) =
        build(&json!({"namespaces": {"include": ["ns"]}})).expect("args")
    else {
        panic!("not a Deschedule plugin");
    };
    let nodes: Vec<NodeId> = (0..s.nodes.len() as NodeId).collect();
    let explain = |name: &str| {
        let id = s
            .pods
            .iter()
            .position(|p| p.name == name)
            .unwrap_or_else(|| panic!("no pod {name}")) as PodId;
        plugin
            .explain_pod(&s, id, &nodes, crate::testing::now())
            .unwrap_or_default()
    };
    assert_eq!(
        explain("db-1"),
        "term 1 (topologyKey kubernetes.io/hostname): none of the 1 other pods in kubernetes.io/hostname=n1 matches; \
         term 2 (topologyKey zone) selects ns/db-2 on n2 in zone=a, yet it was not evicted (the DefaultEvictor or a limit stopped it, or that pod was evicted first)"
    );
    assert_eq!(
        explain("rack-1"),
        "term 1 (topologyKey rack): none of the 0 other pods in n3 (no rack label) matches"
    );
    assert_eq!(
        explain("db-x"),
        "it is excluded by the plugin's namespaces / labelSelector"
    );
    assert_eq!(explain("web"), "it has no required pod anti-affinity terms");
}
