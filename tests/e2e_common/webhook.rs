//! The webhook: the real `kube-descheduler webhook` binary, its certificates and metrics,
//! registered from `webhook-config/` as shipped.

use super::*;

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
        let client = cluster.webhook_client.as_ref();
        let mut cmd = webhook_command(cluster, certs_dir, instance, port, extra);
        let mut child = cmd.spawn().expect("kube-descheduler webhook starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (logs, rx) = collect_logs(stderr);
        let (addr, probe_addr) = match tokio::time::timeout(Duration::from_secs(60), rx).await {
            Ok(Ok(addrs)) => addrs,
            _ => panic!(
                "webhook {instance} did not report its address; logs:\n{}",
                logs.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
            ),
        };
        let wh = Webhook {
            child: Some(child),
            addr,
            probe_addr,
            logs,
            http: https_client(ca_pem, client),
        };
        wh.wait_ready(instance).await;
        wh
    }

    /// Waits (at most 60 s) until `/readyz` on the serving port answers with success.
    async fn wait_ready(&self, instance: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self
                .http
                .get(format!("https://127.0.0.1:{}/readyz", self.addr.port()))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "webhook {instance} never became ready; logs:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
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

/// The `kube-descheduler webhook` command serving with the certificates of `certs_dir` on
/// `port` of 127.0.0.1, logging JSON to a piped stderr; with the cluster's webhook client PKI,
/// reviews require its client certificate and probes get their own port.
fn webhook_command(
    cluster: &Cluster,
    certs_dir: &Path,
    instance: &str,
    port: u16,
    extra: &[&str],
) -> tokio::process::Command {
    let port = port.to_string();
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
    if let Some(pki) = &cluster.webhook_client {
        // Reviews require kube-sim's client certificate; probes have their own port.
        cmd.arg("--client-ca-file")
            .arg(&pki.ca_file)
            .args(["--probe-port", "0"]);
    }
    cmd
}

/// The serving and probe addresses the webhook logs when it starts serving.
type ServingAddrs = (SocketAddr, Option<SocketAddr>);

/// Collects the lines of `stderr` in the background; the receiver gets the addresses from the
/// "eviction guard serving" line.
fn collect_logs(
    stderr: tokio::process::ChildStderr,
) -> (
    Arc<Mutex<Vec<String>>>,
    tokio::sync::oneshot::Receiver<ServingAddrs>,
) {
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
    (logs, rx)
}

/// The helper's HTTPS client trusting only `ca_pem`; with `client`, its requests (readiness,
/// metrics) authenticate like kube-sim's.
fn https_client(ca_pem: &str, client: Option<&ClientPki>) -> reqwest::Client {
    let mut http = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA certificate"),
        )
        .timeout(Duration::from_secs(10));
    if let Some(pki) = client {
        http = http.identity(pki.identity());
    }
    http.build().expect("HTTP client")
}
