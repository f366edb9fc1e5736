//! Self-generated CA and server certificates (rcgen).
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A throw-away certificate authority. Tests also use it to serve webhooks.
pub struct TestCa {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A PEM certificate and its PEM private key.
#[derive(Clone, Debug)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    pub fn new(common_name: &str) -> Result<Self, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        Ok(TestCa {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Issues a serving certificate for DNS names and/or IP addresses.
    pub fn issue(&self, names: &[&str]) -> Result<CertPair, rcgen::Error> {
        let key = KeyPair::generate()?;
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names.clone())?;
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Installs the ring provider as the process default (ignored if one is installed).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
