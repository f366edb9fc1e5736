//! DefaultEvictor: the Filter and PreEvictionFilter every profile uses (upstream semantics).
//!
//! Filter order: the `descheduler.alpha.kubernetes.io/evict` annotation makes a pod evictable
//! outright; `noEvictionPolicy: Mandatory` plus `prefer-no-eviction` makes it not evictable; mirror,
//! static, terminating and UID-less pods are never evicted; then the protections and constraints
//! (labelSelector, minReplicas, minPodAge). PreEvictionFilter: `nodeFit`, `namespaceLabelSelector`.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use serde::Deserialize;

use crate::duration::de_opt_duration;
use crate::framework::EvictorPlugin;
use crate::framework::args::ArgsError;
use crate::scheduling::{fit, selector};
use crate::snapshot::model::{PodPhase, Volume};
use crate::snapshot::{NodeId, PodId, Snapshot};

/// The plugin name.
pub const NAME: &str = "DefaultEvictor";
/// Pods at or above this priority are system-critical (`SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// `priorityThreshold`: a value or a PriorityClass name (not both).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityThreshold {
    /// A priority value.
    #[serde(default)]
    pub value: Option<i32>,
    /// A PriorityClass name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A pod protection policy name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum Protection {
    /// hostPath / emptyDir pods (default on).
    PodsWithLocalStorage,
    /// System-critical pods and the priority threshold (default on).
    SystemCriticalPods,
    /// Bare pods (default on; off: bare Failed pods become evictable).
    FailedBarePods,
    /// DaemonSet pods (default on).
    DaemonSetPods,
    /// Pods with PVCs (extra).
    PodsWithPVC,
    /// Pods not covered by a PDB (extra).
    PodsWithoutPDB,
    /// Pods with DRA resource claims (extra).
    PodsWithResourceClaims,
    /// Lets pods with a PDB be evicted when their owner has a single replica (extra).
    PodsWithPDBBlockingSingleReplicaOwner,
}

const DEFAULT_PROTECTIONS: [Protection; 4] = [
    Protection::PodsWithLocalStorage,
    Protection::SystemCriticalPods,
    Protection::FailedBarePods,
    Protection::DaemonSetPods,
];

/// `podProtections.config.PodsWithPVC.protectedStorageClasses[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtectedStorageClass {
    /// Storage class name.
    pub name: String,
}

/// `podProtections.config.PodsWithPVC`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodsWithPvcConfig {
    /// Only these storage classes are protected (empty: every PVC).
    #[serde(default)]
    pub protected_storage_classes: Vec<ProtectedStorageClass>,
}

/// `podProtections.config`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodProtectionsConfig {
    /// Config of `PodsWithPVC`.
    #[serde(default, rename = "PodsWithPVC")]
    pub pods_with_pvc: Option<PodsWithPvcConfig>,
}

/// `podProtections`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodProtections {
    /// Extra protections to enable.
    #[serde(default)]
    pub extra_enabled: Vec<Protection>,
    /// Default protections to disable.
    #[serde(default)]
    pub default_disabled: Vec<Protection>,
    /// Per-protection configuration.
    #[serde(default)]
    pub config: Option<PodProtectionsConfig>,
}

/// DefaultEvictor args (upstream `DefaultEvictorArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DefaultEvictorArgs {
    /// Label selector string limiting the nodes `nodeFit` considers.
    #[serde(default)]
    pub node_selector: Option<String>,
    /// Only pods matching this selector are evictable.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// Only pods in namespaces matching this selector (`matchLabels` only, as upstream).
    #[serde(default)]
    pub namespace_label_selector: Option<LabelSelector>,
    /// Pods at or above this priority are not evicted (with SystemCriticalPods protection).
    #[serde(default)]
    pub priority_threshold: Option<PriorityThreshold>,
    /// Only evict pods that fit another node.
    #[serde(default)]
    pub node_fit: bool,
    /// Owners with fewer pods than this are not touched (active when > 1).
    #[serde(default)]
    pub min_replicas: u32,
    /// Pods younger than this (since `status.startTime`) are not evicted.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub min_pod_age: Option<Duration>,
    /// `Preferred` (sort only) or `Mandatory` (never evict annotated pods).
    #[serde(default)]
    pub no_eviction_policy: Option<String>,
    /// Protections to enable or disable.
    #[serde(default)]
    pub pod_protections: PodProtections,
    /// Deprecated: disable `PodsWithLocalStorage`.
    #[serde(default)]
    pub evict_local_storage_pods: bool,
    /// Deprecated: disable `DaemonSetPods`.
    #[serde(default)]
    pub evict_daemon_set_pods: bool,
    /// Deprecated: disable `SystemCriticalPods`.
    #[serde(default)]
    pub evict_system_critical_pods: bool,
    /// Deprecated: enable `PodsWithPVC`.
    #[serde(default)]
    pub ignore_pvc_pods: bool,
    /// Deprecated: enable `PodsWithoutPDB`.
    #[serde(default, rename = "ignorePodsWithoutPDB")]
    pub ignore_pods_without_pdb: bool,
    /// Deprecated: disable `FailedBarePods`.
    #[serde(default)]
    pub evict_failed_bare_pods: bool,
}

impl DefaultEvictorArgs {
    /// Upstream validation, plus checks of the protection lists and selectors.
    pub fn validate(&self) -> Result<(), ArgsError> {
        if let Some(pt) = &self.priority_threshold
            && pt.value.is_some()
            && pt.name.as_deref().is_some_and(|n| !n.is_empty())
        {
            return Err(ArgsError::new(
                "priorityThreshold",
                "priority threshold misconfigured, only one of priorityThreshold fields can be set",
            ));
        }
        if let Some(p) = &self.no_eviction_policy
            && !p.is_empty()
            && p != "Preferred"
            && p != "Mandatory"
        {
            return Err(ArgsError::new(
                "noEvictionPolicy",
                "noEvictionPolicy accepts only [\"Preferred\" \"Mandatory\"] values",
            ));
        }
        for p in &self.pod_protections.default_disabled {
            if !DEFAULT_PROTECTIONS.contains(p) {
                return Err(ArgsError::new(
                    "podProtections.defaultDisabled",
                    format!(
                        "{p:?} is not a default protection (expected one of PodsWithLocalStorage, SystemCriticalPods, FailedBarePods, DaemonSetPods)"
                    ),
                ));
            }
        }
        for p in &self.pod_protections.extra_enabled {
            if DEFAULT_PROTECTIONS.contains(p) {
                return Err(ArgsError::new(
                    "podProtections.extraEnabled",
                    format!(
                        "{p:?} is a default protection; extraEnabled accepts PodsWithPVC, PodsWithoutPDB, PodsWithResourceClaims, PodsWithPDBBlockingSingleReplicaOwner"
                    ),
                ));
            }
        }
        let uses_new = !self.pod_protections.default_disabled.is_empty()
            || !self.pod_protections.extra_enabled.is_empty();
        let uses_old = self.evict_local_storage_pods
            || self.evict_daemon_set_pods
            || self.evict_system_critical_pods
            || self.ignore_pvc_pods
            || self.ignore_pods_without_pdb
            || self.evict_failed_bare_pods;
        if uses_new && uses_old {
            return Err(ArgsError::new(
                "podProtections",
                "cannot be combined with the deprecated fields evictLocalStoragePods, evictDaemonSetPods, evictSystemCriticalPods, ignorePvcPods, ignorePodsWithoutPDB, evictFailedBarePods",
            ));
        }
        if let Some(s) = &self.node_selector {
            selector::parse(s).map_err(|e| ArgsError::new("nodeSelector", e))?;
        }
        if let Some(s) = &self.label_selector {
            selector::compile(s).map_err(|e| ArgsError::new("labelSelector", e))?;
        }
        if let Some(s) = &self.namespace_label_selector {
            selector::compile(s).map_err(|e| ArgsError::new("namespaceLabelSelector", e))?;
        }
        Ok(())
    }

    /// The protections in force: `podProtections` when it lists anything, else the deprecated booleans.
    pub fn effective_protections(&self) -> Vec<Protection> {
        let pp = &self.pod_protections;
        if !pp.default_disabled.is_empty() || !pp.extra_enabled.is_empty() {
            let mut v: Vec<Protection> = DEFAULT_PROTECTIONS
                .into_iter()
                .filter(|p| !pp.default_disabled.contains(p))
                .collect();
            v.extend(pp.extra_enabled.iter().copied());
            return v;
        }
        let mut v = Vec::new();
        if !self.evict_local_storage_pods {
            v.push(Protection::PodsWithLocalStorage);
        }
        if !self.evict_daemon_set_pods {
            v.push(Protection::DaemonSetPods);
        }
        if !self.evict_system_critical_pods {
            v.push(Protection::SystemCriticalPods);
        }
        if !self.evict_failed_bare_pods {
            v.push(Protection::FailedBarePods);
        }
        if self.ignore_pvc_pods {
            v.push(Protection::PodsWithPVC);
        }
        if self.ignore_pods_without_pdb {
            v.push(Protection::PodsWithoutPDB);
        }
        v
    }
}

/// The built DefaultEvictor.
#[derive(Debug, Clone)]
pub struct DefaultEvictor {
    args: DefaultEvictorArgs,
    protections: Vec<Protection>,
    label_selector: Option<Selector>,
    namespace_selector: Option<Selector>,
    node_selector: Option<Selector>,
}

impl Default for DefaultEvictor {
    fn default() -> Self {
        Self::new(DefaultEvictorArgs::default()).unwrap_or_else(|_| unreachable_default())
    }
}

fn unreachable_default() -> DefaultEvictor {
    // Default args always validate; this keeps `Default` panic-free without an `expect`.
    DefaultEvictor {
        args: DefaultEvictorArgs::default(),
        protections: DEFAULT_PROTECTIONS.to_vec(),
        label_selector: None,
        namespace_selector: None,
        node_selector: None,
    }
}

impl DefaultEvictor {
    /// Validates `args` and builds the evictor.
    pub fn new(args: DefaultEvictorArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        let label_selector = args
            .label_selector
            .as_ref()
            .map(selector::compile)
            .transpose()
            .map_err(|e| ArgsError::new("labelSelector", e))?;
        // Upstream only applies namespaceLabelSelector when it has matchLabels.
        let namespace_selector = args
            .namespace_label_selector
            .as_ref()
            .filter(|s| s.match_labels.as_ref().is_some_and(|m| !m.is_empty()))
            .map(selector::compile)
            .transpose()
            .map_err(|e| ArgsError::new("namespaceLabelSelector", e))?;
        let node_selector = args
            .node_selector
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(selector::parse)
            .transpose()
            .map_err(|e| ArgsError::new("nodeSelector", e))?;
        let protections = args.effective_protections();
        Ok(DefaultEvictor {
            args,
            protections,
            label_selector,
            namespace_selector,
            node_selector,
        })
    }

    /// Decodes, validates and builds from policy args.
    pub fn from_args(args: &serde_json::Value) -> Result<Self, ArgsError> {
        Self::new(crate::framework::args::decode(args)?)
    }

    /// The args in force.
    pub fn args(&self) -> &DefaultEvictorArgs {
        &self.args
    }

    /// Whether `p` is in force.
    pub fn protects(&self, p: Protection) -> bool {
        self.protections.contains(&p)
    }

    /// Filter: whether the pod may be evicted at all. `Err` carries the reasons it may not.
    pub fn check(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        now: Timestamp,
    ) -> Result<(), Vec<String>> {
        let mut out = Rejections::all();
        self.evaluate(snapshot, pod, now, &mut out);
        if out.reasons.is_empty() {
            Ok(())
        } else {
            Err(out.reasons)
        }
    }

    /// The Filter's rules in upstream order, reporting each failure to `out` (which may stop the
    /// evaluation at the first one).
    fn evaluate(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp, out: &mut Rejections) {
        let p = snapshot.pod(pod);
        if p.uid.is_empty() {
            out.reject(|| "pod has no UID".into());
            return;
        }
        if p.annotations
            .contains_key(crate::snapshot::model::ANNOTATION_EVICT)
        {
            return;
        }
        if self.args.no_eviction_policy.as_deref() == Some("Mandatory") && p.prefers_no_eviction() {
            out.reject(|| {
                "pod has the prefer-no-eviction annotation and noEvictionPolicy is Mandatory".into()
            });
            return;
        }
        if p.is_mirror() && out.reject(|| "pod is a mirror pod".to_string()) {
            return;
        }
        if p.is_static() && out.reject(|| "pod is a static pod".to_string()) {
            return;
        }
        if p.is_terminating() && out.reject(|| "pod is terminating".to_string()) {
            return;
        }
        if self.check_protections(snapshot, pod, out) {
            return;
        }
        if let Some(sel) = &self.label_selector
            && !sel.matches(&p.labels)
            && out.reject(|| "pod labels do not match the labelSelector".into())
        {
            return;
        }
        if self.args.min_replicas > 1 && p.owners.len() == 1 {
            let replicas = snapshot.pods_owned_by(&p.owners[0].uid).count() as u32;
            if replicas < self.args.min_replicas
                && out.reject(|| {
                    format!(
                        "owner has {replicas} replicas which is less than minReplicas of {}",
                        self.args.min_replicas
                    )
                })
            {
                return;
            }
        }
        if let Some(min_age) = self.args.min_pod_age {
            let old_enough = p
                .start_time
                .is_some_and(|st| now.duration_since(st).as_secs_f64() >= min_age.as_secs_f64());
            if !old_enough {
                out.reject(|| "pod is younger than minPodAge".into());
            }
        }
    }

    /// The pod protections; `true` when `out` asks to stop.
    fn check_protections(&self, snapshot: &Snapshot, pod: PodId, out: &mut Rejections) -> bool {
        let p = snapshot.pod(pod);
        if self.protects(Protection::SystemCriticalPods) {
            if p.priority.is_some_and(|v| v >= SYSTEM_CRITICAL_PRIORITY)
                && out.reject(|| "pod has system critical priority".into())
            {
                return true;
            }
            if let Some(threshold) = self.priority_threshold(snapshot)
                && p.priority.is_some_and(|v| v >= threshold)
                && out.reject(|| "pod has higher priority than the priority threshold".into())
            {
                return true;
            }
        }
        if self.protects(Protection::FailedBarePods) {
            if p.owners.is_empty() && out.reject(|| "pod does not have any ownerRefs".into()) {
                return true;
            }
        } else if p.owners.is_empty()
            && p.phase != PodPhase::Failed
            && out.reject(|| "pod does not have any ownerRefs and is not in failed phase".into())
        {
            return true;
        }
        if self.protects(Protection::PodsWithLocalStorage)
            && p.has_local_storage()
            && out.reject(|| "pod has local storage".into())
        {
            return true;
        }
        if self.protects(Protection::DaemonSetPods)
            && p.is_daemonset_pod()
            && out.reject(|| "daemonset pods are protected".into())
        {
            return true;
        }
        if self.protects(Protection::PodsWithPVC) {
            let classes: Vec<&str> = self
                .args
                .pod_protections
                .config
                .as_ref()
                .and_then(|c| c.pods_with_pvc.as_ref())
                .map(|c| {
                    c.protected_storage_classes
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect()
                })
                .unwrap_or_default();
            let claims: Vec<&String> = p
                .volumes
                .iter()
                .filter_map(|v| {
                    if let Volume::Pvc(c) = v {
                        Some(c)
                    } else {
                        None
                    }
                })
                .collect();
            if classes.is_empty() {
                if !claims.is_empty() && out.reject(|| "pod with PVC is protected".into()) {
                    return true;
                }
            } else {
                for claim in claims {
                    let key = crate::snapshot::ObjectKey::new(&p.namespace, claim);
                    match snapshot
                        .pvcs
                        .get(&key)
                        .and_then(|c| c.storage_class.as_deref())
                        .filter(|s| !s.is_empty())
                    {
                        // As upstream: an unresolvable storage class protects the pod.
                        None => {
                            if out.reject(|| {
                                format!("cannot resolve the storage class of PVC {claim}")
                            }) {
                                return true;
                            }
                        }
                        Some(sc) if classes.contains(&sc) => {
                            if out.reject(|| format!("pod using protected storage class {sc:?}")) {
                                return true;
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        if self.protects(Protection::PodsWithoutPDB)
            && !covered_by_pdb(snapshot, pod)
            && out.reject(|| "pod does not have a PodDisruptionBudget".into())
        {
            return true;
        }
        if self.protects(Protection::PodsWithPDBBlockingSingleReplicaOwner)
            && covered_by_pdb(snapshot, pod)
            && !owner_has_single_replica(snapshot, pod)
            && out.reject(|| "pod is covered by PodDisruptionBudget".into())
        {
            return true;
        }
        if self.protects(Protection::PodsWithResourceClaims)
            && p.has_resource_claims
            && out.reject(|| "pod has ResourceClaims".into())
        {
            return true;
        }
        false
    }

    /// The resolved priority threshold (a PriorityClass name is looked up in the snapshot; an
    /// unknown class protects nothing beyond system-critical pods and is reported by the cycle).
    pub fn priority_threshold(&self, snapshot: &Snapshot) -> Option<i32> {
        let pt = self.args.priority_threshold.as_ref()?;
        if let Some(v) = pt.value {
            return Some(v);
        }
        let name = pt.name.as_deref().filter(|n| !n.is_empty())?;
        snapshot.priority_classes.get(name).copied()
    }

    /// Whether a Filter verdict can change when other pods are evicted (`minReplicas` counts the
    /// owner's remaining pods); otherwise verdicts hold for a whole cycle.
    pub fn filter_reads_evictions(&self) -> bool {
        self.args.min_replicas > 1
    }

    /// Filter as a boolean: stops at the first failing rule and builds no reasons.
    pub fn filter(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp) -> bool {
        let mut out = Rejections::first();
        self.evaluate(snapshot, pod, now, &mut out);
        !out.rejected
    }

    /// PreEvictionFilter: `nodeFit` (the pod fits another Ready node matching `nodeSelector`) and
    /// `namespaceLabelSelector`.
    pub fn pre_eviction_filter(&self, snapshot: &Snapshot, pod: PodId) -> bool {
        let candidates = if self.args.node_fit {
            self.node_fit_candidates(snapshot)
        } else {
            Vec::new()
        };
        self.pre_eviction_filter_with(snapshot, pod, &candidates)
    }

    /// PreEvictionFilter with the `nodeFit` candidates computed once per cycle by the caller
    /// ([`Self::node_fit_candidates`]).
    pub fn pre_eviction_filter_with(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        candidates: &[NodeId],
    ) -> bool {
        if self.args.node_fit && !fit::fits_any_other_node(snapshot, pod, candidates) {
            return false;
        }
        if let Some(sel) = &self.namespace_selector {
            let ns = &snapshot.pod(pod).namespace;
            return snapshot
                .namespace_labels(ns)
                .is_some_and(|l| sel.matches(l));
        }
        true
    }

    /// Ready nodes matching the evictor's `nodeSelector`.
    pub fn node_fit_candidates(&self, snapshot: &Snapshot) -> Vec<NodeId> {
        (0..snapshot.nodes.len() as NodeId)
            .filter(|&n| {
                let node = snapshot.node(n);
                node.ready
                    && self
                        .node_selector
                        .as_ref()
                        .is_none_or(|s| s.matches(&node.labels))
            })
            .collect()
    }
}

impl EvictorPlugin for DefaultEvictor {
    fn filter(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp) -> bool {
        DefaultEvictor::filter(self, snapshot, pod, now)
    }

    fn pre_eviction_filter_with(
        &self,
        snapshot: &Snapshot,
        pod: PodId,
        candidates: &[NodeId],
    ) -> bool {
        DefaultEvictor::pre_eviction_filter_with(self, snapshot, pod, candidates)
    }

    fn filter_reads_evictions(&self) -> bool {
        DefaultEvictor::filter_reads_evictions(self)
    }

    fn fit_candidates(&self, snapshot: &Snapshot) -> Vec<NodeId> {
        if self.args.node_fit {
            self.node_fit_candidates(snapshot)
        } else {
            Vec::new()
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The Filter's failures: every reason ([`DefaultEvictor::check`]) or only whether there is one
/// ([`DefaultEvictor::filter`], which stops at the first and formats nothing).
struct Rejections {
    collect: bool,
    rejected: bool,
    reasons: Vec<String>,
}

impl Rejections {
    fn all() -> Self {
        Rejections {
            collect: true,
            rejected: false,
            reasons: Vec::new(),
        }
    }

    fn first() -> Self {
        Rejections {
            collect: false,
            rejected: false,
            reasons: Vec::new(),
        }
    }

    /// Records a failure; `true` when the evaluation can stop.
    fn reject(&mut self, reason: impl FnOnce() -> String) -> bool {
        self.rejected = true;
        if self.collect {
            self.reasons.push(reason());
        }
        !self.collect
    }
}

/// Whether some PDB in the pod's namespace selects it.
pub fn covered_by_pdb(snapshot: &Snapshot, pod: PodId) -> bool {
    let p = snapshot.pod(pod);
    snapshot.pdbs.iter().any(|pdb| {
        pdb.metadata.namespace.as_deref().unwrap_or("default") == &*p.namespace
            && pdb
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                // An empty selector matches every pod in the namespace (policy/v1).
                .is_some_and(|sel| selector::matches(sel, &p.labels))
    })
}

fn owner_has_single_replica(snapshot: &Snapshot, pod: PodId) -> bool {
    let p = snapshot.pod(pod);
    p.owners.iter().any(|o| {
        let ns = &*p.namespace;
        let same = |namespace: &str, name: &str| namespace == ns && name == o.name;
        // ReplicaSet and Deployment facts default `spec.replicas` to 1, as the API server does.
        match o.kind.as_str() {
            "ReplicaSet" => snapshot
                .replica_sets
                .iter()
                .any(|r| same(&r.namespace, &r.name) && r.desired == 1),
            "Deployment" => snapshot
                .deployments
                .iter()
                .any(|d| same(&d.namespace, &d.name) && d.replicas == 1),
            "StatefulSet" => snapshot.stateful_sets.iter().any(|s| {
                same(
                    s.metadata.namespace.as_deref().unwrap_or_default(),
                    s.metadata.name.as_deref().unwrap_or_default(),
                ) && s.spec.replicas == Some(1)
            }),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use serde_json::json;

    fn evictor(args: serde_json::Value) -> DefaultEvictor {
        DefaultEvictor::from_args(&args).unwrap()
    }

    /// `filter` stops at the first failing rule; it must agree with `check` (every reason) on
    /// every pod, whatever the args.
    #[test]
    fn filter_agrees_with_check_on_a_varied_cluster() {
        let s = crate::testing::synthetic_snapshot(20, 600, 5);
        let args = [
            json!({}),
            json!({"minPodAge": "1h", "minReplicas": 3}),
            json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
            json!({"podProtections": {"extraEnabled": ["PodsWithPVC", "PodsWithoutPDB"], "defaultDisabled": ["DaemonSetPods"]}}),
            json!({"evictLocalStoragePods": true, "priorityThreshold": {"value": 1000}}),
        ];
        let (mut passed, mut failed) = (0, 0);
        for a in args {
            let ev = evictor(a.clone());
            for p in 0..s.pods.len() as PodId {
                let check = ev.check(&s, p, now());
                assert_eq!(
                    ev.filter(&s, p, now()),
                    check.is_ok(),
                    "{a} pod {p}: {check:?}"
                );
                if check.is_ok() {
                    passed += 1
                } else {
                    failed += 1
                }
            }
        }
        assert!(
            passed > 0 && failed > 0,
            "both verdicts occur ({passed} / {failed})"
        );
    }

    /// Whether the single pod `p` of a two-node cluster passes the Filter.
    fn passes(ev: &DefaultEvictor, p: k8s_openapi::api::core::v1::Pod) -> bool {
        let s = snapshot(vec![node("n1").build(), node("n2").build()], vec![p]);
        ev.filter(&s, 0, now())
    }

    #[test]
    fn filter_table() {
        let def = evictor(json!({}));
        let cases: Vec<(&str, DefaultEvictor, k8s_openapi::api::core::v1::Pod, bool)> = vec![
            (
                "plain replica pod",
                def.clone(),
                pod("a", "p", "n1").build(),
                true,
            ),
            (
                "no uid",
                def.clone(),
                pod("a", "p", "n1").with(|p| p.metadata.uid = None).build(),
                false,
            ),
            (
                "mirror pod",
                def.clone(),
                pod("a", "p", "n1")
                    .annotation(ANNOTATION_MIRROR_T, "x")
                    .build(),
                false,
            ),
            (
                "static pod",
                def.clone(),
                pod("a", "p", "n1")
                    .annotation("kubernetes.io/config.source", "file")
                    .build(),
                false,
            ),
            (
                "api-sourced pod is not static",
                def.clone(),
                pod("a", "p", "n1")
                    .annotation("kubernetes.io/config.source", "api")
                    .build(),
                true,
            ),
            (
                "terminating",
                def.clone(),
                pod("a", "p", "n1").terminating().build(),
                false,
            ),
            (
                "daemonset",
                def.clone(),
                pod("a", "p", "n1").owner("DaemonSet", "ds").build(),
                false,
            ),
            (
                "daemonset, deprecated evictDaemonSetPods",
                evictor(json!({"evictDaemonSetPods": true})),
                pod("a", "p", "n1").owner("DaemonSet", "ds").build(),
                true,
            ),
            (
                "daemonset, DaemonSetPods disabled",
                evictor(json!({"podProtections": {"defaultDisabled": ["DaemonSetPods"]}})),
                pod("a", "p", "n1").owner("DaemonSet", "ds").build(),
                true,
            ),
            (
                "hostPath",
                def.clone(),
                pod("a", "p", "n1").host_path().build(),
                false,
            ),
            (
                "emptyDir",
                def.clone(),
                pod("a", "p", "n1").empty_dir().build(),
                false,
            ),
            (
                "emptyDir, evictLocalStoragePods",
                evictor(json!({"evictLocalStoragePods": true})),
                pod("a", "p", "n1").empty_dir().build(),
                true,
            ),
            (
                "critical priority",
                def.clone(),
                pod("a", "p", "n1").priority(2_000_000_000).build(),
                false,
            ),
            (
                "just below critical",
                def.clone(),
                pod("a", "p", "n1").priority(1_999_999_999).build(),
                true,
            ),
            (
                "critical, evictSystemCriticalPods",
                evictor(json!({"evictSystemCriticalPods": true})),
                pod("a", "p", "n1").priority(2_000_000_000).build(),
                true,
            ),
            (
                "threshold value",
                evictor(json!({"priorityThreshold": {"value": 100}})),
                pod("a", "p", "n1").priority(100).build(),
                false,
            ),
            (
                "under threshold",
                evictor(json!({"priorityThreshold": {"value": 100}})),
                pod("a", "p", "n1").priority(99).build(),
                true,
            ),
            (
                "no priority under threshold",
                evictor(json!({"priorityThreshold": {"value": 100}})),
                pod("a", "p", "n1").build(),
                true,
            ),
            (
                "threshold ignored when SystemCriticalPods is off",
                evictor(
                    json!({"evictSystemCriticalPods": true, "priorityThreshold": {"value": 100}}),
                ),
                pod("a", "p", "n1").priority(500).build(),
                true,
            ),
            (
                "bare pod",
                def.clone(),
                pod("a", "p", "n1").bare().build(),
                false,
            ),
            (
                "bare failed pod, evictFailedBarePods",
                evictor(json!({"evictFailedBarePods": true})),
                pod("a", "p", "n1").bare().phase("Failed").build(),
                true,
            ),
            (
                "bare running pod, evictFailedBarePods",
                evictor(json!({"evictFailedBarePods": true})),
                pod("a", "p", "n1").bare().build(),
                false,
            ),
            (
                "pvc without protection",
                def.clone(),
                pod("a", "p", "n1").pvc("data").build(),
                true,
            ),
            (
                "pvc, ignorePvcPods",
                evictor(json!({"ignorePvcPods": true})),
                pod("a", "p", "n1").pvc("data").build(),
                false,
            ),
            (
                "pvc, PodsWithPVC",
                evictor(json!({"podProtections": {"extraEnabled": ["PodsWithPVC"]}})),
                pod("a", "p", "n1").pvc("data").build(),
                false,
            ),
            (
                "no pdb, PodsWithoutPDB",
                evictor(json!({"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}})),
                pod("a", "p", "n1").build(),
                false,
            ),
            (
                "resource claims",
                evictor(json!({"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}})),
                pod("a", "p", "n1")
                    .with(|p| {
                        p.spec.as_mut().unwrap().resource_claims = Some(vec![Default::default()])
                    })
                    .build(),
                false,
            ),
            (
                "label selector match",
                evictor(json!({"labelSelector": {"matchLabels": {"tier": "web"}}})),
                pod("a", "p", "n1").label("tier", "web").build(),
                true,
            ),
            (
                "label selector miss",
                evictor(json!({"labelSelector": {"matchLabels": {"tier": "web"}}})),
                pod("a", "p", "n1").build(),
                false,
            ),
            (
                "minPodAge old enough",
                evictor(json!({"minPodAge": "30m"})),
                pod("a", "p", "n1").age(3600).build(),
                true,
            ),
            (
                "minPodAge too young",
                evictor(json!({"minPodAge": "2h"})),
                pod("a", "p", "n1").age(3600).build(),
                false,
            ),
            (
                "minPodAge without startTime",
                evictor(json!({"minPodAge": "1s"})),
                pod("a", "p", "n1")
                    .with(|p| p.status.as_mut().unwrap().start_time = None)
                    .build(),
                false,
            ),
            (
                "evict annotation beats everything",
                def.clone(),
                pod("a", "p", "n1")
                    .bare()
                    .host_path()
                    .priority(2_000_000_001)
                    .annotation(ANNOTATION_EVICT_T, "")
                    .build(),
                true,
            ),
            (
                "prefer-no-eviction, Preferred",
                evictor(json!({"noEvictionPolicy": "Preferred"})),
                pod("a", "p", "n1").annotation(ANNOTATION_PNE_T, "").build(),
                true,
            ),
            (
                "prefer-no-eviction, Mandatory",
                evictor(json!({"noEvictionPolicy": "Mandatory"})),
                pod("a", "p", "n1").annotation(ANNOTATION_PNE_T, "").build(),
                false,
            ),
            (
                "evict annotation beats Mandatory",
                evictor(json!({"noEvictionPolicy": "Mandatory"})),
                pod("a", "p", "n1")
                    .annotation(ANNOTATION_PNE_T, "")
                    .annotation(ANNOTATION_EVICT_T, "")
                    .build(),
                true,
            ),
        ];
        for (name, ev, p, want) in cases {
            assert_eq!(passes(&ev, p), want, "case: {name}");
        }
    }

    const ANNOTATION_MIRROR_T: &str = crate::snapshot::model::ANNOTATION_MIRROR;
    const ANNOTATION_EVICT_T: &str = crate::snapshot::model::ANNOTATION_EVICT;
    const ANNOTATION_PNE_T: &str = crate::snapshot::model::ANNOTATION_PREFER_NO_EVICTION;

    #[test]
    fn min_replicas_counts_pods_of_the_single_owner() {
        let ev = evictor(json!({"minReplicas": 3}));
        let mk = |n: usize| {
            let pods = (0..n)
                .map(|i| {
                    pod("a", &format!("p{i}"), "n1")
                        .owner("ReplicaSet", "rs")
                        .build()
                })
                .collect();
            snapshot(vec![node("n1").build(), node("n2").build()], pods)
        };
        assert!(!ev.filter(&mk(2), 0, now()));
        assert!(ev.filter(&mk(3), 0, now()));
        // minReplicas 1 is inactive, as upstream.
        assert!(evictor(json!({"minReplicas": 1})).filter(&mk(1), 0, now()));
    }

    #[test]
    fn priority_threshold_by_class_name() {
        let ev = evictor(json!({"priorityThreshold": {"name": "high"}}));
        let mut b = crate::snapshot::SnapshotBuilder::new();
        b.add_node(&node("n1").build()).unwrap();
        b.add_node(&node("n2").build()).unwrap();
        b.add_pod(&pod("a", "p", "n1").priority(1000).build())
            .unwrap();
        b.add_pod(&pod("a", "q", "n1").priority(999).build())
            .unwrap();
        b.add_priority_class(&k8s_openapi::api::scheduling::v1::PriorityClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("high".into()),
                ..Default::default()
            },
            value: Some(1000),
            ..Default::default()
        });
        let s = b.build();
        assert!(!ev.filter(&s, 0, now()));
        assert!(ev.filter(&s, 1, now()));
    }

    #[test]
    fn pvc_protection_by_storage_class() {
        let ev = evictor(
            json!({"podProtections": {"extraEnabled": ["PodsWithPVC"], "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}}}}),
        );
        let mut b = crate::snapshot::SnapshotBuilder::new();
        b.add_node(&node("n1").build()).unwrap();
        b.add_pod(&pod("a", "fast", "n1").pvc("c-local").build())
            .unwrap();
        b.add_pod(&pod("a", "net", "n1").pvc("c-net").build())
            .unwrap();
        b.add_pod(&pod("a", "unknown", "n1").pvc("c-missing").build())
            .unwrap();
        for (name, class) in [("c-local", "local"), ("c-net", "ceph")] {
            b.add_pvc(&k8s_openapi::api::core::v1::PersistentVolumeClaim {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("a".into()),
                    ..Default::default()
                },
                spec: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
                    storage_class_name: Some(class.into()),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        let s = b.build();
        assert!(!ev.filter(&s, 0, now()), "protected class");
        assert!(ev.filter(&s, 1, now()), "other class");
        assert!(
            !ev.filter(&s, 2, now()),
            "unresolvable class protects, as upstream"
        );
    }

    #[test]
    fn pre_eviction_filter_node_fit_and_namespace_selector() {
        let pods = vec![pod("a", "p", "n1").node_selector("disk", "ssd").build()];
        let fit = evictor(json!({"nodeFit": true}));
        let s = snapshot(
            vec![node("n1").label("disk", "ssd").build(), node("n2").build()],
            pods.clone(),
        );
        assert!(
            !fit.pre_eviction_filter(&s, 0),
            "no other node matches the nodeSelector"
        );
        let s = snapshot(
            vec![
                node("n1").label("disk", "ssd").build(),
                node("n2").label("disk", "ssd").build(),
            ],
            pods.clone(),
        );
        assert!(fit.pre_eviction_filter(&s, 0));
        let s = snapshot(
            vec![
                node("n1").label("disk", "ssd").build(),
                node("n2").label("disk", "ssd").not_ready().build(),
            ],
            pods.clone(),
        );
        assert!(
            !fit.pre_eviction_filter(&s, 0),
            "NotReady nodes are not candidates"
        );
        let fit_sel = evictor(json!({"nodeFit": true, "nodeSelector": "pool=b"}));
        let s = snapshot(
            vec![
                node("n1").label("disk", "ssd").build(),
                node("n2").label("disk", "ssd").build(),
            ],
            pods,
        );
        assert!(
            !fit_sel.pre_eviction_filter(&s, 0),
            "nodeSelector limits nodeFit candidates"
        );
        assert!(evictor(json!({})).pre_eviction_filter(&s, 0), "nodeFit off");

        let ns_sel = evictor(json!({"namespaceLabelSelector": {"matchLabels": {"team": "x"}}}));
        let mut b = crate::snapshot::SnapshotBuilder::new();
        b.add_node(&node("n1").build()).unwrap();
        b.add_pod(&pod("a", "p", "n1").build()).unwrap();
        b.add_pod(&pod("b", "q", "n1").build()).unwrap();
        b.add_namespace(&k8s_openapi::api::core::v1::Namespace {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("a".into()),
                labels: Some([("team".to_string(), "x".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        });
        let s = b.build();
        assert!(ns_sel.pre_eviction_filter(&s, 0));
        assert!(!ns_sel.pre_eviction_filter(&s, 1));
    }

    #[test]
    fn deprecated_booleans_map_like_upstream() {
        let args: DefaultEvictorArgs = crate::framework::args::decode(
            &json!({"ignorePvcPods": true, "ignorePodsWithoutPDB": true}),
        )
        .unwrap();
        let p = args.effective_protections();
        for want in [
            Protection::PodsWithLocalStorage,
            Protection::DaemonSetPods,
            Protection::SystemCriticalPods,
            Protection::FailedBarePods,
            Protection::PodsWithPVC,
            Protection::PodsWithoutPDB,
        ] {
            assert!(p.contains(&want), "{want:?}");
        }
        let args: DefaultEvictorArgs = crate::framework::args::decode(&json!({"podProtections": {"defaultDisabled": ["FailedBarePods"], "extraEnabled": ["PodsWithPVC"]}})).unwrap();
        assert_eq!(
            args.effective_protections(),
            vec![
                Protection::PodsWithLocalStorage,
                Protection::SystemCriticalPods,
                Protection::DaemonSetPods,
                Protection::PodsWithPVC
            ]
        );
    }
}
