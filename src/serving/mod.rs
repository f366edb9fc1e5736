//! HTTPS serving shared by `run` and `webhook`: TLS with certificate reload, metrics, health, and
//! the trigger (the interface the cycle loop consumes, and its HTTP endpoint).

pub mod client_auth;
pub mod health;
pub mod limits;
pub mod metrics;
pub mod peer;
pub mod tls;
pub mod trigger;
