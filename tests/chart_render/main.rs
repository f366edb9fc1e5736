//! Renders and lints `charts/kube-descheduler` with the real Helm v4 engine (PyPI
//! `helm-python-sdk`, through `tests/chart/render.py`) and checks what comes out:
//! every object parses as its typed k8s-openapi struct with no unknown field, containers are
//! hardened, the ValidatingWebhookConfiguration follows the guard's registration rules, the policy
//! ConfigMap holds a v1alpha2 policy, and each component's RBAC covers exactly the calls listed in
//! `kube_descheduler::apicalls::API_CALLS`.
//!
//! Needs `python3` with `helm-python-sdk==0.2.2` (`pip install helm-python-sdk==0.2.2`); the test
//! fails with that instruction when either is missing.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube_descheduler::apicalls::{API_CALLS, ApiCall, Component, Names, Needed, Scope};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const PIN: &str = "helm-python-sdk==0.2.2";
const NS: &str = "kube-descheduler";

mod eviction_limits;
mod eviction_requester;
mod eviction_responder;
mod hardening;
mod helm;
mod install_modes;
mod measured_usage;
mod network_policy;
mod pdb;
mod policy;
mod rbac;
mod registration;
mod scheduler_config;
mod typed;
mod values_and_lint;

use hardening::*;
use helm::*;
use measured_usage::*;
use policy::*;
use rbac::*;
use registration::*;
use typed::*;
