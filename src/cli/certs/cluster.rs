//! Cluster mode of `certs` (the Helm chart's hook Job): the webhook's serving-certificate Secret
//! and the `caBundle` of its ValidatingWebhookConfiguration.
//!
//! Rules:
//! - **Keep** the Secret when it is a `kubernetes.io/tls` Secret whose `tls.crt` chains to its
//!   `ca.crt`, matches `tls.key`, is valid for every serving name (the Service names, `--dns-name`,
//!   `--ip`) and stays valid for the renewal window: min(30 days, a third of `--valid-days`).
//!   Nothing is written then, so a second run changes nothing.
//! - Otherwise **re-issue** the serving certificate from the Secret's CA (`ca.crt` + `ca.key`) when
//!   that CA is ours and outlives the new certificate, so the caBundle stays valid; else create a
//!   **new CA**. The Secret is created, or replaced with a resourceVersion precondition (its other
//!   keys and metadata are kept). A Secret of another type is an error (the type is immutable).
//! - Every webhook of the configuration whose caBundle does not contain the current CA gets the
//!   current CA — plus, when this run replaced the CA, the previous one, so webhook pods still
//!   serving the old certificate (until the kubelet updates the mounted Secret and the webhook
//!   reloads it) stay trusted; the next CA change drops it. A missing configuration is not an
//!   error (the pre-install hook runs before it exists).
//! - A conflict (409, or a failed JSON-patch `test`) re-reads and retries, up to 3 times; any
//!   other API error fails the command (exit 1).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::verify::{ServingNames, certificates, check_serving};
use super::{
    CertsArgs, CertsCommand, ClusterArgs, ExistingCa, GeneratedCerts, base64, issue_at,
    service_dns_names,
};
use kube_descheduler_engine::error::ConfigError;

/// The Secret type we manage.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// Tries per step when the API answers with a conflict.
const ATTEMPTS: usize = 3;
const DAY: Duration = Duration::from_secs(86_400);

/// What happened to the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretAction {
    /// It held a usable certificate; nothing was written.
    Kept,
    /// It did not exist and was created (with a new CA).
    Created,
    /// It was replaced; `new_ca` says whether the CA changed.
    Replaced {
        /// Why the stored certificate could not be kept.
        reason: String,
        /// The CA changed (else the certificate was re-issued from the stored CA).
        new_ca: bool,
    },
}

/// What happened to the webhook configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BundleAction {
    /// No `--webhook-configuration` was given.
    NotRequested,
    /// It does not exist (yet).
    ConfigurationMissing,
    /// Every webhook already trusts the current CA.
    AlreadyTrusted,
    /// The caBundle of this many webhooks was set.
    Patched(usize),
}

/// The result of [`reconcile`].
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The material now in the Secret (`ca_key_pem` empty when the Secret has no `ca.key`).
    pub certs: GeneratedCerts,
    /// What happened to the Secret.
    pub secret: SecretAction,
    /// What happened to the webhook configuration.
    pub bundle: BundleAction,
}

/// Runs cluster mode: reconciles, writes the Secret's material to `--out-dir`, prints the caBundle.
pub fn run(cmd: CertsCommand) -> anyhow::Result<()> {
    validate(&cmd.cluster)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let client = crate::cluster::client::connect(cmd.cluster.kubeconfig.as_ref()).await?;
        let outcome = reconcile(&client, &cmd.certs, &cmd.cluster, SystemTime::now()).await?;
        super::write_files(&cmd.certs.out_dir, &outcome.certs)?;
        println!("{}", outcome.certs.ca_bundle);
        Ok(())
    })
}

/// Checks the cluster-mode flags; returns the Secret name.
fn validate(cluster: &ClusterArgs) -> Result<&str, ConfigError> {
    let secret_name = cluster
        .secret_name
        .as_deref()
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| ConfigError::new("--secret-name must name a Secret"))?;
    if cluster
        .webhook_configuration
        .as_deref()
        .is_some_and(|n| n.trim().is_empty())
    {
        return Err(ConfigError::new(
            "--webhook-configuration must not be empty",
        ));
    }
    Ok(secret_name)
}

/// Makes the Secret hold a usable certificate and the webhook configuration trust its CA.
pub async fn reconcile(
    client: &kube::Client,
    args: &CertsArgs,
    cluster: &ClusterArgs,
    now: SystemTime,
) -> anyhow::Result<Outcome> {
    let secret_name = validate(cluster)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &args.namespace);
    let what = format!("Secret {}/{secret_name}", args.namespace);

    let mut attempt = 0;
    let (certs, secret, previous_ca) = loop {
        attempt += 1;
        match ensure_secret(&secrets, secret_name, &what, args, now).await? {
            Step::Done(r) => break r,
            Step::Conflict(msg) if attempt < ATTEMPTS => {
                eprintln!("certs: {what}: {msg}; retrying");
            }
            Step::Conflict(msg) => anyhow::bail!("{what}: {msg} ({ATTEMPTS} attempts)"),
        }
    };
    match &secret {
        SecretAction::Kept => eprintln!(
            "certs: {what} holds a valid certificate for {}; kept",
            super::serving_names(args).join(", ")
        ),
        SecretAction::Created => eprintln!("certs: created {what} with a new CA"),
        SecretAction::Replaced { reason, new_ca } => eprintln!(
            "certs: replaced the certificate in {what} ({}): {reason}",
            if *new_ca {
                "new CA"
            } else {
                "same CA, caBundle unchanged"
            }
        ),
    }

    let bundle = match cluster.webhook_configuration.as_deref() {
        None => BundleAction::NotRequested,
        Some(name) => {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
            let what = format!("ValidatingWebhookConfiguration {name}");
            let mut attempt = 0;
            loop {
                attempt += 1;
                match ensure_bundle(&api, name, &what, &certs, previous_ca.as_deref()).await? {
                    Step::Done(r) => break r,
                    Step::Conflict(msg) if attempt < ATTEMPTS => {
                        eprintln!("certs: {what}: {msg}; retrying");
                    }
                    Step::Conflict(msg) => anyhow::bail!("{what}: {msg} ({ATTEMPTS} attempts)"),
                }
            }
        }
    };
    if let Some(name) = cluster.webhook_configuration.as_deref() {
        match &bundle {
            BundleAction::ConfigurationMissing => eprintln!(
                "certs: ValidatingWebhookConfiguration {name} does not exist yet; its caBundle \
                 is set by the next run (the chart's post-install/post-upgrade hook)"
            ),
            BundleAction::AlreadyTrusted => eprintln!(
                "certs: every webhook of ValidatingWebhookConfiguration {name} already trusts the CA"
            ),
            BundleAction::Patched(n) => eprintln!(
                "certs: set the caBundle of {n} webhook(s) of ValidatingWebhookConfiguration {name}"
            ),
            BundleAction::NotRequested => {}
        }
    }
    Ok(Outcome {
        certs,
        secret,
        bundle,
    })
}

enum Step<T> {
    Done(T),
    Conflict(String),
}

/// The certificate material of a Secret, by key.
struct Stored {
    cert: Option<Vec<u8>>,
    key: Option<Vec<u8>>,
    ca_cert: Option<Vec<u8>>,
    ca_key: Option<Vec<u8>>,
}

impl Stored {
    fn of(secret: &Secret) -> Self {
        let get = |k: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .map(|b| b.0.clone())
                .filter(|b| !b.is_empty())
        };
        Stored {
            cert: get("tls.crt"),
            key: get("tls.key"),
            ca_cert: get("ca.crt"),
            ca_key: get("ca.key"),
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The renewal window: a stored certificate must stay valid this long to be kept.
pub fn renew_window(valid_days: u32) -> Duration {
    DAY * (valid_days / 3).min(30)
}

fn serving_names(args: &CertsArgs) -> ServingNames {
    let mut dns = service_dns_names(&args.service, &args.namespace);
    dns.extend(args.dns_names.iter().cloned());
    ServingNames {
        dns,
        ips: args.ips.clone(),
    }
}

/// What to do with the stored material.
enum Plan {
    Keep(GeneratedCerts),
    Issue {
        certs: GeneratedCerts,
        reason: String,
        previous_ca: Option<String>,
    },
}

fn plan(stored: Option<&Stored>, args: &CertsArgs, now: SystemTime) -> anyhow::Result<Plan> {
    let names = serving_names(args);
    let fresh = |reason: String, previous_ca: Option<String>| -> anyhow::Result<Plan> {
        Ok(Plan::Issue {
            certs: issue_at(args, None, now)?,
            reason,
            previous_ca,
        })
    };
    let Some(s) = stored else {
        return fresh("the Secret does not exist".into(), None);
    };
    let previous_ca = s
        .ca_cert
        .as_deref()
        .filter(|ca| certificates(ca).is_ok())
        .map(text);
    let (Some(cert), Some(key), Some(ca)) = (&s.cert, &s.key, &s.ca_cert) else {
        let missing: Vec<&str> = [
            ("tls.crt", s.cert.is_none()),
            ("tls.key", s.key.is_none()),
            ("ca.crt", s.ca_cert.is_none()),
        ]
        .into_iter()
        .filter_map(|(k, m)| m.then_some(k))
        .collect();
        return fresh(
            format!("the Secret has no {}", missing.join(", ")),
            previous_ca,
        );
    };
    let reason = match check_serving(
        cert,
        key,
        ca,
        &names,
        &[now, now + renew_window(args.valid_days)],
    ) {
        Ok(()) => {
            return Ok(Plan::Keep(GeneratedCerts {
                ca_bundle: base64(ca),
                ca_cert_pem: text(ca),
                ca_key_pem: s.ca_key.as_deref().map(text).unwrap_or_default(),
                cert_pem: text(cert),
                key_pem: text(key),
            }));
        }
        Err(reason) => reason,
    };
    // Re-issue from the stored CA when it is ours, its key matches, and it outlives the new
    // certificate (checked by verifying the new certificate at its last day).
    if let Some(ca_key) = &s.ca_key {
        let existing = ExistingCa {
            cert_pem: text(ca),
            key_pem: text(ca_key),
        };
        if let Ok(certs) = issue_at(args, Some(&existing), now) {
            let last_day = now + DAY * args.valid_days.saturating_sub(1);
            if check_serving(
                certs.cert_pem.as_bytes(),
                certs.key_pem.as_bytes(),
                ca,
                &names,
                &[now, last_day],
            )
            .is_ok()
            {
                return Ok(Plan::Issue {
                    certs,
                    reason,
                    previous_ca: None,
                });
            }
        }
    }
    fresh(reason, previous_ca)
}

async fn ensure_secret(
    api: &Api<Secret>,
    name: &str,
    what: &str,
    args: &CertsArgs,
    now: SystemTime,
) -> anyhow::Result<Step<(GeneratedCerts, SecretAction, Option<String>)>> {
    let current = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading {what}"))?;
    if let Some(s) = &current {
        let ty = s.type_.as_deref().unwrap_or("Opaque");
        if ty != TLS_SECRET_TYPE {
            return Err(anyhow::anyhow!(
                "{what} has type {ty}, not {TLS_SECRET_TYPE}; the type of a Secret cannot be \
                 changed: delete it or choose another --secret-name"
            ));
        }
    }
    let stored = current.as_ref().map(Stored::of);
    let (certs, reason, previous_ca) = match plan(stored.as_ref(), args, now)? {
        Plan::Keep(certs) => return Ok(Step::Done((certs, SecretAction::Kept, None))),
        Plan::Issue {
            certs,
            reason,
            previous_ca,
        } => (certs, reason, previous_ca),
    };
    let new_ca = stored
        .as_ref()
        .and_then(|s| s.ca_cert.as_deref())
        .is_none_or(|ca| ca != certs.ca_cert_pem.as_bytes());
    let previous_ca = previous_ca.filter(|_| new_ca);
    let result = match current {
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(args.namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/managed-by".to_owned(),
                        "kube-descheduler-certs".to_owned(),
                    )])),
                    ..Default::default()
                },
                type_: Some(TLS_SECRET_TYPE.to_owned()),
                data: Some(secret_data(BTreeMap::new(), &certs)),
                ..Default::default()
            };
            api.create(&PostParams::default(), &secret)
                .await
                .map(|_| SecretAction::Created)
        }
        Some(mut secret) => {
            // The resourceVersion from the read makes this a compare-and-set.
            secret.data = Some(secret_data(secret.data.take().unwrap_or_default(), &certs));
            api.replace(name, &PostParams::default(), &secret)
                .await
                .map(|_| SecretAction::Replaced { reason, new_ca })
        }
    };
    match result {
        Ok(action) => Ok(Step::Done((certs, action, previous_ca))),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Step::Conflict(s.message.clone())),
        Err(e) => Err(anyhow::Error::from(e).context(format!("writing {what}"))),
    }
}

fn secret_data(
    mut data: BTreeMap<String, ByteString>,
    certs: &GeneratedCerts,
) -> BTreeMap<String, ByteString> {
    let mut put = |k: &str, v: &str| {
        data.insert(k.to_owned(), ByteString(v.as_bytes().to_vec()));
    };
    put("tls.crt", &certs.cert_pem);
    put("tls.key", &certs.key_pem);
    put("ca.crt", &certs.ca_cert_pem);
    if certs.ca_key_pem.is_empty() {
        data.remove("ca.key");
    } else {
        put("ca.key", &certs.ca_key_pem);
    }
    data
}

async fn ensure_bundle(
    api: &Api<ValidatingWebhookConfiguration>,
    name: &str,
    what: &str,
    certs: &GeneratedCerts,
    previous_ca: Option<&str>,
) -> anyhow::Result<Step<BundleAction>> {
    let Some(config) = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading {what}"))?
    else {
        return Ok(Step::Done(BundleAction::ConfigurationMissing));
    };
    let ca = certificates(certs.ca_cert_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("the CA certificate: {e}"))?;
    let mut bundle = certs.ca_cert_pem.trim_end().to_owned();
    bundle.push('\n');
    if let Some(prev) = previous_ca {
        bundle.push_str(prev.trim_end());
        bundle.push('\n');
    }
    let bundle = base64(bundle.as_bytes());
    let mut ops = Vec::new();
    for (i, webhook) in config.webhooks.iter().flatten().enumerate() {
        let trusted = webhook
            .client_config
            .ca_bundle
            .as_ref()
            .and_then(|b| certificates(&b.0).ok())
            .is_some_and(|have| ca.iter().all(|c| have.contains(c)));
        if !trusted {
            ops.push(
                json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": webhook.name}),
            );
            ops.push(json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}));
        }
    }
    if ops.is_empty() {
        return Ok(Step::Done(BundleAction::AlreadyTrusted));
    }
    let patched = ops.len() / 2;
    let patch: json_patch::Patch =
        serde_json::from_value(json!(ops)).context("building the caBundle JSON patch")?;
    match api
        .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
    {
        Ok(_) => Ok(Step::Done(BundleAction::Patched(patched))),
        // A failed `test` (the webhooks changed since the read) is a 422; a conflict a 409.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => {
            Ok(Step::Conflict(s.message.clone()))
        }
        Err(e) => Err(anyhow::Error::from(e).context(format!("setting the caBundle of {what}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_window_is_a_third_of_the_validity_capped_at_30_days() {
        assert_eq!(renew_window(365), DAY * 30);
        assert_eq!(renew_window(30), DAY * 10);
        assert_eq!(renew_window(2), Duration::ZERO);
    }
}
