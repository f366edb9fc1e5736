//! Bounds: failed restarts stop blocking, hanging lookups are answered in time.

use super::*;

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
    let h = serve(Arc::new(state), restarter, source).await;

    let first = h.evict().await;
    assert_eq!(first["status"]["code"], 429);
    advance(&now, 300);
    assert_eq!(h.evict().await["status"]["code"], 429);
    advance(&now, 301);
    let late = h.evict().await;
    assert_eq!(late["allowed"], true, "{late}");
    assert!(
        late["warnings"][0].as_str().unwrap().contains("within 10m"),
        "{late}"
    );
    assert_eq!(
        h.restarts().len(),
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
    let source: Arc<dyn FactSource> = Arc::new(Stuck(cluster(dep())));
    let restarter = Arc::new(FakeRestarter::default());
    let state = Arc::new(GuardState::new(
        source,
        restarter.clone(),
        GuardConfig::default(),
    ));
    // Not the source serving (Stuck): this test counts no reads.
    let h = serve(state, restarter, Arc::new(MemorySource::new())).await;
    let started = std::time::Instant::now();
    let resp = h.evict().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered inside the 5 s webhook timeout"
    );
    assert_eq!(resp["allowed"], true);
    assert!(resp["warnings"][0].as_str().unwrap().contains("in time"));
}
