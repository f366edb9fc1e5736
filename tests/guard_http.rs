//! HTTP-level tests of the eviction guard: the real server on 127.0.0.1:0 over TLS with
//! certificates from our `certs` code, real AdmissionReview JSON, exact responses.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use kube::core::Selector;
use kube_descheduler::cli::certs::{CertsArgs, GeneratedCerts, generate, write_files};
use kube_descheduler::guard::decision::GuardConfig;
use kube_descheduler::guard::facts::{
    DeploymentFacts, IntOrPercent, OwnerFacts, PdbFacts, PodFacts, PodPhase, RecordedRestart,
    ReplicaSetFacts, Strategy,
};
use kube_descheduler::guard::server::{GuardState, router};
use kube_descheduler::guard::source::MemorySource;
use kube_descheduler::restart::{RestartOutcome, RestartRequest, Restarter};
use kube_descheduler::serving::tls::{HttpsServer, load_with_reload, serve_https};
use serde_json::{Value, json};

const HOST: &str = "guard.kube-descheduler.svc";

#[derive(Default)]
struct FakeRestarter {
    calls: Mutex<Vec<RestartRequest>>,
    fail: Option<String>,
}

impl Restarter for FakeRestarter {
    fn restart(&self, req: RestartRequest) -> BoxFuture<'_, RestartOutcome> {
        self.calls.lock().unwrap().push(req);
        let outcome = match &self.fail {
            Some(error) => RestartOutcome::Failed {
                error: error.clone(),
            },
            None => RestartOutcome::Restarted {
                at: Timestamp::now(),
            },
        };
        Box::pin(std::future::ready(outcome))
    }
}

fn certs_args(dir: &Path) -> CertsArgs {
    CertsArgs {
        service: "guard".into(),
        namespace: "kube-descheduler".into(),
        out_dir: dir.to_owned(),
        dns_names: vec![],
        ips: vec![],
        valid_days: 7,
        ca_cert_file: None,
        ca_key_file: None,
    }
}

struct Harness {
    server: HttpsServer,
    client: reqwest::Client,
    restarter: Arc<FakeRestarter>,
    source: Arc<MemorySource>,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn url(&self, path: &str) -> String {
        format!("https://{HOST}:{}{path}", self.server.addr.port())
    }

    async fn post(&self, body: Vec<u8>) -> (u16, String) {
        let resp = self
            .client
            .post(self.url("/validate/eviction"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    async fn review(&self, body: Value) -> Value {
        let (status, text) = self.post(serde_json::to_vec(&body).unwrap()).await;
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(
            v["response"]["uid"], body["request"]["uid"],
            "uid must echo"
        );
        assert!(
            v["response"].get("patch").is_none(),
            "a validating webhook never patches"
        );
        v["response"].clone()
    }
}

fn client_for(ca_pem: &str, addr: SocketAddr) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .resolve(HOST, addr)
        .https_only(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

async fn start_with(
    source: MemorySource,
    restarter: FakeRestarter,
    config: GuardConfig,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let certs = generate(&certs_args(dir.path())).unwrap();
    write_files(dir.path(), &certs).unwrap();
    let (tls, _task) = load_with_reload(
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let restarter = Arc::new(restarter);
    let source = Arc::new(source);
    let state = Arc::new(GuardState::new(source.clone(), restarter.clone(), config));
    let server = serve_https(router(state), "127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    assert_ne!(server.addr.port(), 0);
    let client = client_for(&certs.ca_cert_pem, server.addr);
    Harness {
        server,
        client,
        restarter,
        source,
        _dir: dir,
    }
}

async fn start(source: MemorySource) -> Harness {
    start_with(source, FakeRestarter::default(), GuardConfig::default()).await
}

// ---- cluster fixtures ------------------------------------------------------------------------

fn pod() -> PodFacts {
    PodFacts {
        namespace: "shop".into(),
        name: "web-7d9f-abcde".into(),
        uid: "pod-uid".into(),
        labels: std::sync::Arc::new(BTreeMap::from([("app".into(), "web".into())])),
        opt_out: false,
        phase: PodPhase::Running,
        terminating: false,
        ready: true,
        owner: Some(OwnerFacts {
            kind: "ReplicaSet".into(),
            name: "web-7d9f".into(),
            uid: "rs-uid".into(),
        }),
        pod_template_hash: Some("7d9f".into()),
        claims: vec![],
        ephemeral_single_node_volume: false,
    }
}

fn rs() -> ReplicaSetFacts {
    ReplicaSetFacts {
        namespace: "shop".into(),
        name: "web-7d9f".into(),
        uid: "rs-uid".into(),
        owner: Some(OwnerFacts {
            kind: "Deployment".into(),
            name: "web".into(),
            uid: "dep-uid".into(),
        }),
        revision: Some(3),
        pod_template_hash: Some("7d9f".into()),
        desired: 1,
        replicas: 1,
        ready: 1,
    }
}

fn dep() -> DeploymentFacts {
    DeploymentFacts {
        namespace: "shop".into(),
        name: "web".into(),
        uid: "dep-uid".into(),
        replicas: 1,
        strategy: Strategy::RollingUpdate {
            max_surge: IntOrPercent::Percent(25),
            max_unavailable: IntOrPercent::Percent(25),
        },
        paused: false,
        progress_deadline_exceeded: false,
        opt_out: false,
        revision: Some(3),
        generation: 2,
        observed_generation: 2,
        status_replicas: 1,
        updated_replicas: 1,
        ready_replicas: 1,
        available_replicas: 1,
        restart: None,
        pdb_surge: None,
        surge: None,
    }
}

fn cluster(d: DeploymentFacts) -> MemorySource {
    let mut s = MemorySource::new();
    s.pods.insert("shop/web-7d9f-abcde".into(), pod());
    s.replica_sets
        .insert("shop/web-7d9f".into(), Arc::new(rs()));
    s.deployments.insert("shop/web".into(), Arc::new(d));
    s
}

fn eviction_review(api_version: &str, delete_options: Value, query_dry_run: bool) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "policy", "version": api_version.trim_start_matches("policy/"), "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": "web-7d9f-abcde",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:cluster-autoscaler", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": api_version,
                "kind": "Eviction",
                "metadata": {"name": "web-7d9f-abcde", "namespace": "shop", "creationTimestamp": null},
                "deleteOptions": delete_options
            },
            "oldObject": null,
            "dryRun": query_dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

fn assert_deflection(resp: &Value) {
    assert_eq!(resp["allowed"], false);
    let status = &resp["status"];
    assert_eq!(status["code"], 429);
    assert_eq!(status["reason"], "TooManyRequests");
    assert!(
        status.get("details").is_none(),
        "no details, so no retryAfterSeconds: {status}"
    );
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("Eviction triggered evacuation"),
        "{message}"
    );
    assert!(message.contains("Deployment shop/web"), "{message}");
    assert!(
        message.contains("rolling restart is in progress"),
        "{message}"
    );
}

// ---- tests -----------------------------------------------------------------------------------

#[tokio::test]
async fn v1_eviction_of_single_replica_pod_is_deflected_into_one_restart() {
    let h = start(cluster(dep())).await;
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": "pod-uid"}}),
            false,
        ))
        .await;
    assert_deflection(&resp);
    let calls = h.restarter.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (
            calls[0].namespace.as_str(),
            calls[0].deployment.as_str(),
            calls[0].pod.as_str()
        ),
        ("shop", "web", "web-7d9f-abcde")
    );
    assert_eq!(
        calls[0].requested_by,
        "system:serviceaccount:kube-system:cluster-autoscaler"
    );
}

#[tokio::test]
async fn v1beta1_eviction_is_accepted() {
    let h = start(cluster(dep())).await;
    let resp = h
        .review(eviction_review("policy/v1beta1", Value::Null, false))
        .await;
    assert_deflection(&resp);
    assert_eq!(h.restarter.calls.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn dry_run_in_query_has_no_side_effect_and_warns() {
    let h = start(cluster(dep())).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), true))
        .await;
    assert_eq!(resp["allowed"], true);
    let warning = resp["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("dry run") && warning.contains("rolling restart of Deployment shop/web"),
        "{warning}"
    );
    assert!(
        h.restarter.calls.lock().unwrap().is_empty(),
        "dry run must not restart"
    );
}

#[tokio::test]
async fn dry_run_in_delete_options_has_no_side_effect_and_warns() {
    let h = start(cluster(dep())).await;
    // kubectl drain --dry-run=server: dryRun only in the Eviction body.
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"dryRun": ["All"]}),
            false,
        ))
        .await;
    assert_eq!(resp["allowed"], true);
    assert!(
        resp["warnings"][0]
            .as_str()
            .unwrap()
            .contains("would refuse")
    );
    assert!(h.restarter.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn uid_mismatch_is_allowed_without_restart() {
    let h = start(cluster(dep())).await;
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": "someone-else"}}),
            false,
        ))
        .await;
    assert_eq!(resp["allowed"], true);
    assert!(resp.get("warnings").is_none());
    assert!(h.restarter.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn missing_pod_is_allowed() {
    let h = start(MemorySource::new()).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(resp["allowed"], true);
    assert!(h.restarter.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn malformed_bodies_get_400_naming_the_problem() {
    let h = start(cluster(dep())).await;
    let (status, text) = h.post(b"{not json".to_vec()).await;
    assert_eq!(status, 400);
    assert!(text.contains("malformed AdmissionReview"), "{text}");

    let mut bad = eviction_review("policy/v1", json!({}), false);
    bad["request"]["uid"] = json!(42);
    let (status, text) = h.post(serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(status, 400);
    assert!(text.contains("request.uid"), "{text}");

    let bad = eviction_review("policy/v1", json!({"dryRun": "All"}), false);
    let (status, text) = h.post(serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(status, 400);
    assert!(
        text.contains("deleteOptions") && text.contains("dryRun"),
        "{text}"
    );

    let mut bad = eviction_review("policy/v1", json!({}), false);
    bad["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, text) = h.post(serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(status, 400);
    assert!(text.contains("admission.k8s.io/v1beta1"), "{text}");

    // Oversized bodies are cut off, not buffered forever.
    let (status, _) = h.post(vec![b' '; 5 * 1024 * 1024]).await;
    assert_eq!(status, 413);
    assert!(h.restarter.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn non_eviction_requests_are_allowed() {
    let h = start(cluster(dep())).await;
    let mut review = eviction_review("policy/v1", json!({}), false);
    review["request"]["subResource"] = Value::Null;
    review["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    review["request"]["object"] =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
    let resp = h.review(review).await;
    assert_eq!(resp["allowed"], true);
    let mut delete = eviction_review("policy/v1", json!({}), false);
    delete["request"]["operation"] = json!("DELETE");
    assert_eq!(h.review(delete).await["allowed"], true);
    assert!(h.restarter.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn failed_restart_answers_429_without_the_handoff_phrase() {
    let restarter = FakeRestarter {
        fail: Some("the server is on fire".into()),
        ..FakeRestarter::default()
    };
    let h = start_with(cluster(dep()), restarter, GuardConfig::default()).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 429);
    assert_eq!(resp["status"]["reason"], "TooManyRequests");
    let message = resp["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("Deployment shop/web") && message.contains("the server is on fire"),
        "{message}"
    );
    assert!(
        !message.contains("Eviction triggered evacuation"),
        "not handed off: {message}"
    );
    // The retry tries again.
    let _ = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(h.restarter.calls.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn in_flight_rollout_is_denied_without_another_restart() {
    let d = DeploymentFacts {
        restart: Some(RecordedRestart {
            at: Timestamp::now(),
            by: Some("guard-1".into()),
        }),
        generation: 3,
        observed_generation: 2,
        ..dep()
    };
    let h = start(cluster(d)).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_deflection(&resp);
    assert!(
        h.restarter.calls.lock().unwrap().is_empty(),
        "in flight: no second restart"
    );
}

#[tokio::test]
async fn pdb_without_disruptions_is_denied_naming_the_budget() {
    let mut s = cluster(DeploymentFacts {
        replicas: 3,
        ready_replicas: 3,
        ..dep()
    });
    s.pdbs.push(Arc::new(PdbFacts {
        namespace: "shop".into(),
        name: "web-pdb".into(),
        selector: Some(Selector::from_iter([("app", "web")])),
        disruptions_allowed: 0,
    }));
    let h = start(s).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 429);
    assert_eq!(resp["status"]["reason"], "TooManyRequests");
    let message = resp["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("PodDisruptionBudget shop/web-pdb"),
        "{message}"
    );
    assert!(!message.contains("Eviction triggered evacuation"));
}

#[tokio::test]
async fn health_guard_can_be_switched_off() {
    let s = cluster(DeploymentFacts {
        replicas: 3,
        ready_replicas: 2,
        ..dep()
    });
    let off = GuardConfig {
        health_guard: false,
        ..GuardConfig::default()
    };
    let h = start_with(s, FakeRestarter::default(), off).await;
    assert_eq!(
        h.review(eviction_review("policy/v1", json!({}), false))
            .await["allowed"],
        true
    );
    let s = cluster(DeploymentFacts {
        replicas: 3,
        ready_replicas: 2,
        ..dep()
    });
    let h = start(s).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(resp["status"]["code"], 429);
    assert!(
        resp["status"]["message"]
            .as_str()
            .unwrap()
            .contains("only 2 of 3")
    );
}

#[tokio::test]
async fn when_unsure_the_guard_allows() {
    let mut s = cluster(dep());
    s.pod_error = Some("connection refused".into());
    let h = start(s).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(resp["allowed"], true);
    assert!(
        resp["warnings"][0]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );

    let mut s = cluster(dep());
    s.synced = false;
    let h = start(s).await;
    assert_eq!(
        h.review(eviction_review("policy/v1", json!({}), false))
            .await["allowed"],
        true
    );
    let ready = h.client.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 503);
    assert!(h.restarter.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn health_ready_and_metrics_endpoints() {
    let h = start(cluster(dep())).await;
    assert_eq!(
        h.client
            .get(h.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    assert_eq!(
        h.client
            .get(h.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    let _ = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    let _ = h
        .review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": "x"}}),
            false,
        ))
        .await;
    let text = h
        .client
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("kube_descheduler_guard_deflections_total 1"),
        "{text}"
    );
    assert!(
        text.contains("kube_descheduler_guard_allows_total{reason=\"uid_mismatch\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("kube_descheduler_guard_denials_total{reason=\"deflected\"} 1"),
        "{text}"
    );
}

// ---- certificate reload ----------------------------------------------------------------------

async fn served_cert(addr: SocketAddr, ca_pem: &str) -> Vec<u8> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from(HOST).unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .as_ref()
        .to_vec()
}

fn der_of(certs: &GeneratedCerts) -> Vec<u8> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(certs.cert_pem.as_bytes())
        .unwrap()
        .as_ref()
        .to_vec()
}

/// Lays files out like a Secret volume: `tls.crt -> ..data/tls.crt`, `..data -> ..<version>`.
#[cfg(unix)]
fn publish_secret(dir: &Path, version: &str, certs: &GeneratedCerts) {
    let versioned = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&versioned).unwrap();
    std::fs::write(versioned.join("tls.crt"), &certs.cert_pem).unwrap();
    std::fs::write(versioned.join("tls.key"), &certs.key_pem).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(f)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn rotated_certificates_are_served_to_new_connections_without_restart() {
    let ca_dir = tempfile::tempdir().unwrap();
    let first = generate(&certs_args(ca_dir.path())).unwrap();
    write_files(ca_dir.path(), &first).unwrap();
    let mount = tempfile::tempdir().unwrap();
    publish_secret(mount.path(), "v1", &first);

    let (tls, _task) = load_with_reload(
        mount.path().join("tls.crt"),
        mount.path().join("tls.key"),
        Duration::from_millis(100),
    )
    .await
    .unwrap();
    let state = Arc::new(GuardState::new(
        Arc::new(cluster(dep())),
        Arc::new(FakeRestarter::default()),
        GuardConfig::default(),
    ));
    let server = serve_https(router(state), "127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    assert_eq!(
        served_cert(server.addr, &first.ca_cert_pem).await,
        der_of(&first)
    );

    // Rotate: a new serving certificate from the same CA, swapped in like the kubelet does.
    let reuse = CertsArgs {
        ca_cert_file: Some(ca_dir.path().join("ca.crt")),
        ca_key_file: Some(ca_dir.path().join("ca.key")),
        ..certs_args(ca_dir.path())
    };
    let second = generate(&reuse).unwrap();
    assert_ne!(der_of(&first), der_of(&second));
    publish_secret(mount.path(), "v2", &second);

    let mut served = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        served = served_cert(server.addr, &first.ca_cert_pem).await;
        if served == der_of(&second) {
            break;
        }
    }
    assert_eq!(
        served,
        der_of(&second),
        "new connections get the rotated certificate"
    );

    // A broken update keeps the last good certificate.
    std::fs::write(mount.path().join("..v2").join("tls.key"), "garbage").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        served_cert(server.addr, &first.ca_cert_pem).await,
        der_of(&second)
    );
    server.shutdown(Duration::from_secs(1)).await.unwrap();
}

// ---- bounds ----------------------------------------------------------------------------------

fn advance(clock: &Mutex<Timestamp>, secs: i64) {
    let mut t = clock.lock().unwrap();
    *t = t
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap();
}

#[tokio::test]
async fn failed_restarts_stop_blocking_after_the_deadline() {
    let now = Arc::new(Mutex::new(Timestamp::now()));
    let clock_now = now.clone();
    let restarter = Arc::new(FakeRestarter {
        fail: Some("conflict".into()),
        ..FakeRestarter::default()
    });
    let source = Arc::new(cluster(dep()));
    let state = GuardState::new(source.clone(), restarter.clone(), GuardConfig::default())
        .with_clock(Arc::new(move || *clock_now.lock().unwrap()));
    let dir = tempfile::tempdir().unwrap();
    let certs = generate(&certs_args(dir.path())).unwrap();
    write_files(dir.path(), &certs).unwrap();
    let (tls, _t) = load_with_reload(
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let server = serve_https(router(Arc::new(state)), "127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    let h = Harness {
        client: client_for(&certs.ca_cert_pem, server.addr),
        server,
        restarter,
        source,
        _dir: dir,
    };

    let first = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(first["status"]["code"], 429);
    advance(&now, 300);
    assert_eq!(
        h.review(eviction_review("policy/v1", json!({}), false))
            .await["status"]["code"],
        429
    );
    advance(&now, 301);
    let late = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(late["allowed"], true, "{late}");
    assert!(
        late["warnings"][0].as_str().unwrap().contains("within 10m"),
        "{late}"
    );
    assert_eq!(
        h.restarter.calls.lock().unwrap().len(),
        2,
        "no restart attempt after the deadline"
    );
}

/// A source whose pod reads never finish.
struct Stuck(MemorySource);

impl kube_descheduler::guard::source::FactSource for Stuck {
    fn ready(&self) -> bool {
        true
    }
    fn pod<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodFacts>, kube_descheduler::guard::source::SourceError>> {
        Box::pin(futures::future::pending())
    }
    fn replica_set<'a>(
        &'a self,
        ns: &'a str,
        name: &'a str,
    ) -> BoxFuture<
        'a,
        Result<Option<Arc<ReplicaSetFacts>>, kube_descheduler::guard::source::SourceError>,
    > {
        self.0.replica_set(ns, name)
    }
    fn deployment(&self, ns: &str, name: &str) -> Option<Arc<DeploymentFacts>> {
        self.0.deployment(ns, name)
    }
    fn pdbs(&self, ns: &str) -> Vec<Arc<PdbFacts>> {
        self.0.pdbs(ns)
    }
    fn pvc<'a>(
        &'a self,
        ns: &'a str,
        name: &'a str,
    ) -> BoxFuture<
        'a,
        Result<
            Option<kube_descheduler::guard::facts::PvcFacts>,
            kube_descheduler::guard::source::SourceError,
        >,
    > {
        self.0.pvc(ns, name)
    }
}

#[tokio::test]
async fn a_hanging_lookup_is_answered_allowed_within_the_webhook_timeout() {
    use kube_descheduler::guard::source::FactSource;
    let dir = tempfile::tempdir().unwrap();
    let certs = generate(&certs_args(dir.path())).unwrap();
    write_files(dir.path(), &certs).unwrap();
    let (tls, _t) = load_with_reload(
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let source: Arc<dyn FactSource> = Arc::new(Stuck(cluster(dep())));
    let restarter = Arc::new(FakeRestarter::default());
    let state = Arc::new(GuardState::new(
        source,
        restarter.clone(),
        GuardConfig::default(),
    ));
    let server = serve_https(router(state), "127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    let h = Harness {
        client: client_for(&certs.ca_cert_pem, server.addr),
        server,
        restarter,
        // Not the source serving (Stuck): this test counts no reads.
        source: Arc::new(MemorySource::new()),
        _dir: dir,
    };
    let started = std::time::Instant::now();
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered inside the 5 s webhook timeout"
    );
    assert_eq!(resp["allowed"], true);
    assert!(resp["warnings"][0].as_str().unwrap().contains("in time"));
}

// ---- pod cache -------------------------------------------------------------------------------

fn pod_reads(h: &Harness) -> usize {
    h.source
        .pod_reads
        .load(std::sync::atomic::Ordering::Relaxed)
}

async fn metrics_text(h: &Harness) -> String {
    h.client
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn three_replicas() -> DeploymentFacts {
    DeploymentFacts {
        replicas: 3,
        status_replicas: 3,
        updated_replicas: 3,
        ready_replicas: 3,
        available_replicas: 3,
        ..dep()
    }
}

#[tokio::test]
async fn cached_pod_answers_the_allow_path_without_a_read() {
    let mut s = cluster(three_replicas());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    let h = start(s).await;
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": "pod-uid"}}),
            false,
        ))
        .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(pod_reads(&h), 0, "served from the cache");
    assert!(h.restarter.calls.lock().unwrap().is_empty());
    let m = metrics_text(&h).await;
    assert!(
        m.contains("kube_descheduler_guard_pod_reads_total{source=\"cache\"} 1"),
        "{m}"
    );
}

#[tokio::test]
async fn pod_missing_from_the_cache_is_read_not_assumed_gone() {
    // Synced cache without the pod (just created, the watch lags): the API has it, and it is a
    // deflection candidate.
    let h = start(cluster(dep())).await;
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": "pod-uid"}}),
            false,
        ))
        .await;
    assert_deflection(&resp);
    assert_eq!(pod_reads(&h), 1);
    assert_eq!(h.restarter.calls.lock().unwrap().len(), 1);
    let m = metrics_text(&h).await;
    assert!(
        m.contains("kube_descheduler_guard_pod_reads_total{source=\"api\"} 1"),
        "{m}"
    );
}

#[tokio::test]
async fn stale_cached_pod_that_the_api_says_is_gone_is_not_deflected() {
    let mut s = cluster(dep());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    s.pods.clear();
    let h = start(s).await;
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": "pod-uid"}}),
            false,
        ))
        .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(
        h.restarter.calls.lock().unwrap().is_empty(),
        "no restart for a pod that is gone"
    );
    assert_eq!(pod_reads(&h), 1, "re-read before acting");
}

#[tokio::test]
async fn stale_cached_pod_that_stopped_being_ready_is_not_refused() {
    // The cache still sees the pod Ready under a budget with no disruptions left; the API says it
    // is terminating: allow, as a fresh read would.
    let mut s = cluster(three_replicas());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    s.pods.insert(
        "shop/web-7d9f-abcde".into(),
        PodFacts {
            terminating: true,
            ..pod()
        },
    );
    s.pdbs.push(Arc::new(PdbFacts {
        namespace: "shop".into(),
        name: "web".into(),
        selector: Some(Selector::from_iter([(
            "app".to_string(),
            "web".to_string(),
        )])),
        disruptions_allowed: 0,
    }));
    let h = start(s).await;
    let resp = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(pod_reads(&h), 1);
}

#[tokio::test]
async fn deflection_from_the_cache_is_confirmed_by_a_fresh_read() {
    let mut s = cluster(dep());
    s.cached_pods.insert("shop/web-7d9f-abcde".into(), pod());
    let h = start(s).await;
    let resp = h
        .review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": "pod-uid"}}),
            false,
        ))
        .await;
    assert_deflection(&resp);
    assert_eq!(pod_reads(&h), 1, "one fresh read before the restart");
    assert_eq!(h.restarter.calls.lock().unwrap().len(), 1);
    let m = metrics_text(&h).await;
    assert!(
        m.contains("kube_descheduler_guard_pod_reads_total{source=\"recheck\"} 1"),
        "{m}"
    );
}

/// Rule A through the webhook: of two replicas on a schedulable node, the first eviction is
/// allowed (the other replica stays); an eviction of the second right after it is deflected,
/// because the first replica is now being evicted (this webhook saw its eviction).
#[tokio::test]
async fn a_replica_whose_sibling_is_being_evicted_is_deflected() {
    use kube_descheduler::guard::source::Placement;
    let d = DeploymentFacts {
        replicas: 2,
        status_replicas: 2,
        updated_replicas: 2,
        ready_replicas: 2,
        available_replicas: 2,
        ..dep()
    };
    let mut source = cluster(d);
    let other = PodFacts {
        name: "web-7d9f-other".into(),
        uid: "other-uid".into(),
        ..pod()
    };
    source.pods.insert("shop/web-7d9f-other".into(), other);
    let placed = |name: &str| Placement {
        name: name.into(),
        ready: true,
        terminating: false,
        node: Some("a".into()),
    };
    source.placements.insert(
        "shop/web".into(),
        vec![placed("web-7d9f-abcde"), placed("web-7d9f-other")],
    );
    source.nodes.insert("a".into(), false);
    let h = start(source).await;

    let first = h
        .review(eviction_review("policy/v1", json!({}), false))
        .await;
    assert_eq!(first["allowed"], true, "the other replica stays: {first}");
    assert!(h.restarter.calls.lock().unwrap().is_empty());

    let mut second = eviction_review("policy/v1", json!({}), false);
    second["request"]["name"] = json!("web-7d9f-other");
    second["request"]["object"]["metadata"]["name"] = json!("web-7d9f-other");
    let resp = h.review(second).await;
    assert_deflection(&resp);
    let calls = h.restarter.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].pod, "web-7d9f-other");
}
