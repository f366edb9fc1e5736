//! `run --dry-run` of this crate's binary against the API stand-in (kube-sim): the RetireNodes
//! evictions are logged with the plugin as the strategy, counted under `strategy="RetireNodes"`
//! in the metrics, and nothing is written.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube_sim::Sim;
use serde_json::{Value, json};

const NS: &str = "shop";
const WAIT: Duration = Duration::from_secs(60);

fn node(name: &str, retiring: bool) -> Value {
    let mut labels = json!({"kubernetes.io/hostname": name});
    if retiring {
        labels["lifecycle.example.com/retire"] = json!("true");
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("node-{name}"), "labels": labels},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        }
    })
}

fn replica_set(name: &str, pods: &[(&str, &str)]) -> Vec<Value> {
    let mut v = vec![json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS, "uid": format!("rs-{name}")},
        "spec": {
            "replicas": pods.len(),
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "c", "image": format!("{name}:1")}]}
            }
        }
    })];
    v.extend(pods.iter().map(|(pod, node)| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": pod, "namespace": NS, "uid": format!("pod-{pod}"),
                "labels": {"app": name},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                                     "uid": format!("rs-{name}"), "controller": true}]
            },
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": format!("{name}:1")}]}
        })
    }));
    v
}

const POLICY: &str = "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: node-retirement
    pluginConfig:
      - name: DefaultEvictor
      - name: MinAgeEvictor
        args: {minPodAge: 0s}
      - name: RetireNodes
        args: {nodeSelector: lifecycle.example.com/retire=true}
    plugins:
      filter:
        enabled: [DefaultEvictor, MinAgeEvictor]
      deschedule:
        enabled: [RetireNodes]
";

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < WAIT, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn read(path: &std::path::Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
            .then(|| value.parse::<f64>().ok())
            .flatten()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_logs_and_counts_the_custom_strategy() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        node("old-1", true),
        node("new-1", false),
        node("new-2", false),
    ];
    objects.extend(replica_set(
        "web",
        &[("web-1", "old-1"), ("web-2", "new-1")],
    ));
    objects.extend(replica_set("api", &[("api-1", "new-2")]));
    let sim = Sim::start_with_objects(objects)
        .await
        .expect("kube-sim starts");
    let s = sim.clone();
    wait_for("pods Running and Ready, ReplicaSets reporting them", || {
        let ready = |p: &Value| {
            p.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        };
        let pods = s.list("v1", "Pod", Some(NS));
        pods.len() == 3
            && pods.iter().all(ready)
            && s.list("apps/v1", "ReplicaSet", Some(NS))
                .iter()
                .all(|rs| rs.pointer("/status/readyReplicas") == rs.pointer("/spec/replicas"))
    })
    .await;

    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("policy");
    let log_path = dir.path().join("run.log");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut child = Command::new(env!("CARGO_BIN_EXE_descheduler-node-retirement"))
        .arg("run")
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .arg("--policy-config-file")
        .arg(&policy)
        .args([
            "--bind-address",
            "127.0.0.1",
            "--dry-run",
            "--metrics-unauthenticated",
        ])
        .arg(format!("--secure-port={port}"))
        .arg("--descheduling-interval=1h")
        .env("POD_NAME", "retire")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log"))
        .spawn()
        .expect("spawn");
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let url = format!("https://127.0.0.1:{port}/metrics");
    let start = Instant::now();
    let text = loop {
        let text = match http.get(&url).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if metric(&text, "kube_descheduler_cycles_total", &[]) >= 1.0 {
            break text;
        }
        assert!(
            matches!(child.try_wait(), Ok(None)),
            "exited; log:\n{}",
            read(&log_path)
        );
        assert!(
            start.elapsed() < WAIT,
            "no cycle; log:\n{}",
            read(&log_path)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    let log = read(&log_path);
    let planned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Evicted pod in dry run mode"))
        .collect();
    assert_eq!(planned.len(), 1, "log:\n{log}");
    assert!(
        planned[0].contains("shop/web-1") && planned[0].contains("RetireNodes"),
        "{planned:?}"
    );
    assert!(planned[0].contains("node old-1 is retiring"), "{planned:?}");
    assert!(
        metric(
            &text,
            "descheduler_strategy_duration_seconds_count",
            &[("strategy", "RetireNodes"), ("profile", "node-retirement")]
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "descheduler_pods_evicted_total",
            &[("strategy", "RetireNodes"), ("node", "old-1")]
        ),
        1.0,
        "{text}\nlog:\n{log}"
    );
    // Nothing was evicted for real.
    assert!(sim.get("v1", "Pod", NS, "web-1").is_some_and(|p| {
        p.pointer("/metadata/deletionTimestamp")
            .is_none_or(Value::is_null)
    }));
    sim.shutdown().await;
}
