//! `metrics.k8s.io/v1beta1`: discovery, NodeMetrics and PodMetrics lists and gets, usage from pod
//! annotations or the handle, summed per node; and the real `kubectl top` / `get --raw` reading it.
mod common;

use common::*;
use kube_sim::metrics_api::{CPU_ANNOTATION, MEMORY_ANNOTATION};
use serde_json::{Value, json};

fn annotated(ns: &str, name: &str, node_name: &str, cpu: &str, mem: &str) -> Value {
    let mut p = pod(ns, name, node_name, json!({}), true);
    p["metadata"]["annotations"] = json!({CPU_ANNOTATION: cpu, MEMORY_ANNOTATION: mem});
    p
}

fn objects() -> Vec<Value> {
    let mut pending = pod("b", "pending", "n2", json!({}), true);
    pending["status"]["phase"] = json!("Pending");
    let mut not_ready = node("n3");
    not_ready["status"]["conditions"][0]["status"] = json!("False");
    vec![
        node("n1"),
        node("n2"),
        not_ready,
        annotated("a", "p1", "n1", "1500m", "1Gi"),
        annotated("a", "p2", "n1", "500m", "1Gi"),
        annotated("b", "p3", "n2", "250m", "256Mi"),
        pending,
    ]
}

fn usage_of(items: &Value, name: &str) -> (String, String) {
    let item = items["items"]
        .as_array()
        .and_then(|i| i.iter().find(|x| x["metadata"]["name"] == name))
        .unwrap_or_else(|| panic!("{name} not in {items}"));
    let u = if item.get("usage").is_some() {
        &item["usage"]
    } else {
        &item["containers"][0]["usage"]
    };
    (
        u["cpu"].as_str().unwrap_or("").to_string(),
        u["memory"].as_str().unwrap_or("").to_string(),
    )
}

#[tokio::test]
async fn serves_node_and_pod_metrics_summed_like_metrics_server() {
    let sim = start(objects()).await;
    let c = Client::new(&sim);
    let apis = c.get("/apis").await;
    assert!(
        apis.body["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "metrics.k8s.io"),
        "{}",
        apis.body
    );
    let rl = c.get("/apis/metrics.k8s.io/v1beta1").await;
    assert_eq!(rl.body["resources"][0]["kind"], "NodeMetrics");
    assert_eq!(rl.body["resources"][1]["verbs"], json!(["get", "list"]));

    let nodes = c.get("/apis/metrics.k8s.io/v1beta1/nodes").await;
    assert_eq!(nodes.status, 200);
    assert_eq!(nodes.body["kind"], "NodeMetricsList");
    // n1 = 1500m + 500m, 2Gi; n2 = 250m (the Pending pod does not count); n3 is not Ready.
    assert_eq!(
        usage_of(&nodes.body, "n1"),
        ("2000000000n".into(), "2097152Ki".into())
    );
    assert_eq!(
        usage_of(&nodes.body, "n2"),
        ("250000000n".into(), "262144Ki".into())
    );
    assert_eq!(nodes.body["items"].as_array().unwrap().len(), 2);

    let pods = c
        .get("/apis/metrics.k8s.io/v1beta1/namespaces/a/pods")
        .await;
    assert_eq!(pods.body["items"].as_array().unwrap().len(), 2);
    let all = c.get("/apis/metrics.k8s.io/v1beta1/pods").await;
    assert_eq!(all.body["items"].as_array().unwrap().len(), 3);

    // The handle overrides the annotations; a hidden node disappears.
    sim.set_pod_usage("b", "p3", 3000, 1 << 30);
    sim.hide_node_metrics("n1", true);
    let one = c.get("/apis/metrics.k8s.io/v1beta1/nodes/n2").await;
    assert_eq!(one.body["kind"], "NodeMetrics");
    assert_eq!(one.body["usage"]["cpu"], "3000000000n");
    assert_eq!(
        c.get("/apis/metrics.k8s.io/v1beta1/nodes/n1").await.status,
        404
    );
    let p = c
        .get("/apis/metrics.k8s.io/v1beta1/namespaces/b/pods/p3")
        .await;
    assert_eq!(p.body["containers"][0]["usage"]["memory"], "1048576Ki");
    assert_eq!(
        c.get("/apis/metrics.k8s.io/v1beta1/namespaces/b/pods/pending")
            .await
            .status,
        404
    );
    assert_eq!(
        c.post("/apis/metrics.k8s.io/v1beta1/nodes", json!({}))
            .await
            .status,
        405
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_top_reads_it() {
    let Ok(kubectl) = which::which_kubectl() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("kubectl is required in CI");
        }
        eprintln!("kubectl not found; skipping");
        return;
    };
    let sim = start(objects()).await;
    let out = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["top", "node", "--no-headers"])
        .env("HOME", std::env::temp_dir())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
        .await
        .expect("kubectl top finishes")
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n1 = stdout
        .lines()
        .find(|l| l.starts_with("n1 "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(n1.contains("2000m"), "{n1}");
    sim.shutdown().await;
}

mod which {
    pub fn which_kubectl() -> Result<std::path::PathBuf, ()> {
        let path = std::env::var_os("PATH").ok_or(())?;
        std::env::split_paths(&path)
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file())
            .ok_or(())
    }
}
