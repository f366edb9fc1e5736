//! kube-descheduler's engine: pure computation over a cluster snapshot. It reads a
//! `DeschedulerPolicy`, runs its profiles of plugins over a lean [`snapshot::Snapshot`] and
//! decides which pods to evict and why; it never talks to a cluster (no async runtime, no HTTP
//! client or server). `plan` runs it on a file, `run` on the watched cluster state.
//!
//! Modules, from the bottom layer up (a module imports only from those listed before it):
//! - `quantity`, `duration`, `error`: Kubernetes quantities, Go durations, the configuration error.
//! - `workload`: workload facts (Pods, Deployments, ReplicaSets, PDBs, PVCs) and annotation keys.
//! - `usage`: measured usage as plain data (metrics.k8s.io decoding, upstream's smoothing).
//! - `snapshot`: the lean, indexed view of a cluster; `synth`: the synthetic cluster generator.
//! - `scheduling`: scheduler predicates shared by plugins and `nodeFit` (taints, affinity, fit).
//! - `placement`: where kube-scheduler would put an evicted pod's replacement.
//! - `evictor`: eviction limits, reasons and the planning evictor.
//! - `framework`: plugin traits, registry, profiles and the descheduling cycle.
//! - `plugins`: a folder per upstream plugin, plus the DefaultEvictor.
//! - `wasm`: WebAssembly plugins named in the policy.
//! - `policy`: the `DeschedulerPolicy` file (v1alpha2, v1alpha1 conversion), strict decoding.
//! - [`testing`]: builders and one-call plugin runs for tests and benchmarks.
//!
//! **The public API** is [`plugin`]: traits, handle, snapshot read API, registry and args
//! helpers, under the crate's semver. [`testing`] is offered for plugin tests without that
//! promise. Every other module is `pub` because the guard crate, the binary crate, their tests
//! and benches use it: it is hidden from the documentation and may change in any release.

#[doc(hidden)]
pub mod duration;
#[doc(hidden)]
pub mod error;
#[doc(hidden)]
pub mod evictor;
#[doc(hidden)]
pub mod framework;
#[doc(hidden)]
pub mod placement;
pub mod plugin;
#[doc(hidden)]
pub mod plugins;
#[doc(hidden)]
pub mod policy;
#[doc(hidden)]
pub mod quantity;
#[doc(hidden)]
pub mod scheduling;
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
