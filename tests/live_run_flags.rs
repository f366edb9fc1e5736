//! `run` flag validation: configuration errors exit with code 2 before touching a cluster.

mod cli_common;

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .arg("run")
        .args(args)
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn leader_election_needs_an_interval() {
    let (code, err) = run(&[
        "--leader-elect",
        "--policy-config-file",
        "/nonexistent.yaml",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("leaderElection must be used with deschedulingInterval"),
        "{err}"
    );
    let (code, err) = run(&[
        "--leader-elect=true",
        "--descheduling-interval=0s",
        "--policy-config-file=/x",
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn bad_durations_and_missing_policy_are_config_errors() {
    let (code, err) = run(&[
        "--descheduling-interval=5 minutes",
        "--policy-config-file=/x",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--descheduling-interval"), "{err}");
    let (code, err) = run(&["--descheduling-interval=5m"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--policy-config-file"), "{err}");
    let (code, err) = run(&["--policy-config-file=/nonexistent/policy.yaml"]);
    assert_eq!(code, 2, "{err}");
    let (code, _) = run(&["--secure-port=notaport", "--policy-config-file=/x"]);
    assert_eq!(code, 2);
    let (code, err) = run(&[
        "--enable-trigger-api",
        "--secure-port=0",
        "--policy-config-file=/x",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--enable-trigger-api"), "{err}");
    let (code, _) = run(&["--client-connection-qps=-1", "--policy-config-file=/x"]);
    assert_eq!(code, 2);
}

#[test]
fn cert_reload_interval_must_be_positive() {
    let (code, err) = run(&["--cert-reload-interval=0s", "--policy-config-file=/x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cert-reload-interval"), "{err}");
    let (code, err) = run(&["--cert-reload-interval=soon", "--policy-config-file=/x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cert-reload-interval"), "{err}");
}

#[test]
fn unusable_certificate_files_are_a_config_error_naming_the_flags() {
    let dir = tempfile::tempdir().expect("dir");
    let policy = cli_common::write(
        dir.path(),
        "policy.yaml",
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n",
    );
    // A client can be built from this kubeconfig; nothing listens there (never reached).
    let kubeconfig = cli_common::write(
        dir.path(),
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    );
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, "not a certificate").expect("cert");
    std::fs::write(&key, "not a key").expect("key");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    // The secure port starts before anything talks to the cluster, so this fails at once.
    let (code, err) = run(&[
        &format!("--policy-config-file={}", policy.display()),
        &format!("--kubeconfig={}", kubeconfig.display()),
        &format!("--tls-cert-file={}", cert.display()),
        &format!("--tls-private-key-file={}", key.display()),
        &format!("--secure-port={port}"),
        "--bind-address=127.0.0.1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--tls-cert-file") && err.contains("tls.crt"),
        "{err}"
    );
}

#[test]
fn metrics_max_age_must_be_a_duration_of_at_least_the_collection_period() {
    for bad in ["--metrics-max-age=half a minute", "--metrics-max-age=1s"] {
        let (code, err) = run(&[bad, "--policy-config-file=/x"]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("--metrics-max-age"), "{bad}: {err}");
    }
}
