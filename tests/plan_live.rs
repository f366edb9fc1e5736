//! `plan --kubeconfig` against the API stand-in (kube-sim, controllers off) serving the bundled
//! example: the live read plans exactly as the snapshot file does; `--explain`, `--explain-node`
//! and `-o html` work live; an unreachable server fails in bounded time with one line; and the
//! binary works as the kubectl plugin `kubectl descheduler` (with the real kubectl).

mod cli_common;
#[path = "kubectl_common/mod.rs"]
mod kubectl_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cli_common::bin;
use kube_sim::{Sim, SimHandle, SimOptions};
use serde_json::{Value, json};

const NOW: &str = "2026-01-10T00:00:00Z";
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("kube-descheduler runs")
}

fn stdout_of(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// kube-sim serving examples/cluster.yaml, frozen (no controller changes anything).
async fn serve_example() -> SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Sim::start(SimOptions {
        snapshot_file: Some(Path::new(ROOT).join("examples/cluster.yaml")),
        controllers: false,
        ..Default::default()
    })
    .await
    .expect("kube-sim starts")
}

fn plan_file(snapshot: &Path, extra: &[&str]) -> String {
    stdout_of(&run(bin()
        .args(["plan", "--now", NOW, "--snapshot"])
        .arg(snapshot)
        .args(extra)))
}

fn plan_live(sim: &SimHandle, extra: &[&str]) -> String {
    stdout_of(&run(bin()
        .args(["plan", "--now", NOW, "--kubeconfig"])
        .arg(sim.kubeconfig_path())
        .args(extra)))
}

/// The cluster as the API serves it, written as a snapshot file (what `kubectl get … -o json`
/// gives): the objects in the API's order.
fn export(sim: &SimHandle, dir: &Path) -> PathBuf {
    let mut kinds = cli_common::SNAPSHOT_KINDS.to_vec();
    kinds.push(("autoscaling/v2", "HorizontalPodAutoscaler"));
    let path = dir.join("exported.json");
    cli_common::export_list(sim, &kinds, &path);
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_json_equals_the_file_plan_of_the_same_cluster() {
    let sim = serve_example().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let live = plan_live(&sim, &["-o", "json"]);

    // Byte for byte: the same cluster as a file, in the order the API lists it.
    let exported = export(&sim, dir.path());
    assert_eq!(live, plan_file(&exported, &["-o", "json"]));

    // The bundled file itself, byte for byte: its objects are in the order a real API server
    // lists them (namespace, name), and plugins that pick the first of equal pods on ties
    // (RemoveDuplicates, LowNodeUtilization) pick the same ones.
    let file = plan_file(
        &Path::new(ROOT).join("examples/cluster.yaml"),
        &["-o", "json"],
    );
    assert_eq!(live, file);
    let live: Value = serde_json::from_str(&live).expect("json");
    assert_eq!(live["summary"]["pods"], 28, "the whole example is read");
    assert!(live["summary"]["evicted"].as_u64().expect("count") > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_table_and_html_work_live() {
    let sim = serve_example().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let exported = export(&sim, dir.path());
    let args = [
        "--explain",
        "shop/cart-worker-59d8f7c6b4-t6v1c",
        "--explain-node",
        "node-2",
    ];
    let live = plan_live(&sim, &args);
    assert!(live.contains("shop/cart-worker-59d8f7c6b4-t6v1c"), "{live}");
    assert!(live.contains("node-2"), "{live}");
    assert_eq!(live, plan_file(&exported, &args));

    let html = dir.path().join("report.html");
    let out = stdout_of(&run(bin()
        .args(["plan", "--now", NOW, "-o", "html"])
        .arg(&html)
        .arg(format!("--kubeconfig={}", sim.kubeconfig_path().display()))));
    assert!(out.starts_with("wrote "), "{out}");
    let page = std::fs::read_to_string(&html).expect("report written");
    assert!(
        page.contains("<html") && page.contains("web-7c9f8d6b5"),
        "an HTML report"
    );
}

#[test]
fn an_unreachable_api_server_fails_in_bounded_time_with_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .expect("written");
    let started = Instant::now();
    let out = run(bin()
        .args([
            "plan",
            "-o",
            "json",
            "--request-timeout",
            "2s",
            "--kubeconfig",
        ])
        .arg(&kubeconfig));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(
        took >= Duration::from_secs(2),
        "retried until the timeout: {took:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("https://127.0.0.1:{port}")) && err.contains("--request-timeout"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn live_flags_are_checked_before_the_cluster_is_read() {
    // --snapshot and --kubeconfig (or --context) exclude each other: exit 2, naming both.
    for live in [
        &["--kubeconfig", "k"][..],
        &["--context", "c"][..],
        &["--kubeconfig"][..],
    ] {
        let out = run(bin()
            .args(["plan", "--snapshot", "examples/cluster.yaml"])
            .args(live));
        assert_eq!(out.status.code(), Some(2), "{live:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--snapshot") && err.contains(live[0]), "{err}");
    }
    let out = run(bin().args(["plan", "--kubeconfig=/no/such/kubeconfig"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kubeconfig /no/such/kubeconfig"));
    let out = run(bin().args(["plan", "--kubeconfig=k", "--request-timeout", "soon"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--request-timeout"));
}

/// A directory holding `kubectl-descheduler` (a symlink to the binary) and a PATH with it and
/// the real kubectl's directory.
fn plugin_path(dir: &Path) -> std::ffi::OsString {
    let link = dir.join("kubectl-descheduler");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kube-descheduler"), &link).expect("symlink");
    let kubectl = kubectl_common::kubectl_path();
    let kubectl_dir = kubectl.parent().expect("kubectl's directory");
    std::env::join_paths([dir, kubectl_dir]).expect("PATH")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_descheduler_plan_reads_kubectls_current_context() {
    let sim = serve_example().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = plugin_path(dir.path());
    let exported = export(&sim, dir.path());
    let expected = plan_file(&exported, &["-o", "json"]);
    let kubectl = |args: &[&str], kubeconfig: &Path| {
        Command::new(kubectl_common::kubectl_path())
            .args(args)
            .current_dir(ROOT)
            .env("PATH", &path)
            .env("HOME", dir.path())
            .env("KUBECONFIG", kubeconfig)
            .output()
            .expect("kubectl runs")
    };
    let out = kubectl(&["plugin", "list"], sim.kubeconfig_path());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("kubectl-descheduler"),
        "kubectl finds the plugin: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No --snapshot, no --kubeconfig: kubectl's configuration ($KUBECONFIG here).
    let out = kubectl(
        &["descheduler", "plan", "-o", "json", "--now", NOW],
        sim.kubeconfig_path(),
    );
    assert_eq!(stdout_of(&out), expected);

    // --context passes through: a kubeconfig whose current context points nowhere, and a
    // context that names kube-sim.
    let kc: Value = serde_saphyr::from_str(&sim.kubeconfig_yaml()).expect("kube-sim's kubeconfig");
    let ctx = kc["contexts"][0]["name"]
        .as_str()
        .expect("context name")
        .to_string();
    let mut two = kc.clone();
    let mut broken = kc["contexts"][0].clone();
    broken["name"] = json!("nowhere");
    broken["context"]["cluster"] = json!("nowhere");
    let mut nowhere = kc["clusters"][0].clone();
    nowhere["name"] = json!("nowhere");
    nowhere["cluster"]["server"] = json!("https://127.0.0.1:9");
    two["contexts"]
        .as_array_mut()
        .expect("contexts")
        .push(broken);
    two["clusters"]
        .as_array_mut()
        .expect("clusters")
        .push(nowhere);
    two["current-context"] = json!("nowhere");
    let file = dir.path().join("two-contexts.json");
    std::fs::write(&file, two.to_string()).expect("written");
    let out = kubectl(
        &[
            "descheduler",
            "plan",
            "-o",
            "json",
            "--now",
            NOW,
            "--context",
            &ctx,
        ],
        &file,
    );
    assert_eq!(stdout_of(&out), expected);
    let out = kubectl(
        &["descheduler", "plan", "-o", "json", "--request-timeout=1s"],
        &file,
    );
    assert_eq!(out.status.code(), Some(1), "the current context is used");
    assert!(String::from_utf8_lossy(&out.stderr).contains("https://127.0.0.1:9"));

    // The stock name keeps planning the bundled example without flags.
    let stock = stdout_of(&run(bin()
        .args(["plan", "-o", "json", "--now", NOW])
        .env("KUBECONFIG", sim.kubeconfig_path())));
    assert_eq!(
        stock,
        plan_file(
            &Path::new(ROOT).join("examples/cluster.yaml"),
            &["-o", "json"]
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_without_a_value_uses_the_usual_loading() {
    let sim = serve_example().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let expected = plan_file(&export(&sim, dir.path()), &["-o", "json"]);
    let out = run(bin()
        .args(["plan", "-o", "json", "--now", NOW, "--kubeconfig"])
        .env("KUBECONFIG", sim.kubeconfig_path()));
    assert_eq!(stdout_of(&out), expected);
}
