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
use super::{ObjectKey, PvcInfo, Snapshot};

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
    interned_ns: HashMap<String, Arc<str>>,
    priority_classes: HashMap<String, i32>,
    pdbs: Vec<PodDisruptionBudget>,
    replica_sets: Vec<ReplicaSet>,
    deployments: Vec<Deployment>,
    stateful_sets: Vec<StatefulSet>,
    jobs: Vec<Job>,
    pvcs: HashMap<ObjectKey, PvcInfo>,
    warnings: Vec<String>,
}

fn ts(t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<Timestamp> {
    t.as_ref().map(|t| t.0)
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
        let meta = &p.metadata;
        let name = meta.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(ConvertError {
                field: "metadata.name".into(),
                message: "a pod needs a name".into(),
            });
        }
        let namespace = self.intern(meta.namespace.as_deref().unwrap_or("default"));
        let empty_spec = core::PodSpec::default();
        let spec = p.spec.as_ref().unwrap_or(&empty_spec);
        let status = p.status.as_ref();
        let requests = pod_requests(spec)?;
        let qos = match status.and_then(|s| s.qos_class.as_deref()) {
            Some("BestEffort") => QosClass::BestEffort,
            Some("Guaranteed") => QosClass::Guaranteed,
            Some("Burstable") => QosClass::Burstable,
            _ => compute_qos(spec),
        };
        let conditions = status
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| Condition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone(),
                        last_transition: ts(&c.last_transition_time),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let states = |v: Option<&Vec<core::ContainerStatus>>| -> Vec<ContainerState> {
            v.map(|v| v.iter().map(container_state).collect())
                .unwrap_or_default()
        };
        let volumes = spec
            .volumes
            .as_ref()
            .map(|vs| {
                vs.iter()
                    .map(|v| {
                        if v.host_path.is_some() {
                            Volume::HostPath
                        } else if v.empty_dir.is_some() {
                            Volume::EmptyDir
                        } else if let Some(c) = &v.persistent_volume_claim {
                            Volume::Pvc(c.claim_name.clone())
                        } else if v.ephemeral.is_some() {
                            Volume::Ephemeral(v.name.clone())
                        } else {
                            Volume::Other
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.pods.push(Pod {
            uid: meta.uid.clone().unwrap_or_default(),
            name,
            namespace,
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            node: None,
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta
                .annotations
                .as_ref()
                .map(|a| {
                    a.iter()
                        .filter(|(k, _)| keep_annotation(k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            owners: meta
                .owner_references
                .as_ref()
                .map(|os| {
                    os.iter()
                        .map(|o| OwnerRef {
                            api_version: o.api_version.clone(),
                            kind: o.kind.clone(),
                            name: o.name.clone(),
                            uid: o.uid.clone(),
                            controller: o.controller.unwrap_or(false),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            creation_timestamp: ts(&meta.creation_timestamp),
            deletion_timestamp: ts(&meta.deletion_timestamp),
            priority: spec.priority,
            priority_class_name: spec.priority_class_name.clone().filter(|s| !s.is_empty()),
            phase: PodPhase::parse(status.and_then(|s| s.phase.as_deref())),
            reason: status.and_then(|s| s.reason.clone()),
            start_time: status.and_then(|s| ts(&s.start_time)),
            conditions,
            images: spec
                .containers
                .iter()
                .filter_map(|c| c.image.clone())
                .collect(),
            container_states: states(status.and_then(|s| s.container_statuses.as_ref())),
            init_container_states: states(status.and_then(|s| s.init_container_statuses.as_ref())),
            ephemeral_container_states: states(
                status.and_then(|s| s.ephemeral_container_statuses.as_ref()),
            ),
            requests,
            qos,
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            affinity: spec.affinity.clone().map(Box::new),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            topology_spread_constraints: spec
                .topology_spread_constraints
                .clone()
                .unwrap_or_default(),
            volumes,
            has_resource_claims: spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()),
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
        let mut pdb = pdb.clone();
        pdb.metadata.managed_fields = None;
        self.pdbs.push(pdb);
    }

    /// Adds a ReplicaSet (its pod template is dropped).
    pub fn add_replica_set(&mut self, rs: &ReplicaSet) {
        let mut rs = rs.clone();
        rs.metadata.managed_fields = None;
        if let Some(t) = rs.spec.template.as_mut() {
            t.spec = None;
        }
        self.replica_sets.push(rs);
    }

    /// Adds a Deployment (its pod template spec is dropped; template metadata is kept).
    pub fn add_deployment(&mut self, d: &Deployment) {
        let mut d = d.clone();
        d.metadata.managed_fields = None;
        d.spec.template.spec = None;
        self.deployments.push(d);
    }

    /// Adds a StatefulSet (its pod template spec and claim templates are dropped).
    pub fn add_stateful_set(&mut self, s: &StatefulSet) {
        let mut s = s.clone();
        s.metadata.managed_fields = None;
        s.spec.template.spec = None;
        s.spec.volume_claim_templates = None;
        self.stateful_sets.push(s);
    }

    /// Adds a Job (its pod template spec is dropped).
    pub fn add_job(&mut self, j: &Job) {
        let mut j = j.clone();
        j.metadata.managed_fields = None;
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

    /// Resolves pod → node references and builds the indexes.
    pub fn build(self) -> Snapshot {
        Snapshot::from_parts(self)
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

/// The builder's collected objects, consumed by [`Snapshot::from_parts`].
pub(super) struct Parts {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    pub priority_classes: HashMap<String, i32>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub replica_sets: Vec<ReplicaSet>,
    pub deployments: Vec<Deployment>,
    pub stateful_sets: Vec<StatefulSet>,
    pub jobs: Vec<Job>,
    pub pvcs: HashMap<ObjectKey, PvcInfo>,
    pub warnings: Vec<String>,
}

fn container_state(c: &core::ContainerStatus) -> ContainerState {
    let state = c.state.as_ref();
    ContainerState {
        name: c.name.clone(),
        restart_count: c.restart_count,
        ready: c.ready,
        waiting_reason: state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone()),
        terminated_reason: state
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.reason.clone()),
        terminated_exit_code: state
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
        last_terminated_exit_code: c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
    }
}

/// Requests of one container; a resource with a limit but no request defaults to the limit, as the
/// API server's defaulting does.
fn container_requests(c: &core::Container, field: &str) -> Result<Resources, ConvertError> {
    let Some(res) = c.resources.as_ref() else {
        return Ok(Resources::default());
    };
    let mut merged = res.limits.clone().unwrap_or_default();
    if let Some(req) = &res.requests {
        for (k, v) in req {
            merged.insert(k.clone(), v.clone());
        }
    }
    Resources::from_list(&merged).map_err(|(name, e)| ConvertError {
        field: format!("{field}.resources.requests.{name}"),
        message: e.to_string(),
    })
}

/// Effective pod requests as the scheduler computes them: the larger of the containers' sum and the
/// init phase peak (restartable "sidecar" init containers keep running and add up), plus overhead.
pub fn pod_requests(spec: &core::PodSpec) -> Result<Resources, ConvertError> {
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        sum.add(&container_requests(c, &format!("spec.containers[{i}]"))?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let req = container_requests(c, &format!("spec.initContainers[{i}]"))?;
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
    if let Some(overhead) = &spec.overhead {
        let o = Resources::from_list(overhead).map_err(|(name, e)| ConvertError {
            field: format!("spec.overhead.{name}"),
            message: e.to_string(),
        })?;
        sum.add(&o);
    }
    sum.pods = 1;
    Ok(sum)
}

/// QoS class from the containers' requests and limits (Kubernetes `GetPodQOS`).
fn compute_qos(spec: &core::PodSpec) -> QosClass {
    let mut any = false;
    let mut guaranteed = true;
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let res = c.resources.as_ref();
        let req = res.and_then(|r| r.requests.as_ref());
        let lim = res.and_then(|r| r.limits.as_ref());
        for name in [resources::CPU, resources::MEMORY] {
            // As `GetPodQOS`: zero quantities do not count.
            let parse = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
                q.and_then(|q| crate::quantity::Quantity::parse(&q.0).ok())
                    .filter(|q| q.milli_value() > 0)
            };
            let r = parse(req.and_then(|m| m.get(name)));
            let l = parse(lim.and_then(|m| m.get(name)));
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
    fn qos_ignores_zero_quantities() {
        let qos = |p: core::Pod| compute_qos(p.spec.as_ref().unwrap());
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
