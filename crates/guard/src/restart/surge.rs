//! Rule B's writes: raise a Deployment's `spec.replicas` (a surge) and put the recorded count
//! back (a restore). Both are JSON patches that start with a `test` of the resourceVersion read
//! just before (compare-and-set, as for restarts), and record the state in annotations
//! ([`SURGE_ORIGINAL_REPLICAS`], [`SURGE_REPLICAS`], [`SURGE_AT`], [`SURGE_REASON`]) so that any
//! webhook replica, or this one after a restart, can restore it.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{Value, json};

use super::escape;
use kube_descheduler_engine::workload::DeploymentFacts;
use kube_descheduler_engine::workload::annotations::{
    SURGE_AT, SURGE_ORIGINAL_REPLICAS, SURGE_REASON, SURGE_REPLICAS,
};

/// A request to surge a Deployment on behalf of an eviction a budget blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurgeRequest {
    /// Deployment namespace.
    pub namespace: String,
    /// Deployment name.
    pub deployment: String,
    /// `spec.replicas` the decision saw (the write is refused if it changed).
    pub from: i32,
    /// `spec.replicas` to set.
    pub to: i32,
    /// `namespace/name` of the blocking budget.
    pub budget: String,
    /// The evicted pod's name.
    pub pod: String,
    /// The evicted pod's uid.
    pub pod_uid: String,
    /// Who asked for the eviction.
    pub requested_by: String,
    /// Who asked, in full, for the log line and the Deployment's Event.
    pub audit: super::RequestAudit,
}

/// What became of a surge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SurgeOutcome {
    /// We raised the replicas.
    Surged {
        /// When (recorded).
        at: Timestamp,
    },
    /// A surge (ours, perhaps by another replica) is already in place.
    InFlight,
    /// Not written; answer 429 so the caller retries.
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// Why a surge is undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreReason {
    /// No pod of the Deployment sits on an unschedulable node any more.
    Drained,
    /// The deflect deadline passed since the surge.
    Deadline,
}

impl RestoreReason {
    /// Stable label for logs and Events.
    pub fn as_str(self) -> &'static str {
        match self {
            RestoreReason::Drained => "drained",
            RestoreReason::Deadline => "deadline",
        }
    }
}

/// What became of a restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreOutcome {
    /// The record was removed; `replicas` is what `spec.replicas` is now.
    Restored {
        /// `spec.replicas` after the restore.
        replicas: i32,
    },
    /// Nothing recorded any more (another replica restored it).
    NotSurged,
    /// Not written; the reconciler tries again.
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// The surge patch: test the resourceVersion and the replica count, set the new count and our
/// record.
pub fn surge_patch(
    current: &Deployment,
    resource_version: &str,
    from: i32,
    to: i32,
    at: Timestamp,
    reason: &str,
) -> json_patch::Patch {
    let mut ops: Vec<Value> = vec![
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}),
        json!({"op": "add", "path": "/spec/replicas", "value": to}),
    ];
    if current.metadata.annotations.is_none() {
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    for (k, v) in [
        (SURGE_ORIGINAL_REPLICAS, from.to_string()),
        (SURGE_REPLICAS, to.to_string()),
        (SURGE_AT, at.to_string()),
        (SURGE_REASON, reason.to_owned()),
    ] {
        ops.push(json!({"op": "add", "path": format!("/metadata/annotations/{}", escape(k)), "value": v}));
    }
    to_patch(ops)
}

/// The restore patch: test the resourceVersion; put the original count back when `spec.replicas`
/// is still the one we set (someone who scaled since wins); drop our record. `None` when the
/// Deployment carries no (well-formed) record.
pub fn restore_patch(
    current: &Deployment,
    resource_version: &str,
) -> Option<(json_patch::Patch, i32)> {
    let facts = DeploymentFacts::from_deployment(current);
    let surge = facts.surge?;
    let mut ops: Vec<Value> =
        vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})];
    let replicas = if facts.replicas == surge.surged_replicas {
        ops.push(json!({"op": "add", "path": "/spec/replicas", "value": surge.original_replicas}));
        surge.original_replicas
    } else {
        facts.replicas
    };
    let annotations = current.metadata.annotations.as_ref()?;
    for k in [
        SURGE_ORIGINAL_REPLICAS,
        SURGE_REPLICAS,
        SURGE_AT,
        SURGE_REASON,
    ] {
        if annotations.contains_key(k) {
            ops.push(
                json!({"op": "remove", "path": format!("/metadata/annotations/{}", escape(k))}),
            );
        }
    }
    Some((to_patch(ops), replicas))
}

fn to_patch(ops: Vec<Value>) -> json_patch::Patch {
    // The ops are well-formed by construction; an empty patch would be harmless anyway.
    serde_json::from_value(Value::Array(ops)).unwrap_or_else(|_| json_patch::Patch(Vec::new()))
}

/// Whether a surge is due to be restored: no pod of the Deployment sits on an unschedulable node
/// (`on_unschedulable == Some(0)`; `None` = unknown, wait), or the deadline passed since it.
pub fn restore_due(
    surge_at: Timestamp,
    on_unschedulable: Option<usize>,
    now: Timestamp,
    deadline: std::time::Duration,
) -> Option<RestoreReason> {
    let deadline = jiff::SignedDuration::try_from(deadline).unwrap_or(jiff::SignedDuration::MAX);
    if now.duration_since(surge_at) >= deadline {
        return Some(RestoreReason::Deadline);
    }
    (on_unschedulable == Some(0)).then_some(RestoreReason::Drained)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn dep(replicas: i32, annotations: Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7", "annotations": annotations},
            "spec": {"replicas": replicas, "selector": {}, "template": {}}
        }))
        .unwrap()
    }

    fn apply(d: &Deployment, p: &json_patch::Patch) -> Result<Deployment, String> {
        let mut v = serde_json::to_value(d).unwrap();
        json_patch::patch(&mut v, p).map_err(|e| e.to_string())?;
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn surge_then_restore_round_trips_and_is_compare_and_set() {
        let at: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
        let before = dep(3, json!({"keep": "me"}));
        let surged = apply(
            &before,
            &surge_patch(&before, "7", 3, 4, at, "pdb shop/web"),
        )
        .unwrap();
        assert_eq!(surged.spec.replicas, Some(4));
        let f = DeploymentFacts::from_deployment(&surged);
        let s = f.surge.expect("recorded");
        assert_eq!((s.original_replicas, s.surged_replicas, s.at), (3, 4, at));
        // A stale resourceVersion fails the test op.
        assert!(apply(&before, &surge_patch(&before, "6", 3, 4, at, "x")).is_err());

        let (p, replicas) = restore_patch(&surged, "7").expect("a record to restore");
        assert_eq!(replicas, 3);
        let restored = apply(&surged, &p).unwrap();
        assert_eq!(restored.spec.replicas, Some(3));
        let ann = restored.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(ann.len(), 1, "only the user's annotation is left: {ann:?}");
        assert!(DeploymentFacts::from_deployment(&restored).surge.is_none());
        assert!(
            restore_patch(&restored, "7").is_none(),
            "nothing left to restore"
        );

        // Someone scaled after our surge: their count stays, our record goes.
        let mut scaled = surged.clone();
        scaled.spec.replicas = Some(6);
        let (p, replicas) = restore_patch(&scaled, "7").unwrap();
        assert_eq!(replicas, 6);
        let after = apply(&scaled, &p).unwrap();
        assert_eq!(after.spec.replicas, Some(6));

        // A Deployment without annotations gets the map created.
        let bare: Deployment =
            serde_json::from_value(json!({"metadata": {"name": "w", "resourceVersion": "1"},
            "spec": {"replicas": 1, "selector": {}, "template": {}}}))
            .unwrap();
        let s = apply(&bare, &surge_patch(&bare, "1", 1, 2, at, "r")).unwrap();
        assert!(DeploymentFacts::from_deployment(&s).surge.is_some());
    }

    #[test]
    fn restore_is_due_when_drained_or_past_the_deadline() {
        let at: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
        let later = |s: i64| at.checked_add(jiff::SignedDuration::from_secs(s)).unwrap();
        let d = Duration::from_secs(600);
        let cases = [
            (Some(1), 10, None),
            (None, 10, None),
            (Some(0), 10, Some(RestoreReason::Drained)),
            (Some(2), 600, Some(RestoreReason::Deadline)),
            (None, 601, Some(RestoreReason::Deadline)),
        ];
        for (on, secs, want) in cases {
            assert_eq!(
                restore_due(at, on, later(secs), d),
                want,
                "{on:?} after {secs}s"
            );
        }
    }
}
