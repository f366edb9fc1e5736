//! Converts Kubernetes objects into the lean model and builds the indexed [`Snapshot`].
//! Used by the file loader (`plan`) and by live mode (watch caches) alike.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::model::*;
use super::resources::{self, Resources};
use super::view::{
    ConditionView, ContainerStatusView, ContainerView, Pairs, PodView, ResourcesView, SpecView,
};
use super::{ObjectKey, PvcInfo, Snapshot};
use crate::guard::{DeploymentFacts, ReplicaSetFacts};

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
    pods: Vec<Pod>,
    namespaces: HashMap<String, BTreeMap<String, String>>,
    interned_ns: FastMap<String, Arc<str>>,
    priority_classes: HashMap<String, i32>,
    pdbs: Vec<PodDisruptionBudget>,
    replica_sets: Vec<ReplicaSetFacts>,
    deployments: Vec<DeploymentFacts>,
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

/// Pod fields that pods of one owner usually have in common; shared (not copied) when equal.
#[derive(Default, Clone)]
struct SharedParts {
    labels: Arc<BTreeMap<String, String>>,
    node_selector: Arc<BTreeMap<String, String>>,
    affinity: Option<Arc<core::Affinity>>,
    tolerations: Arc<[core::Toleration]>,
    tsc: Arc<[core::TopologySpreadConstraint]>,
    owners: Arc<[OwnerRef]>,
    images: Arc<[String]>,
    conditions: Arc<[Condition]>,
    container_states: Arc<[ContainerState]>,
    init_container_states: Arc<[ContainerState]>,
    ephemeral_container_states: Arc<[ContainerState]>,
}

/// The pod's conditions as a shared slice: the `cached` one when equal (most pods of an owner have
/// the same conditions), else a new one that becomes the cached value. Compared before anything is
/// built, so the common case allocates nothing.
fn shared_conditions(
    cached: &mut Arc<[Condition]>,
    views: &[ConditionView<'_>],
) -> Result<Arc<[Condition]>, ConvertError> {
    let time = |i: usize, c: &ConditionView<'_>| {
        parse_time(&c.last_transition_time, || {
            format!("status.conditions[{i}].lastTransitionTime")
        })
    };
    let mut equal = cached.len() == views.len();
    for (i, c) in views.iter().enumerate() {
        let last_transition = time(i, c)?;
        equal = equal
            && cached.get(i).is_some_and(|x| {
                x.type_.as_str() == c.type_.as_ref()
                    && x.status.as_str() == c.status.as_ref()
                    && x.reason.as_deref() == c.reason.as_deref()
                    && x.last_transition == last_transition
            });
    }
    if !equal {
        let mut fresh = Vec::with_capacity(views.len());
        for (i, c) in views.iter().enumerate() {
            fresh.push(Condition {
                type_: c.type_.as_ref().into(),
                status: c.status.as_ref().into(),
                reason: c.reason.as_deref().map(Into::into),
                last_transition: time(i, c)?,
            });
        }
        *cached = Arc::from(fresh);
    }
    Ok(cached.clone())
}

/// Container states as a shared slice, like [`shared_conditions`].
fn shared_states(
    cached: &mut Arc<[ContainerState]>,
    views: &[ContainerStatusView<'_>],
) -> Arc<[ContainerState]> {
    let equal = cached.len() == views.len()
        && cached
            .iter()
            .zip(views)
            .all(|(a, v)| *a == container_state(v));
    if !equal {
        *cached = views.iter().map(container_state).collect();
    }
    cached.clone()
}

impl SnapshotBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a warning that ends up in [`Snapshot::warnings`].
    pub fn warn(&mut self, msg: impl Into<String>) {
        self.warnings.push(msg.into());
    }

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

    /// Adds a pod.
    pub fn add_pod(&mut self, p: &core::Pod) -> Result<(), ConvertError> {
        self.add_pod_view(&PodView::from_pod(p))
    }

    /// Adds a pod from its view (the snapshot loader decodes views straight from JSON).
    pub fn add_pod_view(&mut self, p: &PodView<'_>) -> Result<(), ConvertError> {
        let meta = &p.metadata;
        let name = meta.name.as_deref().unwrap_or_default();
        if name.is_empty() {
            return Err(ConvertError {
                field: "metadata.name".into(),
                message: "a pod needs a name".into(),
            });
        }
        let namespace = self.intern(meta.namespace.as_deref().unwrap_or("default"));
        let spec = &p.spec;
        let status = &p.status;
        let requests = pod_requests(spec)?;
        let qos = match status.qos_class.as_deref() {
            Some("BestEffort") => QosClass::BestEffort,
            Some("Guaranteed") => QosClass::Guaranteed,
            Some("Burstable") => QosClass::Burstable,
            _ => compute_qos(spec),
        };
        let volumes = spec
            .volumes
            .iter()
            .map(|v| {
                if v.host_path {
                    Volume::HostPath
                } else if v.empty_dir {
                    Volume::EmptyDir
                } else if let Some(c) = &v.persistent_volume_claim {
                    Volume::Pvc(c.claim_name.to_string())
                } else if v.ephemeral {
                    Volume::Ephemeral(v.name.to_string())
                } else {
                    Volume::Other
                }
            })
            .collect();
        let owner_views = meta.owner_references.as_deref().unwrap_or(&[]);
        let key = owner_views
            .iter()
            .find(|o| o.controller == Some(true))
            .or(owner_views.first())
            .map(|o| o.uid.as_ref())
            .unwrap_or_default();
        let cache = match self.shared.get_mut(key) {
            Some(c) => c,
            None => self.shared.entry(key.to_string()).or_default(),
        };
        let owners_equal = cache.owners.len() == owner_views.len()
            && cache.owners.iter().zip(owner_views).all(|(a, b)| {
                a.uid == b.uid
                    && a.name == b.name
                    && a.kind == b.kind
                    && a.api_version == b.api_version
                    && a.controller == b.controller.unwrap_or(false)
            });
        if !owners_equal {
            cache.owners = owner_views
                .iter()
                .map(|o| OwnerRef {
                    api_version: o.api_version.to_string(),
                    kind: o.kind.to_string(),
                    name: o.name.to_string(),
                    uid: o.uid.to_string(),
                    controller: o.controller.unwrap_or(false),
                })
                .collect();
        }
        if !meta.labels.equals(&cache.labels) {
            cache.labels = Arc::new(meta.labels.to_map());
        }
        if !spec.node_selector.equals(&cache.node_selector) {
            cache.node_selector = Arc::new(spec.node_selector.to_map());
        }
        match spec.affinity.as_deref() {
            None => {}
            Some(a) if cache.affinity.as_deref() == Some(a) => {}
            Some(a) => cache.affinity = Some(Arc::new(a.clone())),
        }
        let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
        if *cache.tolerations != *tolerations {
            cache.tolerations = Arc::from(tolerations);
        }
        let tsc = spec.topology_spread_constraints.as_deref().unwrap_or(&[]);
        if *cache.tsc != *tsc {
            cache.tsc = Arc::from(tsc);
        }
        let images_equal = cache.images.len()
            == spec.containers.iter().filter(|c| c.image.is_some()).count()
            && cache
                .images
                .iter()
                .zip(spec.containers.iter().filter_map(|c| c.image.as_deref()))
                .all(|(a, b)| a == b);
        if !images_equal {
            cache.images = spec
                .containers
                .iter()
                .filter_map(|c| c.image.as_deref().map(str::to_string))
                .collect();
        }
        let conditions = shared_conditions(&mut cache.conditions, &status.conditions)?;
        let container_states =
            shared_states(&mut cache.container_states, &status.container_statuses);
        let init_container_states = shared_states(
            &mut cache.init_container_states,
            &status.init_container_statuses,
        );
        let ephemeral_container_states = shared_states(
            &mut cache.ephemeral_container_states,
            &status.ephemeral_container_statuses,
        );
        let affinity = if spec.affinity.is_some() {
            cache.affinity.clone()
        } else {
            None
        };
        self.pods.push(Pod {
            uid: meta.uid.as_deref().unwrap_or_default().to_string(),
            name: name.to_string(),
            namespace,
            node_name: spec
                .node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            node: None,
            labels: cache.labels.clone(),
            annotations: meta
                .annotations
                .0
                .iter()
                .filter(|(k, _)| keep_annotation(k))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            owners: cache.owners.clone(),
            creation_timestamp: parse_time(&meta.creation_timestamp, || {
                "metadata.creationTimestamp".into()
            })?,
            deletion_timestamp: parse_time(&meta.deletion_timestamp, || {
                "metadata.deletionTimestamp".into()
            })?,
            priority: spec.priority,
            priority_class_name: spec
                .priority_class_name
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            phase: PodPhase::parse(status.phase.as_deref()),
            reason: status.reason.as_deref().map(Into::into),
            start_time: parse_time(&status.start_time, || "status.startTime".into())?,
            conditions,
            images: cache.images.clone(),
            container_states,
            init_container_states,
            ephemeral_container_states,
            requests,
            qos,
            node_selector: cache.node_selector.clone(),
            affinity,
            tolerations: cache.tolerations.clone(),
            topology_spread_constraints: cache.tsc.clone(),
            volumes,
            has_resource_claims: spec.resource_claims,
        });
        Ok(())
    }

    /// Adds a namespace (its labels are used by `namespaceLabelSelector` and the guard).
    pub fn add_namespace(&mut self, ns: &core::Namespace) {
        if let Some(name) = &ns.metadata.name {
            let mut labels = ns.metadata.labels.clone().unwrap_or_default();
            // The API server always sets this label (Kubernetes >= 1.21).
            labels
                .entry("kubernetes.io/metadata.name".into())
                .or_insert_with(|| name.clone());
            self.namespaces.insert(name.clone(), labels);
        }
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
        self.pdbs.push(pdb);
    }

    /// Adds a ReplicaSet as the facts the guard reads (its template, labels and status details
    /// are not kept: a full ReplicaSet object takes kilobytes even without its pod template).
    pub fn add_replica_set(&mut self, rs: &ReplicaSet) {
        self.replica_sets
            .push(ReplicaSetFacts::from_replica_set(rs));
    }

    /// Adds a ReplicaSet's facts (see [`super::workloads`]).
    pub fn add_replica_set_facts(&mut self, facts: ReplicaSetFacts) {
        self.replica_sets.push(facts);
    }

    /// Adds a Deployment's facts (see [`super::workloads`]).
    pub fn add_deployment_facts(&mut self, facts: DeploymentFacts) {
        self.deployments.push(facts);
    }

    /// Adds a Deployment as the facts the guard reads (strategy, replica counts, rollout state,
    /// our restart record).
    pub fn add_deployment(&mut self, d: &Deployment) {
        self.deployments.push(DeploymentFacts::from_deployment(d));
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
    pub(super) fn with_pod_buffer(mut pods: Vec<Pod>) -> Self {
        pods.clear();
        SnapshotBuilder {
            pods,
            ..Self::default()
        }
    }

    /// Like [`Self::merge`], but hands back `other`'s emptied pod vector so its memory can be
    /// reused (see [`Self::with_pod_buffer`]).
    pub(super) fn merge_reusing(&mut self, mut other: SnapshotBuilder) -> Vec<Pod> {
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

    /// Forgets the shared per-owner parts (after a relist, so owners that are gone do not keep
    /// their entries).
    pub fn forget_shared(&mut self) {
        self.shared = FastMap::default();
    }

    pub(super) fn into_parts(self) -> Parts {
        Parts {
            nodes: self.nodes,
            pods: self.pods,
            namespaces: self.namespaces,
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
    pub pods: Vec<Pod>,
    /// Namespace labels by name.
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    /// PriorityClass values by name.
    pub priority_classes: HashMap<String, i32>,
    /// PodDisruptionBudgets (managed fields dropped).
    pub pdbs: Vec<PodDisruptionBudget>,
    /// ReplicaSet facts.
    pub replica_sets: Vec<ReplicaSetFacts>,
    /// Deployment facts.
    pub deployments: Vec<DeploymentFacts>,
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

fn parse_time(
    t: &Option<std::borrow::Cow<'_, str>>,
    field: impl FnOnce() -> String,
) -> Result<Option<Timestamp>, ConvertError> {
    match t.as_deref() {
        None | Some("") => Ok(None),
        Some(text) => match parse_utc_seconds(text) {
            Some(ts) => Ok(Some(ts)),
            None => text
                .parse::<Timestamp>()
                .map(Some)
                .map_err(|e| ConvertError {
                    field: field(),
                    message: format!("expected an RFC 3339 time, got {text:?}: {e}"),
                }),
        },
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`, the form the API server writes, read without the general RFC 3339
/// parser (same result). `None` for any other form or an invalid date: the caller falls back.
fn parse_utc_seconds(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Days since 1970-01-01 (proleptic Gregorian, the "days from civil" method).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Timestamp::from_second(days * 86_400 + hour * 3_600 + minute * 60 + second).ok()
}

fn container_state(c: &ContainerStatusView<'_>) -> ContainerState {
    let state = c.state.as_ref();
    ContainerState {
        name: c.name.as_ref().into(),
        restart_count: c.restart_count,
        ready: c.ready,
        waiting_reason: state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            .map(Into::into),
        terminated_reason: state
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.reason.as_deref())
            .map(Into::into),
        terminated_exit_code: state
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.exit_code),
        last_terminated_exit_code: c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.exit_code),
    }
}

fn resources_of(
    pairs: &Pairs<'_>,
    field: &dyn Fn(&str) -> String,
) -> Result<Resources, ConvertError> {
    let mut r = Resources::default();
    for (name, q) in &pairs.0 {
        let parsed = crate::quantity::Quantity::parse(q).map_err(|e| ConvertError {
            field: field(name),
            message: e.to_string(),
        })?;
        r.set(
            name,
            if name == resources::CPU {
                parsed.milli_value()
            } else {
                parsed.value()
            },
        );
    }
    Ok(r)
}

/// Requests of one container; a resource with a limit but no request defaults to the limit, as the
/// API server's defaulting does.
fn container_requests(
    c: &ContainerView<'_>,
    list: &str,
    index: usize,
) -> Result<Resources, ConvertError> {
    let Some(res) = c.resources.as_ref() else {
        return Ok(Resources::default());
    };
    let field = |kind: &str, n: &str| format!("spec.{list}[{index}].resources.{kind}.{n}");
    let mut r = resources_of(&res.limits, &|n| field("limits", n))?;
    let req = resources_of(&res.requests, &|n| field("requests", n))?;
    for (name, _) in &res.requests.0 {
        r.set(name, req.get(name));
    }
    Ok(r)
}

/// Effective pod requests as the scheduler computes them: the larger of the containers' sum and the
/// init phase peak (restartable "sidecar" init containers keep running and add up), plus overhead.
pub fn pod_requests(spec: &SpecView<'_>) -> Result<Resources, ConvertError> {
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        sum.add(&container_requests(c, "containers", i)?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().enumerate() {
        let req = container_requests(c, "initContainers", i)?;
        let phase = if c.restart_policy.as_deref() == Some("Always") {
            sum.add(&req);
            sidecars.add(&req);
            sidecars.clone()
        } else {
            let mut r = req;
            r.add(&sidecars);
            r
        };
        init_peak.max_with(&phase);
    }
    sum.max_with(&init_peak);
    sum.add(&resources_of(&spec.overhead, &|n| {
        format!("spec.overhead.{n}")
    })?);
    sum.pods = 1;
    Ok(sum)
}

/// QoS class from the containers' requests and limits (Kubernetes `GetPodQOS`).
fn compute_qos(spec: &SpecView<'_>) -> QosClass {
    let mut any = false;
    let mut guaranteed = true;
    let get = |p: &Pairs<'_>, name: &str| {
        p.0.iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| crate::quantity::Quantity::parse(v).ok())
    };
    for c in spec.containers.iter().chain(spec.init_containers.iter()) {
        let empty = ResourcesView::default();
        let res = c.resources.as_ref().unwrap_or(&empty);
        for name in [resources::CPU, resources::MEMORY] {
            // As `GetPodQOS`: zero quantities do not count.
            let nonzero = |q: Option<crate::quantity::Quantity>| q.filter(|q| q.milli_value() > 0);
            let (r, l) = (
                nonzero(get(&res.requests, name)),
                nonzero(get(&res.limits, name)),
            );
            if r.is_some() || l.is_some() {
                any = true;
            }
            match (r.or(l), l) {
                (Some(a), Some(b)) if a == b => {}
                _ => guaranteed = false,
            }
        }
    }
    if !any {
        QosClass::BestEffort
    } else if guaranteed {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::testing::pod;

    #[test]
    fn the_fast_time_parser_agrees_with_jiff() {
        let mut texts: Vec<String> = [
            "1970-01-01T00:00:00Z",
            "0000-01-01T00:00:00Z",
            "0000-03-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "1600-02-29T12:00:00Z",
            "1900-02-29T00:00:00Z",
            "2000-02-29T23:59:59Z",
            "2024-02-29T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-12-31T23:59:60Z",
            "2026-01-01T24:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "2026-01-01t00:00:00z",
            "2026-01-01T00:00:00+01:00",
            "2026-01-01T00:00:00.5Z",
            "2026-1-01T00:00:00Z",
            "+002026-01-01T00:00:0Z",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for year in [
            1, 4, 99, 100, 399, 400, 1583, 1970, 1999, 2001, 2100, 2400, 2026,
        ] {
            for month in 1..=12 {
                for day in [1, 15, 28, 29, 30, 31] {
                    texts.push(format!("{year:04}-{month:02}-{day:02}T13:07:59Z"));
                }
            }
        }
        for text in &texts {
            let fast = parse_utc_seconds(text);
            let general = text.parse::<Timestamp>().ok();
            if let Some(t) = fast {
                assert_eq!(Some(t), general, "{text}");
            }
            assert_eq!(
                parse_time(&Some(text.as_str().into()), String::new)
                    .ok()
                    .flatten(),
                general,
                "{text}"
            );
        }
        assert!(parse_utc_seconds("2026-01-27T00:00:00Z").is_some());
        assert!(parse_utc_seconds("2024-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn qos_ignores_zero_quantities() {
        let qos = |p: core::Pod| compute_qos(&PodView::from_pod(&p).spec);
        assert_eq!(
            qos(pod("a", "zero", "n").requests("0", "0").build()),
            QosClass::BestEffort
        );
        assert_eq!(
            qos(pod("a", "cpu", "n").requests("100m", "0").build()),
            QosClass::Burstable
        );
        assert_eq!(
            qos(pod("a", "none", "n").best_effort().build()),
            QosClass::BestEffort
        );
    }
}
