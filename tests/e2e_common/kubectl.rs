//! kubectl: the installed binaries, running them against the cluster, and `kubectl drain`.

use super::*;

/// Every kubectl found: the one on PATH, then `kubectl.1.27` … `kubectl.1.33` next to its real
/// file. The second list names those that are missing.
pub fn kubectls() -> (Vec<(String, PathBuf)>, Vec<String>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    let Some(path) = which("kubectl") else {
        missing.push("kubectl (on PATH)".to_string());
        return (found, missing);
    };
    found.push(("path".to_string(), path.clone()));
    let real = std::fs::canonicalize(&path).unwrap_or(path);
    let dir = real.parent().map(Path::to_path_buf).unwrap_or_default();
    for v in 27..=33 {
        let p = dir.join(format!("kubectl.1.{v}"));
        if p.is_file() {
            found.push((format!("1.{v}"), p));
        } else {
            missing.push(p.display().to_string());
        }
    }
    (found, missing)
}

/// The kubectl on PATH (tests that exercise one version).
pub fn kubectl() -> PathBuf {
    which("kubectl").expect("kubectl on PATH (CI has it)")
}

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The result of one kubectl run.
#[derive(Debug, Clone)]
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    /// stdout and stderr together (kubectl prints eviction retries on stderr).
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs kubectl against the cluster (own HOME, so discovery caches never collide).
pub async fn run_kubectl(bin: &Path, cluster: &Cluster, args: &[&str]) -> Output {
    let home = cluster.dir.path().join("home");
    let _ = std::fs::create_dir_all(&home);
    let started = Instant::now();
    let child = tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(args)
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let (ok, stdout, stderr) = match tokio::time::timeout(Duration::from_secs(180), child).await {
        Ok(Ok(o)) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Ok(Err(e)) => (
            false,
            String::new(),
            format!("cannot run {}: {e}", bin.display()),
        ),
        Err(_) => (
            false,
            String::new(),
            "kubectl ran for more than 180 s".into(),
        ),
    };
    Output {
        ok,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    }
}

/// `kubectl drain NODE --ignore-daemonsets --delete-emptydir-data --timeout=T [extra…]`.
pub async fn drain(
    bin: &Path,
    cluster: &Cluster,
    node: &str,
    timeout: &str,
    extra: &[&str],
) -> Output {
    let timeout = format!("--timeout={timeout}");
    let mut args = vec![
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        timeout.as_str(),
    ];
    args.extend_from_slice(extra);
    run_kubectl(bin, cluster, &args).await
}
