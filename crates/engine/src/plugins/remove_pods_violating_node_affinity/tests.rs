//! RemovePodsViolatingNodeAffinity unit tests.

use super::*;
use crate::plugins::default_evictor::DefaultEvictor;
use crate::testing::{node, pod, run_deschedule, snapshot};
use k8s_openapi::api::core::v1 as core;
use serde_json::json;

fn prefers(weights: &[(&str, i32)]) -> core::Affinity {
    let terms: Vec<serde_json::Value> = weights
        .iter()
        .map(|(zone, w)| json!({"weight": w, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}}))
        .collect();
    match serde_json::from_value(
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}),
    ) {
        Ok(a) => a,
        Err(e) => panic!("affinity: {e}"),
    }
}

#[test]
fn preferred_affinity_reason_names_both_scores() {
    // On n1 (zone a) the pod scores 3; n2 (zone b) scores 10 + 4 = 14 is the best node.
    let mut snap = snapshot(
        vec![
            node("n1").label("zone", "a").build(),
            node("n2").label("zone", "b").build(),
        ],
        vec![
            pod("shop", "web", "n1")
                .affinity(prefers(&[("a", 3), ("b", 10), ("b", 4)]))
                .build(),
        ],
    );
    let plugin = match RemovePodsViolatingNodeAffinity::new(Args {
        node_affinity_type: vec![PREFERRED.to_string()],
        ..Args::default()
    }) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let records = run_deschedule(Box::new(plugin), DefaultEvictor::default(), &mut snap);
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0].reason;
    assert_eq!(r.code, "NodeAffinityPreferred");
    assert_eq!(
        r.text,
        "preferred node affinity score 3 on n1 < 14 on another node"
    );
    assert_eq!(r.detail.text("node"), Some("n1"));
    assert_eq!(r.detail.int("score"), Some(3));
    assert_eq!(r.detail.int("bestScore"), Some(14));
    assert_eq!(
        serde_json::to_value(&r.detail).ok(),
        Some(json!({"node": "n1", "score": 3, "bestScore": 14}))
    );
}
