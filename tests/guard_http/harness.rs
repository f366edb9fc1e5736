//! The guard server under test: real router and TLS, a fake restarter, facts in memory.

use super::*;

#[derive(Default)]
pub(crate) struct FakeRestarter {
    pub(crate) calls: Mutex<Vec<RestartRequest>>,
    pub(crate) fail: Option<String>,
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

pub(crate) struct Harness {
    pub(crate) server: HttpsServer,
    pub(crate) client: reqwest::Client,
    pub(crate) restarter: Arc<FakeRestarter>,
    pub(crate) source: Arc<MemorySource>,
    pub(crate) _dir: tempfile::TempDir,
}

impl Harness {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("https://{HOST}:{}{path}", self.server.addr.port())
    }

    pub(crate) async fn post(&self, body: Vec<u8>) -> (u16, String) {
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

    pub(crate) async fn review(&self, body: Value) -> Value {
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

    /// The review of the fixture pod's `policy/v1` eviction (no preconditions, not a dry run).
    pub(crate) async fn evict(&self) -> Value {
        self.review(eviction_review("policy/v1", json!({}), false))
            .await
    }

    /// The review of the fixture pod's `policy/v1` eviction with the precondition `uid`.
    pub(crate) async fn evict_uid(&self, uid: &str) -> Value {
        self.review(eviction_review(
            "policy/v1",
            json!({"preconditions": {"uid": uid}}),
            false,
        ))
        .await
    }

    /// The response to a GET of `path`.
    pub(crate) async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// The restarts asked of the restarter so far.
    pub(crate) fn restarts(&self) -> Vec<RestartRequest> {
        self.restarter.calls.lock().unwrap().clone()
    }
}

pub(crate) async fn start_with(
    source: MemorySource,
    restarter: FakeRestarter,
    config: GuardConfig,
) -> Harness {
    let restarter = Arc::new(restarter);
    let source = Arc::new(source);
    let state = GuardState::new(source.clone(), restarter.clone(), config);
    serve(Arc::new(state), restarter, source).await
}

/// Serves `state` over TLS; `restarter` and `source` are what the harness reads back (the source
/// serving `state` or a stand-in).
pub(crate) async fn serve(
    state: Arc<GuardState>,
    restarter: Arc<FakeRestarter>,
    source: Arc<MemorySource>,
) -> Harness {
    let TestTls {
        certs,
        config: tls,
        dir,
    } = test_tls().await;
    let server = serve_https(router(state), "127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap();
    assert_ne!(server.addr.port(), 0);
    let client = client_for(&certs.ca_cert_pem, server.addr, Duration::from_secs(10));
    Harness {
        server,
        client,
        restarter,
        source,
        _dir: dir,
    }
}

pub(crate) async fn start(source: MemorySource) -> Harness {
    start_with(source, FakeRestarter::default(), GuardConfig::default()).await
}
