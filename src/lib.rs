//! kube-descheduler: an upstream-compatible Kubernetes descheduler with an eviction guard.
//!
//! This is the binary crate, the top layer. The layers below are crates of their own, so the
//! compiler enforces what may import what:
//! - `kube_descheduler_engine`: pure computation over a cluster snapshot — policy,
//!   snapshot, plugins, evictor, placement simulator, WebAssembly host, and the plugin API.
//! - `kube_descheduler_guard`: the eviction guard's decision, the rollout-restart
//!   actor, its watch caches and the admission webhook server.
//!
//! This crate's own modules:
//! - [`cli`]: the command line.
//! - `cluster`: the client, and the cluster state kept current by list+watch or read once.
//! - `live`: the `run` loop against a cluster (watch caches, evictions, events).
//! - `plan`: the offline `plan` report.
//! - `serving`: TLS serving, metrics, health and the trigger interface and API.
//! - `usage`: fetching measured usage (metrics.k8s.io, Prometheus).
//! - `leader`: Lease-based leader election.
//! - `apicalls`: the API calls each component makes.
//!
//! **The public API** is [`plugin`] (the engine's, re-exported) and [`cli::main_with`], for
//! programs that add their own plugins and run the stock command line; it follows the crate's
//! semver. [`testing`] is offered for plugin tests without that promise. The engine's and the
//! guard's modules are re-exported under their old paths for the crate's own integration tests,
//! benches and example crate; they are hidden from the documentation and may change in any
//! release.

pub use kube_descheduler_engine::{plugin, testing};

#[doc(hidden)]
pub use kube_descheduler_engine as engine;
#[doc(hidden)]
pub use kube_descheduler_engine::{
    duration, error, evictor, framework, placement, plugins, policy, quantity, scheduling,
    snapshot, synth, wasm, workload,
};
#[doc(hidden)]
pub use kube_descheduler_guard as guard;
#[doc(hidden)]
pub use kube_descheduler_guard::{peer, restart};

#[doc(hidden)]
pub mod apicalls;
pub mod cli;
#[doc(hidden)]
pub mod cluster;
#[doc(hidden)]
pub mod leader;
#[doc(hidden)]
pub mod live;
/// The allocator's free memory: handed back after a `run` cycle, kept for reuse by `plan`.
#[doc(hidden)]
pub mod memory;
#[doc(hidden)]
pub mod plan;
#[doc(hidden)]
pub mod serving;
#[doc(hidden)]
pub mod usage;
