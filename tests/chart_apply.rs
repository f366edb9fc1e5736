//! `kubectl apply` of the rendered Helm chart to the kube-sim API stand-in: the chart is rendered
//! with the real Helm v4 engine (`tests/chart/render.py`, PyPI `helm-python-sdk`) for the default
//! values and the variants `tests/chart_render.rs` renders, applied with the real `kubectl` on
//! PATH, applied a second time (nothing written: every resourceVersion stays), and read back with
//! `kubectl get` (every rendered field is served back as rendered).
//!
//! Kinds from CRDs the chart does not ship — `monitoring.coreos.com` ServiceMonitor
//! (prometheus-operator) and `cert-manager.io` Certificate / Issuer: for those variants the test
//! first checks that kubectl refuses them with "no matches for kind … ensure CRDs are installed
//! first" (a cluster without the operators), then installs the CRDs and applies everything.
//!
//! Needs python3 with `helm-python-sdk==0.2.2` and kubectl (1.29+) on PATH; fails with the
//! instruction when either is missing.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod chart_guard_common;
mod kubectl_common;

use kube_sim::SimHandle;
use kubectl_common::{Out, kubectl_path};
use serde_json::{Value, json};

const PIN: &str = "helm-python-sdk==0.2.2";

/// API groups whose kinds come from CRDs that the chart expects to be installed already.
const CRD_GROUPS: &[&str] = &["monitoring.coreos.com", "cert-manager.io"];

#[path = "chart_apply/render.rs"]
mod render;
#[path = "chart_apply/served.rs"]
mod served;

use render::*;
use served::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_every_chart_variant_is_served_idempotent_and_readable() {
    let bin = kubectl_path();
    let variants = variants();
    let rendered = render_all(&variants);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut crd_variants = 0;
    for (v, objects) in variants.iter().zip(&rendered) {
        let sim = kubectl_common::frozen_sim().await;
        let ctx = |what: &str, o: &Out| {
            format!(
                "{}: kubectl {what}:\nstdout:\n{}\nstderr:\n{}",
                v.label, o.stdout, o.stderr
            )
        };

        // The namespaces the release uses (`helm install --create-namespace` makes the release's).
        let namespaces: BTreeSet<&str> = objects
            .iter()
            .filter_map(|o| o["metadata"]["namespace"].as_str())
            .chain([v.namespace])
            .collect();
        // (Applied from JSON: `kubectl create namespace` sends protobuf, which kube-sim does not
        // decode.)
        let missing: Vec<Value> = namespaces
            .iter()
            .filter(|ns| sim.get("v1", "Namespace", "", ns).is_none())
            .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .collect();
        if !missing.is_empty() {
            let file = dir.path().join(format!("{}-namespaces.yaml", v.label));
            write_stream(&file, &missing.iter().collect::<Vec<_>>());
            let o = kubectl(&bin, &sim, &["apply", "-f", file.to_str().unwrap()]).await;
            assert!(o.ok, "{}", ctx("apply namespaces", &o));
        }

        let crd: Vec<&Value> = objects.iter().filter(|o| needs_crd(o)).collect();
        let served: Vec<&Value> = objects.iter().collect();
        assert!(!served.is_empty(), "{}: nothing rendered", v.label);
        if !crd.is_empty() {
            crd_variants += 1;
            // As on a cluster without prometheus-operator / cert-manager.
            let file = dir.path().join(format!("{}-crd.yaml", v.label));
            write_stream(&file, &crd);
            // `--validate=false`: for a kind it cannot find, kubectl falls back to the OpenAPI v2
            // document, which kube-sim does not serve; kube-apiserver does, and kubectl then
            // fails with the same mapping error.
            let o = kubectl(
                &bin,
                &sim,
                &["apply", "--validate=false", "-f", file.to_str().unwrap()],
            )
            .await;
            assert!(!o.ok, "{}", ctx("apply of CRD kinds without CRDs", &o));
            for obj in &crd {
                let kind = obj["kind"].as_str().unwrap_or("?");
                assert!(
                    o.stderr
                        .contains(&format!("no matches for kind \"{kind}\"")),
                    "{}",
                    ctx("apply of CRD kinds without CRDs", &o)
                );
            }
            assert!(
                o.stderr.contains("ensure CRDs are installed first"),
                "{}",
                ctx("apply of CRD kinds without CRDs", &o)
            );
            // Install the operators' CRDs (trimmed to what kube-apiserver needs to serve the
            // kinds), as a cluster running prometheus-operator / cert-manager has them.
            let crds = crd_manifests(&crd);
            let file = dir.path().join(format!("{}-crds.yaml", v.label));
            write_stream(&file, &crds.iter().collect::<Vec<_>>());
            let o = kubectl(&bin, &sim, &["apply", "-f", file.to_str().unwrap()]).await;
            assert!(o.ok, "{}", ctx("apply CRDs", &o));
        }

        let file = dir.path().join(format!("{}.yaml", v.label));
        write_stream(&file, &served);
        let file = file.to_str().expect("utf-8 path");

        let o = kubectl(&bin, &sim, &["apply", "-f", file]).await;
        assert!(o.ok, "{}", ctx("apply", &o));
        let created = o.stdout.lines().filter(|l| l.ends_with(" created")).count();
        assert_eq!(created, served.len(), "{}", ctx("apply", &o));

        let before = get_all(&bin, &sim, file, &ctx).await;
        let o = kubectl(&bin, &sim, &["apply", "-f", file]).await;
        assert!(o.ok, "{}", ctx("second apply", &o));
        // kubectl reports every object `unchanged`, except PodDisruptionBudgets: their `selector`
        // has patchStrategy "replace", so kubectl's patch is never empty and it prints
        // `configured` for a patch that changes nothing (as against kube-apiserver).
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(lines.len(), served.len(), "{}", ctx("second apply", &o));
        for l in &lines {
            assert!(
                l.ends_with(" unchanged")
                    || (l.starts_with("poddisruptionbudget.policy/") && l.ends_with(" configured")),
                "{}",
                ctx("second apply (idempotent)", &o)
            );
        }
        // Nothing was written: every resourceVersion is the same.
        let items = get_all(&bin, &sim, file, &ctx).await;
        assert_eq!(items.len(), served.len());
        for (a, b) in before.iter().zip(&items) {
            assert_eq!(
                a["metadata"]["resourceVersion"],
                b["metadata"]["resourceVersion"],
                "{}: {} rewritten by the second apply",
                v.label,
                object_ref(a)
            );
        }
        for (want, have) in served.iter().zip(&items) {
            let mut diffs = Vec::new();
            subset(want, have, "", &mut diffs);
            assert!(
                diffs.is_empty(),
                "{}: {} read back differs:\n{}",
                v.label,
                object_ref(want),
                diffs.join("\n")
            );
            assert!(
                have["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
                    .is_string(),
                "{}: {} has no last-applied-configuration",
                v.label,
                object_ref(want)
            );
        }
        sim.shutdown().await;
    }
    assert_eq!(
        crd_variants, 3,
        "the ServiceMonitor and cert-manager variants"
    );
}

#[test]
fn the_guard_pods_mount_only_the_serving_pair() {
    // In generate mode the Secret also holds the CA key; the guard must not see it.
    let rendered = render_all(&[variant("default", json!({}))]).remove(0);
    let guard = rendered
        .iter()
        .find(|o| {
            o["kind"] == "Deployment"
                && o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
                    == "eviction-guard"
        })
        .expect("guard Deployment");
    let volumes = guard["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes");
    let certs = volumes
        .iter()
        .find(|v| v["name"] == "certs")
        .expect("certs volume");
    let keys: Vec<&str> = certs["secret"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["key"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(keys, ["tls.crt", "tls.key"]);
}

/// The hook Job's own arguments, run before (pre-install) and after (post-install) `kubectl apply`
/// of the default chart: the Secret the guard Deployment mounts is written first, and the caBundle
/// of the applied ValidatingWebhookConfiguration is set afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certs_hook_job_args_work_around_a_kubectl_apply_of_the_chart() {
    let bin = kubectl_path();
    let objects = render_all(&[variant("default", json!({}))]).remove(0);
    let job = objects
        .iter()
        .find(|o| o["kind"] == "Job" && o["metadata"]["name"] == "kube-descheduler-certs")
        .expect("certs hook Job");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], json!(["/kube-descheduler"]));
    let out_dir = tempfile::tempdir().expect("tempdir");
    let mut args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_owned())
        .map(|a| {
            if a.starts_with("--out-dir=") {
                format!("--out-dir={}", out_dir.path().display())
            } else {
                a
            }
        })
        .collect();

    let sim = kubectl_common::frozen_sim().await;
    args.push(format!("--kubeconfig={}", sim.kubeconfig_path().display()));
    let hook = || async {
        let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
            .args(&args)
            .env_remove("KUBECONFIG")
            .kill_on_drop(true)
            .output()
            .await
            .expect("certs runs");
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "certs {args:?}: {stderr}");
        stderr
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let ns_file = dir.path().join("ns.yaml");
    write_stream(
        &ns_file,
        &[
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-descheduler"}}),
        ],
    );
    let o = kubectl(&bin, &sim, &["apply", "-f", ns_file.to_str().unwrap()]).await;
    assert!(o.ok, "{}", o.stderr);

    // pre-install: no configuration yet.
    let stderr = hook().await;
    assert!(stderr.contains("does not exist yet"), "{stderr}");
    let guard = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "kube-descheduler-webhook")
        .expect("guard Deployment");
    let secret_name = guard["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
        .as_str()
        .expect("secret volume");
    let secret = sim
        .get("v1", "Secret", "kube-descheduler", secret_name)
        .expect("the Secret the guard mounts exists before the guard is installed");
    assert_eq!(secret["type"], "kubernetes.io/tls");

    // install.
    let file = dir.path().join("chart.yaml");
    write_stream(&file, &objects.iter().collect::<Vec<_>>());
    let o = kubectl(&bin, &sim, &["apply", "-f", file.to_str().unwrap()]).await;
    assert!(o.ok, "{}", o.stderr);

    // post-install: the applied configuration gets the Secret's CA.
    let stderr = hook().await;
    assert!(stderr.contains("kept"), "{stderr}");
    assert!(
        stderr.contains("set the caBundle of 1 webhook(s)"),
        "{stderr}"
    );
    let o = kubectl(
        &bin,
        &sim,
        &[
            "get",
            "validatingwebhookconfiguration",
            "kube-descheduler-eviction-guard",
            "-o",
            "jsonpath={.webhooks[0].clientConfig.caBundle}",
        ],
    )
    .await;
    assert!(o.ok, "{}", o.stderr);
    assert_eq!(
        o.stdout.trim(),
        secret["data"]["ca.crt"].as_str().expect("ca.crt"),
        "caBundle is the Secret's ca.crt"
    );
    // A second `kubectl apply` (helm upgrade without the hook) leaves the caBundle alone:
    // the rendered configuration has none, and kubectl's three-way merge keeps fields it never set.
    let o = kubectl(&bin, &sim, &["apply", "-f", file.to_str().unwrap()]).await;
    assert!(o.ok, "{}", o.stderr);
    let after = sim
        .get(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "",
            "kube-descheduler-eviction-guard",
        )
        .expect("configuration");
    assert_eq!(
        after["webhooks"][0]["clientConfig"]["caBundle"],
        secret["data"]["ca.crt"]
    );
    sim.shutdown().await;
}

/// The guard container's rendered arguments, with client authentication on, run for real: kubelet's
/// probes (the rendered paths and port) answer without a client certificate, and the review port
/// refuses a connection without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendered_guard_probes_answer_without_a_client_certificate_and_reviews_need_one() {
    use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = generate(&CertsArgs::loopback(
        "kube-descheduler-webhook",
        "kube-descheduler",
        dir.path(),
    ))
    .expect("certificates");
    write_files(dir.path(), &certs).expect("write certificates");
    // Any CA does for the client side: the probe needs no certificate, the review port refuses
    // a connection without one.
    let client_ca = dir.path().join("client-ca.crt");
    std::fs::write(&client_ca, &certs.ca_cert_pem).expect("client CA");
    let objects = render_all(&[variant(
        "client-auth",
        json!({"webhook": {"clientAuth": {"enabled": true, "caCert": certs.ca_cert_pem}}}),
    )])
    .remove(0);
    let guard = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "kube-descheduler-webhook")
        .expect("guard Deployment");
    let container = &guard["spec"]["template"]["spec"]["containers"][0];
    let probe = &container["readinessProbe"]["httpGet"];
    let probe_port_name = probe["port"].as_str().expect("named probe port");
    let probe_port = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == probe_port_name)
        .and_then(|p| p["containerPort"].as_u64())
        .expect("the probe's port is declared");
    let rendered = &container["args"];
    let probe_flag = format!("--probe-port={probe_port}");
    assert!(
        rendered
            .as_array()
            .expect("args")
            .iter()
            .any(|a| a.as_str() == Some(probe_flag.as_str())),
        "the probe port {probe_port} is not the one the guard serves probes on: {rendered}"
    );
    // Ports chosen by the OS, on loopback.
    let args = chart_guard_common::local_guard_args(container, dir.path(), &client_ca);
    let sim = kubectl_common::frozen_sim().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(&args)
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--kubeconfig={}", sim.kubeconfig_path().display()))
        .args(["--logging-format", "json"])
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("webhook starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let (addr, probe_addr) = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut seen = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line.clone());
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["fields"]["message"] == "eviction guard serving" {
                let a = v["fields"]["addr"].as_str().unwrap_or("").to_owned();
                let p = v["fields"]["probe_addr"].as_str().unwrap_or("").to_owned();
                return (a, p);
            }
        }
        panic!(
            "the guard {args:?} exited before serving:\n{}",
            seen.join("\n")
        );
    })
    .await
    .expect("the guard reports its addresses");
    let plain = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(certs.ca_cert_pem.as_bytes()).expect("CA"),
        )
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("client");
    let scheme = probe["scheme"].as_str().unwrap_or("HTTP").to_lowercase();
    let path = probe["path"].as_str().expect("probe path");
    let url = format!("{scheme}://{probe_addr}{path}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let ok = plain
            .get(&url)
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if ok {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{url} never answered 200"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let review = plain.get(format!("https://{addr}{path}")).send().await;
    assert!(
        review.is_err(),
        "the review port answered a client without a certificate: {review:?}"
    );
    let _ = child.kill().await;
}
