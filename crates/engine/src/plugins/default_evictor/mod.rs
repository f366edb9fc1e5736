//! DefaultEvictor: the Filter and PreEvictionFilter every profile uses (upstream semantics).
//!
//! Filter order: the `descheduler.alpha.kubernetes.io/evict` annotation makes a pod evictable
//! outright; `noEvictionPolicy: Mandatory` plus `prefer-no-eviction` makes it not evictable; mirror,
//! static, terminating and UID-less pods are never evicted; then the protections and constraints
//! (labelSelector, minReplicas, minPodAge). PreEvictionFilter: `nodeFit`, `namespaceLabelSelector`.

use jiff::Timestamp;
use kube_core::{Selector, SelectorExt};

use crate::framework::EvictorPlugin;
use crate::framework::args::ArgsError;
use crate::scheduling::{fit, selector};
use crate::snapshot::model::{PodPhase, Volume};
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

mod args;
use args::DEFAULT_PROTECTIONS;
pub use args::{
    DefaultEvictorArgs, PodProtections, PodProtectionsConfig, PodsWithPvcConfig, PriorityThreshold,
    ProtectedStorageClass, Protection,
};

/// The plugin name.
pub const NAME: &str = "DefaultEvictor";
/// Pods at or above this priority are system-critical (`SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

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
                out.reject(|| match p.start_time {
                    Some(st) => format!(
                        "pod is younger than minPodAge (started {} ago < minPodAge {})",
                        crate::evictor::reason::duration(now.duration_since(st).as_secs()),
                        crate::evictor::reason::duration(min_age.as_secs() as i64)
                    ),
                    None => "pod is younger than minPodAge (not started yet)".to_string(),
                });
            }
        }
    }

    /// The pod protections; `true` when `out` asks to stop.
    fn check_protections(&self, snapshot: &Snapshot, pod: PodId, out: &mut Rejections) -> bool {
        let p = snapshot.pod(pod);
        if self.protects(Protection::SystemCriticalPods) && self.check_priority(snapshot, p, out) {
            return true;
        }
        if self.check_owners(p, out) {
            return true;
        }
        if self.protects(Protection::PodsWithLocalStorage)
            && p.has_local_storage()
            && out.reject(|| {
                format!(
                    "pod has local storage ({})",
                    p.local_storage_description()
                        .unwrap_or_else(|| "a hostPath or emptyDir volume".into())
                )
            })
        {
            return true;
        }
        if self.protects(Protection::DaemonSetPods)
            && p.is_daemonset_pod()
            && out.reject(|| {
                let ds = p.owners.iter().find(|o| o.kind == "DaemonSet");
                format!(
                    "daemonset pods are protected (owned by DaemonSet {}/{})",
                    p.namespace,
                    ds.map_or("", |o| o.name.as_str())
                )
            })
        {
            return true;
        }
        if self.protects(Protection::PodsWithPVC) && self.check_claims(snapshot, p, out) {
            return true;
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

    /// `SystemCriticalPods`: system-critical priority, or priority at the threshold; `true` when
    /// `out` asks to stop.
    fn check_priority(&self, snapshot: &Snapshot, p: &Pod, out: &mut Rejections) -> bool {
        if p.priority.is_some_and(|v| v >= SYSTEM_CRITICAL_PRIORITY)
            && out.reject(|| {
                format!(
                    "pod has system critical priority (priority {} >= {SYSTEM_CRITICAL_PRIORITY})",
                    p.priority.unwrap_or_default()
                )
            })
        {
            return true;
        }
        if let Some(threshold) = self.priority_threshold(snapshot)
            && p.priority.is_some_and(|v| v >= threshold)
            && out.reject(|| {
                format!(
                    "pod has higher priority than the priority threshold (priority {} >= priorityThreshold {threshold})",
                    p.priority.unwrap_or_default()
                )
            })
        {
            return true;
        }
        false
    }

    /// Pods without owners: protected unless failed, or always with `FailedBarePods`; `true`
    /// when `out` asks to stop.
    fn check_owners(&self, p: &Pod, out: &mut Rejections) -> bool {
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
        false
    }

    /// `PodsWithPVC`: any claim, or with protected storage classes configured, a claim of one of
    /// them or of a class that cannot be resolved; `true` when `out` asks to stop.
    fn check_claims(&self, snapshot: &Snapshot, p: &Pod, out: &mut Rejections) -> bool {
        let classes = self.protected_storage_classes();
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
                        if out.reject(|| format!("cannot resolve the storage class of PVC {claim}"))
                        {
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
        false
    }

    /// The storage classes `PodsWithPVC` protects (none configured: every claim protects).
    fn protected_storage_classes(&self) -> Vec<&str> {
        self.args
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
            .unwrap_or_default()
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

/// The DefaultEvictor's registry entry (absent args: the defaults).
pub fn evictor_factory() -> crate::framework::EvictorFactory {
    crate::framework::EvictorFactory::new(NAME, |args: &serde_json::Value| {
        if args.is_null() {
            DefaultEvictor::new(Default::default())
        } else {
            DefaultEvictor::from_args(args)
        }
    })
}

impl EvictorPlugin for DefaultEvictor {
    fn name(&self) -> &str {
        NAME
    }

    fn explain_filter(&self, snapshot: &Snapshot, pod: PodId, now: Timestamp) -> Vec<String> {
        self.check(snapshot, pod, now).err().unwrap_or_default()
    }

    fn placement(&self) -> crate::placement::PlacementMode {
        self.args.placement
    }

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
mod tests;
