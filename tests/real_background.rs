//! Feature gate `EvictionsInBackground` on the real control plane (`tests/control-plane/up`): as
//! KubeVirt's virt-api does for a VM's launcher pod, a validating webhook on `pods/eviction`
//! (served by this test on 127.0.0.1 over HTTPS, registered with its CA bundle) answers 429
//! "Eviction triggered evacuation" for pod `vm-…`, annotated
//! `descheduler.alpha.kubernetes.io/request-evict-only`. kube-apiserver passes that 429 on;
//! `run --feature-gates=EvictionsInBackground=true` counts it `pods_evicted{result="background"}`
//! once and asks no more while the pod stays; when the pod is gone (its ReplicaSet scaled to
//! zero: the evacuation ended) it counts `result="success"`. The eviction guard's own answer
//! (`guard-…`, same phrase) stays a deflection, asked again each cycle.

mod real_common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
use kube_descheduler::live::server::{Serving, TlsSource, serve_https};
use real_common::{Cluster, run_bounded};
use serde_json::{Value, json};

const NS: &str = "rb-background";
const KUBEVIRT: &str = "Eviction triggered evacuation of VMI rb-background/vm";
const GUARD: &str = "Eviction triggered evacuation: the kube-descheduler eviction guard started a rolling restart of Deployment rb-background/guard; a rolling restart is in progress and a replacement pod starts before the pod is removed.";
const WAIT: Duration = Duration::from_secs(120);

/// Eviction reviews received, by pod name.
type Reviews = Arc<Mutex<HashMap<String, u32>>>;

/// The webhook: 429 with KubeVirt's text for `vm-…`, the guard's for `guard-…`, allow otherwise.
async fn review(State(seen): State<Reviews>, Json(body): Json<Value>) -> Json<Value> {
    let request = &body["request"];
    let name = request["name"].as_str().unwrap_or_default().to_string();
    *seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(name.clone())
        .or_default() += 1;
    let deny = if name.starts_with("vm-") {
        Some(KUBEVIRT)
    } else if name.starts_with("guard-") {
        Some(GUARD)
    } else {
        None
    };
    let mut response = json!({"uid": request["uid"], "allowed": deny.is_none()});
    if let Some(message) = deny {
        response["status"] = json!({"code": 429, "reason": "TooManyRequests", "message": message});
    }
    Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    }))
}

/// Serves the webhook on 127.0.0.1 with a certificate for that address; registers it for
/// CREATE `pods/eviction` in [`NS`] only. Returns the server and its reviews.
async fn install_webhook(c: &Cluster, dir: &Path) -> (Serving, Reviews) {
    let certs =
        generate(&CertsArgs::loopback("evacuation-webhook", NS, dir)).expect("certificates");
    write_files(dir, &certs).expect("write certificates");
    let seen: Reviews = Arc::default();
    let router = axum::Router::new()
        .route("/evict", post(review))
        .with_state(seen.clone());
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let server = serve_https(
        router,
        addr,
        TlsSource::Files {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            reload_interval: Duration::from_secs(3600),
        },
    )
    .await
    .expect("webhook serves");
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "rb-evacuation"},
        "webhooks": [{
            "name": "virt-launcher-eviction-interceptor.rb.test",
            "clientConfig": {
                "url": format!("https://{}/evict", server.addr),
                "caBundle": certs.ca_bundle,
            },
            "rules": [{
                "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods/eviction"], "scope": "Namespaced",
            }],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    });
    c.apply(&serde_json::to_string(&config).expect("json"));
    (server, seen)
}

fn replica_set(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"descheduler.alpha.kubernetes.io/request-evict-only": ""},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                },
            },
        },
    })
}

/// `name node` of the pods of `app` not being deleted.
fn pods(c: &Cluster, app: &str) -> Vec<String> {
    let out = c.kubectl(&[
        "get", "pods", "-n", NS, "-l", &format!("app={app}"), "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
    ]);
    assert!(out.ok, "{}", out.stderr);
    out.stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 2 && f[1] == "Running")
        .map(|f| f[0].to_string())
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Run {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Run {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn metrics(&self) -> String {
        let client = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        match client
            .get(format!("https://127.0.0.1:{}/metrics", self.port))
            .send()
            .await
        {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Waits until the metrics satisfy `cond`; panics naming `what` with the log otherwise.
    async fn wait_metrics(&mut self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let text = self.metrics().await;
            if cond(&text) {
                return text;
            }
            assert!(
                self.child.try_wait().ok().flatten().is_none(),
                "run exited; log:\n{}",
                self.log()
            );
            assert!(
                start.elapsed() < WAIT,
                "{what}: not reached; metrics:\n{text}\nlog:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

fn spawn_run(c: &Cluster, dir: &Path) -> Run {
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: lifetime
  pluginConfig:
  - name: DefaultEvictor
    args: {{}}
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: 1, namespaces: {{include: [{NS}]}}}}
  plugins:
    deschedule: {{enabled: [PodLifeTime]}}
"
        ),
    )
    .expect("policy written");
    let port = free_port();
    let log = dir.join("run.log");
    let child = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .arg("run")
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .arg("--policy-config-file")
        .arg(&policy)
        .args([
            "--descheduling-interval=2s",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--metrics-unauthenticated",
            "--feature-gates=EvictionsInBackground=true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("run starts");
    Run { child, port, log }
}

/// `descheduler_pods_evicted_total{result=…}` summed over the other labels.
fn evicted(text: &str, result: &str) -> f64 {
    let label = format!("result=\"{result}\"");
    text.lines()
        .filter(|l| l.starts_with("descheduler_pods_evicted_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn cycles(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("kube_descheduler_cycles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn reviews(seen: &Reviews, prefix: &str) -> u32 {
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, n)| *n)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_evacuating_webhooks_429_is_an_eviction_in_background_until_the_pod_is_gone() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let c = tokio::task::spawn_blocking(real_common::shared)
        .await
        .expect("cluster");
    let dir = tempfile::tempdir().expect("temp dir");
    c.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"
    ));
    let (_webhook, seen) = install_webhook(c, dir.path()).await;
    // kube-apiserver picks webhook configurations up from an informer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["vm", "guard"] {
        c.apply(&serde_json::to_string(&replica_set(name)).expect("json"));
    }
    c.wait_for("vm and guard pods Running", WAIT, || {
        pods(c, "vm").len() == 1 && pods(c, "guard").len() == 1
    });
    let vm = pods(c, "vm").remove(0);

    let mut run = spawn_run(c, dir.path());
    run.wait_metrics("vm's eviction in background", |t| {
        evicted(t, "background") == 1.0
    })
    .await;
    let first = cycles(&run.metrics().await);
    let text = run
        .wait_metrics("three more cycles", |t| cycles(t) >= first + 3.0)
        .await;
    assert_eq!(evicted(&text, "background"), 1.0, "{text}");
    assert_eq!(evicted(&text, "error"), 0.0, "{text}");
    assert_eq!(evicted(&text, "success"), 0.0, "{text}");
    assert!(
        evicted(&text, "deflected") >= 3.0,
        "the guard's answer stays a deflection: {text}"
    );
    assert_eq!(
        reviews(&seen, "vm-"),
        1,
        "one eviction request while the evacuation lasts"
    );
    assert!(reviews(&seen, "guard-") >= 3, "asked again each cycle");
    assert_eq!(pods(c, "vm"), vec![vm.clone()], "the pod stays");
    assert!(
        run.log().contains("Eviction in background assumed"),
        "{}",
        run.log()
    );

    // The evacuation ends: the pod goes (and no replacement comes).
    let out = c.kubectl(&["scale", "rs", "vm", "-n", NS, "--replicas=0"]);
    assert!(out.ok, "{}", out.stderr);
    let text = run
        .wait_metrics("vm counted success once gone", |t| {
            evicted(t, "success") == 1.0
        })
        .await;
    assert_eq!(evicted(&text, "background"), 1.0, "{text}");
    assert_eq!(reviews(&seen, "vm-"), 1);

    drop(run);
    let out = c.kubectl(&["delete", "validatingwebhookconfiguration", "rb-evacuation"]);
    assert!(out.ok, "{}", out.stderr);
    let _ = run_bounded(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args(["delete", "namespace", NS, "--wait=false"]),
        Duration::from_secs(30),
    );
}
