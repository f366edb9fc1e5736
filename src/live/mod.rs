//! `run` against a cluster: watch caches, the live eviction backend, Events, dry-run verdicts,
//! the cycle loop (interval, one-shot, trigger API) and HTTPS serving.

pub mod caches;
pub mod dry_run;
pub mod events;
pub mod evictor;
pub mod loop_;
pub mod ratelimit;
pub mod auth;
pub mod http;
pub mod server;
