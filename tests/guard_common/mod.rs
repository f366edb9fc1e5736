//! Shared setup of the guard's HTTPS server tests: the Service name the certificates are made
//! for, fresh serving certificates from our `certs` code, and a client that trusts only them.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use kube_descheduler::cli::certs::{CertsArgs, GeneratedCerts, generate, write_files};
use kube_descheduler::serving::tls::load_with_reload;

/// The DNS name the serving certificate is issued for (the chart's guard Service).
pub const HOST: &str = "guard.kube-descheduler.svc";

/// What `kube-descheduler certs` would be asked for the guard Service, writing into `dir`.
pub fn certs_args(dir: &Path) -> CertsArgs {
    CertsArgs {
        service: "guard".into(),
        namespace: "kube-descheduler".into(),
        out_dir: dir.to_owned(),
        dns_names: vec![],
        ips: vec![],
        valid_days: 7,
        ca_cert_file: None,
        ca_key_file: None,
    }
}

/// Serving certificates written to a temporary directory and loaded with reload.
pub struct TestTls {
    pub certs: GeneratedCerts,
    pub config: RustlsConfig,
    pub dir: tempfile::TempDir,
}

/// Loads `dir`'s `tls.crt` and `tls.key` as the server does, re-read every `interval`.
pub async fn load_dir(
    dir: &Path,
    interval: Duration,
) -> (RustlsConfig, tokio::task::JoinHandle<()>) {
    load_with_reload(dir.join("tls.crt"), dir.join("tls.key"), interval)
        .await
        .unwrap()
}

/// Creates a CA and a serving certificate for [`HOST`] and loads them as the server would.
pub async fn test_tls() -> TestTls {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let certs = generate(&certs_args(dir.path())).unwrap();
    write_files(dir.path(), &certs).unwrap();
    let (config, _task) = load_dir(dir.path(), Duration::from_secs(10)).await;
    TestTls { certs, config, dir }
}

/// An HTTPS client that trusts only `ca_pem` and resolves [`HOST`] to `addr`.
pub fn client_for(ca_pem: &str, addr: SocketAddr, timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .resolve(HOST, addr)
        .https_only(true)
        .timeout(timeout)
        .build()
        .unwrap()
}
