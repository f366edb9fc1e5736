//! `run` flag validation: configuration errors exit with code 2 before touching a cluster.

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
