//! HTTPS serving shared by `run` and `webhook`: TLS with certificate reload, metrics, health, and
//! the trigger (the interface the cycle loop consumes, and its HTTP endpoint).

pub mod health;
pub mod metrics;
pub mod tls;
pub mod trigger;
