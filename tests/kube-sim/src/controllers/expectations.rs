//! Creation and deletion expectations of the ReplicaSet controller, copying the behaviour of
//! kube-controller-manager's `ControllerExpectations` and `UIDTrackingControllerExpectations`
//! (`pkg/controller/controller_utils.go`).
//!
//! A controller that keeps a count of pods reads them from its index, which learns about the
//! pods it creates or deletes only when their events arrive. So that a sync running before then
//! does not act on the same shortfall or surplus twice, a sync that issues `N` creates records
//! "expect `N` adds" for its ReplicaSet, and one that deletes pods records the keys of those pods.
//! Each pod ADDED that the index observes for that owner lowers the adds; each expected pod seen
//! terminating or DELETED is struck off. While some remain, the ReplicaSet's sync neither creates
//! nor deletes (it still writes status). A write that is refused or dropped counts as observed
//! (upstream lowers the expectation when the API call fails), the record is forgotten when the
//! ReplicaSet is deleted, and it expires after [`EXPECTATIONS_TIMEOUT`] (upstream's
//! `ExpectationsTimeout`, 5 minutes), so a lost event cannot wedge a ReplicaSet.
//!
//! One more condition is kube-sim's own: the controllers read the objects they reconcile from the
//! store, which can be ahead of their index (a ReplicaSet written just after its pods, read before
//! the pods' events are indexed, would count too few). [`Expectations::observed_through`] records
//! the last resourceVersion the index has taken in; a ReplicaSet with a newer resourceVersion is
//! not synced until the index has caught up (its own event queues it again).
use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::Action;

/// How long an unfulfilled expectation holds a ReplicaSet's sync (upstream's
/// `ExpectationsTimeout`).
pub const EXPECTATIONS_TIMEOUT: SignedDuration = SignedDuration::from_secs(5 * 60);

/// `(namespace, name)` of a ReplicaSet or pod.
pub type Key = (String, String);

/// What one ReplicaSet still waits to observe.
#[derive(Clone, Debug)]
struct Record {
    /// Pod creations not yet observed.
    adds: usize,
    /// Pod deletions not yet observed (their keys are in [`Expectations::deleting`]).
    deletes: usize,
    /// When the expectations were set (simulated time).
    since: Timestamp,
}

/// An outstanding write whose effect a ReplicaSet expects to observe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending {
    /// A pod created for this ReplicaSet.
    Create(Key),
    /// This pod deleted.
    Delete(Key),
}

/// Per-ReplicaSet expectations (see the module documentation).
#[derive(Clone, Debug)]
pub struct Expectations {
    /// Expiry of unfulfilled expectations; [`EXPECTATIONS_TIMEOUT`] unless a test shortens it.
    pub timeout: SignedDuration,
    records: HashMap<Key, Record>,
    /// Pod → the ReplicaSet that expects its deletion.
    deleting: HashMap<Key, Key>,
    /// Last resourceVersion the caller's index has taken in; `None` when the caller reconciles a
    /// consistent snapshot of the whole store.
    observed_rv: Option<u64>,
}

impl Default for Expectations {
    fn default() -> Self {
        Self::with_timeout(EXPECTATIONS_TIMEOUT)
    }
}

impl Expectations {
    /// No expectations, expiring after `timeout`.
    pub fn with_timeout(timeout: SignedDuration) -> Self {
        Self {
            timeout,
            records: HashMap::new(),
            deleting: HashMap::new(),
            observed_rv: None,
        }
    }

    /// `true` when `rs` may create or delete pods: nothing outstanding, or expired at `now`.
    pub fn satisfied(&self, rs: &Key, now: Timestamp) -> bool {
        match self.records.get(rs) {
            None => true,
            Some(r) => {
                (r.adds == 0 && r.deletes == 0) || now.duration_since(r.since) > self.timeout
            }
        }
    }

    /// `true` when the index has taken in the object's resourceVersion (always, when the caller
    /// does not track it or the version is not a number).
    pub fn index_has_seen(&self, meta: &ObjectMeta) -> bool {
        let rv = meta
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok());
        match (self.observed_rv, rv) {
            (Some(seen), Some(rv)) => rv <= seen,
            _ => true,
        }
    }

    /// The index has taken in every event up to `rv`.
    pub fn observed_through(&mut self, rv: u64) {
        self.observed_rv = Some(self.observed_rv.map_or(rv, |s| s.max(rv)));
    }

    /// Records that `rs` issued `adds` creates and the deletion of `deleting` at `now`,
    /// replacing what it expected before (upstream's `SetExpectations`).
    pub fn expect(&mut self, rs: &Key, adds: usize, deleting: Vec<Key>, now: Timestamp) {
        self.forget(rs);
        let deletes = deleting.len();
        for pod in deleting {
            self.deleting.insert(pod, rs.clone());
        }
        if adds > 0 || deletes > 0 {
            let since = now;
            self.records.insert(
                rs.clone(),
                Record {
                    adds,
                    deletes,
                    since,
                },
            );
        }
    }

    /// A pod controlled by `rs` was added (upstream's `CreationObserved`).
    pub fn creation_observed(&mut self, rs: &Key) {
        if let Some(r) = self.records.get_mut(rs) {
            r.adds = r.adds.saturating_sub(1);
            self.prune(rs);
        }
    }

    /// `pod` was deleted or is terminating; lowers the expectations of the ReplicaSet that
    /// deleted it, if one did (upstream's `DeletionObserved` with UID tracking).
    pub fn deletion_observed(&mut self, pod: &Key) {
        let Some(rs) = self.deleting.remove(pod) else {
            return;
        };
        if let Some(r) = self.records.get_mut(&rs) {
            r.deletes = r.deletes.saturating_sub(1);
            self.prune(&rs);
        }
    }

    /// A write the controller issued was refused or dropped: what it would have done will not be
    /// observed.
    pub fn dropped(&mut self, p: &Pending) {
        match p {
            Pending::Create(rs) => self.creation_observed(rs),
            Pending::Delete(pod) => self.deletion_observed(pod),
        }
    }

    /// Forgets `rs` (it was deleted; upstream's `DeleteExpectations`).
    pub fn forget(&mut self, rs: &Key) {
        if let Some(r) = self.records.remove(rs)
            && r.deletes > 0
        {
            self.deleting.retain(|_, owner| owner != rs);
        }
    }

    /// Forgets everything (the caller's index was rebuilt from the store: nothing is in flight).
    pub fn clear(&mut self) {
        self.records.clear();
        self.deleting.clear();
    }

    fn prune(&mut self, rs: &Key) {
        if self
            .records
            .get(rs)
            .is_some_and(|r| r.adds == 0 && r.deletes == 0)
        {
            self.records.remove(rs);
        }
    }
}

/// The expectation an action stands for, if any: a pod create for a ReplicaSet, or a pod
/// deletion (a `Delete`, or an `Update` marking it terminating).
pub fn pending_of(action: &Action) -> Option<Pending> {
    fn s<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
        v.pointer(ptr).and_then(Value::as_str)
    }
    match action {
        Action::Create(v) if s(v, "/kind") == Some("Pod") => {
            let owner = v
                .pointer("/metadata/ownerReferences")?
                .as_array()?
                .iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
            (s(owner, "/kind") == Some("ReplicaSet")).then(|| {
                let ns = s(v, "/metadata/namespace").unwrap_or("").to_string();
                Pending::Create((ns, s(owner, "/name").unwrap_or("").to_string()))
            })
        }
        Action::Update(v)
            if s(v, "/kind") == Some("Pod")
                && v.pointer("/metadata/deletionTimestamp")
                    .is_some_and(|t| !t.is_null()) =>
        {
            let ns = s(v, "/metadata/namespace").unwrap_or("").to_string();
            Some(Pending::Delete((ns, s(v, "/metadata/name")?.to_string())))
        }
        Action::Delete {
            kind,
            namespace,
            name,
            ..
        } if kind == "Pod" => Some(Pending::Delete((
            namespace.clone().unwrap_or_default(),
            name.clone(),
        ))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> Key {
        ("default".to_string(), name.to_string())
    }

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn creations_hold_the_sync_until_each_is_observed() {
        let mut e = Expectations::default();
        let rs = key("web");
        assert!(e.satisfied(&rs, t(0)), "nothing expected yet");
        e.expect(&rs, 2, vec![], t(0));
        assert!(!e.satisfied(&rs, t(1)));
        e.creation_observed(&rs);
        assert!(!e.satisfied(&rs, t(1)), "one of two observed");
        e.creation_observed(&key("other"));
        assert!(
            !e.satisfied(&rs, t(1)),
            "another owner's pod does not count"
        );
        e.creation_observed(&rs);
        assert!(e.satisfied(&rs, t(1)));
        e.creation_observed(&rs);
        assert!(e.satisfied(&rs, t(1)), "an extra add does not go negative");
    }

    #[test]
    fn deletions_are_tracked_by_pod_key() {
        let mut e = Expectations::default();
        let rs = key("web");
        e.expect(&rs, 0, vec![key("web-a"), key("web-b")], t(0));
        e.deletion_observed(&key("web-x"));
        assert!(
            !e.satisfied(&rs, t(1)),
            "a pod it did not delete (an eviction)"
        );
        e.deletion_observed(&key("web-a"));
        e.deletion_observed(&key("web-a"));
        assert!(!e.satisfied(&rs, t(1)), "the same pod counts once");
        e.dropped(&Pending::Delete(key("web-b")));
        assert!(e.satisfied(&rs, t(1)), "a refused delete is not waited for");
    }

    #[test]
    fn expectations_expire_after_the_timeout() {
        let mut e = Expectations::default();
        let rs = key("web");
        e.expect(&rs, 1, vec![], t(0));
        assert!(!e.satisfied(&rs, t(300)), "5 minutes exactly: still held");
        assert!(e.satisfied(&rs, t(301)));
        let mut short = Expectations::with_timeout(SignedDuration::from_secs(2));
        short.expect(&rs, 1, vec![], t(0));
        assert!(!short.satisfied(&rs, t(2)));
        assert!(short.satisfied(&rs, t(3)));
    }

    #[test]
    fn forgetting_a_replica_set_drops_its_pods_too() {
        let mut e = Expectations::default();
        let (a, b) = (key("a"), key("b"));
        e.expect(&a, 1, vec![key("a-1")], t(0));
        e.expect(&b, 0, vec![key("b-1")], t(0));
        e.forget(&a);
        assert!(e.satisfied(&a, t(1)));
        assert!(!e.deleting.contains_key(&key("a-1")));
        assert!(
            !e.satisfied(&b, t(1)),
            "another ReplicaSet keeps its record"
        );
        // Setting new expectations replaces the old ones.
        e.expect(&b, 1, vec![], t(2));
        e.deletion_observed(&key("b-1"));
        assert!(!e.satisfied(&b, t(3)));
        e.creation_observed(&b);
        assert!(e.satisfied(&b, t(3)));
        e.expect(&a, 1, vec![], t(4));
        e.clear();
        assert!(e.satisfied(&a, t(5)));
    }

    #[test]
    fn index_horizon_holds_newer_objects() {
        let meta = |rv: &str| ObjectMeta {
            resource_version: Some(rv.to_string()),
            ..Default::default()
        };
        let mut e = Expectations::default();
        assert!(
            e.index_has_seen(&meta("99")),
            "untracked: a consistent snapshot"
        );
        e.observed_through(10);
        e.observed_through(7);
        assert!(e.index_has_seen(&meta("10")));
        assert!(!e.index_has_seen(&meta("11")));
        assert!(e.index_has_seen(&ObjectMeta::default()));
    }

    #[test]
    fn pending_of_actions() {
        let create = Action::Create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-", "namespace": "default", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u",
                 "controller": true}]}
        }));
        assert_eq!(pending_of(&create), Some(Pending::Create(key("web"))));
        let graceful = Action::Update(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-a", "namespace": "default",
                         "deletionTimestamp": "2026-01-01T00:00:30Z"}
        }));
        assert_eq!(pending_of(&graceful), Some(Pending::Delete(key("web-a"))));
        let status = Action::Update(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-a", "namespace": "default"}
        }));
        assert_eq!(pending_of(&status), None);
        let delete = Action::Delete {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("default".into()),
            name: "web-u".into(),
            uid: "x".into(),
        };
        assert_eq!(pending_of(&delete), Some(Pending::Delete(key("web-u"))));
        let rs_create = Action::Create(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet"}));
        assert_eq!(pending_of(&rs_create), None);
    }
}
