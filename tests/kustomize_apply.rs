//! The Helm-free install path, as `webhook-config/overlays/example/kustomization.yaml` documents it:
//! `kube-descheduler certs` into the overlay's `tls/`, the `caBundle` pasted over the placeholder,
//! then `kubectl kustomize` (real kubectl, built-in kustomize) and `kubectl apply -k` to the kube-sim
//! API stand-in — twice (the second apply changes nothing) — and the objects read back.
//!
//! Works on a copy of `webhook-config/` in a temporary directory, so the repository is not written.
//! Needs `kubectl` on PATH (CI provides it).

use std::path::{Path, PathBuf};

mod kubectl_common;

use kube_sim::SimHandle;
use kubectl_common::{Out, kubectl_path};
use serde_json::Value;

const SERVICE: &str = "kube-descheduler-webhook";
const NAMESPACE: &str = "kube-descheduler";
const CONFIGURATION: &str = "kube-descheduler-eviction-guard";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy dir");
    for entry in std::fs::read_dir(from).expect("read webhook-config") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

async fn kubectl(sim: Option<&SimHandle>, args: &[&str]) -> Out {
    kubectl_common::run(&kubectl_path(), sim.map(|s| s.kubeconfig_path()), args).await
}

/// The documented preparation of the example overlay; returns (overlay dir, caBundle).
async fn prepared_overlay(dir: &Path) -> (PathBuf, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = dir.join("webhook-config");
    copy_dir(&root.join("webhook-config"), &config);
    let overlay = config.join("overlays").join("example");
    let certs = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["certs", "--service", SERVICE, "--namespace", NAMESPACE])
        .arg("--out-dir")
        .arg(overlay.join("tls"))
        .output()
        .await
        .expect("kube-descheduler certs runs");
    assert!(
        certs.status.success(),
        "certs: {}",
        String::from_utf8_lossy(&certs.stderr)
    );
    let bundle = std::fs::read_to_string(overlay.join("tls").join("ca-bundle.b64"))
        .expect("certs wrote ca-bundle.b64")
        .trim()
        .to_string();
    let kustomization = overlay.join("kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).expect("read kustomization");
    assert!(
        text.contains("REPLACE_WITH_CA_BUNDLE_B64"),
        "the example overlay documents a caBundle placeholder"
    );
    std::fs::write(
        &kustomization,
        text.replace("REPLACE_WITH_CA_BUNDLE_B64", &bundle),
    )
    .expect("write kustomization");
    (overlay, bundle)
}

fn items(list: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(list).expect("kubectl printed JSON");
    v["items"].as_array().cloned().unwrap_or_default()
}

/// The documents `kubectl kustomize` renders from `overlay` (which must succeed).
async fn kustomize(overlay: &str) -> Vec<Value> {
    let rendered = kubectl(None, &["kustomize", overlay]).await;
    assert!(rendered.ok, "kubectl kustomize: {}", rendered.stderr);
    serde_saphyr::from_multiple(&rendered.stdout).expect("rendered YAML")
}

/// The rendered document of `kind` named `name`; fails the test when there is none.
fn rendered<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} rendered"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_overlay_renders_and_applies_idempotently_to_the_stand_in() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (overlay, bundle) = prepared_overlay(dir.path()).await;
    let overlay_arg = overlay.to_string_lossy().to_string();

    // Render with kubectl's built-in kustomize and check what the overlay promises.
    let docs = kustomize(&overlay_arg).await;
    let find = |kind: &str, name: &str| rendered(&docs, kind, name);
    let vwc = find("ValidatingWebhookConfiguration", CONFIGURATION);
    assert_eq!(vwc["webhooks"][0]["clientConfig"]["caBundle"], bundle);
    let secret = find("Secret", "kube-descheduler-webhook-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(secret["metadata"]["namespace"], NAMESPACE);
    let deployment = find("Deployment", SERVICE);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["image"]
            .as_str()
            .is_some_and(|i| i.ends_with(":v0.1.0")),
        "{container}"
    );
    assert!(
        container["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "-v=1")),
        "{container}"
    );
    for d in &docs {
        if d["kind"] != "ValidatingWebhookConfiguration"
            && d["kind"] != "ClusterRole"
            && d["kind"] != "ClusterRoleBinding"
            && d["kind"] != "Namespace"
        {
            assert_eq!(d["metadata"]["namespace"], NAMESPACE, "{d}");
        }
    }

    // Apply to the stand-in, twice.
    let sim = kubectl_common::frozen_sim().await;
    let first = kubectl(Some(&sim), &["apply", "-k", &overlay_arg]).await;
    assert!(first.ok, "first apply:\n{}\n{}", first.stdout, first.stderr);
    assert_eq!(
        first.stdout.matches(" created").count(),
        docs.len(),
        "every rendered object is created:\n{}",
        first.stdout
    );
    let rv = |sim: &SimHandle| {
        let mut out: Vec<(String, String)> = docs
            .iter()
            .map(|d| {
                let api = d["apiVersion"].as_str().unwrap_or_default();
                let kind = d["kind"].as_str().unwrap_or_default();
                let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
                let name = d["metadata"]["name"].as_str().unwrap_or_default();
                let obj = sim
                    .get(api, kind, ns, name)
                    .unwrap_or_else(|| panic!("{kind} {ns}/{name} stored"));
                (
                    format!("{kind} {ns}/{name}"),
                    obj["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        out.sort();
        out
    };
    let before = rv(&sim);
    let second = kubectl(Some(&sim), &["apply", "-k", &overlay_arg]).await;
    assert!(
        second.ok,
        "second apply:\n{}\n{}",
        second.stdout, second.stderr
    );
    assert_eq!(rv(&sim), before, "the second apply wrote nothing");

    // Read back what the guard depends on.
    let got = kubectl(
        Some(&sim),
        &[
            "get",
            "validatingwebhookconfigurations",
            CONFIGURATION,
            "-o",
            "json",
        ],
    )
    .await;
    assert!(got.ok, "{}", got.stderr);
    let served: Value = serde_json::from_str(&got.stdout).expect("JSON");
    assert_eq!(served["webhooks"][0]["clientConfig"]["caBundle"], bundle);
    assert_eq!(
        served["webhooks"][0]["rules"][0]["resources"][0],
        "pods/eviction"
    );
    let pods_rbac = kubectl(Some(&sim), &["get", "clusterroles", "-o", "json"]).await;
    assert!(pods_rbac.ok, "{}", pods_rbac.stderr);
    assert!(
        items(&pods_rbac.stdout)
            .iter()
            .any(|r| r["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("kube-descheduler"))),
        "the guard's ClusterRole is served"
    );
    sim.shutdown().await;
}

/// The guard's client-auth overlay (on top of the example) renders the client CA ConfigMap, the
/// flags, probes on the probe port and a NetworkPolicy with the API server's address, and applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_auth_overlay_renders_flags_probes_and_network_policy_and_applies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (example, _) = prepared_overlay(dir.path()).await;
    let overlay = example.with_file_name("client-auth");
    let ca = std::fs::read_to_string(example.join("tls").join("ca.crt"))
        .or_else(|_| std::fs::read_to_string(example.join("tls").join("tls.crt")))
        .expect("a PEM to stand in for the client CA");
    std::fs::write(overlay.join("client-ca.crt"), &ca).expect("client CA");
    let np_file = overlay.join("networkpolicy.yaml");
    let np_text = std::fs::read_to_string(&np_file).expect("read networkpolicy.yaml");
    assert!(np_text.contains("REPLACE_WITH_API_SERVER_CIDR"));
    std::fs::write(
        &np_file,
        np_text.replace("REPLACE_WITH_API_SERVER_CIDR", "10.0.0.10/32"),
    )
    .expect("write networkpolicy.yaml");
    let overlay_arg = overlay.to_string_lossy().to_string();
    let docs = kustomize(&overlay_arg).await;
    let find = |kind: &str, name: &str| rendered(&docs, kind, name);
    let cm = find("ConfigMap", "kube-descheduler-webhook-client-ca");
    assert_eq!(cm["data"]["ca.crt"], ca.as_str());
    let deployment = find("Deployment", SERVICE);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for flag in [
        "--client-ca-file=/etc/kube-descheduler/client-ca/ca.crt",
        "--client-allowed-names=kube-apiserver",
        "--probe-port=8444",
    ] {
        assert!(args.contains(&flag), "{flag} missing: {args:?}");
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "probes");
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "probes");
    assert!(
        pod["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .any(|v| v["configMap"]["name"] == "kube-descheduler-webhook-client-ca")
    );
    let np = find("NetworkPolicy", SERVICE);
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        np["spec"]["ingress"][0]["from"],
        serde_json::json!([{"ipBlock": {"cidr": "10.0.0.10/32"}}])
    );
    assert_eq!(
        np["spec"]["ingress"][0]["ports"],
        serde_json::json!([{"protocol": "TCP", "port": 8443}])
    );
    let sim = kubectl_common::frozen_sim().await;
    let applied = kubectl(Some(&sim), &["apply", "-k", &overlay_arg]).await;
    assert!(applied.ok, "apply:\n{}\n{}", applied.stdout, applied.stderr);
    assert!(
        sim.get("networking.k8s.io/v1", "NetworkPolicy", NAMESPACE, SERVICE)
            .is_some()
    );
}
