//! Fetching measured usage for the utilization plugins: metrics.k8s.io through the cluster's
//! client, Prometheus instant queries over HTTPS, and the per-cycle collector that keeps
//! upstream's smoothing state. The data types and wire decoding are the engine's
//! ([`kube_descheduler_engine::usage`]).

pub mod collector;
pub mod kube_source;
pub mod prometheus;

pub use kube_descheduler_engine::usage::*;
