//! A real control plane for end-to-end tests: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and kwok's fake kubelets, started by `tests/control-plane/up` (built from source,
//! cached). One cluster per test binary and version, shared by its tests ([`shared`]); it is
//! stopped by `tests/control-plane/down` when the test process exits (a watcher started with it
//! waits for this process's pid), so a failing or aborted test leaves nothing running.
//!
//! The version is `K8S_VERSION` (default: the newest pinned, 1.37); `.ci/run` runs the real tests
//! once per supported version.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A running control plane.
#[derive(Debug)]
pub struct Cluster {
    /// Its folder (kubeconfig, certificates, logs).
    pub dir: PathBuf,
    /// cluster-admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The CA kube-apiserver's webhook client certificate is signed by.
    pub webhook_client_ca: PathBuf,
    /// The server's Kubernetes version (`1.37.2`).
    pub version: String,
}

/// Options for [`Cluster::up`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Fake nodes (`node-1` … `node-N`, zones `zone-a/b/c` in turn).
    pub nodes: u32,
    /// Each node's CPU and memory capacity.
    pub node_cpu: String,
    pub node_memory: String,
    /// A KubeSchedulerConfiguration for kube-scheduler (see `tests/control-plane/up`).
    pub scheduler_config: Option<PathBuf>,
    /// The alpha EvictionRequest API (1.37 only).
    pub eviction_request: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            nodes: 3,
            node_cpu: "4".into(),
            node_memory: "8Gi".into(),
            scheduler_config: None,
            eviction_request: false,
        }
    }
}

impl Cluster {
    /// Starts a control plane in a new folder under the system temp dir; panics with the tail of
    /// `up`'s output when it does not come up.
    pub fn up(opts: &Options) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("kd-real-")
            .tempdir()
            .expect("temp dir")
            .keep();
        let mut cmd = Command::new(root().join("tests/control-plane/up"));
        cmd.arg(&dir)
            .env("NODES", opts.nodes.to_string())
            .env("NODE_CPU", &opts.node_cpu)
            .env("NODE_MEMORY", &opts.node_memory)
            .stdin(Stdio::null());
        if let Some(c) = &opts.scheduler_config {
            cmd.env("SCHEDULER_CONFIG", c);
        }
        if opts.eviction_request {
            cmd.env("EVICTION_REQUEST", "1");
        }
        let out = cmd.output().expect("running tests/control-plane/up");
        // Stop the cluster when this test process ends, however it ends.
        when_this_process_ends(&format!(
            "{down} {dir} >/dev/null 2>&1",
            down = root().join("tests/control-plane/down").display(),
            dir = dir.display()
        ));
        assert!(
            out.status.success(),
            "tests/control-plane/up failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(dir.join("env")).unwrap_or_default();
        let version = env
            .lines()
            .find_map(|l| l.strip_prefix("K8S_VERSION="))
            .unwrap_or_default()
            .trim_matches('"')
            .to_string();
        Cluster {
            kubeconfig: dir.join("kubeconfig"),
            webhook_client_ca: dir.join("webhook-client-ca.crt"),
            dir,
            version,
        }
    }

    /// Runs `kubectl` (the one on PATH, or `bin`) with this cluster's kubeconfig; bounded.
    pub fn kubectl_with(&self, bin: &Path, args: &[&str]) -> Out {
        run_bounded(
            Command::new(bin)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(args),
            Duration::from_secs(180),
        )
    }

    /// `kubectl` on PATH with this cluster's kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Out {
        self.kubectl_with(Path::new("kubectl"), args)
    }

    /// `kubectl apply -f -` of `yaml`; panics when it fails.
    pub fn apply(&self, yaml: &str) -> Out {
        let out = run_bounded_stdin(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(["apply", "-f", "-"]),
            yaml,
            Duration::from_secs(120),
        );
        assert!(out.ok, "kubectl apply failed: {}", out.stderr);
        out
    }

    /// Waits (at most `timeout`) until `check` is true; panics naming `what` otherwise.
    pub fn wait_for(&self, what: &str, timeout: Duration, check: impl FnMut() -> bool) {
        wait_until(what, timeout, check)
    }
}

/// Waits (at most `timeout`, polling every 250 ms) until `check` is true; panics naming `what`
/// otherwise.
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The cluster shared by the tests of one test binary (started on first use).
pub fn shared() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| Cluster::up(&Options::default()))
}

/// What a command printed.
#[derive(Debug)]
pub struct Out {
    /// Exit status 0.
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd`, killed after `timeout`.
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> Out {
    run_bounded_stdin(cmd, "", timeout)
}

/// Runs `cmd` with `input` on its stdin, killed after `timeout` (its output read as it comes,
/// so a large output never blocks it).
pub fn run_bounded_stdin(cmd: &mut Command, input: &str, timeout: Duration) -> Out {
    use std::io::{Read, Write};
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_string();
        std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
    }
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("waiting for {cmd:?}: {e}"),
        }
    };
    let mut err = stderr.join().unwrap_or_default();
    if status.is_none() {
        err.push_str(&format!("\n(killed after {timeout:?})"));
    }
    Out {
        ok: status.is_some_and(|s| s.success()),
        stdout: stdout.join().unwrap_or_default(),
        stderr: err,
    }
}

/// POSTs a policy/v1 Eviction of `namespace/name` (what `run` does), with `c`'s kubeconfig.
pub fn evict(c: &Cluster, namespace: &str, name: &str) -> Out {
    let body = format!(
        r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{name}","namespace":"{namespace}"}}}}"#
    );
    run_bounded_stdin(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args(["create", "--raw"])
            .arg(format!(
                "/api/v1/namespaces/{namespace}/pods/{name}/eviction"
            ))
            .args(["-f", "-"]),
        &body,
        Duration::from_secs(60),
    )
}

/// The API server's URL (`API_SERVER` in the cluster's `env`).
pub fn api_server(c: &Cluster) -> String {
    std::fs::read_to_string(c.dir.join("env"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("API_SERVER="))
        .unwrap_or_default()
        .trim_matches('"')
        .to_string()
}

/// A Deployment `namespace/name` of `replicas` pods asking for `cpu` / `memory` (the default
/// grace period), their template carrying `finalizers`.
pub fn deployment(
    namespace: &str,
    name: &str,
    replicas: u32,
    (cpu, memory): (&str, &str),
    finalizers: &[&str],
) -> String {
    format!(
        r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}, finalizers: [{finalizers}]}}
    spec:
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {{requests: {{cpu: "{cpu}", memory: "{memory}"}}}}
"#,
        finalizers = finalizers.join(", ")
    )
}

/// Runs the shell command `then` once this test process has ended, however it ends (a watcher
/// polling the process every second): for what a `static` holds, which is never dropped.
pub fn when_this_process_ends(then: &str) {
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {then}",
            pid = std::process::id(),
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// `kube-descheduler` without the environment's `KUBECONFIG`, stdin and stdout closed, stderr
/// piped (its log, for the caller to read).
pub fn binary_logging_to_pipe() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"));
    cmd.env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// `kube-descheduler run` with `kubeconfig` and `policy`, no HTTPS server, JSON logs.
pub fn run_command(kubeconfig: &Path, policy: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--policy-config-file")
        .arg(policy)
        .args(["--secure-port", "0", "--logging-format", "json"]);
    cmd
}

/// A `run` process every 2 s with `extra` flags, its log in `log`.
pub fn spawn_run(
    kubeconfig: &Path,
    policy: &Path,
    log: &Path,
    extra: &[&str],
) -> std::process::Child {
    let f = std::fs::File::create(log).expect("log file");
    run_command(kubeconfig, policy)
        .args(["--descheduling-interval", "2s"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(f.try_clone().expect("dup"))
        .stderr(f)
        .spawn()
        .expect("run starts")
}
