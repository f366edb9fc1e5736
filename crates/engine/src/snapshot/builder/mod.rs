//! Converts Kubernetes objects into the lean model and builds the indexed [`Snapshot`].
//! Used by the file loader (`plan`) and by live mode (watch caches) alike. Pods are converted in
//! `pod.rs`, their effective requests and QoS class computed in `requests.rs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::model::*;
use super::resources::Resources;
use super::{ObjectKey, PvcInfo, Snapshot};
use crate::workload::annotations::pdb_surge_opt_in;
use crate::workload::{DeploymentFacts, ReplicaSetFacts};

mod order;
mod pod;
mod requests;
mod scheduling;

pub(crate) use order::{cmp_listed, is_sorted_split};
use pod::SharedParts;
pub use requests::{pod_requests, pod_requests_of};

/// An object that could not be converted, with the field at fault.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConvertError {
    /// Field path, e.g. `spec.containers[0].resources.requests.cpu`.
    pub field: String,
    /// What was expected.
    pub message: String,
}

/// Accumulates objects, then [`SnapshotBuilder::build`]s the indexed snapshot.
#[derive(Default)]
pub struct SnapshotBuilder {
    nodes: Vec<Node>,
    pods: Vec<Arc<Pod>>,
    namespaces: HashMap<String, BTreeMap<String, String>>,
    namespace_pdb_surge: HashMap<String, bool>,
    hpas: Vec<HpaTarget>,
    interned_ns: FastMap<String, Arc<str>>,
    priority_classes: HashMap<String, i32>,
    pdbs: Vec<Arc<PodDisruptionBudget>>,
    replica_sets: Vec<Arc<ReplicaSetFacts>>,
    deployments: Vec<Arc<DeploymentFacts>>,
    stateful_sets: Vec<StatefulSet>,
    jobs: Vec<Job>,
    pvcs: HashMap<ObjectKey, PvcInfo>,
    warnings: Vec<String>,
    shared: FastMap<String, SharedParts>,
}

/// A map with the FxHash hasher (much cheaper than SipHash for short keys), for per-pod lookups by
/// namespace, owner and node name. Its keys come from the snapshot being loaded, so a crafted file
/// can at worst slow its own loading.
pub(super) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

impl SnapshotBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a warning that ends up in [`Snapshot::warnings`].
    pub fn warn(&mut self, msg: impl Into<String>) {
        self.warnings.push(msg.into());
    }

    /// One shared `Arc` per distinct string: namespaces, and the few other values that recur on
    /// many pods (status reasons, scheduler names).
    fn intern(&mut self, ns: &str) -> Arc<str> {
        if let Some(a) = self.interned_ns.get(ns) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(ns);
        self.interned_ns.insert(ns.to_string(), a.clone());
        a
    }

    /// Adds a node.
    pub fn add_node(&mut self, n: &core::Node) -> Result<(), ConvertError> {
        let name = n.metadata.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(ConvertError {
                field: "metadata.name".into(),
                message: "a node needs a name".into(),
            });
        }
        let spec = n.spec.as_ref();
        let status = n.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let list = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
        let allocatable = match list {
            Some(l) => Resources::from_list(l).map_err(|(res, e)| ConvertError {
                field: format!("status.allocatable.{res}"),
                message: e.to_string(),
            })?,
            None => Resources::default(),
        };
        self.nodes.push(Node {
            name,
            labels: n.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            ready,
            allocatable,
        });
        Ok(())
    }

    /// Adds a namespace (its labels are used by `namespaceLabelSelector` and the guard; of its
    /// annotations only the guard's rule B opt-in, [`crate::workload::annotations::PDB_SURGE`], is
    /// kept).
    pub fn add_namespace(&mut self, ns: &core::Namespace) {
        if let Some(name) = &ns.metadata.name {
            if let Some(on) = pdb_surge_opt_in(ns.metadata.annotations.as_ref()) {
                self.namespace_pdb_surge.insert(name.clone(), on);
            }
            let mut labels = ns.metadata.labels.clone().unwrap_or_default();
            // The API server always sets this label (Kubernetes >= 1.21).
            labels
                .entry("kubernetes.io/metadata.name".into())
                .or_insert_with(|| name.clone());
            self.namespaces.insert(name.clone(), labels);
        }
    }

    /// Adds a HorizontalPodAutoscaler's Deployment scale target (see [`super::workloads::hpa_target`]).
    pub fn add_hpa_target(&mut self, target: HpaTarget) {
        self.hpas.push(target);
    }

    /// Adds a priority class.
    pub fn add_priority_class(&mut self, pc: &PriorityClass) {
        if let Some(name) = &pc.metadata.name {
            self.priority_classes
                .insert(name.clone(), pc.value.unwrap_or(0));
        }
    }

    /// Adds a PodDisruptionBudget.
    pub fn add_pdb(&mut self, pdb: &PodDisruptionBudget) {
        self.add_pdb_owned(pdb.clone());
    }

    /// [`Self::add_pdb`] without copying the object.
    pub fn add_pdb_owned(&mut self, mut pdb: PodDisruptionBudget) {
        pdb.metadata.managed_fields = None;
        self.pdbs.push(Arc::new(pdb));
    }

    /// Adds a ReplicaSet as the facts the guard reads (its template, labels and status details
    /// are not kept: a full ReplicaSet object takes kilobytes even without its pod template).
    pub fn add_replica_set(&mut self, rs: &ReplicaSet) {
        self.replica_sets
            .push(Arc::new(ReplicaSetFacts::from_replica_set(rs)));
    }

    /// Adds a ReplicaSet's facts (see [`super::workloads`]).
    pub fn add_replica_set_facts(&mut self, facts: ReplicaSetFacts) {
        self.replica_sets.push(Arc::new(facts));
    }

    /// Adds a Deployment's facts (see [`super::workloads`]).
    pub fn add_deployment_facts(&mut self, facts: DeploymentFacts) {
        self.deployments.push(Arc::new(facts));
    }

    /// Adds a Deployment as the facts the guard reads (strategy, replica counts, rollout state,
    /// our restart record).
    pub fn add_deployment(&mut self, d: &Deployment) {
        self.deployments
            .push(Arc::new(DeploymentFacts::from_deployment(d)));
    }

    /// Adds a StatefulSet (its pod template spec and claim templates are dropped).
    pub fn add_stateful_set(&mut self, s: &StatefulSet) {
        self.add_stateful_set_owned(s.clone());
    }

    /// [`Self::add_stateful_set`] without copying the object.
    pub fn add_stateful_set_owned(&mut self, mut s: StatefulSet) {
        strip_meta(&mut s.metadata);
        s.spec.template.spec = None;
        s.spec.volume_claim_templates = None;
        self.stateful_sets.push(s);
    }

    /// Adds a Job (its pod template spec is dropped).
    pub fn add_job(&mut self, j: &Job) {
        self.add_job_owned(j.clone());
    }

    /// [`Self::add_job`] without copying the object.
    pub fn add_job_owned(&mut self, mut j: Job) {
        strip_meta(&mut j.metadata);
        if let Some(spec) = j.spec.as_mut() {
            spec.template.spec = None;
        }
        self.jobs.push(j);
    }

    /// Adds a PersistentVolumeClaim.
    pub fn add_pvc(&mut self, pvc: &core::PersistentVolumeClaim) {
        let key = ObjectKey::new(
            pvc.metadata.namespace.as_deref().unwrap_or("default"),
            pvc.metadata.name.as_deref().unwrap_or_default(),
        );
        let spec = pvc.spec.as_ref();
        let info = PvcInfo {
            storage_class: spec.and_then(|s| s.storage_class_name.clone()),
            access_modes: spec
                .and_then(|s| s.access_modes.clone())
                .unwrap_or_default(),
        };
        self.pvcs.insert(key, info);
    }

    /// Reserves room for `additional` more pods. Capacity that is never filled costs address
    /// space only (the pages are not touched), so an upper estimate is cheap.
    pub fn reserve_pods(&mut self, additional: usize) {
        self.pods.reserve(additional);
    }

    /// Reserves room for objects of the kinds that come in large numbers, so their lists do not
    /// grow (and copy) step by step.
    pub(super) fn reserve_many(&mut self, pods: usize, replica_sets: usize, deployments: usize) {
        self.pods.reserve(pods);
        self.replica_sets.reserve(replica_sets);
        self.deployments.reserve(deployments);
    }

    /// Returns unused pod capacity (see [`Self::reserve_pods`]).
    pub fn shrink_pods(&mut self) {
        self.pods.shrink_to_fit();
    }

    /// An empty builder that collects pods into `pods` (cleared; its capacity is reused).
    pub(super) fn with_pod_buffer(mut pods: Vec<Arc<Pod>>) -> Self {
        pods.clear();
        SnapshotBuilder {
            pods,
            ..Self::default()
        }
    }

    /// Like [`Self::merge`], but hands back `other`'s emptied pod vector so its memory can be
    /// reused (see [`Self::with_pod_buffer`]).
    pub(super) fn merge_reusing(&mut self, mut other: SnapshotBuilder) -> Vec<Arc<Pod>> {
        self.pods.append(&mut other.pods);
        let buffer = std::mem::take(&mut other.pods);
        self.merge(other);
        buffer
    }

    /// Appends everything `other` collected (objects keep their order: ours, then theirs).
    pub fn merge(&mut self, other: SnapshotBuilder) {
        self.nodes.extend(other.nodes);
        self.pods.extend(other.pods);
        self.namespaces.extend(other.namespaces);
        self.namespace_pdb_surge.extend(other.namespace_pdb_surge);
        self.hpas.extend(other.hpas);
        self.priority_classes.extend(other.priority_classes);
        self.pdbs.extend(other.pdbs);
        self.replica_sets.extend(other.replica_sets);
        self.deployments.extend(other.deployments);
        self.stateful_sets.extend(other.stateful_sets);
        self.jobs.extend(other.jobs);
        self.pvcs.extend(other.pvcs);
        self.warnings.extend(other.warnings);
    }

    /// Resolves pod → node references and builds the indexes.
    pub fn build(self) -> Snapshot {
        Snapshot::from_parts(self)
    }

    /// Takes the objects converted so far, leaving the builder empty but keeping what it shares
    /// between objects (interned namespaces, the per-owner label/status parts), so a long-lived
    /// builder can convert watch events one by one into compact parts that still share memory.
    pub fn take_parts(&mut self) -> Parts {
        Parts {
            nodes: std::mem::take(&mut self.nodes),
            pods: std::mem::take(&mut self.pods),
            namespaces: std::mem::take(&mut self.namespaces),
            namespace_pdb_surge: std::mem::take(&mut self.namespace_pdb_surge),
            hpas: std::mem::take(&mut self.hpas),
            priority_classes: std::mem::take(&mut self.priority_classes),
            pdbs: std::mem::take(&mut self.pdbs),
            replica_sets: std::mem::take(&mut self.replica_sets),
            deployments: std::mem::take(&mut self.deployments),
            stateful_sets: std::mem::take(&mut self.stateful_sets),
            jobs: std::mem::take(&mut self.jobs),
            pvcs: std::mem::take(&mut self.pvcs),
            warnings: std::mem::take(&mut self.warnings),
        }
    }

    /// Takes over what `other` shares between objects — its interned namespaces (where this
    /// builder has none of that name) and its per-owner parts (replacing this builder's: they
    /// are the more recent) — so objects this builder converts later share memory with those
    /// `other` converted (batches converted in parallel by separate builders, then kept by one).
    pub fn adopt_shared(&mut self, other: SnapshotBuilder) {
        for (name, interned) in other.interned_ns {
            self.interned_ns.entry(name).or_insert(interned);
        }
        self.shared.extend(other.shared);
    }

    /// Gives `pod` this builder's interned namespace when it has one of that name and the pod
    /// holds another `Arc` (a pod converted by another builder, e.g. a list batch's): pods of
    /// one namespace then share one `Arc`, which the snapshot's indexes and the plugins compare
    /// by address. A pod not shared yet is changed in place.
    pub fn share_namespace(&self, pod: &mut Arc<Pod>) {
        if let Some(interned) = self.interned_ns.get(&*pod.namespace)
            && !Arc::ptr_eq(interned, &pod.namespace)
        {
            Arc::make_mut(pod).namespace = interned.clone();
        }
    }

    /// Forgets the shared per-owner parts (after a relist, so owners that are gone do not keep
    /// their entries).
    pub fn forget_shared(&mut self) {
        self.shared = FastMap::default();
    }

    /// Forgets the shared parts of owners no converted pod refers to any more (their pods were
    /// all deleted), so a long-lived builder does not keep every owner it ever saw.
    pub fn forget_unused_shared(&mut self) {
        self.shared.retain(|_, parts| parts.in_use());
    }

    pub(super) fn into_parts(self) -> Parts {
        Parts {
            nodes: self.nodes,
            pods: self.pods,
            namespaces: self.namespaces,
            namespace_pdb_surge: self.namespace_pdb_surge,
            hpas: self.hpas,
            priority_classes: self.priority_classes,
            pdbs: self.pdbs,
            replica_sets: self.replica_sets,
            deployments: self.deployments,
            stateful_sets: self.stateful_sets,
            jobs: self.jobs,
            pvcs: self.pvcs,
            warnings: self.warnings,
        }
    }
}

/// Converted objects, in the engine's compact form: what a builder collected (consumed by
/// [`Snapshot::assemble`]), or what a live cluster state hands over for one cycle.
#[derive(Default)]
pub struct Parts {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Pods.
    pub pods: Vec<Arc<Pod>>,
    /// Namespace labels by name.
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    /// The rule B opt-in annotation of the namespaces that carry a recognised value, by name.
    pub namespace_pdb_surge: HashMap<String, bool>,
    /// HorizontalPodAutoscalers that scale a Deployment.
    pub hpas: Vec<HpaTarget>,
    /// PriorityClass values by name.
    pub priority_classes: HashMap<String, i32>,
    /// PodDisruptionBudgets (managed fields dropped).
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    /// ReplicaSet facts.
    pub replica_sets: Vec<Arc<ReplicaSetFacts>>,
    /// Deployment facts.
    pub deployments: Vec<Arc<DeploymentFacts>>,
    /// StatefulSets (template specs dropped).
    pub stateful_sets: Vec<StatefulSet>,
    /// Jobs (template specs dropped).
    pub jobs: Vec<Job>,
    /// PVCs by namespace/name.
    pub pvcs: HashMap<ObjectKey, PvcInfo>,
    /// Problems found while converting.
    pub warnings: Vec<String>,
}

/// Drops object metadata the engine never reads (labels, managed fields, finalizers, annotations
/// other than the Deployment controller's revision and ours).
fn strip_meta(m: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    m.managed_fields = None;
    m.labels = None;
    m.finalizers = None;
    if let Some(a) = m.annotations.as_mut() {
        a.retain(|k, _| k.starts_with("deployment.kubernetes.io/") || keep_annotation(k));
    }
}
