//! Client-certificate authentication (mutual TLS) for an HTTPS server.
//!
//! A server given a [`ClientAuth`] asks every client for a certificate during the TLS handshake
//! and refuses the handshake (TLS alert) when the client sends none, when the chain does not lead
//! to one of the CA certificates in the file (rustls `WebPkiClientVerifier`: signature, validity
//! period, extended key usage `clientAuth` when present), or when an allow list is given and the
//! certificate carries none of its names.
//!
//! Names compared with the allow list: the subject's common names (CN), exactly; DNS subject
//! alternative names, ignoring ASCII case; URI subject alternative names, exactly. kube-apiserver
//! authenticates with the CN (it is the user name of a Kubernetes client certificate), so the CN
//! is what an allow list usually names.
//!
//! The refusal is made at the TLS layer, not with an HTTP status, so a refused client never gets
//! to send a request: no byte of a forged AdmissionReview is parsed, and the same code path
//! refuses a missing certificate, a foreign CA and an unlisted name.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;

/// What a server requires of its clients' certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAuth {
    /// PEM file with the CA certificate(s) client certificates must chain to (reloaded when it
    /// changes, with the serving certificate).
    pub ca_file: PathBuf,
    /// Names a client certificate must carry one of (subject CN, DNS or URI SAN); empty: any
    /// certificate from the CA.
    pub allowed_names: Vec<String>,
}

/// The names of a certificate that an allow list is compared with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertNames {
    /// Subject common names.
    pub common_names: Vec<String>,
    /// DNS subject alternative names.
    pub dns: Vec<String>,
    /// URI subject alternative names.
    pub uris: Vec<String>,
}

impl CertNames {
    /// Reads the names of a DER certificate; `None` when it does not parse.
    pub fn of(der: &[u8]) -> Option<CertNames> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let common_names = cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok().map(str::to_owned))
            .collect();
        let mut names = CertNames {
            common_names,
            ..CertNames::default()
        };
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(d) => {
                        names.dns.push((*d).to_owned())
                    }
                    x509_parser::extensions::GeneralName::URI(u) => {
                        names.uris.push((*u).to_owned())
                    }
                    _ => {}
                }
            }
        }
        Some(names)
    }

    /// Whether one of the names is on `allowed` (CN and URI exactly, DNS ignoring ASCII case).
    pub fn any_allowed(&self, allowed: &[String]) -> bool {
        allowed.iter().any(|a| {
            self.common_names.iter().any(|n| n == a)
                || self.uris.iter().any(|n| n == a)
                || self.dns.iter().any(|n| n.eq_ignore_ascii_case(a))
        })
    }
}

/// The subject of a DER certificate as an RFC 4514-style string (`CN=…, O=…`), for records.
pub fn subject_of(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(cert.subject().to_string())
}

/// Builds the verifier for CA certificates `ca_pem` and the allow list `allowed`; the error
/// says what is wrong with the PEM.
pub fn verifier(ca_pem: &[u8], allowed: &[String]) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut roots = RootCertStore::empty();
    let mut found = 0usize;
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| format!("invalid CA certificate PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("unusable CA certificate: {e}"))?;
        found += 1;
    }
    if found == 0 {
        return Err("no CERTIFICATE block found".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let inner = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| format!("building the client certificate verifier: {e}"))?;
    if allowed.is_empty() {
        return Ok(inner);
    }
    Ok(Arc::new(NameCheckingVerifier {
        inner,
        allowed: allowed.to_vec(),
    }))
}

/// The CA verifier, then the allow list.
#[derive(Debug)]
struct NameCheckingVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    allowed: Vec<String>,
}

impl ClientCertVerifier for NameCheckingVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        match CertNames::of(end_entity.as_ref()) {
            Some(names) if names.any_allowed(&self.allowed) => Ok(verified),
            names => {
                tracing::debug!(?names, allowed = ?self.allowed, "client certificate names not on --client-allowed-names; refusing the handshake");
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::ApplicationVerificationFailure,
                ))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with(cn: &str, sans: Vec<rcgen::SanType>) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.subject_alt_names = sans;
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").der().to_vec()
    }

    #[test]
    fn names_are_read_from_cn_and_sans() {
        let der = cert_with(
            "kube-apiserver",
            vec![
                rcgen::SanType::DnsName("Api.Example".try_into().expect("dns")),
                rcgen::SanType::URI("spiffe://cluster/apiserver".try_into().expect("uri")),
            ],
        );
        let names = CertNames::of(&der).expect("parses");
        assert_eq!(names.common_names, vec!["kube-apiserver".to_string()]);
        assert_eq!(names.dns, vec!["Api.Example".to_string()]);
        assert_eq!(names.uris, vec!["spiffe://cluster/apiserver".to_string()]);
        let allow = |n: &str| names.any_allowed(&[n.to_string()]);
        assert!(allow("kube-apiserver"));
        assert!(!allow("Kube-Apiserver"), "CN compares exactly");
        assert!(allow("api.example"), "DNS ignores ASCII case");
        assert!(allow("spiffe://cluster/apiserver"));
        assert!(!allow("spiffe://cluster/other"));
        assert!(!names.any_allowed(&[]));
        assert!(subject_of(&der).is_some_and(|s| s.contains("CN=kube-apiserver")));
    }

    #[test]
    fn a_file_without_certificates_is_refused() {
        let err = verifier(b"not a pem", &[]).expect_err("refused");
        assert!(err.contains("no CERTIFICATE"), "{err}");
        assert!(CertNames::of(b"garbage").is_none());
    }
}
