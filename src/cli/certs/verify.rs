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

/// One DER element: (tag, contents, rest). `None` on malformed input.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for b in input.get(2..2 + n)? {
            len = (len << 8) | usize::from(*b);
        }
        (len, 2 + n)
    };
    let end = header.checked_add(len)?;
    Some((tag, input.get(header..end)?, input.get(end..)?))
}

/// `notAfter` of a DER certificate (RFC 5280 `tbsCertificate.validity`).
pub fn not_after(der: &[u8]) -> Result<SystemTime, String> {
    let bad = || "malformed certificate (validity)".to_owned();
    let (_, cert, _) = der_element(der).ok_or_else(bad)?;
    let (_, tbs, _) = der_element(cert).ok_or_else(bad)?;
    let mut rest = tbs;
    // [0] version (optional), serialNumber, signature, issuer, then validity.
    if rest.first() == Some(&0xa0) {
        rest = der_element(rest).ok_or_else(bad)?.2;
    }
    for _ in 0..3 {
        rest = der_element(rest).ok_or_else(bad)?.2;
    }
    let (_, validity, _) = der_element(rest).ok_or_else(bad)?;
    let (_, _, after) = der_element(validity).ok_or_else(bad)?;
    let (tag, time, _) = der_element(after).ok_or_else(bad)?;
    let text = std::str::from_utf8(time).map_err(|_| bad())?;
    let full = match (tag, text.len()) {
        // UTCTime YYMMDDHHMMSSZ: 50-99 are 19xx (RFC 5280 4.1.2.5.1).
        (0x17, 13) => {
            let yy: u32 = text
                .get(0..2)
                .and_then(|y| y.parse().ok())
                .ok_or_else(bad)?;
            format!("{}{text}", if yy >= 50 { "19" } else { "20" })
        }
        // GeneralizedTime YYYYMMDDHHMMSSZ.
        (0x18, 15) => text.to_owned(),
        _ => return Err(bad()),
    };
    let field = |r: std::ops::Range<usize>| full.get(r).ok_or_else(bad);
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        field(0..4)?,
        field(4..6)?,
        field(6..8)?,
        field(8..10)?,
        field(10..12)?,
        field(12..14)?
    );
    iso.parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .map_err(|_| bad())
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
        // WebPKI does not check a trust anchor's own validity; the API server's TLS client does.
        let end = not_after(ca.as_ref()).map_err(|e| format!("ca.crt: {e}"))?;
        if let Some(t) = times.iter().find(|t| **t > end) {
            return Err(format!(
                "ca.crt expires at {} (before {})",
                show(end),
                show(*t)
            ));
        }
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
                        show(*time)
                    )
                })?;
        }
    }
    Ok(())
}

fn show(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| "?".into())
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
    fn not_after_reads_the_validity_and_rejects_garbage() {
        let c = issue(&args("guard", 30), None).unwrap();
        let leaf = certificates(c.cert_pem.as_bytes()).unwrap().remove(0);
        let end = not_after(leaf.as_ref()).unwrap();
        let days = end.duration_since(SystemTime::now()).unwrap().as_secs() / 86_400;
        assert!((29..=30).contains(&days), "{days}");
        let ca = certificates(c.ca_cert_pem.as_bytes()).unwrap().remove(0);
        let ca_days = not_after(ca.as_ref())
            .unwrap()
            .duration_since(SystemTime::now())
            .unwrap()
            .as_secs()
            / 86_400;
        assert!((3649..=3650).contains(&ca_days), "{ca_days}");
        for bad in [
            &[][..],
            &[0x30],
            &[0x30, 0x85, 1, 1, 1, 1, 1],
            &leaf.as_ref()[..40],
        ] {
            assert!(not_after(bad).is_err());
        }
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
