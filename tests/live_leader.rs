//! Leader election against an in-memory Lease store with resourceVersion checks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube_descheduler::leader::{self, Attempt, Elector, LeaderConfig, LeaseApi, LeaseError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Store {
    lease: Option<Lease>,
    version: u64,
    fail: bool,
    /// Writes fail with 409 (someone else wrote first).
    conflict_next: bool,
}

#[derive(Clone, Default)]
struct FakeLeases(Arc<Mutex<Store>>);

impl FakeLeases {
    fn holder(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap()
            .lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.clone())
    }
    fn spec(&self) -> LeaseSpec {
        self.0
            .lock()
            .unwrap()
            .lease
            .as_ref()
            .and_then(|l| l.spec.clone())
            .unwrap_or_default()
    }
    /// Another replica writes the Lease directly.
    fn steal(&self, who: &str) {
        let mut st = self.0.lock().unwrap();
        st.version += 1;
        let v = st.version;
        let lease = st.lease.get_or_insert_with(Lease::default);
        lease.metadata.resource_version = Some(v.to_string());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(who.into()),
            lease_duration_seconds: Some(137),
            ..Default::default()
        });
    }
}

impl LeaseApi for FakeLeases {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, LeaseError>> {
        Box::pin(async move {
            let st = self.0.lock().unwrap();
            if st.fail {
                return Err(LeaseError::Other("apiserver down".into()));
            }
            Ok(st.lease.clone())
        })
    }
    fn create(&self, mut lease: Lease) -> BoxFuture<'_, Result<Lease, LeaseError>> {
        Box::pin(async move {
            let mut st = self.0.lock().unwrap();
            if st.fail {
                return Err(LeaseError::Other("apiserver down".into()));
            }
            if st.lease.is_some() {
                return Err(LeaseError::Conflict);
            }
            st.version += 1;
            lease.metadata.resource_version = Some(st.version.to_string());
            st.lease = Some(lease.clone());
            Ok(lease)
        })
    }
    fn replace(&self, mut lease: Lease) -> BoxFuture<'_, Result<Lease, LeaseError>> {
        Box::pin(async move {
            let mut st = self.0.lock().unwrap();
            if st.fail {
                return Err(LeaseError::Other("apiserver down".into()));
            }
            let current = st
                .lease
                .as_ref()
                .and_then(|l| l.metadata.resource_version.clone());
            if st.conflict_next || current != lease.metadata.resource_version {
                st.conflict_next = false;
                return Err(LeaseError::Conflict);
            }
            st.version += 1;
            lease.metadata.resource_version = Some(st.version.to_string());
            st.lease = Some(lease.clone());
            Ok(lease)
        })
    }
}

fn cfg(id: &str) -> LeaderConfig {
    LeaderConfig {
        identity: id.into(),
        lease_duration: Duration::from_secs(137),
        renew_deadline: Duration::from_secs(107),
        retry_period: Duration::from_secs(26),
        name: "descheduler".into(),
        namespace: "kube-system".into(),
    }
}

/// `leader::run` as candidate "a" on `store`, once it leads: its leadership channel, its stop
/// token and its task.
async fn leading_as_a(
    store: &FakeLeases,
) -> (
    watch::Receiver<bool>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let (tx, mut rx) = watch::channel(false);
    let stop = CancellationToken::new();
    let task = tokio::spawn(leader::run(
        Elector::new(store.clone(), cfg("a")),
        tx,
        stop.clone(),
    ));
    rx.wait_for(|l| *l).await.unwrap();
    (rx, stop, task)
}

#[tokio::test(start_paused = true)]
async fn acquire_renew_and_respect_another_holder() {
    let store = FakeLeases::default();
    let mut a = Elector::new(store.clone(), cfg("a"));
    let mut b = Elector::new(store.clone(), cfg("b"));
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Held);
    assert_eq!(store.holder().as_deref(), Some("a"));
    let first = store.spec();
    assert_eq!(first.lease_duration_seconds, Some(137));
    assert_eq!(
        b.try_acquire_or_renew().await,
        Attempt::HeldByOther("a".into())
    );
    tokio::time::advance(Duration::from_secs(26)).await;
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Held);
    let renewed = store.spec();
    assert_eq!(
        renewed.acquire_time, first.acquire_time,
        "renewal keeps acquireTime"
    );
    assert_eq!(renewed.lease_transitions, Some(0));
    // b saw a change recently: still held.
    tokio::time::advance(Duration::from_secs(100)).await;
    assert_eq!(
        b.try_acquire_or_renew().await,
        Attempt::HeldByOther("a".into())
    );
    // a stops renewing: after a lease duration since b last saw a change, b takes over.
    tokio::time::advance(Duration::from_secs(138)).await;
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Held);
    assert_eq!(store.holder().as_deref(), Some("b"));
    assert_eq!(store.spec().lease_transitions, Some(1));
    assert_eq!(
        a.try_acquire_or_renew().await,
        Attempt::HeldByOther("b".into())
    );
}

#[tokio::test(start_paused = true)]
async fn a_lost_race_is_a_failed_attempt() {
    let store = FakeLeases::default();
    let mut a = Elector::new(store.clone(), cfg("a"));
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Held);
    store.0.lock().unwrap().conflict_next = true;
    assert!(matches!(a.try_acquire_or_renew().await, Attempt::Failed(m) if m.contains("409")));
}

#[tokio::test(start_paused = true)]
async fn release_clears_the_holder() {
    let store = FakeLeases::default();
    let mut a = Elector::new(store.clone(), cfg("a"));
    let mut b = Elector::new(store.clone(), cfg("b"));
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Held);
    a.release().await.unwrap();
    assert_eq!(store.holder(), None);
    assert_eq!(store.spec().lease_duration_seconds, Some(1));
    // Released: b acquires at once.
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Held);
}

#[tokio::test(start_paused = true)]
async fn run_loses_leadership_when_someone_else_takes_the_lease() {
    let store = FakeLeases::default();
    let (mut rx, stop, task) = leading_as_a(&store).await;
    store.steal("b");
    let t0 = tokio::time::Instant::now();
    rx.wait_for(|l| !*l).await.unwrap();
    assert!(
        t0.elapsed() <= Duration::from_secs(26),
        "noticed within one retry period"
    );
    stop.cancel();
    task.await.unwrap();
    assert_eq!(
        store.holder().as_deref(),
        Some("b"),
        "never releases someone else's lease"
    );
}

#[tokio::test(start_paused = true)]
async fn run_stops_leading_by_the_renew_deadline_when_renewals_fail() {
    let store = FakeLeases::default();
    let (mut rx, stop, task) = leading_as_a(&store).await;
    let acquired = tokio::time::Instant::now();
    store.0.lock().unwrap().fail = true;
    rx.wait_for(|l| !*l).await.unwrap();
    let lost_after = acquired.elapsed();
    assert!(
        lost_after <= Duration::from_secs(107),
        "lost after {lost_after:?}"
    );
    assert!(
        lost_after >= Duration::from_secs(78),
        "lost too early: {lost_after:?}"
    );
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn run_releases_the_lease_on_shutdown() {
    let store = FakeLeases::default();
    let (rx, stop, task) = leading_as_a(&store).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(store.holder().as_deref(), Some("a"));
    stop.cancel();
    task.await.unwrap();
    assert_eq!(store.holder(), None);
    assert!(!*rx.borrow());
}
