//! `run` against a cluster: the live eviction backend, Events, the return detector, the cycle
//! loop (interval, one-shot, trigger API) and HTTPS serving, over the watched cluster state of
//! [`crate::cluster`].
//!
//! API calls made by `run` (for RBAC; mirrored in the report to packaging):
//! - `list`, `watch`: nodes, pods, namespaces, persistentvolumeclaims (core); poddisruptionbudgets
//!   (policy); priorityclasses (scheduling.k8s.io); replicasets, deployments, statefulsets (apps);
//!   jobs (batch) — cluster-wide.
//! - `create` pods/eviction (core) — body `policy/v1` Eviction (`policy/v1beta1` on old servers);
//!   not in `--dry-run`.
//! - `create`, `get`, `patch` evictionrequests (lifecycle.k8s.io/v1alpha1) in the pod's namespace,
//!   `list` them cluster-wide — with `--eviction-api EvictionRequest` (instead of pods/eviction);
//!   `list` only in `--dry-run`.
//! - `create`, `patch` events (events.k8s.io) — in the evicted pod's namespace; not in dry-run.
//! - `get`, `create`, `update` leases (coordination.k8s.io) in
//!   `--leader-elect-resource-namespace` — with `--leader-elect`.
//! - `create` tokenreviews (authentication.k8s.io), `create` subjectaccessreviews
//!   (authorization.k8s.io) — for `/metrics` (unless `--metrics-unauthenticated`) and the trigger.
//!
//! `plan --kubeconfig` ([`crate::cluster::read_once`]) makes only the `list` calls above (and `list`
//! nodes/pods of metrics.k8s.io when the policy measures usage with it): no watch, no writes.

pub mod auth;
pub mod background;
pub mod cycle;
pub mod cycle_log;
pub mod cycle_loop;
pub mod events;
pub mod evictor;
pub mod evreq;
pub mod features;
pub mod http;
pub mod otel;
pub mod ratelimit;
pub mod recent;
pub mod request_upkeep;
pub mod returns;
pub mod run;
pub mod server;
