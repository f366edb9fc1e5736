//! HTTPS serving shared by `run` and `webhook`: TLS with certificate reload, metrics, health, trigger API.

pub mod health;
pub mod limits;
pub mod metrics;
pub mod tls;
pub mod trigger;
