//! kube-descheduler: an upstream-compatible Kubernetes descheduler with an eviction guard.
//!
//! The crate is organised by architecture, in layers (a module imports only from those listed
//! after it):
//! - [`cli`]: the command line.
//! - `live`: the `run` loop against a cluster (watch caches, evictions, events).
//! - `plan`: the offline `plan` report.
//! - `policy`: the `DeschedulerPolicy` file (v1alpha2, v1alpha1 conversion), strict decoding.
//! - [`testing`]: builders and one-call plugin runs for tests and benchmarks.
//! - `plugins`: a folder per plugin (plugin, args, tests), a file for small ones, plus the
//!   DefaultEvictor.
//! - `serving`: TLS serving, metrics, health and the trigger interface and API.
//! - `framework`: plugin traits, registry, profiles and the descheduling cycle.
//! - `guard`: the eviction guard's decision function and admission webhook.
//! - `evictor`: eviction limits and the planning / live evictors.
//! - `placement`: the placement simulator: where kube-scheduler would put an evicted pod's replacement.
//! - `scheduling`: scheduler predicates shared by plugins and `nodeFit` (taints, affinity, fit).
//! - `restart`: the rollout-restart actor that owns every Deployment write.
//! - `snapshot`: the engine's lean, indexed view of a cluster (from a file or from watch caches).
//! - `workload`: workload facts (Pods, Deployments, ReplicaSets, PDBs, PVCs) and annotation keys,
//!   read by the snapshot and the guard.
//! - `leader`: Lease-based leader election.
//! - `duration`, `quantity`, `error`, `synth`: Go durations, Kubernetes quantities, the
//!   configuration error, the synthetic cluster generator.
//!
//! `apicalls` lists the API calls each component makes.
//!
//! **The public API** is [`plugin`] (traits, handle, snapshot read API, registry, args helpers)
//! and [`cli::main_with`], for programs that add their own plugins and run the stock CLI; it
//! follows the crate's semver. [`testing`] (snapshot builders, one-call plugin runs) is offered
//! for plugin tests without that promise. Every other module is `pub` only because the crate's
//! own integration tests, benches and example crates use it: it is hidden from the
//! documentation (`#[doc(hidden)]`) and may change in any release.

#[doc(hidden)]
pub mod apicalls;
pub mod cli;
#[doc(hidden)]
pub mod duration;
#[doc(hidden)]
pub mod error;
#[doc(hidden)]
pub mod evictor;
#[doc(hidden)]
pub mod framework;
#[doc(hidden)]
pub mod guard;
#[doc(hidden)]
pub mod leader;
#[doc(hidden)]
pub mod live;
#[doc(hidden)]
pub mod peer;
#[doc(hidden)]
pub mod placement;
#[doc(hidden)]
pub mod plan;
pub mod plugin;
#[doc(hidden)]
pub mod plugins;
#[doc(hidden)]
pub mod policy;
#[doc(hidden)]
pub mod quantity;
#[doc(hidden)]
pub mod restart;
#[doc(hidden)]
pub mod scheduling;
#[doc(hidden)]
pub mod serving;
#[doc(hidden)]
pub mod snapshot;
#[doc(hidden)]
pub mod synth;
pub mod testing;
#[doc(hidden)]
pub mod usage;
#[doc(hidden)]
pub mod wasm;
#[doc(hidden)]
pub mod workload;
