//! The return detector: what counts as a return, the backoff it starts, expiry and bounds.
use super::*;
use kube_descheduler_engine::testing::{node, pod, snapshot};

fn snap(pods: Vec<k8s_openapi::api::core::v1::Pod>) -> Snapshot {
    snapshot(vec![node("n1").build(), node("n2").build()], pods)
}

fn id(s: &Snapshot, name: &str) -> PodId {
    s.pods
        .iter()
        .position(|p| p.name == name)
        .unwrap_or(usize::MAX) as PodId
}

/// The cluster when `a` was evicted: `a` and its sibling `b` on n1, `c` on n2 (all of
/// ReplicaSet shop/web), `lone` (a bare pod) on n1.
fn before() -> Snapshot {
    snap(vec![
        pod("shop", "a", "n1").owner("ReplicaSet", "web").build(),
        pod("shop", "b", "n1").owner("ReplicaSet", "web").build(),
        pod("shop", "c", "n2").owner("ReplicaSet", "web").build(),
        pod("shop", "lone", "n1").bare().build(),
    ])
}

/// Sets the creation time `secs` seconds before the real clock's now (the detector compares
/// it with the wall-clock time of the eviction).
fn created(p: &mut k8s_openapi::api::core::v1::Pod, secs: i64) {
    let at = Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_secs(secs))
        .unwrap_or(Timestamp::UNIX_EPOCH);
    p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
}

/// A pod of shop/web created `age` seconds ago on `node` ("" = not bound yet), as the watch
/// shows it.
fn seen(name: &str, node: &str, age: i64) -> Snapshot {
    snap(vec![
        pod("shop", name, node)
            .owner("ReplicaSet", "web")
            .with(|p| created(p, age))
            .build(),
    ])
}

fn observe(d: &ReturnDetector, s: &Snapshot) -> Option<Return> {
    d.observe(s.pod(0))
}

#[test]
fn a_new_pod_of_the_owner_on_the_source_node_is_a_return_and_starts_a_backoff() {
    let metrics = Arc::new(Metrics::new());
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let d = ReturnDetector::new(DEFAULT_WINDOW, Some(metrics.clone()), Some(tx));
    let s = before();
    d.record(&s, id(&s, "a"), "default", "HighNodeUtilization");
    // The sibling that was there (a status update), the evicted pod itself, and a new pod on
    // another node are not returns.
    assert_eq!(observe(&d, &seen("b", "n1", 3600)), None);
    assert_eq!(observe(&d, &seen("a", "n1", 3600)), None);
    assert_eq!(observe(&d, &seen("web-x", "n2", 0)), None);
    assert_eq!(observe(&d, &seen("web-y", "", 0)), None);
    assert_eq!(d.refusal(&s, id(&s, "b")), None);
    // The replacement bound to n1: a return.
    let r = observe(&d, &seen("web-y", "n1", 0)).unwrap_or_else(|| panic!("no return"));
    assert_eq!(
        (
            r.owner.to_string(),
            r.node.as_str(),
            r.evicted.as_str(),
            r.pod.as_str()
        ),
        ("ReplicaSet shop/web".to_string(), "n1", "a", "web-y")
    );
    assert_eq!(rx.try_recv().ok(), Some(r.clone()));
    let count = metrics
        .placement_returns
        .get_or_create(&PlacementLabels {
            profile: "default".into(),
            strategy: "HighNodeUtilization".into(),
            namespace: "shop".into(),
        })
        .get();
    assert_eq!(count, 1);
    // Counted once: a later update of the same pod is not another return.
    assert_eq!(observe(&d, &seen("web-y", "n1", 0)), None);
    // The owner's pods are not evicted from n1 now; from n2 they are.
    let why = d.refusal(&s, id(&s, "b")).unwrap_or_default();
    assert!(
        why.starts_with(&format!(
            "placement backoff: ReplicaSet shop/web: its last replacement evicted from n1 was scheduled back onto n1 at {}",
            r.at
        )),
        "{why}"
    );
    assert!(
        why.ends_with(&format!(
            "not evicting from n1 until {} (upstream #424)",
            r.until
        )),
        "{why}"
    );
    assert_eq!(d.refusal(&s, id(&s, "c")), None);
    assert_eq!(d.refusal(&s, id(&s, "lone")), None);
}

#[test]
fn an_older_pod_bound_later_and_bare_pods_are_not_returns() {
    let d = ReturnDetector::new(DEFAULT_WINDOW, None, None);
    let s = before();
    d.record(&s, id(&s, "lone"), "p", "x");
    assert_eq!(
        d.owners(),
        0,
        "a bare pod is not recreated: nothing to remember"
    );
    d.record(&s, id(&s, "a"), "p", "x");
    // Created an hour before the eviction, only now bound: not the eviction's replacement.
    assert_eq!(observe(&d, &seen("old", "n1", 3600)), None);
    // Created a few seconds before the eviction — a sibling our watch had not shown yet (e.g.
    // during a watch outage), not a replacement: when unsure, no backoff.
    assert_eq!(observe(&d, &seen("sibling", "n1", 5)), None);
    // Within the timestamps' whole-second precision before our note: counted.
    assert!(observe(&d, &seen("quick", "n1", 1)).is_some());
    // Counted once per eviction: a later pod is not another return.
    assert_eq!(observe(&d, &seen("new", "n1", 0)), None);
}

#[test]
fn evictions_and_backoffs_expire_with_the_window() {
    let d = ReturnDetector::new(Duration::ZERO, None, None);
    let s = before();
    d.record(&s, id(&s, "a"), "p", "x");
    assert_eq!(observe(&d, &seen("new", "n1", 0)), None);
    d.expire_now();
    assert_eq!(d.owners(), 0);
    let d = ReturnDetector::new(Duration::from_millis(30), None, None);
    d.record(&s, id(&s, "a"), "p", "x");
    assert!(observe(&d, &seen("new", "n1", 0)).is_some());
    assert!(d.refusal(&s, id(&s, "b")).is_some());
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(d.refusal(&s, id(&s, "b")), None);
    d.expire_now();
    assert_eq!(d.owners(), 0);
}

#[test]
fn the_number_of_owners_is_bounded() {
    let d = ReturnDetector::new(DEFAULT_WINDOW, None, None).with_cap(10);
    let pods = (0..25)
        .map(|i| {
            pod("shop", &format!("p{i}"), "n1")
                .owner("ReplicaSet", &format!("rs{i}"))
                .build()
        })
        .collect();
    let s = snap(pods);
    for i in 0..25 {
        d.record(&s, id(&s, &format!("p{i}")), "p", "x");
        assert!(d.owners() <= 10, "{} owners after {i}", d.owners());
    }
    // The newest owner is still remembered.
    let newest = snap(vec![
        pod("shop", "r", "n1")
            .owner("ReplicaSet", "rs24")
            .with(|p| created(p, 0))
            .build(),
    ]);
    assert!(d.observe(newest.pod(0)).is_some());
}
