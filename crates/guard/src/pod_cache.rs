//! The lean pod cache entry: a pod stripped on arrival to what [`super::decide`] reads.
//!
//! A watched [`Pod`] is converted with [`PodFacts::from_pod`] (the same conversion as an on-demand
//! GET, so cache and API never disagree on how a pod is read) and then packed into a
//! [`LeanPod`]: uid, phase, readiness, deletion, opt-out, claim names, and two shared parts —
//! the label set and the controlling owner, interned so that the replicas of one ReplicaSet
//! share one copy. Namespace and name are the cache's keys and are not repeated.
//!
//! All labels are kept (not only the keys today's PodDisruptionBudgets select on): a budget
//! created later must match the cached pod exactly as it would match the API's.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use kube_descheduler_engine::workload::facts::{OwnerFacts, PodFacts, PodPhase};

/// A pod's labels, sorted by key (as they come out of a `BTreeMap`).
pub type LabelSet = [(Box<str>, Box<str>)];

/// What the cache keeps of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeanPod {
    uid: Box<str>,
    labels: Arc<LabelSet>,
    owner: Option<Arc<OwnerFacts>>,
    claims: Box<[Box<str>]>,
    node: Option<Arc<str>>,
    phase: PodPhase,
    terminating: bool,
    ready: bool,
    opt_out: bool,
    ephemeral_single_node_volume: bool,
}

impl LeanPod {
    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// `spec.nodeName`, when scheduled.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// The controlling owner.
    pub fn owner(&self) -> Option<&OwnerFacts> {
        self.owner.as_deref()
    }

    /// Condition Ready is True.
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Being deleted.
    pub fn terminating(&self) -> bool {
        self.terminating
    }

    /// Rebuilds the facts of the pod `namespace/name` (the cache keys).
    pub fn facts(&self, namespace: &str, name: &str) -> PodFacts {
        let labels: std::collections::BTreeMap<String, String> = self
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PodFacts {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: self.uid.to_string(),
            pod_template_hash: labels.get("pod-template-hash").cloned(),
            labels: Arc::new(labels),
            opt_out: self.opt_out,
            phase: self.phase,
            terminating: self.terminating,
            ready: self.ready,
            owner: self.owner.as_deref().cloned(),
            claims: self.claims.iter().map(|c| c.to_string()).collect(),
            ephemeral_single_node_volume: self.ephemeral_single_node_volume,
        }
    }
}

/// Hands out one shared copy of equal values. Entries nobody else holds any more are swept when
/// the table has doubled since the last sweep, so churn cannot grow it without bound.
#[derive(Debug)]
struct Interner<T: ?Sized + Hash + Eq> {
    set: HashSet<Arc<T>>,
    live_after_sweep: usize,
}

impl<T: ?Sized + Hash + Eq> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            set: HashSet::new(),
            live_after_sweep: 0,
        }
    }
}

impl<T: ?Sized + Hash + Eq> Interner<T> {
    /// Smallest table that is ever swept.
    const MIN_SWEEP: usize = 1024;

    fn intern<Q>(&mut self, value: &Q, make: impl FnOnce(&Q) -> Arc<T>) -> Arc<T>
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        if let Some(v) = self.set.get(value) {
            return v.clone();
        }
        let v = make(value);
        self.set.insert(v.clone());
        if self.set.len() > 2 * self.live_after_sweep.max(Self::MIN_SWEEP) {
            self.sweep();
        }
        v
    }

    fn sweep(&mut self) {
        self.set.retain(|v| Arc::strong_count(v) > 1);
        self.live_after_sweep = self.set.len();
    }

    fn len(&self) -> usize {
        self.set.len()
    }
}

/// Converts watched pods into [`LeanPod`]s, sharing label sets and owners between pods.
#[derive(Debug, Default)]
pub struct PodStripper {
    labels: Interner<LabelSet>,
    owners: Interner<OwnerFacts>,
    nodes: Interner<str>,
}

impl PodStripper {
    /// Strips an API pod to its cache entry.
    pub fn strip(&mut self, pod: &Pod) -> LeanPod {
        let mut lean = self.pack(PodFacts::from_pod(pod));
        lean.node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
            .map(|n| self.nodes.intern(n, |n: &str| Arc::from(n)));
        lean
    }

    /// Packs pod facts into a cache entry (namespace and name are dropped: they are the keys).
    pub fn pack(&mut self, f: PodFacts) -> LeanPod {
        let pairs: Vec<(Box<str>, Box<str>)> = Arc::unwrap_or_clone(f.labels)
            .into_iter()
            .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
            .collect();
        let labels = self
            .labels
            .intern(pairs.as_slice(), |p| Arc::from(p.to_vec()));
        let owner = f
            .owner
            .map(|o| self.owners.intern(&o, |o| Arc::new(o.clone())));
        LeanPod {
            uid: f.uid.into_boxed_str(),
            labels,
            owner,
            claims: f.claims.into_iter().map(String::into_boxed_str).collect(),
            node: None,
            phase: f.phase,
            terminating: f.terminating,
            ready: f.ready,
            opt_out: f.opt_out,
            ephemeral_single_node_volume: f.ephemeral_single_node_volume,
        }
    }

    /// Distinct (label sets, owners) currently interned.
    pub fn shared_parts(&self) -> (usize, usize) {
        (self.labels.len(), self.owners.len())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, extra_labels: serde_json::Value) -> Pod {
        let mut labels = json!({"app": "web", "pod-template-hash": "7d9f"});
        if let (Some(l), Some(e)) = (labels.as_object_mut(), extra_labels.as_object()) {
            l.extend(e.clone());
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                "labels": labels,
                "annotations": {"kube-descheduler.io/eviction-guard": "disabled", "big": "x".repeat(4096)},
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n-uid"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "rs-uid", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "img"}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                    {"name": "cfg", "configMap": {"name": "cfg"}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap()
    }

    #[test]
    fn stripped_pod_yields_the_same_facts_as_the_api_object() {
        let mut s = PodStripper::default();
        for p in [
            pod("web-1", json!({})),
            pod("web-2", json!({"tier": "front"})),
            serde_json::from_value(json!({"metadata": {"name": "bare", "namespace": "shop"}}))
                .unwrap(),
            serde_json::from_value(json!({"metadata": {"name": "pending", "namespace": "shop", "uid": "u"},
                "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}}))
            .unwrap(),
        ] {
            let want = PodFacts::from_pod(&p);
            let lean = s.strip(&p);
            assert_eq!(lean.facts(&want.namespace, &want.name), want);
            assert_eq!(lean.uid(), want.uid);
        }
        let got = s.strip(&pod("web-1", json!({}))).facts("shop", "web-1");
        assert_eq!(got.phase, PodPhase::Running);
        assert!(got.ready && got.terminating && got.opt_out && got.ephemeral_single_node_volume);
        assert_eq!(got.claims, vec!["data-web".to_string()]);
        assert_eq!(got.pod_template_hash.as_deref(), Some("7d9f"));
        assert_eq!(
            got.owner.map(|o| (o.kind, o.name)),
            Some(("ReplicaSet".into(), "web-7d9f".into())),
            "the controlling owner, not the first reference"
        );
    }

    #[test]
    fn replicas_share_labels_and_owner() {
        let mut s = PodStripper::default();
        let a = s.strip(&pod("web-1", json!({})));
        let b = s.strip(&pod("web-2", json!({})));
        let c = s.strip(&pod(
            "web-3",
            json!({"statefulset.kubernetes.io/pod-name": "web-3"}),
        ));
        assert!(Arc::ptr_eq(&a.labels, &b.labels));
        assert!(!Arc::ptr_eq(&a.labels, &c.labels));
        assert!(Arc::ptr_eq(
            a.owner.as_ref().unwrap(),
            c.owner.as_ref().unwrap()
        ));
        assert_eq!(s.shared_parts(), (2, 1));
    }

    #[test]
    fn interner_forgets_sets_no_pod_holds() {
        let mut s = PodStripper::default();
        let keep = s.strip(&pod("keep", json!({})));
        // Pods with unique labels come and go (Jobs): the table must not keep them all.
        for i in 0..10_000 {
            let _gone = s.strip(&pod(
                &format!("job-{i}"),
                json!({"job-name": format!("job-{i}")}),
            ));
        }
        let (labels, _) = s.shared_parts();
        assert!(
            labels <= 2 * Interner::<LabelSet>::MIN_SWEEP + 1,
            "{labels} label sets kept"
        );
        // A held set survives sweeps and is still shared.
        let again = s.strip(&pod("keep-2", json!({})));
        assert!(Arc::ptr_eq(&keep.labels, &again.labels));
    }
}
