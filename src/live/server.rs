//! HTTPS serving of the secure port with rustls (axum-server). Temporary home until the shared
//! `serving::tls` (with certificate reload) lands: swap [`serve_https`] for it.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Router;
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use tokio::task::JoinHandle;

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// `--tls-cert-file` / `--tls-private-key-file` (PEM).
    Files {
        /// Certificate chain.
        cert: PathBuf,
        /// Private key.
        key: PathBuf,
    },
    /// A self-signed certificate for these DNS names (no files given).
    SelfSigned(Vec<String>),
}

/// A running server.
pub struct Serving {
    /// The bound address (the real port when 0 was asked).
    pub addr: SocketAddr,
    /// Stops the server.
    pub handle: Handle<SocketAddr>,
    /// The server task.
    pub task: JoinHandle<std::io::Result<()>>,
}

async fn rustls_config(tls: &TlsSource) -> anyhow::Result<RustlsConfig> {
    match tls {
        TlsSource::Files { cert, key } => {
            RustlsConfig::from_pem_file(cert, key).await.map_err(|e| {
                anyhow::Error::new(crate::error::ConfigError::new(format!(
                    "cannot load --tls-cert-file {} / --tls-private-key-file {}: {e}",
                    cert.display(),
                    key.display()
                )))
            })
        }
        TlsSource::SelfSigned(names) => {
            let ck = rcgen::generate_simple_self_signed(names.clone())?;
            RustlsConfig::from_pem(
                ck.cert.pem().into_bytes(),
                ck.signing_key.serialize_pem().into_bytes(),
            )
            .await
            .map_err(|e| anyhow::anyhow!("self-signed certificate: {e}"))
        }
    }
}

/// Serves `router` over HTTPS on `addr`; returns once bound.
pub async fn serve_https(
    router: Router,
    addr: SocketAddr,
    tls: TlsSource,
) -> anyhow::Result<Serving> {
    let config = rustls_config(&tls).await?;
    let handle = Handle::new();
    let server = axum_server::bind_rustls(addr, config).handle(handle.clone());
    let task = tokio::spawn(async move { server.serve(router.into_make_service()).await });
    let bound = handle.listening().await;
    match bound {
        Some(addr) => Ok(Serving { addr, handle, task }),
        None => {
            let err = match task.await {
                Ok(Err(e)) => e.to_string(),
                Ok(Ok(())) => "server stopped".into(),
                Err(e) => e.to_string(),
            };
            anyhow::bail!("cannot serve on {addr}: {err}")
        }
    }
}
