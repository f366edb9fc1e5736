//! The flags of the HTTPS servers' client bounds, shared by `webhook` and `run`.

use crate::serving::limits::{DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, ServeLimits};
use kube_descheduler_engine::duration::parse_go_duration;
use kube_descheduler_engine::error::ConfigError;

/// The command-line flags of [`ServeLimits`] (shared by `webhook` and `run`).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeLimitFlags {
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_request_body_bytes: usize,
    /// Time a client has to send its complete request headers (and body) before it is
    /// disconnected; also how long an idle keep-alive connection stays open (Go duration).
    #[arg(long, default_value = "10s")]
    pub header_read_timeout: String,
    /// Time a client has to complete the TLS handshake (Go duration).
    #[arg(long, default_value = "10s")]
    pub tls_handshake_timeout: String,
    /// Connections open at once; further connections are closed at once.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
}

impl ServeLimitFlags {
    /// The limits, checked; errors name the flag.
    pub fn resolve(&self) -> Result<ServeLimits, ConfigError> {
        let duration = |name: &str, v: &str| {
            parse_go_duration(v).map_err(|e| ConfigError::new(format!("--{name}: {e}")))
        };
        let limits = ServeLimits {
            max_body_bytes: self.max_request_body_bytes,
            header_read_timeout: duration("header-read-timeout", &self.header_read_timeout)?,
            tls_handshake_timeout: duration("tls-handshake-timeout", &self.tls_handshake_timeout)?,
            max_connections: self.max_connections,
        };
        limits.validate().map_err(ConfigError::new)?;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> ServeLimitFlags {
        ServeLimitFlags {
            max_request_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_read_timeout: "10s".into(),
            tls_handshake_timeout: "10s".into(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    fn error(f: &ServeLimitFlags) -> String {
        match f.resolve() {
            Ok(l) => panic!("accepted {l:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn default_flags_resolve_to_the_documented_defaults() {
        assert_eq!(flags().resolve().ok(), Some(ServeLimits::default()));
    }

    #[test]
    fn zero_or_malformed_bounds_are_refused_naming_the_flag() {
        let mut f = flags();
        f.header_read_timeout = "0s".into();
        assert!(error(&f).contains("--header-read-timeout"));
        let mut f = flags();
        f.tls_handshake_timeout = "ten".into();
        assert!(error(&f).contains("--tls-handshake-timeout"));
        let mut f = flags();
        f.max_connections = 0;
        assert!(error(&f).contains("--max-connections"));
        let mut f = flags();
        f.max_request_body_bytes = 0;
        assert!(error(&f).contains("--max-request-body-bytes"));
    }
}
