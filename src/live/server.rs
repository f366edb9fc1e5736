//! The secure port of `run`: where its certificate comes from, served by the shared
//! [`crate::serving::tls`] (certificate files re-read when they change, polled every
//! `--cert-reload-interval`; a self-signed certificate when no files are given).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use tokio::task::JoinHandle;

use crate::serving::limits::ServeLimits;
use crate::serving::tls::{self, HttpsServer, Protocols};
use kube_descheduler_engine::error::ConfigError;

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// `--tls-cert-file` / `--tls-private-key-file` (PEM), reloaded when they change.
    Files {
        /// Certificate chain.
        cert: PathBuf,
        /// Private key.
        key: PathBuf,
        /// How often the files are checked for changes.
        reload_interval: Duration,
    },
    /// A self-signed certificate for these DNS names (no files given).
    SelfSigned(Vec<String>),
}

/// A running secure port.
pub struct Serving {
    /// The bound address (the real port when 0 was asked).
    pub addr: SocketAddr,
    server: HttpsServer,
    reloader: Option<JoinHandle<()>>,
}

impl Serving {
    /// Stops accepting, lets in-flight requests finish for up to `grace`, stops reloading.
    pub async fn shutdown(self, grace: Duration) {
        if let Some(r) = &self.reloader {
            r.abort();
        }
        if let Err(e) = self.server.shutdown(grace).await {
            tracing::warn!(error = %e, "secure port stopped with an error");
        }
    }
}

/// Serves `router` over HTTPS on `addr` with the default client bounds; returns once bound.
/// Unusable certificate files are a configuration error naming the flags.
pub async fn serve_https(
    router: Router,
    addr: SocketAddr,
    source: TlsSource,
) -> anyhow::Result<Serving> {
    serve_https_with(
        router,
        addr,
        source,
        &ServeLimits::default(),
        &Protocols::default(),
    )
    .await
}

/// As [`serve_https`], bounding clients by `limits` and speaking `protocols` (upstream's
/// `--enable-http2`: HTTP/1.1 only unless HTTP/2 is asked for).
pub async fn serve_https_with(
    router: Router,
    addr: SocketAddr,
    source: TlsSource,
    limits: &ServeLimits,
    protocols: &Protocols,
) -> anyhow::Result<Serving> {
    let (config, reloader) = match &source {
        TlsSource::Files {
            cert,
            key,
            reload_interval,
        } => {
            let (config, task) = tls::load_with_reload_speaking(
                cert.clone(),
                key.clone(),
                *reload_interval,
                *protocols,
            )
            .await
            .map_err(|e| {
                ConfigError::new(format!(
                    "--tls-cert-file {} / --tls-private-key-file {}: {e}",
                    cert.display(),
                    key.display()
                ))
            })?;
            (config, Some(task))
        }
        TlsSource::SelfSigned(names) => {
            let config = tls::self_signed_config_with(names, protocols)
                .map_err(|e| anyhow::anyhow!("self-signed serving certificate: {e}"))?;
            (RustlsConfig::from_config(config), None)
        }
    };
    match tls::serve_https_speaking(router, addr, config, limits, protocols).await {
        Ok(server) => Ok(Serving {
            addr: server.addr,
            server,
            reloader,
        }),
        Err(e) => {
            if let Some(r) = reloader {
                r.abort();
            }
            anyhow::bail!("cannot serve on {addr}: {e}")
        }
    }
}
