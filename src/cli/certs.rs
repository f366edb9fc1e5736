//! `kube-descheduler certs`: a CA and a serving certificate for the webhook (or the secure port).
//!
//! File mode (`--out-dir`): writes `ca.crt`, `ca.key`, `tls.crt`, `tls.key` and `ca-bundle.b64`
//! (the base64 `caBundle` of the webhook configuration, also printed on stdout). Pass
//! `--ca-cert-file`/`--ca-key-file` to re-issue a serving certificate from an existing CA, so the
//! caBundle does not change.
//!
//! Cluster mode (`--secret-name`, optionally `--webhook-configuration`): keeps the webhook's
//! `kubernetes.io/tls` Secret valid and the webhook configuration's `caBundle` trusting it; see
//! [`cluster`] for the rules. This is what the Helm chart's hook Job runs.

pub mod cluster;
pub mod verify;

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::pem::PemObject;

use kube_descheduler_engine::error::ConfigError;

/// Flags of `certs`.
#[derive(Debug, Clone, clap::Args)]
pub struct CertsArgs {
    /// Name of the Service in front of the webhook.
    #[arg(long)]
    pub service: String,
    /// Namespace of that Service.
    #[arg(long)]
    pub namespace: String,
    /// Directory to write `ca.crt`, `ca.key`, `tls.crt`, `tls.key`, `ca-bundle.b64` into (with
    /// `--secret-name`: what the Secret holds afterwards).
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

impl CertsArgs {
    /// A new CA and a one-day serving certificate for `service.namespace` and 127.0.0.1, written
    /// to `out_dir`: what a webhook serving on loopback (a test or a benchmark) needs.
    pub fn loopback(service: &str, namespace: &str, out_dir: &Path) -> CertsArgs {
        CertsArgs {
            service: service.to_owned(),
            namespace: namespace.to_owned(),
            out_dir: out_dir.to_owned(),
            dns_names: vec![],
            ips: vec![IpAddr::from([127, 0, 0, 1])],
            valid_days: 1,
            ca_cert_file: None,
            ca_key_file: None,
        }
    }
}

/// Flags of cluster mode (the Helm chart's hook Job).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterArgs {
    /// Cluster mode: keep this `kubernetes.io/tls` Secret (in `--namespace`) holding a valid
    /// serving certificate, creating or replacing it when needed.
    #[arg(long, conflicts_with_all = ["ca_cert_file", "ca_key_file"])]
    pub secret_name: Option<String>,
    /// Cluster mode: set the `caBundle` of every webhook of this ValidatingWebhookConfiguration
    /// (exit 0 when it does not exist yet).
    #[arg(long, requires = "secret_name")]
    pub webhook_configuration: Option<String>,
    /// kubeconfig file for cluster mode (default: in-cluster config, then the usual lookup).
    #[arg(long, requires = "secret_name")]
    pub kubeconfig: Option<PathBuf>,
}

/// The `certs` subcommand: file mode, or cluster mode with `--secret-name`.
#[derive(Debug, Clone, clap::Args)]
pub struct CertsCommand {
    /// What to issue and where to write the files.
    #[command(flatten)]
    pub certs: CertsArgs,
    /// The Secret and webhook configuration to keep up to date.
    #[command(flatten)]
    pub cluster: ClusterArgs,
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

/// Valid from the day before `now` (clock skew) for `days` days.
fn set_validity(params: &mut CertificateParams, days: u32, now: SystemTime) {
    let now = jiff::Timestamp::try_from(now)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_zoned(jiff::tz::TimeZone::UTC);
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

/// Validity of a CA we create, in days (10 years).
pub const CA_VALID_DAYS: u32 = 3650;

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

/// Checks the flags shared by both modes.
fn validate(args: &CertsArgs) -> Result<(), ConfigError> {
    if args.service.trim().is_empty() || args.namespace.trim().is_empty() {
        return Err(ConfigError::new(
            "--service and --namespace must not be empty",
        ));
    }
    if args.valid_days == 0 {
        return Err(ConfigError::new("--valid-days must be at least 1"));
    }
    Ok(())
}

/// An existing CA (PEM certificate and key) to issue from.
#[derive(Debug, Clone)]
pub struct ExistingCa {
    /// CA certificate (PEM).
    pub cert_pem: String,
    /// CA private key (PEM).
    pub key_pem: String,
}

/// Creates (or reuses, with `--ca-cert-file`/`--ca-key-file`) a CA and issues a serving
/// certificate for the Service.
pub fn generate(args: &CertsArgs) -> anyhow::Result<GeneratedCerts> {
    validate(args)?;
    let ca = match (&args.ca_cert_file, &args.ca_key_file) {
        (Some(cert), Some(key)) => Some(ExistingCa {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        }),
        _ => None,
    };
    let shown = |p: &Option<PathBuf>| p.as_deref().map(Path::display).map(|d| d.to_string());
    issue(args, ca.as_ref()).map_err(|e| match e {
        IssueError::CaKey(m) => ConfigError::new(format!(
            "--ca-key-file {}: {m}",
            shown(&args.ca_key_file).unwrap_or_default()
        ))
        .into(),
        IssueError::CaCert(m) => ConfigError::new(format!(
            "--ca-cert-file {}: {m}",
            shown(&args.ca_cert_file).unwrap_or_default()
        ))
        .into(),
        IssueError::Config(c) => c.into(),
        e => anyhow::Error::from(e),
    })
}

/// Why [`issue`] failed.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The CA certificate cannot be used.
    #[error("{0}")]
    CaCert(String),
    /// The CA key cannot be used.
    #[error("{0}")]
    CaKey(String),
    /// A flag value is not usable (e.g. an invalid DNS name).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Key generation or signing failed.
    #[error("{0}")]
    Crypto(String),
}

/// Issues a serving certificate for the Service from `ca`, or from a new CA when `None`.
pub fn issue(args: &CertsArgs, ca: Option<&ExistingCa>) -> Result<GeneratedCerts, IssueError> {
    issue_at(args, ca, SystemTime::now())
}

/// [`issue`] with the validity counted from `now`.
pub fn issue_at(
    args: &CertsArgs,
    ca: Option<&ExistingCa>,
    now: SystemTime,
) -> Result<GeneratedCerts, IssueError> {
    validate(args)?;
    let (ca_cert_pem, ca_key_pem, issuer) = match ca {
        Some(ca) => {
            let ca_key = KeyPair::from_pem(&ca.key_pem)
                .map_err(|e| IssueError::CaKey(format!("not a usable private key: {e}")))?;
            let der = rustls_pki_types::CertificateDer::from_pem_slice(ca.cert_pem.as_bytes())
                .map_err(|e| IssueError::CaCert(format!("not a PEM certificate: {e}")))?;
            if !contains(der.as_ref(), CA_COMMON_NAME.as_bytes()) {
                return Err(IssueError::CaCert(format!(
                    "not a CA made by `kube-descheduler certs` (subject must be CN={CA_COMMON_NAME})"
                )));
            }
            (
                ca.cert_pem.clone(),
                ca.key_pem.clone(),
                Issuer::new(ca_params(), ca_key),
            )
        }
        None => {
            let ca_key = KeyPair::generate()
                .map_err(|e| IssueError::Crypto(format!("generating the CA key: {e}")))?;
            let mut params = ca_params();
            set_validity(&mut params, CA_VALID_DAYS, now);
            let cert = params
                .self_signed(&ca_key)
                .map_err(|e| IssueError::Crypto(format!("self-signing the CA: {e}")))?;
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
    set_validity(&mut params, args.valid_days, now);
    let key = KeyPair::generate()
        .map_err(|e| IssueError::Crypto(format!("generating the serving key: {e}")))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| IssueError::Crypto(format!("signing the serving certificate: {e}")))?;
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

/// Writes the files into `dir` (created if missing; empty contents are skipped). Keys get mode 0600. Each file is written to a
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
        if content.is_empty() {
            // `ca.key` in cluster mode when the Secret holds no CA key.
            continue;
        }
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

/// File mode: writes certificates and prints the caBundle. Cluster mode (`--secret-name`): see
/// [`cluster::run`].
pub fn run(cmd: CertsCommand) -> anyhow::Result<()> {
    validate(&cmd.certs)?;
    if cmd.cluster.secret_name.is_some() {
        return cluster::run(cmd);
    }
    let args = cmd.certs;
    let certs = generate(&args)?;
    write_files(&args.out_dir, &certs)?;
    eprintln!(
        "wrote ca.crt, ca.key, tls.crt, tls.key and ca-bundle.b64 to {} (serving names: {})",
        args.out_dir.display(),
        serving_names(&args).join(", ")
    );
    println!("{}", certs.ca_bundle);
    Ok(())
}

/// Every name the serving certificate is for: the Service DNS names, `--dns-name`s and `--ip`s.
pub fn serving_names(args: &CertsArgs) -> Vec<String> {
    let mut names = service_dns_names(&args.service, &args.namespace);
    names.extend(args.dns_names.iter().cloned());
    names.extend(args.ips.iter().map(IpAddr::to_string));
    names
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
