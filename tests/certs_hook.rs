//! `kube-descheduler certs --secret-name … --webhook-configuration …` (the Helm chart's hook Job),
//! the real binary against the kube-sim API stand-in: the Secret is written, every webhook's
//! caBundle is set, a second run writes nothing, a missing configuration is not an error, a
//! certificate for other names is re-issued from the same CA, a Secret without the CA key gets a
//! new CA while the bundle keeps trusting the old one, and API errors fail the command.

mod cli_common;

use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube_sim::{FaultRule, Sim, SimHandle};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use serde_json::{Value, json};

const NS: &str = "kube-descheduler";
const SECRET: &str = "guard-tls";
const VWC: &str = "guard-eviction-guard";

async fn start(objects: Vec<Value>) -> SimHandle {
    let mut all = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    all.extend(objects);
    Sim::start_static(all).await.expect("kube-sim starts")
}

/// Two webhooks, as a configuration with several could have; the second has a stale bundle.
fn configuration() -> Value {
    let webhook = |name: &str, bundle: Option<&str>| {
        let mut client = json!({"service": {"name": "guard", "namespace": NS, "path": "/validate/eviction", "port": 443}});
        if let Some(b) = bundle {
            client["caBundle"] = json!(b);
        }
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Ignore",
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}],
            "clientConfig": client
        })
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VWC},
        "webhooks": [
            webhook("eviction-guard.kube-descheduler.io", None),
            // base64("not a certificate")
            webhook("second.kube-descheduler.io", Some("bm90IGEgY2VydGlmaWNhdGU=")),
        ]
    })
}

struct Run {
    ok: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// `--out-dir`: the Secret's material after the run.
    out_dir: tempfile::TempDir,
}

async fn certs(sim: &SimHandle, service: &str, extra: &[&str]) -> Run {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out: Output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
            .arg("certs")
            .arg(format!("--service={service}"))
            .arg(format!("--namespace={NS}"))
            .arg(format!("--secret-name={SECRET}"))
            .arg("--out-dir")
            .arg(out_dir.path())
            .arg("--kubeconfig")
            .arg(sim.kubeconfig_path())
            .args(extra)
            .env_remove("KUBECONFIG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("certs finishes within 60 s")
    .expect("certs runs");
    Run {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        out_dir,
    }
}

const WITH_VWC: &[&str] = &["--webhook-configuration", VWC];

fn secret(sim: &SimHandle) -> Option<(Secret, String)> {
    let v = sim.get("v1", "Secret", NS, SECRET)?;
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_owned();
    Some((serde_json::from_value(v).expect("a Secret"), rv))
}

fn key<'a>(s: &'a Secret, k: &str) -> &'a [u8] {
    &s.data.as_ref().expect("data")[k].0
}

fn configuration_now(sim: &SimHandle) -> (ValidatingWebhookConfiguration, String) {
    let v = sim
        .get(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "",
            VWC,
        )
        .expect("configuration");
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_owned();
    (serde_json::from_value(v).expect("a configuration"), rv)
}

fn ders(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .expect("PEM certificates")
}

/// The CA certificates each webhook's caBundle holds.
fn bundles(sim: &SimHandle) -> Vec<Vec<CertificateDer<'static>>> {
    configuration_now(sim)
        .0
        .webhooks
        .unwrap_or_default()
        .iter()
        .map(|w| {
            let b = w.client_config.ca_bundle.as_ref().expect("caBundle set");
            ders(&b.0)
        })
        .collect()
}

/// What the API server does with the caBundle: the serving certificate chains to it, is valid now
/// and for the Service's DNS name; and the key belongs to the certificate.
fn assert_trusted(s: &Secret, ca_pem: &[u8], service: &str) {
    let mut roots = rustls::RootCertStore::empty();
    for c in ders(ca_pem) {
        roots.add(c).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .expect("verifier");
    let chain = ders(key(s, "tls.crt"));
    let name = ServerName::try_from(format!("{service}.{NS}.svc")).expect("name");
    verifier
        .verify_server_cert(&chain[0], &chain[1..], &name, &[], UnixTime::now())
        .expect("tls.crt is trusted by the bundle for the Service name");
    let key = PrivateKeyDer::from_pem_slice(key(s, "tls.key")).expect("tls.key");
    rustls::sign::CertifiedKey::from_der(chain, key, &provider).expect("tls.key matches tls.crt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_run_writes_the_secret_and_every_ca_bundle_and_a_second_run_changes_nothing() {
    let sim = start(vec![configuration()]).await;
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stderr.contains("created Secret"), "{}", run.stderr);
    assert!(
        run.stderr.contains("set the caBundle of 2 webhook(s)"),
        "{}",
        run.stderr
    );

    let (s, secret_rv) = secret(&sim).expect("Secret written");
    assert_eq!(s.type_.as_deref(), Some("kubernetes.io/tls"));
    for k in ["tls.crt", "tls.key", "ca.crt", "ca.key"] {
        assert!(!key(&s, k).is_empty(), "{k} missing");
    }
    let ca = ders(key(&s, "ca.crt"));
    assert_eq!(ca.len(), 1);
    for b in bundles(&sim) {
        assert_eq!(b, ca, "every webhook trusts exactly the Secret's CA");
    }
    assert_trusted(&s, key(&s, "ca.crt"), "guard");
    for f in ["tls.crt", "tls.key", "ca.crt", "ca.key"] {
        let written = std::fs::read(run.out_dir.path().join(f)).expect(f);
        assert_eq!(written, key(&s, f), "--out-dir {f} is the Secret's");
    }
    // stdout is the caBundle (base64 of ca.crt), as in file mode.
    let (config, vwc_rv) = configuration_now(&sim);
    let first_bundle = &config.webhooks.as_ref().unwrap()[0]
        .client_config
        .ca_bundle
        .as_ref()
        .unwrap()
        .0;
    assert_eq!(
        ders(first_bundle),
        ders(key(&s, "ca.crt")),
        "stdout: {}",
        run.stdout
    );
    assert!(!run.stdout.trim().is_empty());

    // Idempotent: nothing is written the second time.
    let again = certs(&sim, "guard", WITH_VWC).await;
    assert!(again.ok, "{}", again.stderr);
    assert!(again.stderr.contains("kept"), "{}", again.stderr);
    assert!(again.stderr.contains("already trusts"), "{}", again.stderr);
    assert_eq!(again.stdout, run.stdout, "same caBundle");
    assert_eq!(secret(&sim).unwrap().1, secret_rv, "Secret not rewritten");
    assert_eq!(
        configuration_now(&sim).1,
        vwc_rv,
        "configuration not patched"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_configuration_is_not_an_error_and_the_next_run_sets_its_bundle() {
    let sim = start(vec![]).await;
    // The pre-install hook: the configuration does not exist yet.
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stderr.contains("does not exist yet"), "{}", run.stderr);
    let (s, rv) = secret(&sim).expect("Secret written before the configuration exists");

    // The post-install hook, once Helm created the configuration.
    sim.apply(configuration()).expect("configuration created");
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(secret(&sim).unwrap().1, rv, "Secret kept");
    for b in bundles(&sim) {
        assert_eq!(b, ders(key(&s, "ca.crt")));
    }

    // Without --webhook-configuration only the Secret is managed.
    let run = certs(&sim, "guard", &[]).await;
    assert!(run.ok, "{}", run.stderr);
    assert!(!run.stderr.contains("ValidatingWebhookConfiguration"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_other_names_is_reissued_from_the_same_ca() {
    let sim = start(vec![configuration()]).await;
    assert!(certs(&sim, "old-name", WITH_VWC).await.ok);
    let (before, _) = secret(&sim).unwrap();
    let (_, vwc_rv) = configuration_now(&sim);

    // One conflict on the write: the command re-reads and retries.
    sim.add_fault(FaultRule {
        verb: Some("update".into()),
        resource: Some("secrets".into()),
        status: Some(409),
        times: Some(1),
        ..Default::default()
    });
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stderr.contains("retrying"), "{}", run.stderr);
    assert!(run.stderr.contains("same CA"), "{}", run.stderr);
    let (after, _) = secret(&sim).unwrap();
    assert_eq!(key(&after, "ca.crt"), key(&before, "ca.crt"), "CA kept");
    assert_ne!(key(&after, "tls.crt"), key(&before, "tls.crt"));
    assert_trusted(&after, key(&before, "ca.crt"), "guard");
    assert_eq!(
        configuration_now(&sim).1,
        vwc_rv,
        "the caBundle already trusts the CA: not patched"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_key_a_new_ca_is_made_and_the_bundle_keeps_the_old_one() {
    // A Secret made by hand from file mode (`kubectl create secret tls` + ca.crt), for other names.
    let dir = tempfile::tempdir().unwrap();
    cli_common::succeeds(
        cli_common::bin()
            .args([
                "certs",
                "--service=old-name",
                "--namespace",
                NS,
                "--out-dir",
            ])
            .arg(dir.path()),
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect(f);
    let old_ca = read("ca.crt");
    let b64 = |s: &str| kube_descheduler::cli::certs::base64(s.as_bytes());
    let mut config = configuration();
    for w in config["webhooks"].as_array_mut().unwrap() {
        w["clientConfig"]["caBundle"] = json!(b64(&old_ca));
    }
    let sim = start(vec![
        config,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": SECRET, "namespace": NS, "labels": {"team": "platform"}},
               "data": {"tls.crt": b64(&read("tls.crt")), "tls.key": b64(&read("tls.key")), "ca.crt": b64(&old_ca)}}),
    ])
    .await;
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert!(run.ok, "{}", run.stderr);
    assert!(run.stderr.contains("new CA"), "{}", run.stderr);
    let (s, rv) = secret(&sim).unwrap();
    assert_ne!(key(&s, "ca.crt"), old_ca.as_bytes());
    assert_eq!(
        s.metadata.labels.as_ref().unwrap()["team"],
        "platform",
        "metadata kept"
    );
    assert_trusted(&s, key(&s, "ca.crt"), "guard");
    let new_ca = ders(key(&s, "ca.crt"));
    let old = ders(old_ca.as_bytes());
    for b in bundles(&sim) {
        assert!(b.contains(&new_ca[0]), "new CA trusted");
        assert!(
            b.contains(&old[0]),
            "old CA still trusted while pods reload"
        );
        assert_eq!(b.len(), 2);
    }
    let (_, vwc_rv) = configuration_now(&sim);
    let again = certs(&sim, "guard", WITH_VWC).await;
    assert!(again.ok, "{}", again.stderr);
    assert_eq!(secret(&sim).unwrap().1, rv);
    assert_eq!(configuration_now(&sim).1, vwc_rv);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_errors_and_foreign_secrets_fail_with_a_clear_message() {
    let sim = start(vec![configuration()]).await;
    let id = sim.add_fault(FaultRule {
        verb: Some("get".into()),
        resource: Some("secrets".into()),
        status: Some(500),
        ..Default::default()
    });
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("reading Secret {NS}/{SECRET}")),
        "{}",
        run.stderr
    );
    sim.remove_fault(id);

    let id = sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("secrets".into()),
        status: Some(403),
        ..Default::default()
    });
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("writing Secret {NS}/{SECRET}")),
        "{}",
        run.stderr
    );
    sim.remove_fault(id);

    let id = sim.add_fault(FaultRule {
        verb: Some("patch".into()),
        resource: Some("validatingwebhookconfigurations".into()),
        status: Some(500),
        ..Default::default()
    });
    let run = certs(&sim, "guard", WITH_VWC).await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "setting the caBundle of ValidatingWebhookConfiguration {VWC}"
        )),
        "{}",
        run.stderr
    );
    sim.remove_fault(id);

    // A Secret of another type cannot become a TLS Secret.
    let other = start(vec![
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": SECRET, "namespace": NS}, "data": {"x": "eA=="}}),
    ])
    .await;
    let run = certs(&other, "guard", &[]).await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("has type Opaque"), "{}", run.stderr);
    assert!(run.stderr.contains("--secret-name"), "{}", run.stderr);

    // Flags: --webhook-configuration needs --secret-name; an empty name is refused.
    for (flags, expect) in [
        (
            vec!["--out-dir=/tmp/x", "--webhook-configuration=v"],
            "--secret-name",
        ),
        (vec!["--out-dir=/tmp/x", "--secret-name= "], "--secret-name"),
        (
            vec![
                "--out-dir=/tmp/x",
                "--secret-name=s",
                "--ca-cert-file=c",
                "--ca-key-file=k",
            ],
            "--ca-cert-file",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
            .args(["certs", "--service=guard", "--namespace", NS])
            .args(&flags)
            .env("KUBECONFIG", "/nonexistent")
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(expect), "{flags:?}: {stderr}");
    }
    sim.shutdown().await;
    other.shutdown().await;
}

/// The renewal window and CA expiry, with the clock moved forward (in-process `reconcile`
/// against kube-sim, the same code the binary runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_expiry_renews_from_the_same_ca_and_an_expiring_ca_is_replaced() {
    use kube_descheduler::cli::certs::cluster::{BundleAction, SecretAction, reconcile};
    use kube_descheduler::cli::certs::{CertsArgs, ClusterArgs};
    use std::time::SystemTime;

    const DAY: Duration = Duration::from_secs(86_400);
    let sim = start(vec![configuration()]).await;
    let client =
        kube_descheduler::cluster::client::connect(Some(&sim.kubeconfig_path().to_path_buf()))
            .await
            .expect("client");
    let dir = tempfile::tempdir().unwrap();
    let args = CertsArgs {
        service: "guard".into(),
        namespace: NS.into(),
        out_dir: dir.path().to_owned(),
        dns_names: vec![],
        ips: vec![],
        valid_days: 365,
        ca_cert_file: None,
        ca_key_file: None,
    };
    let cluster = ClusterArgs {
        secret_name: Some(SECRET.into()),
        webhook_configuration: Some(VWC.into()),
        kubeconfig: None,
    };
    let now = SystemTime::now();
    let first = reconcile(&client, &args, &cluster, now).await.unwrap();
    assert_eq!(first.secret, SecretAction::Created);
    assert_eq!(first.bundle, BundleAction::Patched(2));
    let (s1, _) = secret(&sim).unwrap();

    // 300 days on: 65 days left, more than the 30-day window: kept.
    let o = reconcile(&client, &args, &cluster, now + 300 * DAY)
        .await
        .unwrap();
    assert_eq!(o.secret, SecretAction::Kept);
    assert_eq!(o.bundle, BundleAction::AlreadyTrusted);

    // 340 days on: 25 days left: re-issued from the same CA, caBundle untouched.
    let o = reconcile(&client, &args, &cluster, now + 340 * DAY)
        .await
        .unwrap();
    assert!(
        matches!(&o.secret, SecretAction::Replaced { new_ca: false, reason } if reason.contains("not valid")),
        "{:?}",
        o.secret
    );
    assert_eq!(o.bundle, BundleAction::AlreadyTrusted);
    let (s2, _) = secret(&sim).unwrap();
    assert_eq!(key(&s2, "ca.crt"), key(&s1, "ca.crt"));
    assert_ne!(key(&s2, "tls.crt"), key(&s1, "tls.crt"));

    // Ten years on the CA itself has expired: a new CA; the bundle trusts both for the switch.
    let o = reconcile(&client, &args, &cluster, now + 3660 * DAY)
        .await
        .unwrap();
    assert!(
        matches!(&o.secret, SecretAction::Replaced { new_ca: true, .. }),
        "{:?}",
        o.secret
    );
    assert_eq!(o.bundle, BundleAction::Patched(2));
    let (s3, _) = secret(&sim).unwrap();
    assert_ne!(key(&s3, "ca.crt"), key(&s1, "ca.crt"));
    for b in bundles(&sim) {
        assert_eq!(b.len(), 2);
        assert!(b.contains(&ders(key(&s3, "ca.crt"))[0]));
        assert!(b.contains(&ders(key(&s1, "ca.crt"))[0]));
    }
    sim.shutdown().await;
}
