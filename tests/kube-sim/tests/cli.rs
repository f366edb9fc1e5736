//! The `kube-sim` binary: its modes (`--controllers`), its help text, and one-line load errors.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_kube-sim");

/// A pod no controller has touched yet (no node, no status).
const PENDING_POD: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status:
    capacity: {cpu: '4', memory: 8Gi, pods: '110'}
- apiVersion: v1
  kind: Pod
  metadata: {name: lone, namespace: default, uid: 11111111-1111-4111-8111-111111111111}
  spec:
    containers: [{name: c, image: nginx}]
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write temp file");
    p
}

/// `sched.yaml` in `dir`: a KubeSchedulerConfiguration with `profiles` (YAML list items).
fn scheduler_config(dir: &Path, profiles: &str) -> PathBuf {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n{profiles}"
    );
    write(dir, "sched.yaml", &text)
}

/// Kills the child when dropped (a failed assertion must not leave a server behind).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary and waits (bounded) for its `ready <url>` line.
fn start(snapshot: &Path, kubeconfig: &Path, extra: &[&str]) -> Running {
    let mut child = Command::new(BIN)
        .arg("--snapshot")
        .arg(snapshot)
        .arg("--kubeconfig-out")
        .arg(kubeconfig)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kube-sim");
    let stdout = child.stdout.take().expect("piped stdout");
    let running = Running(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("kube-sim printed its ready line within 30 s");
    assert!(line.starts_with("ready https://"), "{line:?}");
    running
}

/// `spec.nodeName` of `default/lone`, through the real kubectl (`None` when kubectl is absent).
fn node_of_lone(kubeconfig: &Path) -> Option<String> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "pod", "lone", "-n", "default", "-o"])
        .arg("jsonpath={.spec.nodeName}")
        .env("HOME", std::env::temp_dir())
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Polls `node_of_lone` until `want` holds or `bound` passes; returns the last value.
fn wait_node(kubeconfig: &Path, bound: Duration, want: impl Fn(&str) -> bool) -> Option<String> {
    let end = Instant::now() + bound;
    loop {
        let node = node_of_lone(kubeconfig)?;
        if want(&node) || Instant::now() > end {
            return Some(node);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn controllers_true_binds_the_pending_pod_and_false_leaves_it_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snap = write(dir.path(), "pending.yaml", PENDING_POD);

    let kc_on = dir.path().join("on.kubeconfig");
    let _on = start(&snap, &kc_on, &[]);
    let Some(node) = wait_node(&kc_on, Duration::from_secs(20), |n| !n.is_empty()) else {
        eprintln!("kubectl not found; skipping");
        return;
    };
    assert_eq!(node, "n1", "the scheduler binds the pod by default");

    let kc_off = dir.path().join("off.kubeconfig");
    let _off = start(&snap, &kc_off, &["--controllers=false"]);
    // With the default mode the binding above took well under this; a frozen cluster keeps
    // the pod unbound however long one waits.
    let node = wait_node(&kc_off, Duration::from_secs(2), |n| !n.is_empty());
    assert_eq!(node.as_deref(), Some(""), "no scheduler runs");
}

#[test]
fn help_says_what_each_mode_is_for() {
    let out = Command::new(BIN)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--controllers"), "{help}");
    assert!(help.contains("--controllers=false"), "{help}");
    assert!(help.contains("living cluster"), "{help}");
    assert!(help.contains("frozen cluster"), "{help}");
}

#[test]
fn a_bad_controllers_value_is_refused() {
    let out = Command::new(BIN)
        .args(["--kubeconfig-out", "/dev/null", "--controllers=maybe"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--controllers"), "{err}");
}

/// kube-sim started on `snapshot` (backtraces asked for), which must refuse it: exit non-zero
/// with one line on stderr; (stdout, stderr).
fn refused_snapshot(dir: &Path, snapshot: &Path) -> (Vec<u8>, String) {
    let out = Command::new(BIN)
        .arg("--snapshot")
        .arg(snapshot)
        .arg("--kubeconfig-out")
        .arg(dir.join("kc"))
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("run kube-sim");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    (out.stdout, err)
}

#[test]
fn a_duplicate_pod_is_one_line_naming_it_and_exit_nonzero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = "- apiVersion: v1
  kind: Pod
  metadata: {name: kube-proxy-1x, namespace: kube-system, uid: 22222222-2222-4222-8222-222222222222}
  spec:
    containers: [{name: c, image: proxy}]
";
    let text = format!("apiVersion: v1\nkind: List\nitems:\n{pod}{pod}");
    let snap = write(dir.path(), "dup.yaml", &text);
    let (stdout, err) = refused_snapshot(dir.path(), &snap);
    assert!(stdout.is_empty(), "never said ready");
    assert!(err.contains("Pod kube-system/kube-proxy-1x"), "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert!(err.contains("dup.yaml"), "{err}");
    assert!(!err.contains("backtrace"), "{err}");
}

#[test]
fn an_unreadable_snapshot_is_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.yaml");
    let (_, err) = refused_snapshot(dir.path(), &missing);
    assert!(err.contains("nope.yaml"), "{err}");
}

#[test]
fn a_bad_scheduler_config_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = scheduler_config(
        dir.path(),
        "  - pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy: {type: Packed}
",
    );
    let out = Command::new(BIN)
        .args(["--kubeconfig-out", "/dev/null", "--scheduler-config"])
        .arg(&cfg)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--scheduler-config")
            && err.contains("sched.yaml")
            && err.contains("profiles[0].pluginConfig[0].args.scoringStrategy.type: \"Packed\""),
        "{err}"
    );
}

#[test]
fn a_scheduler_config_serves_its_profiles_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snap = write(dir.path(), "pending.yaml", PENDING_POD);
    // No profile serves `default-scheduler`: the pod stays unbound.
    let cfg = scheduler_config(dir.path(), "  - schedulerName: other\n");
    let kc = dir.path().join("kc");
    let _sim = start(&snap, &kc, &["--scheduler-config", &cfg.to_string_lossy()]);
    let Some(node) = wait_node(&kc, Duration::from_secs(2), |n| !n.is_empty()) else {
        eprintln!("kubectl not found; skipping");
        return;
    };
    assert_eq!(node, "", "a pod no profile serves is left Pending");
}
