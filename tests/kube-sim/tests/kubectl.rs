//! The real kubectl against the stand-in (every kubectl found: the one on PATH and the
//! versioned `kubectl.1.27` … `kubectl.1.33` next to its real file).
mod common;

use common::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn kubectls() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Some(path) = on_path("kubectl") else {
        eprintln!("kubectl not found; skipping");
        return out;
    };
    out.push(("path".to_string(), path.clone()));
    let real = std::fs::canonicalize(&path).unwrap_or(path);
    if let Some(dir) = real.parent() {
        for v in 27..=33 {
            let p = dir.join(format!("kubectl.1.{v}"));
            if p.exists() {
                out.push((format!("1.{v}"), p));
            }
        }
    }
    out
}

async fn run(bin: &Path, kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    kubectl_run(bin, kubeconfig, args).await
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: IMAGE}]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_versions_drive_the_sim() {
    let bins = kubectls();
    assert!(
        !bins.is_empty() || std::env::var("CI").is_err(),
        "kubectl is required in CI"
    );
    let dir = tempfile::tempdir().unwrap();
    for (label, bin) in bins {
        let sim = start(vec![
            node("n1"),
            node("n2"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
            pod("shop", "web-1", "n1", json!({"app": "web"}), true),
            pod("shop", "api-1", "n1", json!({"app": "api"}), true),
        ])
        .await;
        let kc = sim.kubeconfig_path().to_path_buf();
        let ctx =
            |what: &str, out: &(bool, String, String)| format!("kubectl {label} {what}: {out:?}");

        let out = run(&bin, &kc, &["get", "pods", "-A"]).await;
        assert!(
            out.0 && out.1.contains("web-1") && out.1.contains("shop"),
            "{}",
            ctx("get pods -A", &out)
        );
        let out = run(&bin, &kc, &["get", "nodes"]).await;
        assert!(
            out.0 && out.1.contains("n1") && out.1.contains("Ready"),
            "{}",
            ctx("get nodes", &out)
        );
        let out = run(&bin, &kc, &["api-resources"]).await;
        assert!(
            out.0 && out.1.contains("poddisruptionbudgets"),
            "{}",
            ctx("api-resources", &out)
        );
        let out = run(&bin, &kc, &["get", "po,deploy,rs,pdb,pc,pvc,lease", "-A"]).await;
        assert!(out.0, "{}", ctx("get short names", &out));

        let out = run(&bin, &kc, &["cordon", "n2"]).await;
        assert!(out.0, "{}", ctx("cordon", &out));
        assert_eq!(
            sim.get("v1", "Node", "", "n2").unwrap()["spec"]["unschedulable"],
            true
        );
        let out = run(&bin, &kc, &["uncordon", "n2"]).await;
        assert!(out.0, "{}", ctx("uncordon", &out));

        // apply: kubectl 1.27/1.28 validate against OpenAPI v2 (protobuf), which is not
        // served; they need --validate=false. 1.29+ use the minimal OpenAPI v3 document.
        let old = matches!(label.as_str(), "1.27" | "1.28");
        let file = dir.path().join(format!("dep-{label}.yaml"));
        for (i, image) in ["img:1", "img:2"].iter().enumerate() {
            std::fs::write(&file, DEPLOYMENT.replace("IMAGE", image)).unwrap();
            let f = file.to_str().unwrap();
            let mut args = vec!["apply", "-f", f];
            if old {
                args.push("--validate=false");
            }
            let out = run(&bin, &kc, &args).await;
            assert!(out.0, "{}", ctx("apply", &out));
            let d = sim.get("apps/v1", "Deployment", "shop", "web").unwrap();
            assert_eq!(
                d["spec"]["template"]["spec"]["containers"][0]["image"],
                *image
            );
            assert_eq!(d["metadata"]["generation"], i as i64 + 1);
        }
        let out = run(
            &bin,
            &kc,
            &["rollout", "restart", "deployment/web", "-n", "shop"],
        )
        .await;
        assert!(out.0, "{}", ctx("rollout restart", &out));
        let d = sim.get("apps/v1", "Deployment", "shop", "web").unwrap();
        assert!(
            d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
                .is_string()
        );
        let out = run(&bin, &kc, &["label", "pod", "api-1", "-n", "shop", "x=y"]).await;
        assert!(out.0, "{}", ctx("label", &out));

        let out = run(
            &bin,
            &kc,
            &["delete", "pod", "api-1", "-n", "shop", "--wait=false"],
        )
        .await;
        assert!(out.0, "{}", ctx("delete pod", &out));
        assert!(
            sim.get("v1", "Pod", "shop", "api-1").unwrap()["metadata"]["deletionTimestamp"]
                .is_string()
        );

        // drain: evictions; a stand-in kubelet removes terminating pods (controllers are off).
        let store_sim = sim.clone();
        let kubelet = tokio::spawn(async move {
            for _ in 0..600 {
                for p in store_sim.list("v1", "Pod", None) {
                    if p["metadata"]["deletionTimestamp"].is_string() {
                        let def = kube_sim::resources::by_gvr("", "v1", "pods").unwrap();
                        let _ = store_sim.store().remove(
                            def,
                            p["metadata"]["namespace"].as_str().unwrap(),
                            p["metadata"]["name"].as_str().unwrap(),
                            None,
                        );
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let out = run(
            &bin,
            &kc,
            &[
                "drain",
                "n1",
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--force",
                "--timeout=30s",
            ],
        )
        .await;
        kubelet.abort();
        assert!(out.0, "{}", ctx("drain", &out));
        assert!(out.1.contains("evicted"), "{}", ctx("drain output", &out));
        assert!(sim.list("v1", "Pod", Some("shop")).is_empty());
        assert_eq!(
            sim.get("v1", "Node", "", "n1").unwrap()["spec"]["unschedulable"],
            true
        );
        sim.shutdown().await;
    }
}
