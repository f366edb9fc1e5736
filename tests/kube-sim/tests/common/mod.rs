//! Shared helpers: start a sim, talk to it over HTTPS, run a fake webhook.
#![allow(dead_code)]
use kube_sim::tls::TestCa;
use kube_sim::{Sim, SimHandle};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A sim with controllers off (tests set statuses by hand) and the given objects.
pub async fn start(objects: Vec<Value>) -> SimHandle {
    Sim::start_static(objects).await.expect("sim starts")
}

/// A minimal HTTP client for the sim.
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

/// A response: status, warnings and JSON body (Null when not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub warnings: Vec<String>,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Client {
    pub fn new(sim: &SimHandle) -> Self {
        Self::with_token(sim, sim.token())
    }

    pub fn with_token(sim: &SimHandle, token: &str) -> Self {
        let ca = reqwest::Certificate::from_pem(sim.ca_pem().as_bytes()).expect("ca");
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(20))
            .build()
            .expect("client");
        Client {
            http,
            base: sim.url().to_string(),
            token: token.to_string(),
        }
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        ct: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self
            .http
            .request(m, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            rb = rb
                .header("content-type", ct.unwrap_or("application/json"))
                .body(serde_json::to_vec(&b).expect("json"));
        }
        let resp = rb.send().await.expect("request");
        let status = resp.status().as_u16();
        let warnings = resp
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let bytes = resp.bytes().await.expect("body");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp {
            status,
            warnings,
            retry_after,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send("GET", path, None, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send("POST", path, None, Some(body)).await
    }
    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.send("PUT", path, None, Some(body)).await
    }
    pub async fn patch(&self, path: &str, ct: &str, body: Value) -> Resp {
        self.send("PATCH", path, Some(ct), Some(body)).await
    }
    pub async fn delete(&self, path: &str, body: Option<Value>) -> Resp {
        self.send("DELETE", path, None, body).await
    }

    /// Reads a watch stream until `n` events arrived or the stream ended / `max` passed.
    pub async fn watch(&self, path: &str, n: usize, max: Duration) -> (Vec<Value>, bool) {
        let mut resp = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("watch");
        let mut buf = Vec::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + max;
        loop {
            if events.len() >= n {
                return (events, false);
            }
            match tokio::time::timeout_at(deadline, resp.chunk()).await {
                Err(_) => return (events, false),
                Ok(Ok(Some(c))) => {
                    buf.extend_from_slice(&c);
                    take_events(&mut buf, &mut events);
                }
                Ok(Ok(None)) | Ok(Err(_)) => return (events, true),
            }
        }
    }
}

/// Moves every complete line of a watch stream from `buf` to `events` (as JSON; a line that is
/// not JSON is dropped), leaving a partial last line in `buf`.
pub fn take_events(buf: &mut Vec<u8>, events: &mut Vec<Value>) {
    while let Some(i) = buf.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = buf.drain(..=i).collect();
        if let Ok(v) = serde_json::from_slice::<Value>(&line) {
            events.push(v);
        }
    }
}

pub fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

pub fn pod(ns: &str, name: &str, node: &str, labels: Value, ready: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "img:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

pub fn pdb(ns: &str, name: &str, labels: Value, allowed: i64, current: i64, desired: i64) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": ns, "generation": 1},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": current,
            "desiredHealthy": desired, "expectedPods": current}})
}

pub fn eviction(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
}

/// How a fake webhook answers one AdmissionReview request.
pub type Answer = Arc<dyn Fn(&Value) -> (Duration, Value) + Send + Sync>;

/// An HTTPS admission webhook on 127.0.0.1 with a certificate for
/// `<name>.<namespace>.svc` and `127.0.0.1`.
pub struct FakeWebhook {
    pub addr: SocketAddr,
    pub ca_pem: String,
    pub seen: Arc<Mutex<Vec<Value>>>,
    handle: axum_server::Handle<SocketAddr>,
}

impl FakeWebhook {
    pub async fn start(svc: &str, ns: &str, answer: Answer) -> Self {
        kube_sim::tls::install_crypto_provider();
        let ca = TestCa::new("webhook-ca").expect("ca");
        let host = format!("{svc}.{ns}.svc");
        let pair = ca.issue(&[&host, "127.0.0.1"]).expect("cert");
        let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
        let seen2 = seen.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let answer = answer.clone();
            let seen = seen2.clone();
            async move {
                let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push(review.clone());
                let (delay, resp) = answer(&review);
                tokio::time::sleep(delay).await;
                axum::Json(resp)
            }
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let cfg = axum_server::tls_rustls::RustlsConfig::from_pem(
            pair.cert_pem.into_bytes(),
            pair.key_pem.into_bytes(),
        )
        .await
        .expect("tls");
        let handle = axum_server::Handle::new();
        let srv = axum_server::from_tcp_rustls(listener, cfg)
            .expect("server")
            .handle(handle.clone());
        tokio::spawn(async move {
            let _ = srv.serve(app.into_make_service()).await;
        });
        FakeWebhook {
            addr,
            ca_pem: ca.ca_pem().to_string(),
            seen,
            handle,
        }
    }

    pub fn stop(&self) {
        self.handle.shutdown();
    }

    pub fn requests(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

/// An AdmissionReview response echoing the request uid.
pub fn review_response(
    req: &Value,
    allowed: bool,
    status: Option<Value>,
    warnings: &[&str],
) -> Value {
    let mut r = json!({"uid": req.pointer("/request/uid").cloned().unwrap_or(Value::Null), "allowed": allowed});
    if let Some(s) = status {
        r["status"] = s;
    }
    if !warnings.is_empty() {
        r["warnings"] = json!(warnings);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})
}

/// A ValidatingWebhookConfiguration for `CREATE pods/eviction` pointing at a service.
pub fn eviction_webhook(
    name: &str,
    svc: &str,
    ns: &str,
    ca_pem: &str,
    failure: &str,
    side_effects: &str,
    timeout: u64,
) -> Value {
    use base64::Engine;
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": name},
    "webhooks": [{
        "name": format!("{name}.example.com"),
        "admissionReviewVersions": ["v1"],
        "sideEffects": side_effects,
        "failurePolicy": failure,
        "timeoutSeconds": timeout,
        "clientConfig": {"caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            "service": {"namespace": ns, "name": svc, "path": "/validate", "port": 443}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/eviction"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}
    }]})
}

/// The program `name` on PATH, if there is one.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs kubectl `bin` with `--kubeconfig kubeconfig` and `args` (HOME in the temp dir, so no
/// user cache is read), bounded to 60 s: (exit status 0, stdout, stderr).
pub async fn kubectl_run(
    bin: &std::path::Path,
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> (bool, String, String) {
    let child = tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("HOME", std::env::temp_dir())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(60), child).await {
        Ok(Ok(o)) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into(),
            String::from_utf8_lossy(&o.stderr).into(),
        ),
        Ok(Err(e)) => (false, String::new(), e.to_string()),
        Err(_) => (false, String::new(), "timed out".into()),
    }
}
