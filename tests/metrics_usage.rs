//! LowNodeUtilization on measured usage, end to end: a cluster whose requests look balanced but
//! whose measured usage is not (and the reverse), through `plan --metrics` (NodeMetrics /
//! PodMetrics lists as `kubectl get --raw` prints them), `plan --prometheus-url` against a real
//! Prometheus, and `run` against kube-sim's metrics.k8s.io and with a Prometheus provider whose
//! bearer token is read from a Secret.

mod cli_common;
mod metrics_common;
mod run_sim_common;

use std::process::Command;

use metrics_common::*;
use run_sim_common::{NS, evicted, replica_set, rs_pod, start, wait_for};
use serde_json::{Value, json};

const HEAD: &str = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n";

fn lnu(thresholds: &str, metrics_utilization: &str) -> String {
    format!(
        "profiles:\n- name: p\n  pluginConfig:\n  - name: LowNodeUtilization\n    args:\n      thresholds: {{{thresholds}: 30}}\n      targetThresholds: {{{thresholds}: 60}}\n{metrics_utilization}  plugins:\n    balance: {{enabled: [LowNodeUtilization]}}\n"
    )
}

fn requests_policy() -> String {
    format!("{HEAD}{}", lnu("cpu", ""))
}

fn kubernetes_policy() -> String {
    format!(
        "{HEAD}metricsProviders:\n- source: KubernetesMetrics\n{}",
        lnu(
            "cpu",
            "      metricsUtilization: {source: KubernetesMetrics}\n"
        )
    )
}

fn prometheus_policy(url: &str, secret: bool) -> String {
    let auth = if secret {
        "\n    authToken: {secretReference: {namespace: kube-system, name: prom-token}}"
    } else {
        ""
    };
    format!(
        "{HEAD}metricsProviders:\n- source: Prometheus\n  prometheus:\n    url: '{url}'{auth}\n{}",
        lnu(
            "MetricResource",
            &format!(
                "      metricsUtilization: {{source: Prometheus, prometheus: {{query: '{METRIC}'}}}}\n"
            )
        )
    )
}

/// Nodes n1–n3 (4 cpu) with four pods each (ReplicaSet `rs-nX`); every pod requests
/// `requests[i]` millicores and uses `used[i]` (kube-sim usage annotations).
fn objects(requests: [i64; 3], used: [i64; 3]) -> Vec<Value> {
    let mut out = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    for i in 0..3 {
        let n = format!("n{}", i + 1);
        out.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}));
        let rs = format!("rs-{n}");
        out.push(replica_set(&rs, 4));
        for j in 1..=4 {
            let mut p = rs_pod(&rs, &format!("{n}-{j}"), &n);
            p["spec"]["containers"][0]["resources"] =
                json!({"requests": {"cpu": format!("{}m", requests[i])}});
            p["metadata"]["annotations"] = json!({
                kube_sim::metrics_api::CPU_ANNOTATION: format!("{}m", used[i]),
                kube_sim::metrics_api::MEMORY_ANNOTATION: "64Mi"});
            out.push(p);
        }
    }
    out
}

/// The same cluster as a snapshot file (pods Running) plus the metrics lists kube-sim serves
/// for it, as `kubectl get --raw` prints them.
async fn snapshot_and_metrics(
    dir: &tempfile::TempDir,
    requests: [i64; 3],
    used: [i64; 3],
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let sim = start_cluster(objects(requests, used)).await;
    let mut items = sim.list("v1", "Node", None);
    items.extend(sim.list("v1", "Pod", Some(NS)));
    items.extend(sim.list("apps/v1", "ReplicaSet", Some(NS)));
    let snap = dir.path().join("cluster.json");
    std::fs::write(
        &snap,
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    let raw = |path: &str, file: &str| {
        let out = cli_common::succeeds(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(sim.kubeconfig_path())
                .args(["get", "--raw", path])
                .env("HOME", std::env::temp_dir()),
        );
        let p = dir.path().join(file);
        std::fs::write(&p, &out.stdout).unwrap();
        p
    };
    let nodes = raw("/apis/metrics.k8s.io/v1beta1/nodes", "nodes.json");
    let pods = raw("/apis/metrics.k8s.io/v1beta1/pods", "pods.json");
    sim.shutdown().await;
    (snap, nodes, pods)
}

async fn start_cluster(objects: Vec<Value>) -> kube_sim::SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = kube_sim::Sim::start_with_objects(objects)
        .await
        .expect("kube-sim starts");
    let s = sim.clone();
    wait_for("pods Running", || {
        let pods = s.list("v1", "Pod", Some(NS));
        pods.len() == 12 && pods.iter().all(|p| p["status"]["phase"] == "Running")
    })
    .await;
    sim
}

fn plan(policy: &str, snapshot: &std::path::Path, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let p = cli_common::write(dir.path(), "policy.yaml", policy);
    cli_common::json_of(&cli_common::succeeds(
        cli_common::plan_with(&p, snapshot)
            .args(["-o", "json", "--no-guard"])
            .args(extra),
    ))
}

/// The `--metrics` flags for the NodeMetrics and PodMetrics files.
fn metrics_flags<'a>(nodes: &'a std::path::Path, pods: &'a std::path::Path) -> [&'a str; 4] {
    [
        "--metrics",
        nodes.to_str().unwrap(),
        "--metrics",
        pods.to_str().unwrap(),
    ]
}

fn evicted_pods(plan: &Value) -> Vec<String> {
    plan["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"] == "evicted")
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

fn has_kubectl() -> bool {
    let ok = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok();
    if !ok && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("kubectl is required in CI");
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_with_metrics_files_follows_measured_usage_not_requests() {
    if !has_kubectl() {
        eprintln!("kubectl not found; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Requests: 50 % everywhere. Measured: n1 90 %, n2 10 %, n3 50 %.
    let (snap, nodes, pods) = snapshot_and_metrics(&dir, [500, 500, 500], [900, 100, 500]).await;
    let files = metrics_flags(&nodes, &pods);
    assert!(evicted_pods(&plan(&requests_policy(), &snap, &files)).is_empty());
    let p = plan(&kubernetes_policy(), &snap, &files);
    let names = evicted_pods(&p);
    assert_eq!(names.len(), 2, "{p}");
    assert!(names.iter().all(|n| n.starts_with("n1-")), "{names:?}");
    let usage = p["measuredUsage"].as_array().expect("measuredUsage");
    let n1 = usage.iter().find(|u| u["node"] == "n1").unwrap();
    assert_eq!(n1["source"], "KubernetesMetrics");
    assert_eq!(n1["cpuMilli"], 3600);
    // The policy needs metrics: without --metrics the plan refuses to guess.
    let policy = dir.path().join("k.yaml");
    std::fs::write(&policy, kubernetes_policy()).unwrap();
    let out = cli_common::plan_with(&policy, &snap).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--metrics"));

    // The reverse: requests unbalanced, usage even.
    let dir = tempfile::tempdir().unwrap();
    let (snap, nodes, pods) = snapshot_and_metrics(&dir, [900, 100, 500], [500, 500, 500]).await;
    let files = metrics_flags(&nodes, &pods);
    let by_requests = evicted_pods(&plan(&requests_policy(), &snap, &files));
    assert!(!by_requests.is_empty() && by_requests.iter().all(|n| n.starts_with("n1-")));
    assert!(evicted_pods(&plan(&kubernetes_policy(), &snap, &files)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_with_a_real_prometheus() {
    let Some(bin) = prometheus_binary() else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = Exporter::start(&[("n1", 0.9), ("n2", 0.1), ("n3", 0.5)]).await;
    let prom = Prometheus::start(&bin, &exporter, "s3cret").await;
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("cluster.json");
    let mut items: Vec<Value> = objects([500, 500, 500], [0, 0, 0])
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .collect();
    for i in items.iter_mut().filter(|o| o["kind"] == "Pod") {
        i["status"] = json!({"phase": "Running"});
    }
    std::fs::write(
        &snap,
        json!({"kind": "List", "apiVersion": "v1", "items": items}).to_string(),
    )
    .unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let policy = prometheus_policy("http://prometheus.monitoring.svc:9090", false);
    let p = plan(
        &policy,
        &snap,
        &[
            "--prometheus-url",
            &prom.url,
            "--prometheus-token-file",
            token.to_str().unwrap(),
        ],
    );
    // One pod from the only node above 60 %, as upstream does for Prometheus usage.
    assert_eq!(evicted_pods(&p), ["n1-1"], "{p}");
    let n1 = p["measuredUsage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["node"] == "n1")
        .cloned()
        .unwrap();
    assert_eq!(n1["source"], "Prometheus");
    assert_eq!(n1["query"], METRIC);
    assert_eq!(n1["utilization"], 0.9);

    // A wrong token: 401, an error naming the query, exit code non-zero, no plan.
    std::fs::write(&token, "wrong").unwrap();
    let pol = dir.path().join("p.yaml");
    std::fs::write(&pol, &policy).unwrap();
    let out = cli_common::plan_with(&pol, &snap)
        .args(["--prometheus-url", &prom.url, "--prometheus-token-file"])
        .arg(&token)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("401") && err.contains(METRIC), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_uses_metrics_k8s_io_from_kube_sim() {
    // Requests balanced, measured usage hot on n1: the requests policy evicts nothing …
    let sim = start_cluster(objects([500, 500, 500], [900, 100, 500])).await;
    let mut d = start(
        &sim,
        "requests",
        &requests_policy(),
        &["--descheduling-interval=0"],
    );
    let code = d.wait_exit().await;
    assert_eq!(code, 0, "{}", d.log_text());
    assert!((1..=4).all(|j| !evicted(&sim, &format!("n1-{j}"))));
    // … the metrics policy evicts from n1 only.
    let mut d = start(
        &sim,
        "metrics",
        &kubernetes_policy(),
        &["--descheduling-interval=0"],
    );
    let code = d.wait_exit().await;
    let log = d.log_text();
    assert_eq!(code, 0, "{log}");
    let gone: Vec<String> = sim
        .list("v1", "Pod", Some(NS))
        .iter()
        .chain(std::iter::empty())
        .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    let evicted_n1 = (1..=4)
        .filter(|j| evicted(&sim, &format!("n1-{j}")))
        .count();
    assert_eq!(evicted_n1, 2, "pods now: {gone:?}\n{log}");
    for n in ["n2", "n3"] {
        assert!(
            (1..=4).all(|j| !evicted(&sim, &format!("{n}-{j}"))),
            "{log}"
        );
    }
    // A node without a sample: the plugin fails its run, nothing is evicted, the log says why.
    sim.hide_node_metrics("n3", true);
    let mut d = start(
        &sim,
        "partial",
        &kubernetes_policy(),
        &["--descheduling-interval=0"],
    );
    assert_eq!(d.wait_exit().await, 0);
    let log = d.log_text();
    assert!(
        log.contains("unable to find node \\\"n3\\\"")
            || log.contains("unable to find node \"n3\""),
        "{log}"
    );
    assert!(log.contains("evicted=0"), "{log}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_a_prometheus_provider_and_a_token_from_a_secret() {
    let Some(bin) = prometheus_binary() else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = Exporter::start(&[("n1", 0.9), ("n2", 0.1), ("n3", 0.5)]).await;
    let prom = Prometheus::start(&bin, &exporter, "from-the-secret").await;
    let sim = start_cluster(objects([500, 500, 500], [0, 0, 0])).await;
    sim.apply(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "prom-token", "namespace": "kube-system"},
        "data": {"prometheusAuthToken": "ZnJvbS10aGUtc2VjcmV0"}}))
        .expect("secret");
    let mut d = start(
        &sim,
        "prom",
        &prometheus_policy(&prom.url, true),
        &["--descheduling-interval=0"],
    );
    let code = d.wait_exit().await;
    let log = d.log_text();
    assert_eq!(code, 0, "{log}");
    let evicted_n1 = (1..=4)
        .filter(|j| evicted(&sim, &format!("n1-{j}")))
        .count();
    assert_eq!(evicted_n1, 1, "one pod per hot node; {log}");
    for n in ["n2", "n3"] {
        assert!(
            (1..=4).all(|j| !evicted(&sim, &format!("{n}-{j}"))),
            "{log}"
        );
    }
    sim.shutdown().await;
}
