//! Certificate rotation without restart.

use super::*;

async fn served_cert(addr: SocketAddr, ca_pem: &str) -> Vec<u8> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from(HOST).unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .as_ref()
        .to_vec()
}

fn der_of(certs: &GeneratedCerts) -> Vec<u8> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(certs.cert_pem.as_bytes())
        .unwrap()
        .as_ref()
        .to_vec()
}

/// Lays files out like a Secret volume: `tls.crt -> ..data/tls.crt`, `..data -> ..<version>`.
#[cfg(unix)]
fn publish_secret(dir: &Path, version: &str, certs: &GeneratedCerts) {
    let versioned = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&versioned).unwrap();
    std::fs::write(versioned.join("tls.crt"), &certs.cert_pem).unwrap();
    std::fs::write(versioned.join("tls.key"), &certs.key_pem).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(f)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn rotated_certificates_are_served_to_new_connections_without_restart() {
    let ca_dir = tempfile::tempdir().unwrap();
    let first = generate(&certs_args(ca_dir.path())).unwrap();
    write_files(ca_dir.path(), &first).unwrap();
    let mount = tempfile::tempdir().unwrap();
    publish_secret(mount.path(), "v1", &first);

    let (tls, _task) = load_dir(mount.path(), Duration::from_millis(100)).await;
    let state = Arc::new(GuardState::new(
        Arc::new(cluster(dep())),
        Arc::new(FakeRestarter::default()),
        GuardConfig::default(),
    ));
    let server = serve_https(router(state), "127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    assert_eq!(
        served_cert(server.addr, &first.ca_cert_pem).await,
        der_of(&first)
    );

    // Rotate: a new serving certificate from the same CA, swapped in like the kubelet does.
    let reuse = CertsArgs {
        ca_cert_file: Some(ca_dir.path().join("ca.crt")),
        ca_key_file: Some(ca_dir.path().join("ca.key")),
        ..certs_args(ca_dir.path())
    };
    let second = generate(&reuse).unwrap();
    assert_ne!(der_of(&first), der_of(&second));
    publish_secret(mount.path(), "v2", &second);

    let mut served = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        served = served_cert(server.addr, &first.ca_cert_pem).await;
        if served == der_of(&second) {
            break;
        }
    }
    assert_eq!(
        served,
        der_of(&second),
        "new connections get the rotated certificate"
    );

    // A broken update keeps the last good certificate.
    std::fs::write(mount.path().join("..v2").join("tls.key"), "garbage").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        served_cert(server.addr, &first.ca_cert_pem).await,
        der_of(&second)
    );
    server.shutdown(Duration::from_secs(1)).await.unwrap();
}
