//! Tracing of `kube-descheduler run` (`--otel-*`, as upstream v0.36) received by the OpenTelemetry
//! Collector (`tests/otel-collector`: the Collector's OTLP receiver and OTLP exporter), which
//! forwards to `tests/otel-receiver`, a Go program serving the OpenTelemetry TraceService from the
//! official generated protobuf code (`go.opentelemetry.io/proto/otlp`) over grpc-go that prints
//! every span it receives. Both are built from the Go module proxy once and cached under
//! `~/.cache/kube-descheduler/`. The tests check span names, attributes, resource and parent
//! links, through the Collector in plaintext and straight to the receiver over TLS verified with
//! `--otel-transport-ca-cert`.

mod run_sim_common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use run_sim_common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn go() -> Option<PathBuf> {
    if Path::new("/usr/local/go/bin/go").exists() {
        return Some("/usr/local/go/bin/go".into());
    }
    Command::new("go")
        .arg("version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "go".into())
}

/// The receiver binary, built once per source version (once per process: the tests run in
/// parallel).
fn receiver_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| build_go_tool("otel-receiver")).clone()
}

/// The OpenTelemetry Collector of `tests/otel-collector`, built as the receiver is.
fn collector_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| build_go_tool("otel-collector")).clone()
}

/// Builds the Go program in `tests/<name>` into the cache (`$KD_CACHE` or
/// `~/.cache/kube-descheduler`), named after a hash of its sources.
fn build_go_tool(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name);
    let mut h = Sha256::new();
    for f in ["go.mod", "go.sum", "main.go"] {
        h.update(std::fs::read(src.join(f)).expect("Go sources"));
    }
    let hash: String = h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cache = std::env::var_os("KD_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kube-descheduler"))
        })
        .expect("HOME or KD_CACHE");
    let bin = cache.join(name).join(format!("{name}-{hash}"));
    if bin.exists() {
        return bin;
    }
    let go = go().unwrap_or_else(|| {
        panic!("a Go toolchain (/usr/local/go/bin/go or go on PATH) to build tests/{name}")
    });
    std::fs::create_dir_all(bin.parent().expect("parent")).expect("cache dir");
    let tmp = bin.with_extension(format!("tmp-{}", std::process::id()));
    let out = Command::new(go)
        .current_dir(&src)
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&tmp)
        .arg(".")
        .env("GOTOOLCHAIN", "auto")
        .output()
        .expect("go build");
    assert!(
        out.status.success(),
        "building tests/{name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&tmp, &bin).expect("install the binary");
    bin
}

struct Receiver {
    child: Child,
    port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_receiver(tls: Option<(&Path, &Path)>) -> Receiver {
    let mut cmd = Command::new(receiver_binary());
    if let Some((cert, key)) = tls {
        cmd.arg("-cert").arg(cert).arg("-key").arg(key);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start receiver");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a first line").expect("utf-8");
    let port = first
        .strip_prefix("listening ")
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    let spans = Arc::new(Mutex::new(Vec::new()));
    let sink = spans.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                sink.lock().expect("spans").push(v);
            }
        }
    });
    Receiver { child, port, spans }
}

async fn wait_spans(r: &Receiver, what: &str, cond: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let spans = r.spans.lock().expect("spans").clone();
        if cond(&spans) {
            return spans;
        }
        assert!(
            start.elapsed() < WAIT,
            "{what}: not received; spans: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn by_name<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn parent_of<'a>(spans: &'a [Value], s: &Value) -> Option<&'a Value> {
    spans
        .iter()
        .find(|p| p["spanId"] == s["parentSpanId"] && p["traceId"] == s["traceId"])
}

/// One-shot run exporting to `endpoint` and evicting web-1 and web-2 from the tainted node;
/// returns the spans `receiver` got.
async fn traced_run(receiver: &Receiver, endpoint: &str, extra: &[&str]) -> Vec<Value> {
    let sim = start_sim(cluster(replica_set_with_pods("web", 2, TAINTED))).await;
    let endpoint = format!("--otel-collector-endpoint={endpoint}");
    let mut args = vec![
        "--descheduling-interval=0",
        "--secure-port=0",
        "--otel-trace-namespace=kube-system",
        endpoint.as_str(),
    ];
    args.extend_from_slice(extra);
    let mut d = start(&sim, "traced", &policy(""), &args);
    assert_eq!(d.wait_exit().await, 0, "log:\n{}", d.log_text());
    assert!(evicted(&sim, "web-1") && evicted(&sim, "web-2"));
    let spans = wait_spans(receiver, "the cycle's spans", |s| {
        !by_name(s, "runDeschedulerLoop").is_empty() && by_name(s, "EvictPod").len() >= 2
    })
    .await;
    sim.shutdown().await;
    spans
}

fn check_tree(spans: &[Value]) {
    let loops = by_name(spans, "runDeschedulerLoop");
    assert_eq!(loops.len(), 1, "{spans:#?}");
    let root = loops[0];
    assert_eq!(root["parentSpanId"], "", "the cycle span is a root");
    assert_eq!(root["attributes"]["source"], "once");
    assert_eq!(root["scope"], "sigs.k8s.io/descheduler");
    assert_eq!(root["resource"]["service.name"], "descheduler");
    assert_eq!(root["resource"]["service.namespace"], "kube-system");

    let runs = by_name(spans, "runProfiles");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    assert_eq!(
        parent_of(spans, runs[0]),
        Some(root),
        "runProfiles under the cycle"
    );

    let profiles = by_name(spans, "profile");
    assert_eq!(profiles.len(), 1, "{spans:#?}");
    assert_eq!(profiles[0]["attributes"]["profile"], "taints");
    assert_eq!(
        parent_of(spans, profiles[0]),
        Some(runs[0]),
        "profile under runProfiles"
    );

    let plugins = by_name(spans, "RemovePodsViolatingNodeTaints");
    assert_eq!(plugins.len(), 1, "{spans:#?}");
    let plugin = plugins[0];
    assert_eq!(
        plugin["attributes"]["plugin"],
        "RemovePodsViolatingNodeTaints"
    );
    assert_eq!(plugin["attributes"]["profile"], "taints");
    assert_eq!(plugin["attributes"]["operation"], "deschedule");
    assert_eq!(
        parent_of(spans, plugin),
        Some(profiles[0]),
        "plugin under its profile"
    );

    let evictions = by_name(spans, "EvictPod");
    assert_eq!(evictions.len(), 2, "{spans:#?}");
    let mut pods: Vec<&str> = evictions
        .iter()
        .map(|e| e["attributes"]["podName"].as_str().unwrap_or_default())
        .collect();
    pods.sort_unstable();
    assert_eq!(pods, ["web-1", "web-2"]);
    for e in evictions {
        assert_eq!(e["attributes"]["podNamespace"], NS);
        assert_eq!(e["attributes"]["operation"], "evict");
        assert_eq!(e["attributes"]["result"], "success");
        assert_eq!(
            parent_of(spans, e),
            Some(plugin),
            "eviction under its plugin"
        );
    }
}

/// The OpenTelemetry Collector of `tests/otel-collector`: its OTLP/gRPC receiver on a free port,
/// forwarding over OTLP/gRPC to `to` (a receiver's port).
struct Collector {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
            eprintln!("collector log:\n{log}");
        }
    }
}

fn start_collector(to: u16) -> Collector {
    let dir = tempfile::tempdir().expect("dir");
    let port = free_port();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{port}
exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:{to}
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp_grpc]
"
        ),
    )
    .expect("config written");
    let mut child = Command::new(collector_binary())
        .arg(format!("--config={}", config.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the collector");
    let stderr = child.stderr.take().expect("stderr");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("Everything is ready") {
                let _ = ready_tx.send(Ok(()));
            }
            if let Ok(mut l) = sink.lock() {
                l.push_str(&line);
                l.push('\n');
            }
        }
        let all = sink.lock().map(|l| l.clone()).unwrap_or_default();
        let _ = ready_tx.send(Err(all));
    });
    match ready_rx.recv_timeout(WAIT) {
        Ok(Ok(())) => {}
        Ok(Err(log)) => panic!("the collector exited before it was ready:\n{log}"),
        Err(e) => panic!("the collector was not ready within {WAIT:?}: {e}"),
    }
    Collector {
        child,
        port,
        log,
        _dir: dir,
    }
}

/// `run` → the OpenTelemetry Collector (its OTLP receiver) → its OTLP exporter → the receiver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_pass_through_the_opentelemetry_collector() {
    let receiver = start_receiver(None);
    let collector = start_collector(receiver.port);
    let endpoint = format!("127.0.0.1:{}", collector.port);
    let spans = traced_run(&receiver, &endpoint, &[]).await;
    check_tree(&spans);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_a_tls_receiver_verified_with_the_ca_cert() {
    let dir = tempfile::tempdir().expect("dir");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, ck.cert.pem()).expect("cert");
    std::fs::write(&key, ck.signing_key.serialize_pem()).expect("key");
    let receiver = start_receiver(Some((&cert, &key)));
    let ca = format!("--otel-transport-ca-cert={}", cert.display());
    let endpoint = format!("localhost:{}", receiver.port);
    let spans = traced_run(&receiver, &endpoint, &[&ca]).await;
    check_tree(&spans);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_ca_cert_stops_run_unless_falling_back_to_no_op() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 1, TAINTED))).await;
    let base = [
        "--descheduling-interval=0",
        "--secure-port=0",
        "--otel-collector-endpoint=localhost:4317",
        "--otel-transport-ca-cert=/nonexistent/ca.pem",
    ];
    let mut d = start(&sim, "no-ca", &policy(""), &base);
    assert_eq!(d.wait_exit().await, 2, "log:\n{}", d.log_text());
    assert!(
        d.log_text().contains("--otel-transport-ca-cert"),
        "{}",
        d.log_text()
    );
    assert!(!evicted(&sim, "web-1"));

    let mut args = base.to_vec();
    args.push("--otel-fallback-no-op-on-error");
    let mut d = start(&sim, "fallback", &policy(""), &args);
    assert_eq!(d.wait_exit().await, 0, "log:\n{}", d.log_text());
    assert!(
        d.log_text().contains("Falling back to NoOp"),
        "{}",
        d.log_text()
    );
    assert!(evicted(&sim, "web-1"));
    sim.shutdown().await;
}
