//! Shared parts of the EvictionRequest tests on the real control plane: a 1.37 cluster with the
//! `EvictionRequestAPI` gate (skipped with a printed reason on other versions), the stand-in
//! evictionrequest-controller ([`controller`]) running in the test process, and the guard run
//! as a local process with `--eviction-responder`, registered as the validating webhook on
//! `pods/eviction` and the mutating webhook on pods (`/mutate/pod`).
#![allow(dead_code)]

pub mod controller;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::real_common::{Cluster, Options, run_bounded, run_bounded_stdin};
use serde_json::{Value, json};

/// The shared EvictionRequest cluster, or `None` (with the reason printed) when `K8S_VERSION`
/// asks for a Kubernetes without the API (it is alpha from 1.37).
pub fn cluster() -> Option<&'static Cluster> {
    static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
    let asked = std::env::var("K8S_VERSION").unwrap_or_default();
    if !asked.is_empty() && !asked.starts_with("1.37") {
        eprintln!(
            "SKIPPED: the EvictionRequest API (lifecycle.k8s.io/v1alpha1) needs Kubernetes 1.37; K8S_VERSION={asked}"
        );
        return None;
    }
    let c = CLUSTER.get_or_init(|| {
        let c = Cluster::up(&Options {
            eviction_request: true,
            ..Options::default()
        });
        eprintln!(
            "Kubernetes {} (EvictionRequestAPI on) in {}",
            c.version,
            c.dir.display()
        );
        if !c.version.starts_with("1.37") {
            return None;
        }
        start_controller(&c);
        Some(c)
    });
    if c.is_none() {
        eprintln!("SKIPPED: the EvictionRequest API needs Kubernetes 1.37");
    }
    c.as_ref()
}

/// One scenario at a time (drains and guard restarts affect the whole cluster).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the stand-in controller every 500 ms in a thread of its own until the process ends.
fn start_controller(c: &Cluster) {
    let kubeconfig = c.kubeconfig.clone();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            eprintln!("stand-in controller: no runtime");
            return;
        };
        rt.block_on(async move {
            let client = match client(&kubeconfig).await {
                Ok(c) => c,
                Err(e) => return eprintln!("stand-in controller: {e}"),
            };
            let mut stand_in = controller::Controller::default();
            loop {
                if let Err(e) = stand_in.sync(&client).await {
                    eprintln!("stand-in controller: {e}");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    });
}

async fn client(kubeconfig: &std::path::Path) -> Result<kube::Client, String> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// `kubectl … -o json`, parsed (panics with the output otherwise).
pub fn json_of(c: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = c.kubectl(&all);
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}\n{}", out.stderr))
}

/// Applies JSON objects (`kubectl apply -f -`), panicking on failure.
pub fn apply_json(c: &Cluster, objects: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let out = run_bounded_stdin(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args(["apply", "-f", "-"]),
        &list.to_string(),
        Duration::from_secs(60),
    );
    assert!(out.ok, "kubectl apply: {}", out.stderr);
}

/// A Deployment of `replicas` pause pods labelled `app: name`; `responders` go into the pod
/// template's `spec.evictionResponders` (JSON null: none).
pub fn deployment(
    ns: &str,
    name: &str,
    replicas: u32,
    responders: Value,
    extra_spec: Value,
) -> Value {
    let mut pod_spec = json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}], "terminationGracePeriodSeconds": 0});
    if !responders.is_null() {
        pod_spec["evictionResponders"] = responders;
    }
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}});
    if let Some(extra) = extra_spec.as_object() {
        for (k, v) in extra {
            d["spec"][k] = v.clone();
        }
    }
    d
}

/// The pods labelled `app=name`.
pub fn pods(c: &Cluster, ns: &str, app: &str) -> Vec<Value> {
    json_of(c, &["get", "pods", "-n", ns, "-l", &format!("app={app}")])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Ready and not terminating.
pub fn is_ready(p: &Value) -> bool {
    p["metadata"]["deletionTimestamp"].is_null()
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Waits for exactly one Ready pod of `app` and returns it.
pub fn one_ready_pod(c: &Cluster, ns: &str, app: &str) -> Value {
    let mut found = Value::Null;
    c.wait_for(
        &format!("one Ready pod of {ns}/{app}"),
        Duration::from_secs(120),
        || {
            let ps = pods(c, ns, app);
            let ready: Vec<_> = ps.iter().filter(|p| is_ready(p)).collect();
            if ps.len() == 1 && ready.len() == 1 {
                found = ready[0].clone();
                true
            } else {
                false
            }
        },
    );
    found
}

/// An EvictionRequest of `pod` by `requester` with `intent`.
pub fn eviction_request(ns: &str, name: &str, pod: &Value, requester: &str, intent: &str) -> Value {
    json!({"apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "EvictionRequest",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"target": {"pod": {"name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}},
                 "requester": requester, "intent": intent}})
}

/// The Eviction of the pod with `uid` in `ns`, once the controller made one.
pub fn eviction_of(c: &Cluster, ns: &str, uid: &str) -> Option<Value> {
    json_of(c, &["get", "evictions.lifecycle.k8s.io", "-n", ns])["items"]
        .as_array()?
        .iter()
        .find(|e| e["spec"]["target"]["pod"]["uid"] == uid)
        .cloned()
}

/// The state of `responder` in an Eviction's `.status.targetResponders`.
pub fn state_of(e: &Value, responder: &str) -> String {
    e["status"]["targetResponders"]
        .as_array()
        .and_then(|l| l.iter().find(|t| t["name"] == responder))
        .and_then(|t| t["state"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// `responder`'s entry of `.status.responders`.
pub fn status_of(e: &Value, responder: &str) -> Value {
    e["status"]["responders"]
        .as_array()
        .and_then(|l| l.iter().find(|t| t["name"] == responder))
        .cloned()
        .unwrap_or(Value::Null)
}

/// A condition of an Eviction that is True.
pub fn has_condition(e: &Value, type_: &str, reason: &str) -> bool {
    e["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == "True" && c["reason"] == reason)
    })
}

/// Follows the pods of `app` through a watch (`kubectl get pods -w --output-watch-events`):
/// every change is seen when the API server sends it, so no stretch at zero Ready pods falls
/// between two samples.
pub struct Sampler {
    child: Child,
    task: std::thread::JoinHandle<(Duration, usize)>,
}

impl Sampler {
    /// Starts watching (after the initial list has arrived).
    pub fn start(c: &'static Cluster, ns: &str, app: &str) -> Sampler {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args([
                "get",
                "pods",
                "-n",
                ns,
                "-l",
                &format!("app={app}"),
                "-w",
                "--output-watch-events",
                "-o",
                "json",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get -w");
        let stdout = child.stdout.take().expect("stdout");
        let (listed_tx, listed_rx) = std::sync::mpsc::channel();
        let task = std::thread::spawn(move || {
            let mut ready: std::collections::BTreeMap<String, bool> = Default::default();
            let (mut longest, mut events, mut zero_since) = (Duration::ZERO, 0, None::<Instant>);
            for ev in serde_json::Deserializer::from_reader(stdout).into_iter::<Value>() {
                let Ok(ev) = ev else { break };
                let pod = &ev["object"];
                let name = pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if ev["type"] == "DELETED" {
                    ready.remove(&name);
                } else {
                    ready.insert(name, is_ready(pod));
                }
                events += 1;
                let _ = listed_tx.send(());
                if ready.values().any(|r| *r) {
                    if let Some(since) = zero_since.take() {
                        longest = longest.max(since.elapsed());
                    }
                } else {
                    zero_since.get_or_insert_with(Instant::now);
                }
            }
            if let Some(since) = zero_since {
                longest = longest.max(since.elapsed());
            }
            (longest, events)
        });
        let _ = listed_rx.recv_timeout(Duration::from_secs(30));
        Sampler { child, task }
    }

    /// Stops: the longest time at zero Ready pods, and the number of watch events seen.
    pub fn finish(mut self) -> (Duration, usize) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.task.join().unwrap_or((Duration::MAX, 0))
    }
}

/// The guard as a local process with `--eviction-responder`.
pub struct Guard {
    /// host:port of the review port.
    pub addr: String,
    /// Serving CA bundle (base64) for webhook configurations.
    pub ca_bundle: String,
    /// Serving CA file (for curl).
    pub ca_file: PathBuf,
    child: Child,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Guard {
    /// Starts a guard named `instance` with the cluster-admin kubeconfig; waits until it serves.
    pub fn start(c: &Cluster, instance: &str) -> Guard {
        use kube_descheduler::cli::certs::{CertsArgs, generate, write_files};
        let dir = c.dir.join(format!("evreq-{instance}"));
        std::fs::create_dir_all(&dir).expect("guard dir");
        let certs = generate(&CertsArgs::loopback(
            "kube-descheduler-webhook",
            "kube-descheduler",
            &dir,
        ))
        .expect("certificates");
        write_files(&dir, &certs).expect("write certificates");
        let ca_file = dir.join("serving-ca.crt");
        std::fs::write(&ca_file, &certs.ca_cert_pem).expect("CA");
        let mut child = crate::real_common::binary_logging_to_pipe()
            .arg("webhook")
            .arg(format!("--tls-cert-file={}", dir.join("tls.crt").display()))
            .arg(format!(
                "--tls-private-key-file={}",
                dir.join("tls.key").display()
            ))
            .arg(format!("--kubeconfig={}", c.kubeconfig.display()))
            .args([
                "--port=0",
                "--bind-address=127.0.0.1",
                "--logging-format=json",
                "--eviction-responder",
            ])
            .arg(format!("--instance-name={instance}"))
            .spawn()
            .expect("the guard starts");
        // A guard kept in a `static` is never dropped: stop it with the test process.
        // (Only if the process still is this guard: its pid may have been reused by then.)
        crate::real_common::when_this_process_ends(&format!(
            "grep -qa '{dir}' /proc/{pid}/cmdline 2>/dev/null && kill {pid}",
            dir = dir.display(),
            pid = child.id()
        ));
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Ok(v) = serde_json::from_str::<Value>(&line)
                        && v["fields"]["message"] == "eviction guard serving"
                    {
                        let _ = tx.send(v["fields"]["addr"].as_str().unwrap_or("").to_owned());
                    }
                    if let Ok(mut l) = logs.lock() {
                        l.push(line);
                    }
                }
            });
        }
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!(
                    "the guard did not serve:\n{}",
                    logs.lock().map(|l| l.join("\n")).unwrap_or_default()
                )
            });
        Guard {
            addr,
            ca_bundle: certs.ca_bundle,
            ca_file,
            child,
            logs,
        }
    }

    /// Its log so far.
    pub fn logs(&self) -> String {
        self.logs.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// Kills it (SIGKILL: no goodbye).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its `/metrics` text.
    pub fn metrics(&self) -> String {
        run_bounded(
            Command::new("curl")
                .args(["-s", "--cacert"])
                .arg(&self.ca_file)
                .arg(format!("https://{}/metrics", self.addr)),
            Duration::from_secs(10),
        )
        .stdout
    }

    /// Points the cluster's validating (pods/eviction) and mutating (pods in namespaces labelled
    /// `evreq-mutate=on`) webhook configurations at this process.
    pub fn register(&self, c: &Cluster) {
        let client = |path: &str| json!({"url": format!("https://{}{path}", self.addr), "caBundle": self.ca_bundle});
        let vwc = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "evreq-eviction-guard"},
            "webhooks": [{"name": "eviction-guard.kube-descheduler.io", "admissionReviewVersions": ["v1"],
                "sideEffects": "NoneOnDryRun", "failurePolicy": "Ignore", "timeoutSeconds": 5,
                "clientConfig": client("/validate/eviction"),
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}]}]});
        let mwc = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "evreq-eviction-responder"},
            "webhooks": [{"name": "eviction-responder.kube-descheduler.io", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Ignore", "timeoutSeconds": 5, "reinvocationPolicy": "Never",
                "namespaceSelector": {"matchLabels": {"evreq-mutate": "on"}},
                "clientConfig": client("/mutate/pod"),
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}]});
        apply_json(c, &[vwc, mwc]);
        // kube-apiserver picks webhook configurations up from an informer.
        std::thread::sleep(Duration::from_secs(3));
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The value of a counter line of `/metrics` (`name{labels}`), 0 when absent.
pub fn counter(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.trim().parse().ok())
        })
        .unwrap_or(0.0)
}
