//! Shared by `tests/drain_e2e.rs` and `benches/drain.rs`: a kube-sim cluster, our webhook (the
//! real `kube-descheduler webhook` binary) registered from `webhook-config/` exactly as shipped,
//! the installed kubectl binaries, and a sampler of Ready replicas.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_descheduler::cli::certs::{CertsArgs, GeneratedCerts, generate, write_files};
use kube_sim::{Sim, SimHandle, SimOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

mod cluster;
mod kubectl;
mod objects;
mod per_kubectl;
mod sampling;
mod webhook;
#[allow(unused_imports)]
pub use cluster::*;
#[allow(unused_imports)]
pub use kubectl::*;
#[allow(unused_imports)]
pub use objects::*;
#[allow(unused_imports)]
pub use per_kubectl::*;
#[allow(unused_imports)]
pub use sampling::*;
#[allow(unused_imports)]
pub use webhook::*;

/// Namespace of the workloads under test.
pub const NS: &str = "shop";
/// Service and namespace the shipped webhook configuration points at.
pub const WEBHOOK_SERVICE: &str = "kube-descheduler-webhook";
pub const WEBHOOK_NAMESPACE: &str = "kube-descheduler";
/// The phrase of a deflection (upstream descheduler recognises it).
pub const DEFLECTION: &str = "Eviction triggered evacuation";
/// Seconds a new pod takes to become Ready in the simulated kubelet.
pub const POD_START_SECONDS: f64 = 0.5;
