//! kube-descheduler: an upstream-compatible Kubernetes descheduler with an eviction guard.
//!
//! The crate is organised by architecture, in layers (a module imports only from those listed
//! after it):
//! - [`cli`]: the command line.
//! - [`live`]: the `run` loop against a cluster (watch caches, evictions, events).
//! - [`plan`]: the offline `plan` report.
//! - [`policy`]: the `DeschedulerPolicy` file (v1alpha2, v1alpha1 conversion), strict decoding.
//! - [`testing`]: builders and one-call plugin runs for tests and benchmarks.
//! - [`plugins`]: a folder per plugin (plugin, args, tests), a file for small ones, plus the
//!   DefaultEvictor.
//! - [`serving`]: TLS serving, metrics, health and the trigger interface and API.
//! - [`framework`]: plugin traits, registry, profiles and the descheduling cycle.
//! - [`guard`]: the eviction guard's decision function and admission webhook.
//! - [`evictor`]: eviction limits and the planning / live evictors.
//! - [`placement`]: the placement simulator: where kube-scheduler would put an evicted pod's replacement.
//! - [`scheduling`]: scheduler predicates shared by plugins and `nodeFit` (taints, affinity, fit).
//! - [`restart`]: the rollout-restart actor that owns every Deployment write.
//! - [`snapshot`]: the engine's lean, indexed view of a cluster (from a file or from watch caches).
//! - [`workload`]: workload facts (Pods, Deployments, ReplicaSets, PDBs, PVCs) and annotation keys,
//!   read by the snapshot and the guard.
//! - [`leader`]: Lease-based leader election.
//! - [`duration`], [`quantity`], [`error`], [`synth`]: Go durations, Kubernetes quantities, the
//!   configuration error, the synthetic cluster generator.
//!
//! [`apicalls`] lists the API calls each component makes.
//!
//! [`plugin`] is the plugin API (the stable part of the crate: traits, handle, snapshot read API,
//! registry, args helpers), for programs that add their own plugins and run the CLI with
//! [`cli::main_with`].

pub mod apicalls;
pub mod cli;
pub mod duration;
pub mod error;
pub mod evictor;
pub mod framework;
pub mod guard;
pub mod leader;
pub mod live;
pub mod peer;
pub mod placement;
pub mod plan;
pub mod plugin;
pub mod plugins;
pub mod policy;
pub mod quantity;
pub mod restart;
pub mod scheduling;
pub mod serving;
pub mod snapshot;
pub mod synth;
pub mod testing;
pub mod usage;
pub mod wasm;
pub mod workload;
