//! Is a stored serving certificate still usable? The same checks a TLS client makes (rustls'
//! WebPKI verifier: chain to the CA, validity period, `serverAuth`, every name), plus the private
//! key matching the certificate.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// The names a serving certificate must be valid for.
#[derive(Debug, Clone, Default)]
pub struct ServingNames {
    /// DNS names (the Service names and any `--dns-name`).
    pub dns: Vec<String>,
    /// IP addresses (`--ip`).
    pub ips: Vec<IpAddr>,
}

/// Parses every `CERTIFICATE` block of a PEM text (at least one).
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("invalid certificate PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block".into());
    }
    Ok(certs)
}

/// Checks that `cert_pem` (the serving certificate first, then any intermediates) with `key_pem`
/// is trusted by `ca_pem` and valid for every name at each of `times`. The error says why not.
pub fn check_serving(
    cert_pem: &[u8],
    key_pem: &[u8],
    ca_pem: &[u8],
    names: &ServingNames,
    times: &[SystemTime],
) -> Result<(), String> {
    let chain = certificates(cert_pem).map_err(|e| format!("tls.crt: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("tls.key: no usable private key: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("tls.key: {e}"))?;
    CertifiedKey::new(chain.clone(), signer)
        .keys_match()
        .map_err(|e| format!("tls.key does not belong to tls.crt: {e}"))?;

    let mut roots = RootCertStore::empty();
    for ca in certificates(ca_pem).map_err(|e| format!("ca.crt: {e}"))? {
        roots
            .add(ca)
            .map_err(|e| format!("ca.crt: not a usable CA certificate: {e}"))?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| format!("ca.crt: {e}"))?;
    let mut server_names: Vec<ServerName<'static>> = Vec::new();
    for dns in &names.dns {
        server_names
            .push(ServerName::try_from(dns.clone()).map_err(|e| format!("name {dns:?}: {e}"))?);
    }
    server_names.extend(
        names
            .ips
            .iter()
            .map(|ip| ServerName::IpAddress((*ip).into())),
    );
    let (leaf, intermediates) = chain.split_first().ok_or("tls.crt: empty")?;
    for time in times {
        let unix = UnixTime::since_unix_epoch(
            time.duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or(Duration::ZERO),
        );
        for name in &server_names {
            verifier
                .verify_server_cert(leaf, intermediates, name, &[], unix)
                .map_err(|e| {
                    format!(
                        "tls.crt is not valid for {} at {}: {e}",
                        name.to_str(),
                        jiff::Timestamp::try_from(*time)
                            .map(|t| t.to_string())
                            .unwrap_or_else(|_| "?".into())
                    )
                })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::certs::{CertsArgs, ExistingCa, issue};

    fn args(service: &str, valid_days: u32) -> CertsArgs {
        CertsArgs {
            service: service.into(),
            namespace: "ns".into(),
            out_dir: std::env::temp_dir(),
            dns_names: vec![],
            ips: vec!["10.0.0.5".parse().unwrap()],
            valid_days,
            ca_cert_file: None,
            ca_key_file: None,
        }
    }

    fn names(service: &str) -> ServingNames {
        ServingNames {
            dns: crate::cli::certs::service_dns_names(service, "ns"),
            ips: vec!["10.0.0.5".parse().unwrap()],
        }
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn accepts_a_fresh_certificate_and_rejects_other_names_expiry_and_foreign_keys() {
        let c = issue(&args("guard", 30), None).unwrap();
        let now = SystemTime::now();
        let ok = |cert: &str, key: &str, ca: &str, n: &ServingNames, t: &[SystemTime]| {
            check_serving(cert.as_bytes(), key.as_bytes(), ca.as_bytes(), n, t)
        };
        ok(
            &c.cert_pem,
            &c.key_pem,
            &c.ca_cert_pem,
            &names("guard"),
            &[now],
        )
        .unwrap();
        ok(
            &c.cert_pem,
            &c.key_pem,
            &c.ca_cert_pem,
            &names("guard"),
            &[now + 20 * DAY],
        )
        .unwrap();

        let err = ok(
            &c.cert_pem,
            &c.key_pem,
            &c.ca_cert_pem,
            &names("other"),
            &[now],
        )
        .unwrap_err();
        assert!(err.contains("other"), "{err}");

        let err = ok(
            &c.cert_pem,
            &c.key_pem,
            &c.ca_cert_pem,
            &names("guard"),
            &[now, now + 40 * DAY],
        )
        .unwrap_err();
        assert!(err.contains("not valid"), "{err}");

        let other = issue(&args("guard", 30), None).unwrap();
        let err = ok(
            &c.cert_pem,
            &other.key_pem,
            &c.ca_cert_pem,
            &names("guard"),
            &[now],
        )
        .unwrap_err();
        assert!(err.contains("does not belong"), "{err}");
        let err = ok(
            &c.cert_pem,
            &c.key_pem,
            &other.ca_cert_pem,
            &names("guard"),
            &[now],
        )
        .unwrap_err();
        assert!(err.contains("not valid"), "{err}");

        let err = ok(
            "garbage",
            &c.key_pem,
            &c.ca_cert_pem,
            &names("guard"),
            &[now],
        )
        .unwrap_err();
        assert!(err.starts_with("tls.crt"), "{err}");
    }

    #[test]
    fn a_certificate_reissued_from_the_same_ca_verifies_against_it() {
        let first = issue(&args("guard", 30), None).unwrap();
        let ca = ExistingCa {
            cert_pem: first.ca_cert_pem.clone(),
            key_pem: first.ca_key_pem.clone(),
        };
        let again = issue(&args("guard", 30), Some(&ca)).unwrap();
        assert_eq!(again.ca_cert_pem, first.ca_cert_pem);
        check_serving(
            again.cert_pem.as_bytes(),
            again.key_pem.as_bytes(),
            first.ca_cert_pem.as_bytes(),
            &names("guard"),
            &[SystemTime::now()],
        )
        .unwrap();
    }
}
