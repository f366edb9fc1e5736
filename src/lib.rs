//! kube-descheduler: an upstream-compatible Kubernetes descheduler with an eviction guard.
//!
//! The crate is organised by architecture:
//! - [`policy`]: the `DeschedulerPolicy` file (v1alpha2, v1alpha1 conversion), strict decoding.
//! - [`snapshot`]: the engine's lean, indexed view of a cluster (from a file or from watch caches).
//! - [`scheduling`]: scheduler predicates shared by plugins and `nodeFit` (taints, affinity, fit).
//! - [`framework`]: plugin traits, registry, profiles and the descheduling cycle.
//! - [`plugins`]: one file per plugin, plus the DefaultEvictor.
//! - [`evictor`]: eviction limits and the planning / live evictors.
//! - [`guard`]: the eviction guard's decision function and admission webhook.
//! - [`restart`]: the rollout-restart actor that owns every Deployment write.
//! - [`serving`]: TLS serving, metrics, health and the trigger API.
//! - [`leader`]: Lease-based leader election.
//! - [`live`]: the `run` loop against a cluster (watch caches, evictions, events).
//! - [`plan`]: the offline `plan` report.
//! - [`cli`]: the command line.

pub mod apicalls;
pub mod cli;
pub mod error;
pub mod evictor;
pub mod framework;
pub mod guard;
pub mod leader;
pub mod live;
pub mod plan;
pub mod plugins;
pub mod policy;
pub mod quantity;
pub mod restart;
pub mod scheduling;
pub mod serving;
pub mod snapshot;
pub mod synth;
pub mod usage;
