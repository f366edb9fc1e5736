//! Unit tables for the placement simulator: each Score plugin's arithmetic with kube-scheduler's
//! documented examples, each Filter plugin on a crafted cluster, the ping-pong scenario
//! (HighNodeUtilization empties nodes that LeastAllocated scoring refills), the incremental
//! state, and the scheduler configuration's strict decoding — one sub-module each; the cluster
//! helpers here are shared by them.

use super::predict::{Caches, predict};
use super::profile::{SchedulerProfile, ScoringStrategy};
use super::score::*;
use super::state::ClusterState;
use super::*;
use crate::testing::{node, pod, snapshot};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn names(s: &crate::snapshot::Snapshot, ids: &[crate::snapshot::NodeId]) -> Vec<String> {
    ids.iter().map(|&n| s.node(n).name.clone()).collect()
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

mod configuration;
mod filters;
mod ping_pong;
mod score_math;
mod score_plugins;
