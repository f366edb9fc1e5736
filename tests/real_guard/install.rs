//! The guard, installed from the chart once per test binary and run as a local process with its
//! ServiceAccount.

use super::*;

/// The running guard.
pub(crate) struct Guard {
    /// host:port of the review port.
    pub(crate) addr: String,
    pub(crate) probe_addr: String,
    /// Serving CA (PEM file) and folder of the guard's files.
    pub(crate) ca_file: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) logs: Arc<Mutex<Vec<String>>>,
    /// The ServiceAccount's kubeconfig the guard runs with.
    pub(crate) sa_kubeconfig: PathBuf,
}

impl Guard {
    pub(crate) fn logs(&self) -> String {
        self.logs.lock().map(|l| l.join("\n")).unwrap_or_default()
    }
}

/// Installs the guard from the chart on the shared cluster (once) and starts it.
pub(crate) fn guard() -> &'static Guard {
    static GUARD: OnceLock<Guard> = OnceLock::new();
    GUARD.get_or_init(|| install_guard(shared()))
}

/// Applies the chart's guard objects, writes the guard's certificates and ServiceAccount
/// kubeconfig under the cluster's folder, starts the guard with the chart's arguments, waits
/// until it is ready, and registers the chart's webhook configuration pointed at it.
pub(crate) fn install_guard(c: &Cluster) -> Guard {
    eprintln!("Kubernetes {} in {}", c.version, c.dir.display());
    use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
    let dir = c.dir.join("guard");
    std::fs::create_dir_all(&dir).expect("guard dir");
    let client_ca = std::fs::read_to_string(&c.webhook_client_ca).expect("webhook client CA");
    let objects = render_chart(&json!({
        "webhook": {"clientAuth": {"enabled": true, "caCert": client_ca}}
    }));
    let client_ca_file = apply_guard_objects(c, &objects, &client_ca, &dir);
    let sa_kubeconfig = write_sa_kubeconfig(c, &dir);

    // Serving certificate for 127.0.0.1.
    let certs = generate(&CertsArgs::loopback(
        "kube-descheduler-webhook",
        GUARD_NS,
        &dir,
    ))
    .expect("certificates");
    write_files(&dir, &certs).expect("write certificates");
    let ca_file = dir.join("serving-ca.crt");
    std::fs::write(&ca_file, &certs.ca_cert_pem).expect("CA");

    let args = guard_args(&objects, &dir, &client_ca_file, &sa_kubeconfig);
    let (addr, probe_addr, logs) = start_guard(&args);
    wait_ready(&ca_file, &probe_addr);
    register_webhook(c, &objects, &addr, &certs.ca_bundle);
    Guard {
        addr,
        probe_addr,
        ca_file,
        dir,
        logs,
        sa_kubeconfig,
    }
}

/// Applies the guard's own objects as rendered (ServiceAccount, RBAC, client CA ConfigMap) and
/// writes the client CA read back from the applied ConfigMap to `dir/client-ca.crt`.
fn apply_guard_objects(c: &Cluster, objects: &[Value], client_ca: &str, dir: &Path) -> PathBuf {
    let _ = c.kubectl(&["create", "namespace", GUARD_NS]);
    let own: Vec<Value> = [
        ("ServiceAccount", GUARD_SA),
        ("ClusterRole", GUARD_SA),
        ("ClusterRoleBinding", GUARD_SA),
        ("ConfigMap", "kube-descheduler-webhook-client-ca"),
    ]
    .iter()
    .map(|(k, n)| find(objects, k, n).clone())
    .collect();
    apply_server_side(c, &own);

    // The client CA the guard trusts: read back from the applied ConfigMap.
    let cm = kubectl_json(
        c,
        &[
            "get",
            "configmap",
            "kube-descheduler-webhook-client-ca",
            "-n",
            GUARD_NS,
        ],
    );
    let served_ca = cm["data"]["ca.crt"]
        .as_str()
        .expect("ca.crt in the ConfigMap");
    assert_eq!(served_ca.trim(), client_ca.trim());
    let client_ca_file = dir.join("client-ca.crt");
    std::fs::write(&client_ca_file, served_ca).expect("client CA");
    client_ca_file
}

/// `dir/sa.kubeconfig` with a token of the chart's ServiceAccount: the guard's calls are
/// authorized by the chart's RBAC.
fn write_sa_kubeconfig(c: &Cluster, dir: &Path) -> PathBuf {
    let token = kubectl_ok(
        c,
        &["create", "token", GUARD_SA, "-n", GUARD_NS, "--duration=2h"],
    );
    let server = kubectl_ok(
        c,
        &[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ],
    );
    let sa_kubeconfig = dir.join("sa.kubeconfig");
    std::fs::write(
        &sa_kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n",
            server.stdout.trim(),
            c.dir.join("ca.crt").display(),
            token.stdout.trim()
        ),
    )
    .expect("kubeconfig");
    sa_kubeconfig
}

/// The chart's container arguments, paths and ports adapted to a local process, with rule B
/// and the ServiceAccount's kubeconfig.
fn guard_args(
    objects: &[Value],
    dir: &Path,
    client_ca_file: &Path,
    sa_kubeconfig: &Path,
) -> Vec<String> {
    let deployment = find(objects, "Deployment", "kube-descheduler-webhook");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut args = chart_guard_common::local_guard_args(container, dir, client_ca_file);
    assert!(
        args.iter().any(|a| a.starts_with("--client-ca-file=")),
        "{args:?}"
    );
    // Rule B is opt-in per Deployment (annotation); the chart has no value for the flag.
    args.extend(
        [
            "--pdb-surge",
            "--surge-reconcile-interval=500ms",
            "--bind-address=127.0.0.1",
            "--logging-format=json",
            "--instance-name=guard-real",
        ]
        .map(String::from),
    );
    args.push(format!("--kubeconfig={}", sa_kubeconfig.display()));
    args
}

/// Starts the guard (stopped when this test process ends, however it ends) and waits until it
/// logs that it serves; its review and probe addresses, and its log lines as they come.
fn start_guard(args: &[String]) -> (String, String, Arc<Mutex<Vec<String>>>) {
    let mut child = real_common::binary_logging_to_pipe()
        .args(args)
        .spawn()
        .expect("the guard starts");
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; kill {child} 2>/dev/null",
            pid = std::process::id(),
            child = child.id()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let logs = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let logs = logs.clone();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && v["fields"]["message"] == "eviction guard serving"
                {
                    let _ = tx.send((
                        v["fields"]["addr"].as_str().unwrap_or("").to_owned(),
                        v["fields"]["probe_addr"].as_str().unwrap_or("").to_owned(),
                    ));
                }
                if let Ok(mut l) = logs.lock() {
                    l.push(line);
                }
            }
        });
    }
    let (addr, probe_addr) = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            panic!(
                "the guard {args:?} did not serve:\n{}",
                logs.lock().map(|l| l.join("\n")).unwrap_or_default()
            )
        });
    std::mem::forget(child);
    (addr, probe_addr, logs)
}

/// Waits until the guard is ready (caches synced through the ServiceAccount's RBAC) on its
/// probe port.
fn wait_ready(ca_file: &Path, probe_addr: &str) {
    wait_until("the guard's /readyz", Duration::from_secs(60), || {
        let out = run_bounded(
            Command::new("curl").args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--cacert",
                &ca_file.display().to_string(),
                &format!("https://{probe_addr}/readyz"),
            ]),
            Duration::from_secs(10),
        );
        out.stdout.trim() == "200"
    });
}

/// Applies the chart's webhook configuration with its clientConfig pointed at the local guard
/// at `addr`, and gives kube-apiserver's informer time to pick it up.
fn register_webhook(c: &Cluster, objects: &[Value], addr: &str, ca_bundle: &str) {
    let mut vwc = find(
        objects,
        "ValidatingWebhookConfiguration",
        "kube-descheduler-eviction-guard",
    )
    .clone();
    let path = vwc["webhooks"][0]["clientConfig"]["service"]["path"]
        .as_str()
        .expect("service path")
        .to_owned();
    vwc["webhooks"][0]["clientConfig"] = json!({
        "url": format!("https://{addr}{path}"),
        "caBundle": ca_bundle,
    });
    apply_server_side(c, &[vwc]);
    std::thread::sleep(Duration::from_secs(3));
}
