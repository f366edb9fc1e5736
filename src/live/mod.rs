//! `run` against a cluster: watch caches, the live eviction backend, Events, dry-run verdicts,
//! the cycle loop (interval, one-shot, trigger API) and HTTPS serving.

pub mod auth;
pub mod caches;
pub mod cycle;
pub mod dry_run;
pub mod events;
pub mod evictor;
pub mod http;
pub mod loop_;
pub mod ratelimit;
pub mod run;
pub mod server;
