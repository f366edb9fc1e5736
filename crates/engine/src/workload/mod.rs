//! Workload facts: the cluster-model view of Pods, Deployments, ReplicaSets, PodDisruptionBudgets
//! and PersistentVolumeClaims that both the snapshot and the eviction guard read, plus the
//! annotation keys kube-descheduler reads and writes.
//!
//! This is the bottom layer: it imports nothing from the rest of the crate.

pub mod annotations;
pub mod facts;

pub use facts::{DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts};
