//! The eviction guard on the real control plane (`tests/control-plane/up`): installed from the
//! Helm chart (rendered with the real Helm engine, applied server-side with validation), its
//! ServiceAccount's RBAC decided by kube-apiserver's authorizer, reviews authenticated by
//! kube-apiserver's webhook client certificate; real `kubectl drain` (1.33 and the one on PATH)
//! through a deflection and through a budget deadlock (rule B); a forged review restarts nothing.
//!
//! kwok's pods run nothing, so the guard runs as a local process on 127.0.0.1 with the chart's
//! container arguments, registered by the chart's ValidatingWebhookConfiguration with its
//! `clientConfig` pointed at that address (`url` instead of the Service).
//!
//! Needs python3 with `helm-python-sdk==0.2.2` and PyYAML, kubectl on PATH (and `kubectl.1.33`
//! next to it), curl and openssl. Drains are serialized (one node at a time on the shared cluster).

mod chart_guard_common;
mod real_common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use real_common::{Cluster, Out, root, run_bounded, run_bounded_stdin, shared, wait_until};
use serde_json::{Value, json};

const GUARD_NS: &str = "kube-descheduler";
const GUARD_SA: &str = "kube-descheduler-webhook";
const DEFLECTION: &str = "Eviction triggered evacuation";

// ---------------------------------------------------------------------------------------------
// Helpers

fn kubectl_json(c: &Cluster, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let out = c.kubectl(&a);
    assert!(out.ok, "kubectl {args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("kubectl printed JSON")
}

fn kubectl_ok(c: &Cluster, args: &[&str]) -> Out {
    let out = c.kubectl(args);
    assert!(out.ok, "kubectl {args:?}: {}{}", out.stdout, out.stderr);
    out
}

/// `kubectl apply --server-side` (field validation Strict, kubectl's default) of `objects`.
fn apply_server_side(c: &Cluster, objects: &[Value]) -> Out {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let out = run_bounded_stdin(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args([
                "apply",
                "--server-side",
                "--field-manager=helm",
                "--validate=strict",
                "-f",
                "-",
            ]),
        &list.to_string(),
        Duration::from_secs(120),
    );
    assert!(out.ok, "kubectl apply --server-side: {}", out.stderr);
    out
}

/// The chart rendered by the real Helm engine for `values`: its objects in template order.
fn render_chart(values: &Value) -> Vec<Value> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let out = run_bounded(
        Command::new(&python)
            .arg(root().join("tests/chart/render.py"))
            .arg("render")
            .arg(root().join("charts/kube-descheduler"))
            .arg("--values-json")
            .arg(values.to_string()),
        Duration::from_secs(120),
    );
    assert!(
        out.ok,
        "render.py failed (pip install helm-python-sdk==0.2.2): {}",
        out.stderr
    );
    let json = run_bounded_stdin(
        Command::new(&python).args([
            "-c",
            "import sys, json, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
        ]),
        &out.stdout,
        Duration::from_secs(60),
    );
    assert!(json.ok, "YAML to JSON (needs PyYAML): {}", json.stderr);
    serde_json::from_str(&json.stdout).expect("rendered objects")
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the chart renders no {kind} {name}"))
}

/// kubectl 1.33 (next to the kubectl on PATH) and the kubectl on PATH.
fn kubectls() -> Vec<(String, PathBuf)> {
    let on_path = PathBuf::from("kubectl");
    let mut bins = Vec::new();
    let which = run_bounded(
        Command::new("sh").args(["-c", "readlink -f \"$(command -v kubectl)\""]),
        Duration::from_secs(10),
    );
    let v133 = Path::new(which.stdout.trim())
        .parent()
        .map(|d| d.join("kubectl.1.33"));
    match v133 {
        Some(p) if p.exists() => bins.push(("1.33".to_owned(), p)),
        _ => eprintln!("kubectl.1.33 not found next to kubectl: only the one on PATH"),
    }
    bins.push(("path".to_owned(), on_path));
    bins
}

// ---------------------------------------------------------------------------------------------
// The guard, installed once per test binary

struct Guard {
    /// host:port of the review port.
    addr: String,
    probe_addr: String,
    /// Serving CA (PEM file) and folder of the guard's files.
    ca_file: PathBuf,
    dir: PathBuf,
    logs: Arc<Mutex<Vec<String>>>,
    /// The ServiceAccount's kubeconfig the guard runs with.
    sa_kubeconfig: PathBuf,
}

impl Guard {
    fn logs(&self) -> String {
        self.logs.lock().map(|l| l.join("\n")).unwrap_or_default()
    }
}

/// Installs the guard from the chart on the shared cluster (once) and starts it.
fn guard() -> &'static Guard {
    static GUARD: OnceLock<Guard> = OnceLock::new();
    GUARD.get_or_init(|| install_guard(shared()))
}

fn install_guard(c: &Cluster) -> Guard {
    eprintln!("Kubernetes {} in {}", c.version, c.dir.display());
    use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
    let dir = c.dir.join("guard");
    std::fs::create_dir_all(&dir).expect("guard dir");
    let client_ca = std::fs::read_to_string(&c.webhook_client_ca).expect("webhook client CA");
    let objects = render_chart(&json!({
        "webhook": {"clientAuth": {"enabled": true, "caCert": client_ca}}
    }));

    // The guard's own objects, as rendered: ServiceAccount, RBAC, client CA ConfigMap.
    let _ = c.kubectl(&["create", "namespace", GUARD_NS]);
    let own: Vec<Value> = [
        ("ServiceAccount", GUARD_SA),
        ("ClusterRole", GUARD_SA),
        ("ClusterRoleBinding", GUARD_SA),
        ("ConfigMap", "kube-descheduler-webhook-client-ca"),
    ]
    .iter()
    .map(|(k, n)| find(&objects, k, n).clone())
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

    // A token of the chart's ServiceAccount: the guard's calls are authorized by the chart's RBAC.
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

    // The chart's container arguments, paths and ports adapted to a local process.
    let deployment = find(&objects, "Deployment", "kube-descheduler-webhook");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut args = chart_guard_common::local_guard_args(container, &dir, &client_ca_file);
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

    let mut child = real_common::binary_logging_to_pipe()
        .args(&args)
        .spawn()
        .expect("the guard starts");
    // Stopped when this test process ends, however it ends.
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

    // Ready (caches synced through the ServiceAccount's RBAC) on the probe port.
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

    // The chart's webhook configuration, its clientConfig pointed at the local process.
    let mut vwc = find(
        &objects,
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
        "caBundle": certs.ca_bundle,
    });
    apply_server_side(c, &[vwc]);
    // kube-apiserver picks webhook configurations up from an informer.
    std::thread::sleep(Duration::from_secs(3));
    Guard {
        addr,
        probe_addr,
        ca_file,
        dir,
        logs,
        sa_kubeconfig,
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads

/// Drains one at a time on the shared cluster (every node is cordoned and uncordoned in turn).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn nodes(c: &Cluster) -> Vec<String> {
    let out = kubectl_ok(c, &["get", "nodes", "-o", "name"]);
    out.stdout
        .lines()
        .map(|l| l.trim_start_matches("node/").to_owned())
        .collect()
}

fn deployment(ns: &str, name: &str, replicas: u32, annotations: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name},
                     "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    })
}

fn pods(c: &Cluster, ns: &str, app: &str) -> Vec<Value> {
    let v = kubectl_json(c, &["get", "pods", "-n", ns, "-l", &format!("app={app}")]);
    v["items"].as_array().cloned().unwrap_or_default()
}

fn is_ready(p: &Value) -> bool {
    p["metadata"]["deletionTimestamp"].is_null()
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn node_of(p: &Value) -> &str {
    p["spec"]["nodeName"].as_str().unwrap_or("")
}

/// Creates `objects` (a Deployment of `replicas` and more) with every pod on `node`: the other
/// nodes are cordoned until the pods are Ready there.
fn place_on(c: &Cluster, node: &str, ns: &str, app: &str, replicas: usize, objects: &[Value]) {
    place_on_nodes(c, &[node], ns, app, replicas, objects)
}

/// [`place_on`] with every pod on one of `on`.
fn place_on_nodes(
    c: &Cluster,
    on: &[&str],
    ns: &str,
    app: &str,
    replicas: usize,
    objects: &[Value],
) {
    let _ = c.kubectl(&["create", "namespace", ns]);
    let others: Vec<String> = nodes(c)
        .into_iter()
        .filter(|n| !on.contains(&n.as_str()))
        .collect();
    for n in &others {
        kubectl_ok(c, &["cordon", n]);
    }
    for n in on {
        kubectl_ok(c, &["uncordon", n]);
    }
    for o in objects {
        c.apply(&o.to_string());
    }
    wait_until(
        &format!("{replicas} Ready pods of {app} on {on:?}"),
        Duration::from_secs(90),
        || {
            let p = pods(c, ns, app);
            p.len() == replicas && p.iter().all(|p| is_ready(p) && on.contains(&node_of(p)))
        },
    );
    wait_until(
        &format!("{app}'s status: {replicas} Ready"),
        Duration::from_secs(60),
        || {
            let d = kubectl_json(c, &["get", "deployment", app, "-n", ns]);
            d["status"]["readyReplicas"].as_u64() == Some(replicas as u64)
                && d["status"]["updatedReplicas"].as_u64() == Some(replicas as u64)
        },
    );
    for n in &others {
        kubectl_ok(c, &["uncordon", n]);
    }
}

/// What the sampler saw.
#[derive(Debug, Default, Clone)]
struct Series {
    samples: usize,
    min_ready_pods: usize,
    min_ready_replicas: i64,
    /// Longest stretch with no Ready (not terminating) pod.
    longest_zero: Duration,
}

/// Samples the Ready pods and `status.readyReplicas` of a Deployment as fast as kubectl answers.
struct Sampler {
    stop: Arc<AtomicBool>,
    task: std::thread::JoinHandle<Series>,
}

impl Sampler {
    fn start(c: &'static Cluster, ns: &str, app: &str) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, app, flag) = (ns.to_owned(), app.to_owned(), stop.clone());
        let task = std::thread::spawn(move || {
            let mut s = Series {
                min_ready_pods: usize::MAX,
                min_ready_replicas: i64::MAX,
                ..Default::default()
            };
            let mut zero_since: Option<Instant> = None;
            while !flag.load(Ordering::Relaxed) {
                let out = c.kubectl(&[
                    "get",
                    "deployment,pods",
                    "-n",
                    &ns,
                    "-l",
                    &format!("app={app}"),
                    "-o",
                    "json",
                ]);
                let Ok(v) = serde_json::from_str::<Value>(&out.stdout) else {
                    continue;
                };
                let items = v["items"].as_array().cloned().unwrap_or_default();
                let now = Instant::now();
                let ready = items
                    .iter()
                    .filter(|o| o["kind"] == "Pod" && is_ready(o))
                    .count();
                let replicas = items
                    .iter()
                    .find(|o| o["kind"] == "Deployment")
                    .map(|d| d["status"]["readyReplicas"].as_i64().unwrap_or(0))
                    .unwrap_or(0);
                s.samples += 1;
                s.min_ready_pods = s.min_ready_pods.min(ready);
                s.min_ready_replicas = s.min_ready_replicas.min(replicas);
                if ready == 0 {
                    let since = *zero_since.get_or_insert(now);
                    s.longest_zero = s.longest_zero.max(now - since);
                } else {
                    zero_since = None;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            s
        });
        Sampler { stop, task }
    }

    fn finish(self) -> Series {
        self.stop.store(true, Ordering::Relaxed);
        self.task.join().expect("sampler")
    }
}

struct Drain {
    out: Out,
    elapsed: Duration,
}

impl Drain {
    fn all(&self) -> String {
        format!("{}\n{}", self.out.stdout, self.out.stderr)
    }
}

fn drain(c: &Cluster, bin: &Path, node: &str, selector: &str, timeout: &str) -> Drain {
    let start = Instant::now();
    let out = c.kubectl_with(
        bin,
        &[
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            &format!("--pod-selector={selector}"),
            &format!("--timeout={timeout}"),
        ],
    );
    Drain {
        out,
        elapsed: start.elapsed(),
    }
}

fn slug(label: &str) -> String {
    label.replace('.', "-")
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// Scenario 1: the chart's guard objects apply server-side with validation; kube-apiserver's
/// authorizer gives the chart's ServiceAccount exactly what the guard needs (and not more); the
/// guard, run with that ServiceAccount's token and the cluster's webhook client CA, is ready.
#[test]
fn the_guard_installs_from_the_chart_and_runs_as_its_service_account() {
    let c = shared();
    let g = guard();
    let sa = format!("--as=system:serviceaccount:{GUARD_NS}:{GUARD_SA}");
    for (verb, resource, want) in [
        ("patch", "deployments.apps", "yes"),
        ("watch", "pods", "yes"),
        ("list", "poddisruptionbudgets.policy", "yes"),
        ("create", "events.events.k8s.io", "yes"),
        ("delete", "pods", "no"),
        ("create", "pods", "no"),
        ("update", "deployments.apps", "no"),
        ("get", "secrets", "no"),
    ] {
        let out = c.kubectl(&["auth", "can-i", verb, resource, &sa, "-A"]);
        assert_eq!(
            out.stdout.trim(),
            want,
            "can-i {verb} {resource} as the guard: {}",
            out.stderr
        );
    }
    // The ServiceAccount's own kubeconfig cannot do what the chart does not grant.
    let denied = run_bounded(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&g.sa_kubeconfig)
            .args(["get", "secrets", "-A"]),
        Duration::from_secs(30),
    );
    assert!(
        !denied.ok && denied.stderr.contains("Forbidden"),
        "{denied:?}"
    );
    let vwc = kubectl_json(
        c,
        &[
            "get",
            "validatingwebhookconfiguration",
            "kube-descheduler-eviction-guard",
        ],
    );
    assert_eq!(
        vwc["webhooks"][0]["clientConfig"]["url"],
        format!("https://{}/validate/eviction", g.addr)
    );
    assert_eq!(vwc["webhooks"][0]["failurePolicy"], "Ignore");
    assert!(
        g.logs().contains("\"client_auth\":true"),
        "the guard requires client certificates:\n{}",
        g.logs()
    );
}

/// Scenario 2: kubectl drain (1.33 and the one on PATH) of a node running a single-replica
/// Deployment completes through one deflection; Ready replicas never drop to 0.
#[test]
fn kubectl_drain_of_a_single_replica_deployment_deflects_once_without_downtime() {
    let c = shared();
    let g = guard();
    let _serial = serial();
    let ns = "real-drain";
    for (label, bin) in kubectls() {
        let app = format!("single-{}", slug(&label));
        let node = nodes(c)[0].clone();
        place_on(c, &node, ns, &app, 1, &[deployment(ns, &app, 1, json!({}))]);
        let before = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
        assert_eq!(before["metadata"]["generation"], 1);
        let sampler = Sampler::start(c, ns, &app);
        let d = drain(c, &bin, &node, &format!("app={app}"), "120s");
        // Until the rollout has finished.
        wait_until(
            &format!("{app} rolled out"),
            Duration::from_secs(60),
            || {
                let p = pods(c, ns, &app);
                p.len() == 1 && is_ready(&p[0]) && node_of(&p[0]) != node
            },
        );
        let series = sampler.finish();
        kubectl_ok(c, &["uncordon", &node]);
        let ctx = format!("kubectl {label}: {:?}\nguard logs:\n{}", d.out, g.logs());
        eprintln!(
            "kubectl {label}: drain of {node} took {:.1} s, {:.1} s at zero Ready ({} samples, min Ready pods {}, min readyReplicas {})",
            d.elapsed.as_secs_f64(),
            series.longest_zero.as_secs_f64(),
            series.samples,
            series.min_ready_pods,
            series.min_ready_replicas
        );
        eprintln!("kubectl {label} drain output:\n{}", d.all());
        assert!(d.out.ok, "drain failed: {ctx}");
        assert!(d.all().contains(DEFLECTION), "not deflected: {ctx}");
        let after = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
        assert!(
            after["spec"]["template"]["metadata"]["annotations"]
                ["kubectl.kubernetes.io/restartedAt"]
                .is_string(),
            "no restart: {ctx}"
        );
        assert_eq!(
            after["metadata"]["generation"], 2,
            "exactly one restart (one template change): {ctx}"
        );
        let rs = kubectl_json(
            c,
            &["get", "replicasets", "-n", ns, "-l", &format!("app={app}")],
        );
        assert_eq!(
            rs["items"].as_array().map(Vec::len),
            Some(2),
            "two ReplicaSets: the original and the restart's: {ctx}"
        );
        assert!(series.samples > 0);
        assert_eq!(series.min_ready_pods, 1, "never 0 Ready pods: {series:?}");
        assert_eq!(
            series.longest_zero,
            Duration::ZERO,
            "never 0 Ready pods: {series:?}"
        );
        assert!(series.min_ready_replicas >= 1, "{series:?}");
        kubectl_ok(c, &["delete", "deployment", &app, "-n", ns, "--wait=false"]);
    }
}

/// Scenario 3: 2 replicas and a budget `minAvailable: 2` (the drain deadlocks without the guard),
/// rule B opted in by the Deployment's annotation, for each kubectl:
/// - one replica on the drained node, one on another (required anti-affinity): the guard surges
///   to 3, the drain completes, Ready replicas never drop below 2, `spec.replicas` is restored;
/// - both replicas on the drained node: rule A comes first (every Ready replica is leaving), a
///   rolling restart moves them, the drain completes, never below 2 Ready, nothing surged.
#[test]
fn kubectl_drain_through_a_min_available_budget_with_rule_b() {
    let c = shared();
    let g = guard();
    let _serial = serial();
    let ns = "real-pdb";
    for (label, bin) in kubectls() {
        for together in [false, true] {
            let app = format!(
                "pdb-{}-{}",
                if together { "one-node" } else { "spread" },
                slug(&label)
            );
            let all = nodes(c);
            let node = all[1].clone();
            let on: Vec<&str> = if together {
                vec![&all[1]]
            } else {
                vec![&all[1], &all[2]]
            };
            let pdb = json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": app, "namespace": ns},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}}
            });
            let mut dep = deployment(
                ns,
                &app,
                2,
                json!({"kube-descheduler.io/pdb-surge": "enabled"}),
            );
            if !together {
                dep["spec"]["template"]["spec"]["affinity"] = json!({"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": {"app": app}},
                        "topologyKey": "kubernetes.io/hostname"}]}});
            }
            place_on_nodes(c, &on, ns, &app, 2, &[dep, pdb]);
            if !together {
                let p = pods(c, ns, &app);
                assert!(
                    p.iter().any(|p| node_of(p) == node),
                    "a replica on {node}: {p:?}"
                );
            }
            wait_until("the budget's status", Duration::from_secs(60), || {
                let p = kubectl_json(c, &["get", "pdb", &app, "-n", ns]);
                p["status"]["currentHealthy"] == 2 && p["status"]["disruptionsAllowed"] == 0
            });
            let sampler = Sampler::start(c, ns, &app);
            let d = drain(c, &bin, &node, &format!("app={app}"), "120s");
            let ctx = format!(
                "kubectl {label} {app}: {:?}\nguard logs:\n{}",
                d.out,
                g.logs()
            );
            assert!(d.out.ok, "drain failed: {ctx}");
            wait_until(
                &format!("{app} at 2 replicas, both Ready off {node}"),
                Duration::from_secs(60),
                || {
                    let dep = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
                    let p = pods(c, ns, &app);
                    dep["spec"]["replicas"] == 2
                        && dep["metadata"]["annotations"]
                            ["kube-descheduler.io/surge-original-replicas"]
                            .is_null()
                        && p.len() == 2
                        && p.iter().all(|p| is_ready(p) && node_of(p) != node)
                },
            );
            let series = sampler.finish();
            kubectl_ok(c, &["uncordon", &node]);
            eprintln!(
                "kubectl {label} {app}: drain of {node} through the budget took {:.1} s (min Ready pods {}, min readyReplicas {}, {} samples)",
                d.elapsed.as_secs_f64(),
                series.min_ready_pods,
                series.min_ready_replicas,
                series.samples
            );
            eprintln!("kubectl {label} {app} drain output:\n{}", d.all());
            let dep = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
            let restarted = dep["spec"]["template"]["metadata"]["annotations"]
                ["kubectl.kubernetes.io/restartedAt"]
                .is_string();
            if together {
                assert!(d.all().contains(DEFLECTION), "rule A: {ctx}");
                assert!(restarted, "rule A restarts: {ctx}");
                assert_eq!(dep["metadata"]["generation"], 2, "one restart: {ctx}");
            } else {
                assert!(
                    d.all().contains(&format!("PodDisruptionBudget {ns}/{app}")),
                    "the refusal names the budget: {ctx}"
                );
                assert!(!restarted, "surged, not restarted: {ctx}");
            }
            assert!(series.min_ready_pods >= 2, "{series:?}");
            kubectl_ok(
                c,
                &["delete", "deployment,pdb", &app, "-n", ns, "--wait=false"],
            );
        }
    }
}

/// Scenario 4: a review sent straight to the guard by a client without kube-apiserver's webhook
/// client certificate (none, or one from another CA with the same name) is refused in the TLS
/// handshake and restarts nothing; the same review with kube-apiserver's certificate is answered
/// (dry run, so nothing is written either).
#[test]
fn a_forged_review_restarts_nothing() {
    let c = shared();
    let g = guard();
    let ns = "real-forged";
    let app = "target";
    let _ = c.kubectl(&["create", "namespace", ns]);
    c.apply(&deployment(ns, app, 1, json!({})).to_string());
    wait_until("target Ready", Duration::from_secs(90), || {
        let p = pods(c, ns, app);
        p.len() == 1 && is_ready(&p[0])
    });
    let pod = pods(c, ns, app).remove(0);
    let pod_name = pod["metadata"]["name"].as_str().expect("name").to_owned();
    let review = |dry_run: bool| {
        kube_descheduler_guard::testing::eviction_review(
            "00000000-0000-0000-0000-00000000f0f0",
            (ns, &pod_name),
            json!({"username": "system:admin", "groups": ["system:masters"]}),
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": pod_name, "namespace": ns}}),
            dry_run,
        )
        .to_string()
    };
    let url = format!("https://{}/validate/eviction", g.addr);
    let ca = g.ca_file.display().to_string();
    let post = |cert: Option<(&Path, &Path)>, body: &str| {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-sS",
            "--max-time",
            "10",
            "--cacert",
            &ca,
            "-H",
            "Content-Type: application/json",
            "-w",
            "\n%{http_code}",
            "--data-binary",
            "@-",
            &url,
        ]);
        if let Some((crt, key)) = cert {
            cmd.arg("--cert").arg(crt).arg("--key").arg(key);
        }
        run_bounded_stdin(&mut cmd, body, Duration::from_secs(20))
    };

    // No client certificate.
    let none = post(None, &review(false));
    eprintln!("forged review without a certificate: {none:?}");
    assert!(!none.ok, "answered without a client certificate: {none:?}");

    // A certificate named kube-apiserver from a CA of the forger's own.
    let forged = g.dir.join("forged");
    std::fs::create_dir_all(&forged).expect("dir");
    let sh = format!(
        "cd {d} && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=forged-ca \
         -keyout ca.key -out ca.crt 2>/dev/null && \
         openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout c.key -out c.csr 2>/dev/null && \
         printf 'extendedKeyUsage=clientAuth\\n' > ext && \
         openssl x509 -req -in c.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext -out c.crt 2>/dev/null",
        d = forged.display()
    );
    let made = run_bounded(
        Command::new("sh").args(["-c", &sh]),
        Duration::from_secs(60),
    );
    assert!(made.ok, "openssl: {}", made.stderr);
    let bad = post(
        Some((&forged.join("c.crt"), &forged.join("c.key"))),
        &review(false),
    );
    eprintln!("forged review with a foreign certificate: {bad:?}");
    assert!(!bad.ok, "answered a certificate from another CA: {bad:?}");

    // The review port is not reachable through the probe port either.
    let probe = run_bounded(
        Command::new("curl").args([
            "-sS",
            "--max-time",
            "10",
            "--cacert",
            &ca,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &review(false),
            &format!("https://{}/validate/eviction", g.probe_addr),
        ]),
        Duration::from_secs(20),
    );
    eprintln!("review on the probe port: {probe:?}");
    assert_ne!(probe.stdout.trim(), "200", "{probe:?}");

    // Control: kube-apiserver's own client certificate is answered (a dry run writes nothing).
    let pki = c.dir.join("pki");
    let real = post(
        Some((
            &pki.join("webhook-client.crt"),
            &pki.join("webhook-client.key"),
        )),
        &review(true),
    );
    eprintln!("dry-run review with kube-apiserver's certificate: {real:?}");
    assert!(
        real.ok && real.stdout.trim_end().ends_with("200"),
        "{real:?}"
    );
    assert!(real.stdout.contains("\"allowed\""), "{real:?}");

    std::thread::sleep(Duration::from_secs(2));
    let dep = kubectl_json(c, &["get", "deployment", app, "-n", ns]);
    assert_eq!(dep["metadata"]["generation"], 1, "nothing was restarted");
    assert!(
        dep["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_null()
    );
    let p = pods(c, ns, app);
    assert!(p.len() == 1 && p[0]["metadata"]["name"] == pod_name.as_str());
}
