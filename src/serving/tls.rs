//! HTTPS serving over rustls (TLS 1.2 and 1.3, ring provider) with certificate reload.
//!
//! Certificates are re-read when the files change: a task hashes both files every interval and,
//! on a change, swaps the server config for new connections (existing ones keep theirs). Hashing
//! contents rather than watching inodes also catches Kubernetes Secret volumes, which update by
//! swapping a `..data` symlink. A broken pair (half-written, mismatched) is logged and the
//! previous certificate stays in use.
//!
//! With [`TlsFiles::client_auth`] the server also requires client certificates
//! ([`super::client_auth`]); the client CA file is hashed and reloaded with the pair, so a
//! rotated CA takes effect for new connections the same way.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use super::client_auth::{self, ClientAuth};
use super::limits::{self, BoundedAcceptor, ServeLimits};

/// Default interval between certificate checks.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
static TLS12_AND_13: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// The protocols a TLS server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocols {
    /// HTTP/2, offered through ALPN, with at most this many concurrent streams per connection;
    /// `None`: HTTP/1.1 only (ALPN `http/1.1`, an HTTP/2 preface is refused).
    pub http2: Option<u32>,
    /// TLS 1.3 only (otherwise TLS 1.2 and 1.3).
    pub tls13_only: bool,
}

impl Default for Protocols {
    /// HTTP/2 and HTTP/1.1, TLS 1.2 and 1.3 (the webhook's).
    fn default() -> Self {
        Protocols {
            http2: Some(limits::MAX_CONCURRENT_STREAMS),
            tls13_only: false,
        }
    }
}

/// A certificate or key that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file holds no usable PEM of the expected kind.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The client CA file cannot be used.
    #[error("client CA {path}: {message}")]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// rustls refused the pair (e.g. key does not match certificate).
    #[error("certificate {cert} / key {key}: {source}")]
    Config {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// Why.
        source: rustls::Error,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Builds a rustls server config (TLS 1.2+, ALPN h2 and http/1.1) from PEM files.
pub fn load_server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    pair_config(cert, key, &cert_pem, &key_pem, None, &Protocols::default())
}

/// The files a TLS server is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM serving certificate (chain).
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
    /// Client certificates required, and from which CA; `None`: no client authentication.
    pub client_auth: Option<ClientAuth>,
}

impl TlsFiles {
    /// SHA-256 over every file's contents (follows symlinks, so `..data` swaps are seen).
    pub fn hash(&self) -> Result<[u8; 32], TlsError> {
        let mut h = Sha256::new();
        h.update(read(&self.cert)?);
        h.update([0u8]);
        h.update(read(&self.key)?);
        if let Some(auth) = &self.client_auth {
            h.update([0u8]);
            h.update(read(&auth.ca_file)?);
        }
        Ok(h.finalize().into())
    }

    /// Builds the server config (TLS 1.2+, ALPN h2 and http/1.1, client certificates verified
    /// when asked for).
    pub fn load(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.load_with(&Protocols::default())
    }

    /// As [`TlsFiles::load`], speaking `protocols`.
    pub fn load_with(&self, protocols: &Protocols) -> Result<Arc<ServerConfig>, TlsError> {
        let cert_pem = read(&self.cert)?;
        let key_pem = read(&self.key)?;
        let verifier =
            match &self.client_auth {
                None => None,
                Some(auth) => {
                    let ca_pem = read(&auth.ca_file)?;
                    Some(client_auth::verifier(&ca_pem, &auth.allowed_names).map_err(
                        |message| TlsError::ClientCa {
                            path: auth.ca_file.clone(),
                            message,
                        },
                    )?)
                }
            };
        pair_config(
            &self.cert, &self.key, &cert_pem, &key_pem, verifier, protocols,
        )
    }
}

fn pair_config(
    cert: &Path,
    key: &Path,
    cert_pem: &[u8],
    key_pem: &[u8],
    verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    protocols: &Protocols,
) -> Result<Arc<ServerConfig>, TlsError> {
    server_config_from_pem(cert_pem, key_pem, verifier, protocols).map_err(|e| match e {
        PemProblem::Cert(message) => TlsError::Pem {
            path: cert.to_owned(),
            message,
        },
        PemProblem::Key(message) => TlsError::Pem {
            path: key.to_owned(),
            message,
        },
        PemProblem::Rustls(source) => TlsError::Config {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        },
    })
}

enum PemProblem {
    Cert(String),
    Key(String),
    Rustls(rustls::Error),
}

fn server_config_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    protocols: &Protocols,
) -> Result<Arc<ServerConfig>, PemProblem> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| PemProblem::Cert(format!("invalid certificate PEM: {e}")))?;
    if certs.is_empty() {
        return Err(PemProblem::Cert("no CERTIFICATE block found".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| PemProblem::Key(format!("no usable private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(if protocols.tls13_only {
            TLS13_ONLY
        } else {
            TLS12_AND_13
        })
        .map_err(PemProblem::Rustls)?;
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(PemProblem::Rustls)?;
    config.alpn_protocols = match protocols.http2 {
        Some(_) => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        None => vec![b"http/1.1".to_vec()],
    };
    Ok(Arc::new(config))
}

/// A server config with the same settings as [`load_server_config`] for a fresh self-signed
/// certificate naming `names` (for a secure port started without certificate files).
pub fn self_signed_config(names: &[String]) -> Result<Arc<ServerConfig>, String> {
    self_signed_config_with(names, &Protocols::default())
}

/// As [`self_signed_config`], speaking `protocols`.
pub fn self_signed_config_with(
    names: &[String],
    protocols: &Protocols,
) -> Result<Arc<ServerConfig>, String> {
    let ck = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| format!("generating a self-signed certificate: {e}"))?;
    server_config_from_pem(
        ck.cert.pem().as_bytes(),
        ck.signing_key.serialize_pem().as_bytes(),
        None,
        protocols,
    )
    .map_err(|e| match e {
        PemProblem::Cert(m) | PemProblem::Key(m) => m,
        PemProblem::Rustls(e) => e.to_string(),
    })
}

/// SHA-256 over both files' contents (follows symlinks, so `..data` swaps are seen).
pub fn files_hash(cert: &Path, key: &Path) -> Result<[u8; 32], TlsError> {
    TlsFiles {
        cert: cert.to_owned(),
        key: key.to_owned(),
        client_auth: None,
    }
    .hash()
}

/// Loads the certificate pair and starts a task reloading it when the files change.
pub async fn load_with_reload(
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
) -> Result<(RustlsConfig, JoinHandle<()>), TlsError> {
    load_with_reload_speaking(cert, key, interval, Protocols::default()).await
}

/// As [`load_with_reload`], speaking `protocols`.
pub async fn load_with_reload_speaking(
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
    protocols: Protocols,
) -> Result<(RustlsConfig, JoinHandle<()>), TlsError> {
    let files = TlsFiles {
        cert,
        key,
        client_auth: None,
    };
    let hash = files.hash()?;
    let config = RustlsConfig::from_config(files.load_with(&protocols)?);
    let task = tokio::spawn(reload_loop(
        config.clone(),
        files,
        interval,
        hash,
        protocols,
    ));
    Ok((config, task))
}

/// Loads `files` and starts a task reloading them when any of them changes.
pub async fn load_files_with_reload(
    files: TlsFiles,
    interval: Duration,
) -> Result<(RustlsConfig, JoinHandle<()>), TlsError> {
    let hash = files.hash()?;
    let config = RustlsConfig::from_config(files.load()?);
    let task = tokio::spawn(reload_loop(
        config.clone(),
        files,
        interval,
        hash,
        Protocols::default(),
    ));
    Ok((config, task))
}

async fn reload_loop(
    config: RustlsConfig,
    files: TlsFiles,
    interval: Duration,
    mut last: [u8; 32],
    protocols: Protocols,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let hash = match files.hash() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read serving certificate; keeping the current one");
                continue;
            }
        };
        if hash == last {
            continue;
        }
        match files.load_with(&protocols) {
            Ok(c) => {
                config.reload_from_config(c);
                last = hash;
                tracing::info!(cert = %files.cert.display(), client_ca = ?files.client_auth.as_ref().map(|a| a.ca_file.display().to_string()), "serving certificate reloaded");
            }
            Err(e) => {
                tracing::warn!(error = %e, "new serving certificate unusable; keeping the current one")
            }
        }
    }
}

/// A running HTTPS server.
pub struct HttpsServer {
    /// The bound address (the real port when asked for port 0).
    pub addr: SocketAddr,
    /// Control handle (graceful shutdown).
    pub handle: Handle<SocketAddr>,
    /// The serving task.
    pub task: JoinHandle<io::Result<()>>,
}

impl HttpsServer {
    /// Stops accepting, lets in-flight requests finish for up to `grace`, and waits.
    pub async fn shutdown(self, grace: Duration) -> io::Result<()> {
        self.handle.graceful_shutdown(Some(grace));
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(io::Error::other(e)),
        }
    }
}

/// Serves `router` over TLS on `addr` with the default [`ServeLimits`]; returns once the socket
/// is bound.
pub async fn serve_https(
    router: Router,
    addr: SocketAddr,
    tls: RustlsConfig,
) -> io::Result<HttpsServer> {
    serve_https_with(router, addr, tls, &ServeLimits::default()).await
}

/// Serves `router` over TLS on `addr`, bounding clients by `limits` (handshake and header
/// timeouts, connection cap, body size and time); returns once the socket is bound.
pub async fn serve_https_with(
    router: Router,
    addr: SocketAddr,
    tls: RustlsConfig,
    limits: &ServeLimits,
) -> io::Result<HttpsServer> {
    serve_https_speaking(router, addr, tls, limits, &Protocols::default()).await
}

/// As [`serve_https_with`]; the connection builder speaks `protocols` (which `tls` must offer
/// through ALPN, see [`TlsFiles::load_with`]).
pub async fn serve_https_speaking(
    router: Router,
    addr: SocketAddr,
    tls: RustlsConfig,
    limits: &ServeLimits,
    protocols: &Protocols,
) -> io::Result<HttpsServer> {
    let handle: Handle<SocketAddr> = Handle::new();
    let body_limits = *limits;
    let router = router.layer(axum::middleware::from_fn(move |req, next| {
        limits::bounded_body(body_limits, req, next)
    }));
    let mut server = axum_server::bind(addr)
        .acceptor(BoundedAcceptor::new(tls, limits))
        .handle(handle.clone());
    limits::configure_http(server.http_builder(), limits);
    match protocols.http2 {
        Some(streams) => {
            server
                .http_builder()
                .http2()
                .max_concurrent_streams(streams);
        }
        None => {
            let builder = std::mem::replace(
                server.http_builder(),
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new()),
            );
            *server.http_builder() = builder.http1_only();
        }
    }
    let task = tokio::spawn(async move { server.serve(router.into_make_service()).await });
    match handle.listening().await {
        Some(addr) => Ok(HttpsServer { addr, handle, task }),
        None => match task.await {
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => Err(io::Error::other(format!(
                "server on {addr} stopped before listening"
            ))),
            Err(e) => Err(io::Error::other(e)),
        },
    }
}
