//! `placement: Enforce` in the eviction session: a refused eviction is not attempted, counts
//! against no limit, leaves the pod where it is in the simulator, and reaches the backend's
//! `placement_refused` hook; `Report` predicts the same and changes nothing.

use std::sync::{Arc, Mutex};

use super::*;
use crate::placement::RefusalCode;
use crate::testing::{node, pod, snapshot};

/// a: one 100m pod (`back`); b: one 2.4-CPU pod; d: cordoned, one 100m pod (`cordoned`). With
/// kube-scheduler's default LeastAllocated scoring, `back`'s replacement lands on a again, and
/// `cordoned`'s replacement lands on a (d rejects it: NodeUnschedulable).
fn cluster() -> Snapshot {
    snapshot(
        vec![
            node("a").build(),
            node("b").build(),
            node("d").unschedulable().build(),
        ],
        vec![
            pod("ns", "back", "a").build(),
            pod("ns", "big", "b").requests("2400m", "8Gi").build(),
            pod("ns", "cordoned", "d").build(),
        ],
    )
}

/// A backend that evicts everything and remembers the refusals it is told about.
#[derive(Clone, Default)]
struct Recording(Arc<Mutex<Vec<String>>>);

impl EvictionBackend for Recording {
    fn evict(&mut self, _s: &Snapshot, _p: PodId, _r: &EvictionRequest<'_>) -> EvictOutcome {
        EvictOutcome::Evicted
    }

    fn placement_refused(
        &mut self,
        snapshot: &Snapshot,
        pod: PodId,
        req: &EvictionRequest<'_>,
        refusal: &Refusal,
    ) {
        if let Ok(mut v) = self.0.lock() {
            v.push(format!(
                "{} {} {}",
                snapshot.pod(pod).name,
                req.plugin,
                refusal.code.as_str()
            ));
        }
    }
}

fn attempt(
    session: &mut EvictionSession,
    s: &Snapshot,
    pod: PodId,
    mode: PlacementMode,
) -> Result<EvictOutcome, EvictError> {
    let reason = Arc::new(EvictionReason::plugin("HighNodeUtilization"));
    let req = EvictionRequest {
        profile: "pack",
        plugin: "HighNodeUtilization",
        reason: &reason,
    };
    session.evict_placed(s, pod, &req, mode)
}

#[test]
fn an_enforced_refusal_is_not_attempted_and_not_counted_against_the_total_limit() {
    let s = cluster();
    let backend = Recording::default();
    let seen = backend.0.clone();
    let mut session = EvictionSession::new(Limits::new(None, None, Some(1)), Box::new(backend));
    let refused = attempt(&mut session, &s, 0, PlacementMode::Enforce);
    let Err(EvictError::Placement(r)) = refused else {
        panic!("expected a placement refusal, got {refused:?}");
    };
    assert_eq!(r.code, RefusalCode::PlacementReturn);
    assert!(
        r.message
            .starts_with("would be scheduled back onto a: score "),
        "{}",
        r.message
    );
    assert!(r.message.contains("LeastAllocated"), "{}", r.message);
    assert_eq!(
        session.limits().total_count(),
        0,
        "a refusal counts nowhere"
    );
    assert!(session.records().is_empty(), "no attempt was made");
    assert!(!session.moved(0));
    let hits = session.placement_hits();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].name.as_str(), &*hits[0].node), ("back", "a"));
    assert_eq!(hits[0].code(), "PlacementReturn");
    assert_eq!(hits[0].placement.predicted_node.as_deref(), Some("a"));
    // The plugin goes on: the next pod fits the one eviction the total limit allows. Its
    // replacement is predicted onto a, where the refused pod still is (abandoned, not moved).
    let next = attempt(&mut session, &s, 2, PlacementMode::Enforce);
    assert_eq!(next, Ok(EvictOutcome::Evicted));
    let rec = &session.records()[0];
    let placed = rec
        .placement
        .as_ref()
        .expect("Enforce reports the prediction");
    assert_eq!(placed.predicted_node.as_deref(), Some("a"));
    assert_eq!(placed.current_filtered, Some("NodeUnschedulable"));
    assert_eq!(placed.refusal, None);
    assert_eq!(session.limits().total_count(), 1);
    assert_eq!(
        seen.lock().map(|v| v.clone()).unwrap_or_default(),
        vec!["back HighNodeUtilization PlacementReturn".to_string()]
    );
}

#[test]
fn report_predicts_the_same_refusal_and_evicts_anyway() {
    let s = cluster();
    let mut session = EvictionSession::new(
        Limits::new(None, None, None),
        Box::new(Recording::default()),
    );
    assert_eq!(
        attempt(&mut session, &s, 0, PlacementMode::Report),
        Ok(EvictOutcome::Evicted)
    );
    let rec = &session.records()[0];
    let report = rec.placement.as_ref().expect("a prediction");
    assert_eq!(
        report.refusal.as_ref().map(|r| r.code),
        Some(RefusalCode::PlacementReturn)
    );
    assert!(session.placement_hits().is_empty());
    assert!(session.moved(0));
}

#[test]
fn a_pod_that_fits_nowhere_is_refused_with_no_fit() {
    // Only a cordoned node besides its own, which it cannot return to: its node is tainted.
    let s = snapshot(
        vec![
            node("a")
                .taint("dedicated", Some("x"), "NoSchedule")
                .build(),
            node("d").unschedulable().build(),
        ],
        vec![pod("ns", "stuck", "a").build()],
    );
    let mut session = EvictionSession::new(
        Limits::new(None, None, None),
        Box::new(Recording::default()),
    );
    let got = attempt(&mut session, &s, 0, PlacementMode::Enforce);
    let Err(EvictError::Placement(r)) = got else {
        panic!("expected a refusal, got {got:?}");
    };
    assert_eq!(r.code, RefusalCode::PlacementNoFit);
    assert!(r.message.contains("would stay Pending"), "{}", r.message);
}
