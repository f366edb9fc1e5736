//! Both API servers of `tests/real_sim_parity.rs` behind one raw HTTP client: the real control
//! plane (`tests/real_common`) and an in-process kube-sim with its controllers on the same three
//! nodes; the same workload applied to both; a webhook listener that records AdmissionReviews.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube_sim::{Sim, SimHandle, SimOptions};
use serde_json::{Value, json};

pub mod workload;

/// One API server.
pub struct Server {
    /// `real` or `kube-sim`.
    pub name: &'static str,
    pub client: kube::Client,
}

/// A response: status code and JSON body (Null when not JSON).
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
}

impl Server {
    /// A client from a kubeconfig file.
    pub async fn new(name: &'static str, kubeconfig: &std::path::Path) -> Server {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
        let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("client config");
        // Every answer is observed as sent: no retries of 429s (as the project's own client).
        cfg.default_retry = false;
        Server {
            name,
            client: kube::Client::try_from(cfg).expect("client"),
        }
    }

    fn request(
        method: &str,
        path: &str,
        ct: &str,
        body: Option<&Value>,
    ) -> http::Request<kube::client::Body> {
        let bytes = body
            .map(|b| serde_json::to_vec(b).expect("json"))
            .unwrap_or_default();
        http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", ct)
            .body(kube::client::Body::from(bytes))
            .expect("request")
    }

    /// Sends one request with a JSON body of content type `ct`; bounded to 30 s.
    pub async fn send_ct(&self, method: &str, path: &str, ct: &str, body: Option<&Value>) -> Resp {
        let req = Self::request(method, path, ct, body);
        let resp = tokio::time::timeout(Duration::from_secs(30), self.client.send(req))
            .await
            .unwrap_or_else(|_| panic!("{} {method} {path}: timed out", self.name))
            .unwrap_or_else(|e| panic!("{} {method} {path}: {e}", self.name));
        let status = resp.status().as_u16();
        let bytes = tokio::time::timeout(Duration::from_secs(30), resp.into_body().collect())
            .await
            .ok()
            .and_then(|r| r.ok())
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        Resp {
            status,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    pub async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        self.send_ct(method, path, "application/json", body).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send("POST", path, Some(body)).await
    }

    /// Reads a watch: its HTTP status and the events until `n` arrived, one matched `stop`, the
    /// stream ended or `max` passed.
    pub async fn watch(
        &self,
        path: &str,
        n: usize,
        max: Duration,
        stop: impl Fn(&Value) -> bool,
    ) -> (u16, Vec<Value>) {
        let req = Self::request("GET", path, "application/json", None);
        let resp = tokio::time::timeout(Duration::from_secs(30), self.client.send(req))
            .await
            .unwrap_or_else(|_| panic!("{} watch {path}: timed out", self.name))
            .unwrap_or_else(|e| panic!("{} watch {path}: {e}", self.name));
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let (mut buf, mut events) = (Vec::new(), Vec::new());
        let deadline = tokio::time::Instant::now() + max;
        while events.len() < n && !events.last().is_some_and(&stop) {
            match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Some(d) = frame.data_ref() {
                        buf.extend_from_slice(d);
                    }
                    while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=i).collect();
                        if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                            events.push(v);
                        }
                    }
                }
                _ => break,
            }
        }
        (status, events)
    }

    /// Polls `path` until `check` holds on its body; panics after `max`.
    pub async fn wait_for(
        &self,
        what: &str,
        path: &str,
        max: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            let r = self.get(path).await;
            if r.status == 200 && check(&r.body) {
                return r.body;
            }
            assert!(
                start.elapsed() < max,
                "{}: timed out after {max:?} waiting for {what}; last answer {} {}",
                self.name,
                r.status,
                r.body
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// kube-sim with its controllers on and the real cluster's three nodes (4 CPUs, 8 GiB, zones
/// `zone-a/b/c`).
pub async fn start_sim() -> SimHandle {
    let nodes = (1..=3)
        .map(|i| {
            let name = format!("node-{i}");
            let zone = ["zone-a", "zone-b", "zone-c"][i - 1];
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                    "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "region-1"}},
                "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect();
    Sim::start(SimOptions {
        objects: nodes,
        ..Default::default()
    })
    .await
    .expect("kube-sim starts")
}

/// An HTTPS listener on 127.0.0.1 (certificate for `127.0.0.1` from its own CA) that records
/// every AdmissionReview it gets and allows it.
pub struct ReviewRecorder {
    pub url: String,
    pub ca_pem: String,
    pub seen: Arc<Mutex<Vec<Value>>>,
    serving: kube_sim::serving::Serving,
}

impl ReviewRecorder {
    pub async fn start() -> ReviewRecorder {
        kube_sim::tls::install_crypto_provider();
        let ca = kube_sim::tls::TestCa::new("review-recorder-ca").expect("ca");
        let pair = ca.issue(&["127.0.0.1"]).expect("cert");
        let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
        let seen2 = seen.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let seen = seen2.clone();
            async move {
                let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap_or_else(|e| e.into_inner()).push(review.clone());
                axum::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": review.pointer("/request/uid").cloned().unwrap_or(Value::Null),
                        "allowed": true}}))
            }
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem(
            pair.cert_pem.into_bytes(),
            pair.key_pem.into_bytes(),
        )
        .await
        .expect("tls");
        let serving = kube_sim::serving::Serving::start(listener, tls, app).expect("serve");
        ReviewRecorder {
            url: format!("https://127.0.0.1:{}/review", addr.port()),
            ca_pem: ca.ca_pem().to_string(),
            seen,
            serving,
        }
    }

    /// The reviews recorded so far.
    pub fn reviews(&self) -> Vec<Value> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub async fn stop(&self) {
        self.serving.graceful_stop().await;
    }
}

/// Replaces every occurrence of each `(from, to)` in every string of `v`.
pub fn replace_all(v: &mut Value, subs: &[(String, String)]) {
    match v {
        Value::String(s) => {
            for (from, to) in subs {
                if !from.is_empty() {
                    *s = s.replace(from.as_str(), to);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| replace_all(x, subs)),
        Value::Object(m) => m.values_mut().for_each(|x| replace_all(x, subs)),
        _ => {}
    }
}

/// Keeps only the JSON pointers `keep` of `v` (missing ones as Null), keyed by pointer.
pub fn pick(v: &Value, keep: &[&str]) -> Value {
    Value::Object(
        keep.iter()
            .map(|p| {
                (
                    (*p).to_string(),
                    v.pointer(p).cloned().unwrap_or(Value::Null),
                )
            })
            .collect(),
    )
}
