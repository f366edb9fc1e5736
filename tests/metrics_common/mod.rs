//! A real Prometheus for the tests (Debian package `prometheus`), started on 127.0.0.1 with a
//! scrape config for an exporter on loopback that exposes per-node usage, and a bearer-token
//! check in front of it (Prometheus itself only knows basic auth).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The metric the exporter serves: `node_usage_ratio{instance="<node>"} <0..1>`.
pub const METRIC: &str = "node_usage_ratio";

/// Finds the `prometheus` binary. Without it: in CI (`CI=true`) the test fails loudly, elsewhere
/// it is skipped with how to install it.
pub fn prometheus_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let hint = "the Prometheus server is not installed: apt-get install -y prometheus (Debian package `prometheus`; .ci/run installs it)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{hint}");
        }
        eprintln!("skipping: {hint}");
    }
    found
}

async fn serve(router: axum::Router) -> SocketAddr {
    kube_descheduler_guard::testing::serve_on_loopback(router).await
}

/// An exporter of per-node usage ratios.
pub struct Exporter {
    pub addr: SocketAddr,
    values: Arc<Mutex<BTreeMap<String, f64>>>,
}

impl Exporter {
    pub async fn start(values: &[(&str, f64)]) -> Self {
        let map: BTreeMap<String, f64> = values.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let values = Arc::new(Mutex::new(map));
        let v = values.clone();
        let router = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let v = v.clone();
                async move {
                    let mut text = format!("# TYPE {METRIC} gauge\n");
                    for (node, value) in v.lock().unwrap().iter() {
                        text.push_str(&format!("{METRIC}{{instance=\"{node}\"}} {value}\n"));
                    }
                    text
                }
            }),
        );
        Exporter {
            addr: serve(router).await,
            values,
        }
    }
}

/// A Prometheus server process (killed on drop) and, in front of it, a proxy that requires
/// `Authorization: Bearer <token>` (401 otherwise).
pub struct Prometheus {
    child: Child,
    pub direct: String,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Prometheus {
    /// Starts Prometheus scraping `exporter` every second (keeping the exporter's `instance`
    /// label: `honor_labels`), and waits for the first scrape to be queryable.
    pub async fn start(binary: &PathBuf, exporter: &Exporter, token: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: usage\n    honor_labels: true\n    static_configs:\n      - targets: ['{}']\n",
                exporter.addr
            ),
        )
        .expect("config");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let direct = format!("http://127.0.0.1:{port}");
        let mut p = Prometheus {
            child,
            url: String::new(),
            direct: direct.clone(),
            _dir: dir,
        };
        // The token check in front.
        let want = format!("Bearer {token}");
        let upstream = direct.clone();
        let http = reqwest::Client::new();
        let router = axum::Router::new().fallback(
            move |headers: axum::http::HeaderMap, uri: axum::http::Uri| {
                let (want, upstream, http) = (want.clone(), upstream.clone(), http.clone());
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    if auth != want {
                        return (
                            axum::http::StatusCode::UNAUTHORIZED,
                            "unauthorized".to_string(),
                        );
                    }
                    let target = format!(
                        "{upstream}{}",
                        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
                    );
                    match http.get(target).send().await {
                        Ok(r) => (
                            axum::http::StatusCode::from_u16(r.status().as_u16())
                                .unwrap_or(axum::http::StatusCode::BAD_GATEWAY),
                            r.text().await.unwrap_or_default(),
                        ),
                        Err(e) => (axum::http::StatusCode::BAD_GATEWAY, e.to_string()),
                    }
                }
            },
        );
        p.url = format!("http://{}", serve(router).await);
        let n = exporter.values.lock().unwrap().len();
        p.wait_for_samples(n).await;
        p
    }

    /// Waits (bounded) until the query for [`METRIC`] returns `n` samples.
    async fn wait_for_samples(&mut self, n: usize) {
        let start = Instant::now();
        let http = reqwest::Client::new();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prometheus exited: {status}");
            }
            let url = format!("{}/api/v1/query?query={METRIC}", self.direct);
            if let Ok(r) = http.get(url).send().await
                && let Ok(v) = r.json::<serde_json::Value>().await
                && v["data"]["result"].as_array().is_some_and(|a| a.len() == n)
            {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "prometheus did not scrape the exporter within 90 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
