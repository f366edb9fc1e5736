//! Shared by `tests/drain_e2e.rs` and `benches/drain.rs`: a kube-sim cluster, our webhook (the
//! real `kube-descheduler webhook` binary) registered from `webhook-config/` exactly as shipped,
//! the installed kubectl binaries, and a sampler of Ready replicas.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_descheduler::cli::certs::{CertsArgs, GeneratedCerts, generate, write_files};
use kube_sim::{Sim, SimHandle, SimOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

mod per_kubectl;
#[allow(unused_imports)]
pub use per_kubectl::*;

/// Namespace of the workloads under test.
pub const NS: &str = "shop";
/// Service and namespace the shipped webhook configuration points at.
pub const WEBHOOK_SERVICE: &str = "kube-descheduler-webhook";
pub const WEBHOOK_NAMESPACE: &str = "kube-descheduler";
/// The phrase of a deflection (upstream descheduler recognises it).
pub const DEFLECTION: &str = "Eviction triggered evacuation";
/// Seconds a new pod takes to become Ready in the simulated kubelet.
pub const POD_START_SECONDS: f64 = 0.5;

// ---------------------------------------------------------------------------------------------
// Objects

/// A Ready node with room for many pods; `schedulable: false` starts it cordoned.
pub fn node(name: &str, schedulable: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": !schedulable},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A node with a `NoSchedule` taint `key=value`.
pub fn tainted_node(name: &str, key: &str, value: &str) -> Value {
    let mut n = node(name, true);
    n["spec"]["taints"] = json!([{"key": key, "value": value, "effect": "NoSchedule"}]);
    n
}

/// How a Deployment rolls out.
#[derive(Clone, Copy, Debug)]
pub enum Strategy {
    /// No `strategy` field: RollingUpdate 25% / 25% (surge 1, unavailable 0 for one replica).
    Default,
    /// RollingUpdate maxSurge 0, maxUnavailable 1.
    NoSurge,
    /// Recreate.
    Recreate,
}

/// A Deployment `name` in [`NS`] (pods labelled `app: name`, 1 s grace period).
pub fn deployment(name: &str, replicas: i64, strategy: Strategy) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "app", "image": "registry.example/app:1",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}});
    match strategy {
        Strategy::Default => {}
        Strategy::NoSurge => {
            d["spec"]["strategy"] = json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})
        }
        Strategy::Recreate => d["spec"]["strategy"] = json!({"type": "Recreate"}),
    }
    d
}

/// Adds a toleration of the `NoSchedule` taint `key=value` to a Deployment's pods.
pub fn tolerating(mut d: Value, key: &str, value: &str) -> Value {
    d["spec"]["template"]["spec"]["tolerations"] =
        json!([{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]);
    d
}

/// A PodDisruptionBudget `minAvailable: n` over `app: <app>` in [`NS`].
pub fn pdb_min_available(app: &str, n: i64) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": NS},
        "spec": {"minAvailable": n, "selector": {"matchLabels": {"app": app}}}})
}

// ---------------------------------------------------------------------------------------------
// The cluster

/// A running kube-sim with its scratch directory (certificates, kubeconfig, kubectl HOME).
pub struct Cluster {
    pub sim: SimHandle,
    pub dir: tempfile::TempDir,
    /// The client certificate kube-sim presents to webhooks (as kube-apiserver does through its
    /// AdmissionConfiguration), and its CA; `None` for a cluster whose webhook calls are
    /// anonymous. Webhooks started with [`Webhook::start`] require it when it is set.
    pub webhook_client: Option<ClientPki>,
    /// Another client certificate from the same CA, with subject CN `not-the-apiserver`.
    pub same_ca_other_client: Option<ClientPki>,
}

/// A client CA and one client certificate it signed (PEM), with the CA written to `ca_file`.
#[derive(Debug, Clone)]
pub struct ClientPki {
    pub ca_pem: String,
    pub ca_file: PathBuf,
    pub cert_pem: String,
    pub key_pem: String,
}

impl ClientPki {
    /// The certificate and key as a reqwest identity.
    pub fn identity(&self) -> reqwest::Identity {
        reqwest::Identity::from_pem(format!("{}\n{}", self.cert_pem, self.key_pem).as_bytes())
            .expect("client identity")
    }
}

/// Makes a client CA named `ca_name` and a client certificate (extended key usage clientAuth)
/// with subject CN `cn`, writing the CA to `dir/<file_stem>-ca.crt`.
pub fn client_pki(dir: &Path, file_stem: &str, ca_name: &str, cn: &str) -> ClientPki {
    client_pkis(dir, file_stem, ca_name, &[cn]).remove(0)
}

/// [`client_pki`] with one certificate per name in `cns`, all from the same CA.
pub fn client_pkis(dir: &Path, file_stem: &str, ca_name: &str, cns: &[&str]) -> Vec<ClientPki> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let ca_file = dir.join(format!("{file_stem}-ca.crt"));
    std::fs::write(&ca_file, ca_cert.pem()).expect("write client CA");
    cns.iter()
        .map(|cn| {
            let key = KeyPair::generate().expect("client key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
            params.distinguished_name.push(DnType::CommonName, *cn);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let cert = params.signed_by(&key, &issuer).expect("client certificate");
            ClientPki {
                ca_pem: ca_cert.pem(),
                ca_file: ca_file.clone(),
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            }
        })
        .collect()
}

/// Writes kube-apiserver's files for webhook client certificates into `dir` — an
/// `AdmissionConfiguration` whose `ValidatingAdmissionWebhook` plugin names a kubeconfig whose
/// user `<service>.<namespace>.svc` carries `pki`'s certificate — and returns the
/// AdmissionConfiguration's path (what `--admission-control-config-file` takes).
pub fn write_admission_config(dir: &Path, pki: &ClientPki) -> PathBuf {
    std::fs::write(dir.join("webhook-client.crt"), &pki.cert_pem).expect("write client cert");
    std::fs::write(dir.join("webhook-client.key"), &pki.key_pem).expect("write client key");
    let kubeconfig = dir.join("webhook-kubeconfig.yaml");
    // Service port 443: the name without a port matches (kube-apiserver's rule).
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: {WEBHOOK_SERVICE}.{WEBHOOK_NAMESPACE}.svc\n  user:\n    client-certificate: webhook-client.crt\n    client-key: webhook-client.key\n"
        ),
    )
    .expect("write webhook kubeconfig");
    let admission = dir.join("admission-config.yaml");
    std::fs::write(
        &admission,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ValidatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        ),
    )
    .expect("write admission configuration");
    admission
}

impl Cluster {
    /// Starts kube-sim with controllers on, pods Ready [`POD_START_SECONDS`] after they start,
    /// presenting a client certificate to webhooks.
    pub async fn start(objects: Vec<Value>) -> Cluster {
        Self::start_with_tick(objects, SimOptions::default().tick).await
    }

    /// [`Cluster::start`] with the node to drain, `n1`, and a spare `n2` cordoned until the
    /// workload is up, so that every pod of `apps` (name, replicas) is Ready on `n1`.
    pub async fn start_on_n1(workload: Vec<Value>, apps: &[(&str, usize)]) -> Cluster {
        let mut objects = vec![node("n1", true), node("n2", false)];
        objects.extend(workload);
        let cluster = Self::start(objects).await;
        cluster.wait_ready_on(apps, "n1").await;
        cluster
    }

    /// [`Cluster::start_on_n1`] with one replica of Deployment `app` behind a budget
    /// `minAvailable: 1`, which never allows its eviction by itself.
    pub async fn start_single_replica_behind_budget(app: &str) -> Cluster {
        Self::start_on_n1(
            vec![
                deployment(app, 1, Strategy::Default),
                pdb_min_available(app, 1),
            ],
            &[(app, 1)],
        )
        .await
    }

    /// [`Cluster::start`] whose webhook calls are anonymous (no client certificate).
    pub async fn start_unauthenticated(objects: Vec<Value>) -> Cluster {
        Self::start_with(objects, SimOptions::default().tick, false).await
    }

    /// [`Cluster::start`] with another controller tick (real time between reconciles).
    pub async fn start_with_tick(objects: Vec<Value>, tick: Duration) -> Cluster {
        Self::start_with(objects, tick, true).await
    }

    async fn start_with(objects: Vec<Value>, tick: Duration, webhook_auth: bool) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut pkis = if webhook_auth {
            client_pkis(
                dir.path(),
                "webhook-client",
                "kube-sim-webhook-client-ca",
                &["kube-apiserver", "not-the-apiserver"],
            )
        } else {
            Vec::new()
        };
        let same_ca_other_client = pkis.pop();
        let webhook_client = pkis.pop();
        let mut objects = objects;
        objects.insert(
            0,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        );
        let mut opts = SimOptions {
            objects,
            kubeconfig_path: Some(dir.path().join("kubeconfig")),
            tick,
            ..Default::default()
        };
        if let Some(pki) = &webhook_client {
            let admission = write_admission_config(dir.path(), pki);
            opts.webhook_auth =
                kube_sim::webhook_auth::WebhookAuth::from_admission_config(&admission)
                    .expect("admission configuration loads");
        }
        opts.config.pod_start_delay_seconds = POD_START_SECONDS;
        let sim = Sim::start(opts).await.expect("kube-sim starts");
        Cluster {
            sim,
            dir,
            webhook_client,
            same_ca_other_client,
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.sim.kubeconfig_path().to_path_buf()
    }

    /// Cordons or uncordons a node (as `kubectl cordon` would, without kubectl).
    pub fn set_schedulable(&self, name: &str, schedulable: bool) {
        let mut n = self.sim.get("v1", "Node", "", name).expect("node exists");
        n["spec"]["unschedulable"] = json!(!schedulable);
        self.sim.apply(n).expect("node update");
    }

    /// Pods of `app` in [`NS`] (terminating ones included).
    pub fn pods(&self, app: &str) -> Vec<Value> {
        pods_of(&self.sim, app)
    }

    /// The Deployment `name` in [`NS`].
    pub fn deployment(&self, name: &str) -> Value {
        self.sim
            .get("apps/v1", "Deployment", NS, name)
            .unwrap_or(Value::Null)
    }

    /// The template's `kubectl.kubernetes.io/restartedAt`, if any.
    pub fn restarted_at(&self, name: &str) -> Option<String> {
        self.deployment(name)
            .pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt")
            .and_then(Value::as_str)
            .map(String::from)
    }

    /// Waits until every Deployment has all its replicas Ready (and not terminating) on `node`,
    /// and its status says so (see [`deployment_settled`]).
    pub async fn wait_ready_on(&self, apps: &[(&str, usize)], node: &str) {
        let what = format!("{apps:?} Ready on {node}, as their Deployments report");
        wait_until(&what, Duration::from_secs(90), || {
            apps.iter().all(|(app, n)| {
                let ready = ready_pods(&self.sim, app);
                ready.len() == *n
                    && ready.iter().all(|p| node_of(p) == node)
                    && deployment_settled(&self.deployment(app), *n)
            })
        })
        .await;
    }

    /// Waits until `app` has `n` Ready pods (anywhere) and its Deployment's status says so.
    pub async fn wait_settled(&self, app: &str, n: usize) {
        wait_until(
            &format!("{app}: {n} Ready pod(s), as its Deployment reports"),
            Duration::from_secs(90),
            || {
                ready_pods(&self.sim, app).len() == n
                    && deployment_settled(&self.deployment(app), n)
            },
        )
        .await;
    }

    /// Waits until `app` has exactly `n` pods, all Ready, none terminating and none on `not_on`.
    pub async fn wait_moved(&self, app: &str, n: usize, not_on: &str) {
        wait_until(
            &format!("{app} to run {n} Ready pod(s) off {not_on}"),
            Duration::from_secs(90),
            || {
                let pods = self.pods(app);
                pods.len() == n
                    && pods
                        .iter()
                        .all(|p| is_ready(p) && !is_terminating(p) && node_of(p) != not_on)
            },
        )
        .await;
    }

    /// EvictionDeflected Events regarding the Deployment `name`.
    pub fn deflection_events(&self, name: &str) -> usize {
        self.sim
            .list("events.k8s.io/v1", "Event", Some(NS))
            .iter()
            .filter(|e| {
                e["reason"] == "EvictionDeflected"
                    && e["regarding"]["kind"] == "Deployment"
                    && e["regarding"]["name"] == name
            })
            .count()
    }

    /// ReplicaSets owned by the Deployment `name`.
    pub fn replica_sets(&self, name: &str) -> Vec<Value> {
        self.sim
            .list("apps/v1", "ReplicaSet", Some(NS))
            .into_iter()
            .filter(|rs| {
                rs.pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|o| o.iter().any(|r| r["name"] == name))
            })
            .collect()
    }
}

pub fn pods_of(sim: &SimHandle, app: &str) -> Vec<Value> {
    sim.list("v1", "Pod", Some(NS))
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app)
        .collect()
}

/// The Deployment's status has caught up with `n` Ready pods of its current template: observed
/// its generation and reports `n` replicas, all updated, Ready and available (what `kubectl
/// rollout status` waits for, plus `readyReplicas`).
///
/// Pods being Ready is not enough: the status follows them a few controller ticks later (kubelet
/// → ReplicaSet status → Deployment status, as with the real controllers), and a sampler or a
/// resourceVersion taken in between sees the stale pre-Ready status (`readyReplicas` 0).
pub fn deployment_settled(d: &Value, n: usize) -> bool {
    let int = |ptr: &str| d.pointer(ptr).and_then(Value::as_i64).unwrap_or(0);
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    d.pointer("/status/observedGeneration").is_some()
        && int("/status/observedGeneration") >= int("/metadata/generation")
        && [
            "/status/replicas",
            "/status/updatedReplicas",
            "/status/readyReplicas",
            "/status/availableReplicas",
        ]
        .iter()
        .all(|p| int(p) == n)
}

pub fn is_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

pub fn is_terminating(p: &Value) -> bool {
    p.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

pub fn node_of(p: &Value) -> &str {
    p.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Pods of `app` that serve: Ready and not terminating.
pub fn ready_pods(sim: &SimHandle, app: &str) -> Vec<Value> {
    pods_of(sim, app)
        .into_iter()
        .filter(|p| is_ready(p) && !is_terminating(p))
        .collect()
}

/// Polls `f` every 50 ms until it holds; panics naming `what` after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The webhook

/// A CA and serving certificate for the shipped Service name, written to `dir`.
pub fn certs(dir: &Path) -> GeneratedCerts {
    let args = CertsArgs::loopback(WEBHOOK_SERVICE, WEBHOOK_NAMESPACE, dir);
    let certs = generate(&args).expect("certificates");
    write_files(dir, &certs).expect("write certificates");
    certs
}

/// One `kube-descheduler webhook` process serving on 127.0.0.1 (port chosen by the OS).
pub struct Webhook {
    child: Option<tokio::process::Child>,
    pub addr: SocketAddr,
    /// The probe port (only when reviews require a client certificate).
    pub probe_addr: Option<SocketAddr>,
    logs: Arc<Mutex<Vec<String>>>,
    http: reqwest::Client,
}

impl Webhook {
    /// Starts the binary with `extra` flags and waits until `/readyz` is 200 (caches synced).
    pub async fn start(
        cluster: &Cluster,
        certs_dir: &Path,
        ca_pem: &str,
        instance: &str,
        extra: &[&str],
    ) -> Webhook {
        Self::start_on(cluster, certs_dir, ca_pem, instance, 0, extra).await
    }

    /// [`Webhook::start`] on `port` of 127.0.0.1 (0: chosen by the OS), e.g. a restarted
    /// replica taking over its predecessor's port.
    pub async fn start_on(
        cluster: &Cluster,
        certs_dir: &Path,
        ca_pem: &str,
        instance: &str,
        port: u16,
        extra: &[&str],
    ) -> Webhook {
        let port = port.to_string();
        let client = cluster.webhook_client.clone();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"));
        cmd.arg("webhook")
            .arg("--tls-cert-file")
            .arg(certs_dir.join("tls.crt"))
            .arg("--tls-private-key-file")
            .arg(certs_dir.join("tls.key"))
            .args(["--bind-address", "127.0.0.1", "--port", port.as_str()])
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .args(["--logging-format", "json", "--instance-name", instance])
            .args(extra)
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(pki) = &client {
            // Reviews require kube-sim's client certificate; probes have their own port.
            cmd.arg("--client-ca-file")
                .arg(&pki.ca_file)
                .args(["--probe-port", "0"]);
        }
        let mut child = cmd.spawn().expect("kube-descheduler webhook starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let logs: Arc<Mutex<Vec<String>>> = Arc::default();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let logs2 = logs.clone();
        tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && v["fields"]["message"] == "eviction guard serving"
                    && let Some(addr) = v["fields"]["addr"].as_str()
                    && let Ok(addr) = addr.parse::<SocketAddr>()
                    && let Some(tx) = tx.take()
                {
                    let probe = v["fields"]["probe_addr"]
                        .as_str()
                        .and_then(|a| a.parse::<SocketAddr>().ok());
                    let _ = tx.send((addr, probe));
                }
                logs2.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        let (addr, probe_addr) = match tokio::time::timeout(Duration::from_secs(60), rx).await {
            Ok(Ok(addrs)) => addrs,
            _ => panic!(
                "webhook {instance} did not report its address; logs:\n{}",
                logs.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
            ),
        };
        let mut http = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA certificate"),
            )
            .timeout(Duration::from_secs(10));
        if let Some(pki) = &client {
            // The helper's own requests (readiness, metrics) authenticate like kube-sim.
            http = http.identity(pki.identity());
        }
        let http = http.build().expect("HTTP client");
        let wh = Webhook {
            child: Some(child),
            addr,
            probe_addr,
            logs,
            http,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = wh
                .http
                .get(format!("https://127.0.0.1:{}/readyz", addr.port()))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "webhook {instance} never became ready; logs:\n{}",
                wh.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        wh
    }

    /// Everything the process logged so far.
    pub fn logs(&self) -> String {
        self.logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .join("\n")
    }

    /// `GET /healthz`: (status code, body), or `None` when the request fails.
    pub async fn healthz(&self) -> Option<(u16, String)> {
        let r = self
            .http
            .get(format!("https://127.0.0.1:{}/healthz", self.addr.port()))
            .send()
            .await
            .ok()?;
        let code = r.status().as_u16();
        Some((code, r.text().await.unwrap_or_default()))
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        let r = self
            .http
            .get(format!("https://127.0.0.1:{}/metrics", self.addr.port()))
            .send()
            .await
            .expect("GET /metrics");
        r.text().await.expect("metrics body")
    }

    /// Sum of the samples of the series `name` (exact name with labels, e.g.
    /// `kube_descheduler_guard_allows_total{reason="dry_run"}`).
    pub async fn metric(&self, name: &str) -> f64 {
        metric_value(&self.metrics().await, name)
    }

    /// Asserts that the counter `name` (exact name with labels) has counted at least once.
    pub async fn assert_counted(&self, name: &str) {
        let value = self.metric(name).await;
        assert!(value >= 1.0, "{name} is {value}");
    }

    /// Kills the process (as a crashed or deleted replica would disappear).
    pub async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }
}

/// The value of one series in Prometheus / OpenMetrics text (0 when absent).
pub fn metric_value(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| *series == name)
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .sum()
}

/// Registers the webhook exactly as `webhook-config/base` ships it (CREATE pods/eviction,
/// failurePolicy Ignore, sideEffects NoneOnDryRun, timeoutSeconds 5, service reference), with
/// our caBundle; the service name resolves to `addr` (kube-sim has no cluster DNS).
pub fn register_guard(cluster: &Cluster, ca_bundle: &str, addr: SocketAddr) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("webhook-config/base/validatingwebhookconfiguration.yaml");
    let text = std::fs::read_to_string(&path).expect("webhook-config base is readable");
    let mut objs = kube_sim::snapshot::parse(&text).expect("webhook-config base parses");
    assert_eq!(objs.len(), 1, "{} holds one object", path.display());
    let mut vwc = objs.remove(0);
    let hooks = vwc["webhooks"].as_array_mut().expect("webhooks list");
    for h in hooks.iter_mut() {
        assert_eq!(h["clientConfig"]["service"]["name"], WEBHOOK_SERVICE);
        assert_eq!(h["clientConfig"]["service"]["namespace"], WEBHOOK_NAMESPACE);
        h["clientConfig"]["caBundle"] = json!(ca_bundle.trim());
    }
    cluster
        .sim
        .set_service_override(WEBHOOK_NAMESPACE, WEBHOOK_SERVICE, addr);
    cluster.sim.apply(vwc.clone()).expect("register webhook");
    vwc
}

/// Certificates in the cluster's directory, one webhook started and registered.
pub async fn guarded(cluster: &Cluster, extra: &[&str]) -> (Webhook, GeneratedCerts) {
    let certs_dir = cluster.dir.path().join("certs");
    std::fs::create_dir_all(&certs_dir).expect("certs dir");
    let c = certs(&certs_dir);
    let wh = Webhook::start(cluster, &certs_dir, &c.ca_cert_pem, "guard-0", extra).await;
    register_guard(cluster, &c.ca_bundle, wh.addr);
    (wh, c)
}

// ---------------------------------------------------------------------------------------------
// kubectl

/// Every kubectl found: the one on PATH, then `kubectl.1.27` … `kubectl.1.33` next to its real
/// file. The second list names those that are missing.
pub fn kubectls() -> (Vec<(String, PathBuf)>, Vec<String>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    let Some(path) = which("kubectl") else {
        missing.push("kubectl (on PATH)".to_string());
        return (found, missing);
    };
    found.push(("path".to_string(), path.clone()));
    let real = std::fs::canonicalize(&path).unwrap_or(path);
    let dir = real.parent().map(Path::to_path_buf).unwrap_or_default();
    for v in 27..=33 {
        let p = dir.join(format!("kubectl.1.{v}"));
        if p.is_file() {
            found.push((format!("1.{v}"), p));
        } else {
            missing.push(p.display().to_string());
        }
    }
    (found, missing)
}

/// The kubectl on PATH (tests that exercise one version).
pub fn kubectl() -> PathBuf {
    which("kubectl").expect("kubectl on PATH (CI has it)")
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The result of one kubectl run.
#[derive(Debug, Clone)]
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    /// stdout and stderr together (kubectl prints eviction retries on stderr).
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs kubectl against the cluster (own HOME, so discovery caches never collide).
pub async fn run_kubectl(bin: &Path, cluster: &Cluster, args: &[&str]) -> Output {
    let home = cluster.dir.path().join("home");
    let _ = std::fs::create_dir_all(&home);
    let started = Instant::now();
    let child = tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(args)
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let (ok, stdout, stderr) = match tokio::time::timeout(Duration::from_secs(180), child).await {
        Ok(Ok(o)) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Ok(Err(e)) => (
            false,
            String::new(),
            format!("cannot run {}: {e}", bin.display()),
        ),
        Err(_) => (
            false,
            String::new(),
            "kubectl ran for more than 180 s".into(),
        ),
    };
    Output {
        ok,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    }
}

/// `kubectl drain NODE --ignore-daemonsets --delete-emptydir-data --timeout=T [extra…]`.
pub async fn drain(
    bin: &Path,
    cluster: &Cluster,
    node: &str,
    timeout: &str,
    extra: &[&str],
) -> Output {
    let timeout = format!("--timeout={timeout}");
    let mut args = vec![
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        timeout.as_str(),
    ];
    args.extend_from_slice(extra);
    run_kubectl(bin, cluster, &args).await
}

// ---------------------------------------------------------------------------------------------
// Sampling Ready replicas

/// What the sampler saw for one Deployment.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Samples taken.
    pub samples: usize,
    /// Fewest serving pods (Ready, not terminating) in any sample.
    pub min_ready_pods: usize,
    /// Fewest `status.readyReplicas` of the Deployment in any sample.
    pub min_ready_replicas: i64,
    /// Longest stretch (wall time) with 0 serving pods.
    pub longest_zero: Duration,
}

/// Samples every 100 ms until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(String, Series)>>,
}

impl Sampler {
    /// Starts sampling the Deployments `apps` (in [`NS`]). Panics unless each one's status
    /// already reports its serving pods ([`deployment_settled`]; [`Cluster::wait_ready_on`] waits
    /// for that): a status still catching up would read as a drop to 0 Ready replicas.
    pub fn start(sim: &SimHandle, apps: &[&str]) -> Sampler {
        for app in apps {
            let serving = ready_pods(sim, app).len();
            let d = sim
                .get("apps/v1", "Deployment", NS, app)
                .unwrap_or(Value::Null);
            assert!(
                deployment_settled(&d, serving),
                "sampling {app} before its Deployment status reports its {serving} Ready pod(s): {}",
                d["status"]
            );
        }
        let sim = sim.clone();
        let apps: Vec<String> = apps.iter().map(|a| a.to_string()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let task = tokio::spawn(async move {
            let mut series: Vec<(String, Series, Option<Instant>)> = apps
                .into_iter()
                .map(|a| {
                    let s = Series {
                        min_ready_pods: usize::MAX,
                        min_ready_replicas: i64::MAX,
                        ..Default::default()
                    };
                    (a, s, None)
                })
                .collect();
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = Instant::now();
                let pods = sim.list("v1", "Pod", Some(NS));
                for (app, s, zero_since) in series.iter_mut() {
                    let ready = pods
                        .iter()
                        .filter(|p| {
                            p["metadata"]["labels"]["app"] == app.as_str()
                                && is_ready(p)
                                && !is_terminating(p)
                        })
                        .count();
                    let replicas = sim
                        .get("apps/v1", "Deployment", NS, app)
                        .and_then(|d| d.pointer("/status/readyReplicas").and_then(Value::as_i64))
                        .unwrap_or(0);
                    s.samples += 1;
                    s.min_ready_pods = s.min_ready_pods.min(ready);
                    s.min_ready_replicas = s.min_ready_replicas.min(replicas);
                    match (ready, *zero_since) {
                        (0, None) => *zero_since = Some(now),
                        (0, Some(t)) => s.longest_zero = s.longest_zero.max(now - t),
                        (_, Some(t)) => {
                            s.longest_zero = s.longest_zero.max(now - t);
                            *zero_since = None;
                        }
                        _ => {}
                    }
                }
                if stop2.load(Ordering::Acquire) {
                    break;
                }
            }
            series.into_iter().map(|(a, s, _)| (a, s)).collect()
        });
        Sampler { stop, task }
    }

    /// Stops sampling (after one last sample) and returns each Deployment's series.
    pub async fn finish(self) -> Vec<(String, Series)> {
        self.stop.store(true, Ordering::Release);
        self.task.await.expect("sampler task")
    }
}
