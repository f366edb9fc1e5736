//! Shared fixtures for the `run` tests against the API stand-in (kube-sim): a small cluster whose
//! pods on a tainted node the policy evicts, the real binary started against it, and polling
//! helpers (never fixed sleeps: every wait is a generous deadline on an observable condition).
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube_sim::{Sim, SimHandle};
use serde_json::{Value, json};

/// Namespace of the workload pods.
pub const NS: &str = "shop";
/// The tainted node every evictable pod starts on.
pub const TAINTED: &str = "n1";
/// How long any poll waits before failing (CI runs all test binaries at once on 2 cores).
pub const WAIT: Duration = Duration::from_secs(60);

/// The policy: RemovePodsViolatingNodeTaints evicts what runs on the NoSchedule-tainted node.
/// `extra` is appended at the top level (limits, `evictionFailureEventNotification`).
pub fn policy(extra: &str) -> String {
    format!(
        "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
{extra}
profiles:
  - name: taints
    pluginConfig:
      - name: DefaultEvictor
        args: {{}}
      - name: RemovePodsViolatingNodeTaints
        args: {{}}
    plugins:
      deschedule:
        enabled: [RemovePodsViolatingNodeTaints]
"
    )
}

/// A Ready 8-CPU node `name` (uid `node-<name>`), tainted `maintenance=true:NoSchedule` when
/// `tainted`.
pub fn node(name: &str, tainted: bool) -> Value {
    let mut n = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("node-{name}"),
                     "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        }
    });
    if tainted {
        n["spec"]["taints"] =
            json!([{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]);
    }
    n
}

/// A ReplicaSet `name` (uid `rs-<name>`) with `replicas` pods labelled `app=<name>`.
pub fn replica_set(name: &str, replicas: u32) -> Value {
    kube_sim::fixtures::replica_set(NS, name, replicas as usize, 1)
}

/// Pod `pod` of ReplicaSet `rs`, bound to `node_name`.
pub fn rs_pod(rs: &str, pod: &str, node_name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod, "namespace": NS, "uid": format!("pod-{pod}"),
            "labels": {"app": rs},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                 "uid": format!("rs-{rs}"), "controller": true,
                                 "blockOwnerDeletion": true}]
        },
        "spec": {"nodeName": node_name, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": format!("{rs}:1")}]}
    })
}

/// ReplicaSet `name` (see [`replica_set`]) with `replicas` pods `<name>-1` … `<name>-<replicas>`,
/// all bound to `node_name`.
pub fn replica_set_with_pods(name: &str, replicas: u32, node_name: &str) -> Vec<Value> {
    let mut objects = vec![replica_set(name, replicas)];
    objects.extend((1..=replicas).map(|i| rs_pod(name, &format!("{name}-{i}"), node_name)));
    objects
}

/// A PodDisruptionBudget allowing no disruption of `app=<app>` (evictions answered 429).
pub fn blocking_pdb(app: &str) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": format!("{app}-pdb"), "namespace": NS},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}
    })
}

/// Three Ready nodes, `n1` tainted `maintenance=true:NoSchedule`, plus `objects`.
pub fn cluster(objects: Vec<Value>) -> Vec<Value> {
    let mut all = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        node(TAINTED, true),
        node("n2", false),
        node("n3", false),
    ];
    all.extend(objects);
    all
}

/// Starts the stand-in with `objects` (controllers on: kubelets, scheduler, ReplicaSets, PDBs).
pub async fn start_sim(objects: Vec<Value>) -> SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = Sim::start_with_objects(objects)
        .await
        .expect("kube-sim starts");
    // Workload pods are Ready before the descheduler looks (PDB status depends on it).
    let s = sim.clone();
    wait_for("workload pods Running and Ready", || {
        let pods = s.list("v1", "Pod", Some(NS));
        !pods.is_empty() && pods.iter().all(pod_ready)
    })
    .await;
    // …and the ReplicaSets' status reports them (a tick or two later, as in a real cluster):
    // `--dry-run` applies the guard's health rule, which reads ready vs desired replicas.
    wait_for("ReplicaSet statuses report every replica Ready", || {
        s.list("apps/v1", "ReplicaSet", Some(NS)).iter().all(|rs| {
            let want = rs.pointer("/spec/replicas").and_then(Value::as_i64);
            let ready = rs.pointer("/status/readyReplicas").and_then(Value::as_i64);
            want.is_some() && want == ready
        })
    })
    .await;
    sim
}

/// Whether the pod's Ready condition is True.
pub fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Polls `cond` every 100 ms until true; panics after [`WAIT`].
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < WAIT, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Events (`events.k8s.io/v1`) about pod `name` in [`NS`] of `type_` (`Normal`, `Warning`).
pub fn events_for(sim: &SimHandle, name: &str, type_: &str) -> Vec<Value> {
    sim.list("events.k8s.io/v1", "Event", Some(NS))
        .into_iter()
        .filter(|e| e.pointer("/regarding/name").and_then(Value::as_str) == Some(name))
        .filter(|e| e["type"] == type_)
        .collect()
}

/// Every Event in [`NS`] (`events.k8s.io/v1` and core `v1`).
pub fn all_events(sim: &SimHandle) -> Vec<Value> {
    let mut v = sim.list("events.k8s.io/v1", "Event", Some(NS));
    v.extend(sim.list("v1", "Event", Some(NS)));
    v
}

/// How many times an Event was reported (one object, possibly with a `series`).
pub fn occurrences(events: &[Value]) -> u64 {
    events
        .iter()
        .map(|e| {
            e.pointer("/series/count")
                .and_then(Value::as_u64)
                .unwrap_or(1)
        })
        .sum()
}

/// Whether the pod is gone or terminating (an eviction was accepted).
pub fn evicted(sim: &SimHandle, name: &str) -> bool {
    match sim.get("v1", "Pod", NS, name) {
        None => true,
        Some(p) => p
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null()),
    }
}

/// A free local port (bound and released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The real binary running `run` against the stand-in; killed on drop.
pub struct Descheduler {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

/// [`start`] with the policy `policy_text`, then waits for the process to exit: it and its exit
/// code.
pub async fn run_to_exit(
    sim: &SimHandle,
    name: &str,
    policy_text: &str,
    args: &[&str],
) -> (Descheduler, i32) {
    let mut d = start(sim, name, policy_text, args);
    let code = d.wait_exit().await;
    (d, code)
}

/// Starts `kube-descheduler run` against `sim` with `policy_text` and extra flags; it serves on
/// a free port of 127.0.0.1 unless `args` says `--secure-port`. `POD_NAME` = `name`.
pub fn start(sim: &SimHandle, name: &str, policy_text: &str, args: &[&str]) -> Descheduler {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy_path = dir.path().join("policy.yaml");
    std::fs::write(&policy_path, policy_text).expect("write policy");
    let log = dir.path().join(format!("{name}.log"));
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .arg("--policy-config-file")
        .arg(&policy_path)
        .args(["--bind-address", "127.0.0.1"]);
    if !args.iter().any(|a| a.starts_with("--secure-port")) {
        cmd.arg(format!("--secure-port={port}"));
    }
    let child = cmd
        .args(args)
        .env("POD_NAME", name)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn kube-descheduler");
    Descheduler {
        child,
        port,
        log,
        _dir: dir,
    }
}

impl Descheduler {
    /// The process's log so far.
    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Waits for the process to exit (up to [`WAIT`]) and returns its exit code.
    pub async fn wait_exit(&mut self) -> i32 {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(
                start.elapsed() < WAIT,
                "kube-descheduler did not exit; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Still running (no crash)?
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Waits until `/readyz` answers 200 (caches synced).
    pub async fn wait_ready(&mut self) {
        let http = insecure_client();
        let start = Instant::now();
        loop {
            if let Ok(r) = http.get(self.url("/readyz")).send().await
                && r.status() == 200
            {
                return;
            }
            assert!(
                self.running(),
                "kube-descheduler exited; log:\n{}",
                self.log_text()
            );
            assert!(
                start.elapsed() < WAIT,
                "kube-descheduler never became ready; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The status code of `GET path`, or `None` when the request fails.
    pub async fn status(&self, path: &str) -> Option<u16> {
        insecure_client()
            .get(self.url(path))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .ok()
    }

    /// `/metrics` text (the process must run with `--metrics-unauthenticated`).
    pub async fn metrics(&self) -> String {
        match insecure_client().get(self.url("/metrics")).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }
}

impl Descheduler {
    /// Waits until `n` more interval cycles have run (the process must serve metrics openly);
    /// fails if the process exits or after [`WAIT`].
    pub async fn more_cycles(&mut self, n: f64) {
        let seen = interval_cycles(&self.metrics().await);
        self.cycles_reach(seen + n).await;
    }

    /// Waits until `n` interval cycles have run in all (the process must serve metrics openly);
    /// the `/metrics` text that showed it. Fails if the process exits or after [`WAIT`].
    pub async fn cycles_reach(&mut self, n: f64) -> String {
        let start = Instant::now();
        loop {
            let text = self.metrics().await;
            if interval_cycles(&text) >= n {
                return text;
            }
            assert!(self.running(), "exited; log:\n{}", self.log_text());
            assert!(
                start.elapsed() < WAIT,
                "no cycle {n}; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// `run` with `policy_text` at a 1 s interval, metrics served without authentication, started
/// against `sim` and ready.
pub async fn start_interval(sim: &SimHandle, name: &str, policy_text: &str) -> Descheduler {
    let mut d = start(
        sim,
        name,
        policy_text,
        &["--descheduling-interval=1s", "--metrics-unauthenticated"],
    );
    d.wait_ready().await;
    d
}

/// `descheduler_pods_evicted_total` of the taints profile's evictions from the tainted node
/// with `result` (`success`, `error`, or a limit's refusal text), in a metrics text.
pub fn evicted_from_tainted(text: &str, result: &str) -> f64 {
    metric(
        text,
        "descheduler_pods_evicted_total",
        &[
            ("result", result),
            ("strategy", "RemovePodsViolatingNodeTaints"),
            ("profile", "taints"),
            ("namespace", NS),
            ("node", TAINTED),
        ],
    )
}

/// `kube_descheduler_cycles_total{source="interval"}` in a metrics text.
pub fn interval_cycles(text: &str) -> f64 {
    metric(
        text,
        "kube_descheduler_cycles_total",
        &[("source", "interval")],
    )
}

/// The leader-election flags of the replicas: Lease `kube-system/descheduler`, held for
/// `lease_seconds`, renewed within 3 s, retried every 500 ms.
pub fn leader_elect_flags(lease_seconds: u64) -> Vec<String> {
    vec![
        "--leader-elect".into(),
        format!("--leader-elect-lease-duration={lease_seconds}s"),
        "--leader-elect-renew-deadline=3s".into(),
        "--leader-elect-retry-period=500ms".into(),
        "--leader-elect-resource-name=descheduler".into(),
        "--leader-elect-resource-namespace=kube-system".into(),
    ]
}

impl Drop for Descheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sum of the samples of metric `name` whose label set contains every `labels` pair.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest),
                None => (series, ""),
            };
            if n != name {
                return None;
            }
            labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// An HTTPS client that accepts the self-signed serving certificate.
pub fn insecure_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}
