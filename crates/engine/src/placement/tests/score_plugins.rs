//! The Score plugins on a crafted cluster.

use super::*;

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
