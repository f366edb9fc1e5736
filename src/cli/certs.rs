//! `kube-descheduler certs`: a CA and a serving certificate for the webhook (or the secure port).
//!
//! Writes `ca.crt`, `ca.key`, `tls.crt`, `tls.key` and `ca-bundle.b64` (the base64 `caBundle` of
//! the webhook configuration, also printed on stdout). Pass `--ca-cert-file`/`--ca-key-file` to
//! re-issue a serving certificate from an existing CA, so the caBundle does not change.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::pem::PemObject;

use crate::error::ConfigError;

/// Flags of `certs`.
#[derive(Debug, Clone, clap::Args)]
pub struct CertsArgs {
    /// Name of the Service in front of the webhook.
    #[arg(long)]
    pub service: String,
    /// Namespace of that Service.
    #[arg(long)]
    pub namespace: String,
    /// Directory to write `ca.crt`, `ca.key`, `tls.crt`, `tls.key`, `ca-bundle.b64` into.
    #[arg(long)]
    pub out_dir: PathBuf,
    /// Extra DNS name for the serving certificate (repeatable).
    #[arg(long = "dns-name")]
    pub dns_names: Vec<String>,
    /// Extra IP address for the serving certificate (repeatable).
    #[arg(long = "ip")]
    pub ips: Vec<IpAddr>,
    /// Validity of the serving certificate in days.
    #[arg(long, default_value_t = 365)]
    pub valid_days: u32,
    /// Existing CA certificate (PEM) to sign with instead of creating a CA.
    #[arg(long, requires = "ca_key_file")]
    pub ca_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `--ca-cert-file`.
    #[arg(long, requires = "ca_cert_file")]
    pub ca_key_file: Option<PathBuf>,
}

/// PEM material produced by [`generate`].
#[derive(Debug, Clone)]
pub struct GeneratedCerts {
    /// CA certificate (PEM).
    pub ca_cert_pem: String,
    /// CA private key (PEM).
    pub ca_key_pem: String,
    /// Serving certificate (PEM).
    pub cert_pem: String,
    /// Serving private key (PEM).
    pub key_pem: String,
    /// Base64 of `ca_cert_pem`: the webhook configuration's `caBundle`.
    pub ca_bundle: String,
}

/// The Service DNS names of a serving certificate: svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Valid from yesterday (clock skew) for `days` days.
fn set_validity(params: &mut CertificateParams, days: u32) {
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    let start = now
        .checked_sub(jiff::Span::new().days(1))
        .unwrap_or_else(|_| now.clone());
    let end = now
        .checked_add(jiff::Span::new().days(i64::from(days)))
        .unwrap_or_else(|_| now.clone());
    let ymd =
        |z: &jiff::Zoned| rcgen::date_time_ymd(i32::from(z.year()), z.month() as u8, z.day() as u8);
    params.not_before = ymd(&start);
    params.not_after = ymd(&end);
}

/// Subject CN of CAs we create; a reused CA must carry it (the issuer name of new certificates is
/// rebuilt from it, since rcgen cannot parse certificates without extra features).
pub const CA_COMMON_NAME: &str = "kube-descheduler webhook CA";

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Creates (or reuses) a CA and issues a serving certificate for the Service.
pub fn generate(args: &CertsArgs) -> anyhow::Result<GeneratedCerts> {
    if args.service.trim().is_empty() || args.namespace.trim().is_empty() {
        return Err(ConfigError::new("--service and --namespace must not be empty").into());
    }
    if args.valid_days == 0 {
        return Err(ConfigError::new("--valid-days must be at least 1").into());
    }
    let (ca_cert_pem, ca_key_pem, issuer) = match (&args.ca_cert_file, &args.ca_key_file) {
        (Some(cert), Some(key)) => {
            let cert_pem = read(cert)?;
            let key_pem = read(key)?;
            let ca_key = KeyPair::from_pem(&key_pem)
                .map_err(|e| ConfigError::new(format!("--ca-key-file {}: {e}", key.display())))?;
            let der = rustls_pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes())
                .map_err(|e| ConfigError::new(format!("--ca-cert-file {}: {e}", cert.display())))?;
            if !contains(der.as_ref(), CA_COMMON_NAME.as_bytes()) {
                return Err(ConfigError::new(format!(
                    "--ca-cert-file {}: not a CA made by `kube-descheduler certs` (subject must be CN={CA_COMMON_NAME})",
                    cert.display()
                ))
                .into());
            }
            (cert_pem, key_pem, Issuer::new(ca_params(), ca_key))
        }
        _ => {
            let ca_key = KeyPair::generate().context("generating the CA key")?;
            let mut params = ca_params();
            set_validity(&mut params, 3650);
            let cert = params.self_signed(&ca_key).context("self-signing the CA")?;
            let key_pem = ca_key.serialize_pem();
            (cert.pem(), key_pem, Issuer::new(params, ca_key))
        }
    };
    let mut names = service_dns_names(&args.service, &args.namespace);
    names.extend(args.dns_names.iter().cloned());
    let mut params = CertificateParams::new(names)
        .map_err(|e| ConfigError::new(format!("invalid DNS name: {e}")))?;
    params
        .subject_alt_names
        .extend(args.ips.iter().map(|ip| SanType::IpAddress(*ip)));
    params.distinguished_name.push(
        DnType::CommonName,
        format!("{}.{}.svc", args.service, args.namespace),
    );
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, args.valid_days);
    let key = KeyPair::generate().context("generating the serving key")?;
    let cert = params
        .signed_by(&key, &issuer)
        .context("signing the serving certificate")?;
    Ok(GeneratedCerts {
        ca_bundle: base64(ca_cert_pem.as_bytes()),
        ca_cert_pem,
        ca_key_pem,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(format!("reading {}: {e}", path.display())).into())
}

/// Writes the files into `dir` (created if missing). Keys get mode 0600. Each file is written to a
/// temporary name and renamed, so a reloading server never reads half a file.
pub fn write_files(dir: &Path, certs: &GeneratedCerts) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let files = [
        ("ca.crt", &certs.ca_cert_pem, false),
        ("ca.key", &certs.ca_key_pem, true),
        ("tls.key", &certs.key_pem, true),
        ("tls.crt", &certs.cert_pem, false),
        ("ca-bundle.b64", &certs.ca_bundle, false),
    ];
    for (name, content, secret) in files {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        if secret {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = secret;
        let mut f = opts
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(content.as_bytes())
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all().ok();
        std::fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
    }
    Ok(())
}

/// Standard base64 (RFC 4648, padded).
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Writes certificates and prints the caBundle.
pub fn run(args: CertsArgs) -> anyhow::Result<()> {
    let certs = generate(&args)?;
    write_files(&args.out_dir, &certs)?;
    eprintln!(
        "wrote ca.crt, ca.key, tls.crt, tls.key and ca-bundle.b64 to {} (serving names: {})",
        args.out_dir.display(),
        service_dns_names(&args.service, &args.namespace).join(", ")
    );
    println!("{}", certs.ca_bundle);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &Path) -> CertsArgs {
        CertsArgs {
            service: "guard".into(),
            namespace: "kube-descheduler".into(),
            out_dir: dir.to_owned(),
            dns_names: vec!["guard.example".into()],
            ips: vec!["127.0.0.1".parse().unwrap()],
            valid_days: 30,
            ca_cert_file: None,
            ca_key_file: None,
        }
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (i, o) in cases {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }

    #[test]
    fn generates_a_usable_pair_and_can_reuse_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let a = args(dir.path());
        let certs = generate(&a).unwrap();
        write_files(dir.path(), &certs).unwrap();
        for f in ["ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.b64"] {
            assert!(dir.path().join(f).exists(), "{f}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("tls.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        crate::serving::tls::load_server_config(
            &dir.path().join("tls.crt"),
            &dir.path().join("tls.key"),
        )
        .unwrap();

        // Re-issue from the same CA: same caBundle, new serving cert.
        let reuse = CertsArgs {
            ca_cert_file: Some(dir.path().join("ca.crt")),
            ca_key_file: Some(dir.path().join("ca.key")),
            ..a
        };
        let again = generate(&reuse).unwrap();
        assert_eq!(again.ca_bundle, certs.ca_bundle);
        assert_ne!(again.cert_pem, certs.cert_pem);
    }

    #[test]
    fn rejects_empty_service() {
        let dir = tempfile::tempdir().unwrap();
        let a = CertsArgs {
            service: " ".into(),
            ..args(dir.path())
        };
        assert!(generate(&a).unwrap_err().to_string().contains("--service"));
    }
}
