//! Running the real `kubectl` from integration tests (the one on PATH).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

/// `kubectl` on PATH; panics with the instruction when there is none (CI provides it).
pub fn kubectl_path() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl on PATH (1.29+) is needed for this test")
}

/// What a kubectl run printed.
#[derive(Debug)]
pub struct Out {
    /// Exit status 0.
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `bin args…` (with `--kubeconfig` when given, HOME in the temp dir so no user cache is
/// read), bounded to 120 s.
pub async fn run(bin: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> Out {
    let mut cmd = tokio::process::Command::new(bin);
    if let Some(kc) = kubeconfig {
        cmd.arg("--kubeconfig").arg(kc);
        // kubectl caches discovery per host:port under $HOME; test servers reuse ports, so a
        // shared cache could map kinds of an earlier server (e.g. CRD kinds) on this one.
        if let Some(dir) = kc.parent() {
            cmd.arg("--cache-dir").arg(dir.join("kubectl-cache"));
        }
    }
    let run = cmd
        .args(args)
        .env("HOME", std::env::temp_dir())
        .kill_on_drop(true)
        .output();
    let o = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("kubectl finishes within 120 s")
        .expect("kubectl runs");
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// kube-sim with its controllers off: it stores what is applied and changes nothing itself.
pub async fn frozen_sim() -> kube_sim::SimHandle {
    kube_sim::Sim::start(kube_sim::SimOptions {
        controllers: false,
        ..Default::default()
    })
    .await
    .expect("kube-sim starts")
}
