//! HTTP-level tests of the eviction guard: the real server on 127.0.0.1:0 over TLS with
//! certificates from our `certs` code, real AdmissionReview JSON, exact responses.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use kube::core::Selector;
use kube_descheduler::cli::certs::{CertsArgs, GeneratedCerts, generate, write_files};
use kube_descheduler::guard::decision::GuardConfig;
use kube_descheduler::guard::facts::{
    DeploymentFacts, PdbFacts, PodFacts, RecordedRestart, ReplicaSetFacts,
};
use kube_descheduler::guard::server::{GuardState, router};
use kube_descheduler::guard::source::MemorySource;
use kube_descheduler::restart::{RestartOutcome, RestartRequest, Restarter};
use kube_descheduler::serving::tls::{HttpsServer, serve_https};
use serde_json::{Value, json};

#[path = "../guard_common/mod.rs"]
mod guard_common;

mod bounds;
mod cert_reload;
mod fixtures;
mod harness;
mod pod_cache;
mod rate_limits;
mod reviews;

use fixtures::*;
use guard_common::*;
use harness::*;
