//! Placeholder for the controllers module (owned by another engineer; replaced on merge).
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::{Node, Pod},
    policy::v1::PodDisruptionBudget,
};

pub struct ClusterState {
    pub now: jiff::Timestamp,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub replica_sets: Vec<ReplicaSet>,
    pub deployments: Vec<Deployment>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub config: SimConfig,
}

#[derive(Clone, Debug, Default)]
pub struct SimConfig {
    pub pod_start_delay_seconds: f64,
    pub crashing_images: Vec<String>,
    pub stopped_nodes: Vec<String>,
}

pub enum Action {
    Create(serde_json::Value),
    Update(serde_json::Value),
    Delete {
        api_version: String,
        kind: String,
        namespace: Option<String>,
        name: String,
        uid: String,
    },
}

pub fn reconcile_all(_state: &ClusterState) -> Vec<Action> {
    Vec::new()
}
