//! The engine's lean object model. Converted from Kubernetes objects by [`super::SnapshotBuilder`];
//! holds only what plugins, the evictor and the guard read, so 150,000 pods stay small.

use std::collections::BTreeMap;
use std::sync::Arc;

use compact_str::CompactString;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Affinity, Taint, Toleration, TopologySpreadConstraint};

use super::resources::Resources;

/// Index of a node in [`super::Snapshot::nodes`].
pub type NodeId = u32;
/// Index of a pod in [`super::Snapshot::pods`].
pub type PodId = u32;

/// A node as the engine sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `status.allocatable` (falls back to `status.capacity`).
    pub allocatable: Resources,
}

pub use crate::workload::facts::PodPhase;

/// Quality-of-service class; the order is eviction preference (BestEffort first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    /// No requests or limits.
    BestEffort,
    /// Some requests or limits.
    Burstable,
    /// Requests equal limits for cpu and memory in every container.
    Guaranteed,
}

/// An owner reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`, e.g. `ReplicaSet`.
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
    /// `controller: true`.
    pub controller: bool,
}

/// A pod condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `type`, e.g. `Ready`.
    pub type_: CompactString,
    /// `status`: `True`, `False` or `Unknown`.
    pub status: CompactString,
    /// `reason`.
    pub reason: Option<CompactString>,
    /// `lastTransitionTime`.
    pub last_transition: Option<Timestamp>,
}

/// The state of one container, reduced to what plugins read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerState {
    /// Container name.
    pub name: CompactString,
    /// `restartCount`.
    pub restart_count: i32,
    /// `ready`.
    pub ready: bool,
    /// `state.waiting.reason`.
    pub waiting_reason: Option<CompactString>,
    /// `state.terminated.reason`.
    pub terminated_reason: Option<CompactString>,
    /// `state.terminated.exitCode`.
    pub terminated_exit_code: Option<i32>,
    /// `lastState.terminated.exitCode`.
    pub last_terminated_exit_code: Option<i32>,
}

/// A pod volume, reduced to what the evictor and guard check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Volume {
    /// `hostPath`.
    HostPath,
    /// `emptyDir`.
    EmptyDir,
    /// `persistentVolumeClaim.claimName`.
    Pvc(String),
    /// A generic ephemeral volume (creates a PVC named `<pod>-<volume>`).
    Ephemeral(String),
    /// Anything else (configMap, secret, projected, ...).
    Other,
}

/// A pod as the engine sees it.
///
/// `repr(C)`, with the fields every plugin reads for every pod first (phase, node, priority,
/// namespace, labels, owners, images, then the evictor's uid, annotations and deletion
/// timestamp): a pass over 150,000 pods then touches one or two cache lines per pod instead of
/// four or five spread over the whole struct (the compiler's own order put `phase` last).
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Pod {
    /// `status.phase`.
    pub phase: PodPhase,
    /// QoS class (`status.qosClass`, else computed).
    pub qos: QosClass,
    /// `spec.resourceClaims` is non-empty (DRA).
    pub has_resource_claims: bool,
    /// The node in the snapshot, if `node_name` names a known node.
    pub node: Option<NodeId>,
    /// `spec.priority`.
    pub priority: Option<i32>,
    /// `metadata.namespace` (interned).
    pub namespace: Arc<str>,
    /// `metadata.labels` (shared between pods of one owner when equal).
    pub labels: Arc<BTreeMap<String, String>>,
    /// `metadata.ownerReferences` (shared between pods of one owner).
    pub owners: Arc<[OwnerRef]>,
    /// Container images, in `spec.containers` order (shared between pods of one owner).
    pub images: Arc<[String]>,
    /// `metadata.uid` (empty when absent: such a pod is never evicted).
    pub uid: String,
    /// The annotations the engine reads (descheduler, mirror/static, ours); others are dropped.
    pub annotations: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` (set: the pod is terminating).
    pub deletion_timestamp: Option<Timestamp>,
    /// `spec.tolerations` (shared between pods of one owner when equal).
    pub tolerations: Arc<[Toleration]>,
    /// `spec.nodeSelector` (shared between pods of one owner when equal).
    pub node_selector: Arc<BTreeMap<String, String>>,
    /// `status.containerStatuses` (shared between pods of one owner when equal).
    pub container_states: Arc<[ContainerState]>,
    /// `spec.topologySpreadConstraints` (shared between pods of one owner when equal).
    pub topology_spread_constraints: Arc<[TopologySpreadConstraint]>,
    /// `spec.affinity` (shared between pods of one owner when equal).
    pub affinity: Option<Arc<Affinity>>,
    /// `spec.volumes`, reduced.
    pub volumes: Box<[Volume]>,
    /// Effective requests from the spec: init/sidecar rules, pod-level resources, overhead (shared
    /// between pods of one owner when computed from the same fields). What the descheduler's
    /// utilization plugins count (as upstream); kube-scheduler's (resize-aware) is
    /// [`Pod::fit_requests`].
    pub requests: Arc<Resources>,
    /// `status.conditions` (shared between pods of one owner when equal).
    pub conditions: Arc<[Condition]>,
    /// `status.startTime`.
    pub start_time: Option<Timestamp>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<Timestamp>,
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeName`.
    pub node_name: Option<Box<str>>,
    /// `spec.priorityClassName` (an `Arc` rather than a `String`: with the boxed node name and
    /// volumes and the shared requests, it keeps `Arc<Pod>` within 448 bytes, an allocator size
    /// class below 512).
    pub priority_class_name: Option<Arc<str>>,
    /// `status.reason` (interned: a few values such as `Evicted` recur).
    pub reason: Option<Arc<str>>,
    /// `status.initContainerStatuses` (shared between pods of one owner when equal).
    pub init_container_states: Arc<[ContainerState]>,
    /// `status.ephemeralContainerStatuses` (shared between pods of one owner when equal).
    pub ephemeral_container_states: Arc<[ContainerState]>,
    /// The name of the first local-storage (hostPath or emptyDir) volume, for explanations
    /// (shared between pods of one owner when equal; `None` without one or when it has no name).
    pub local_storage_volume: Option<Arc<str>>,
    /// What kube-scheduler reads that most pods do not set (a `schedulerName` other than
    /// `default-scheduler`, host ports); `None` for the usual pod, so it costs one pointer and no
    /// allocation (shared between pods of one owner when equal).
    pub scheduling: Option<Arc<SchedulingExtras>>,
}

/// The name of kube-scheduler's default profile: a pod without `spec.schedulerName` gets it.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// A host port a container binds on its node (`spec.containers[].ports[]` with `hostPort` > 0, and
/// the same of restartable init containers), as kube-scheduler's NodePorts plugin reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// `hostIP`, `0.0.0.0` when empty (kube-scheduler's `DefaultBindAllHostIP`).
    pub host_ip: CompactString,
    /// `protocol`, `TCP` when empty.
    pub protocol: CompactString,
    /// `hostPort` (> 0).
    pub port: i32,
}

/// The rare scheduling facts of a pod, kept apart so that the usual pod pays one null pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulingExtras {
    /// `spec.schedulerName` when set and not `default-scheduler` (interned).
    pub scheduler_name: Option<Arc<str>>,
    /// Host ports, in container order (restartable init containers first, as kube-scheduler's
    /// `GetHostPorts` lists them).
    pub host_ports: Box<[HostPort]>,
    /// kube-scheduler's requests when an in-place resize makes them differ from
    /// [`Pod::requests`]: per resource the largest of spec, allocated and actuated (`status`), see
    /// [`crate::snapshot::builder::pod_requests_of`].
    pub resized_requests: Option<Arc<Resources>>,
}

impl SchedulingExtras {
    /// Whether there is nothing to keep (the pod then carries `None`).
    pub fn is_empty(&self) -> bool {
        self.scheduler_name.is_none()
            && self.host_ports.is_empty()
            && self.resized_requests.is_none()
    }
}

/// A HorizontalPodAutoscaler reduced to the one fact the guard's rule B reads: the Deployment it
/// scales (`spec.scaleTargetRef`, the same in autoscaling/v1 and v2). Autoscalers of other kinds
/// are not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HpaTarget {
    /// `metadata.namespace` (the Deployment's namespace too: a scale target is namespace-local).
    pub namespace: String,
    /// `metadata.name` of the autoscaler.
    pub name: String,
    /// `spec.scaleTargetRef.name`: the Deployment.
    pub deployment: String,
}

/// Annotation that marks a pod evictable regardless of other checks (upstream).
pub const ANNOTATION_EVICT: &str = "descheduler.alpha.kubernetes.io/evict";
/// Annotation that asks not to be evicted (upstream `noEvictionPolicy`).
pub const ANNOTATION_PREFER_NO_EVICTION: &str =
    "descheduler.alpha.kubernetes.io/prefer-no-eviction";
/// Annotation set on mirror pods by the kubelet.
pub const ANNOTATION_MIRROR: &str = "kubernetes.io/config.mirror";
/// Annotation giving a pod's config source (static pods: not `api`).
pub const ANNOTATION_CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// Prefix of all kube-descheduler's own annotations.
pub const OUR_ANNOTATION_PREFIX: &str = "kube-descheduler.io/";

/// Whether an annotation is kept in the lean model.
pub fn keep_annotation(key: &str) -> bool {
    key.starts_with("descheduler.alpha.kubernetes.io/")
        || key.starts_with(OUR_ANNOTATION_PREFIX)
        || key == ANNOTATION_MIRROR
        || key == ANNOTATION_CONFIG_SOURCE
}

impl Pod {
    /// The requests kube-scheduler counts for the pod (resize-aware: see
    /// [`SchedulingExtras::resized_requests`]); NodeResourcesFit and capacity checks read these.
    pub fn fit_requests(&self) -> &Arc<Resources> {
        self.resized_requests().unwrap_or(&self.requests)
    }

    /// kube-scheduler's requests when an in-place resize makes them differ from
    /// [`Pod::requests`] (`None` for the usual pod).
    pub fn resized_requests(&self) -> Option<&Arc<Resources>> {
        self.scheduling.as_ref()?.resized_requests.as_ref()
    }

    /// Whether the pod has ended (Succeeded or Failed): it no longer holds resources on its
    /// node (upstream `ListPodsOnANode` leaves such pods out).
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The controlling owner reference, if any.
    pub fn controller(&self) -> Option<&OwnerRef> {
        self.owners.iter().find(|o| o.controller)
    }

    /// Terminating: `deletionTimestamp` is set.
    pub fn is_terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// Mirror pod (created by the kubelet for a static pod).
    pub fn is_mirror(&self) -> bool {
        self.annotations.contains_key(ANNOTATION_MIRROR)
    }

    /// Static pod: config source annotation present and not `api`.
    pub fn is_static(&self) -> bool {
        self.annotations
            .get(ANNOTATION_CONFIG_SOURCE)
            .is_some_and(|s| s != "api")
    }

    /// Owned by a DaemonSet.
    pub fn is_daemonset_pod(&self) -> bool {
        self.owners.iter().any(|o| o.kind == "DaemonSet")
    }

    /// `spec.schedulerName` (`default-scheduler` when unset).
    pub fn scheduler_name(&self) -> &str {
        self.scheduling
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(DEFAULT_SCHEDULER_NAME)
    }

    /// The host ports the pod binds (empty for most pods).
    pub fn host_ports(&self) -> &[HostPort] {
        self.scheduling.as_ref().map_or(&[], |s| &s.host_ports)
    }

    /// Has a hostPath or emptyDir volume (upstream's "local storage").
    pub fn has_local_storage(&self) -> bool {
        self.volumes
            .iter()
            .any(|v| matches!(v, Volume::HostPath | Volume::EmptyDir))
    }

    /// The first local-storage volume as people read it: `emptyDir volume `cache`` (without the
    /// name when the volume has none), or `None` without local storage.
    pub fn local_storage_description(&self) -> Option<String> {
        let kind = match self
            .volumes
            .iter()
            .find(|v| matches!(v, Volume::HostPath | Volume::EmptyDir))?
        {
            Volume::HostPath => "hostPath",
            _ => "emptyDir",
        };
        Some(match &self.local_storage_volume {
            Some(name) => format!("{kind} volume `{name}`"),
            None => format!("{kind} volume"),
        })
    }

    /// Names of PVCs the pod uses (claims and generic ephemeral volumes).
    pub fn pvc_names(&self) -> impl Iterator<Item = String> + '_ {
        self.volumes.iter().filter_map(|v| match v {
            Volume::Pvc(c) => Some(c.clone()),
            Volume::Ephemeral(vol) => Some(format!("{}-{}", self.name, vol)),
            _ => None,
        })
    }

    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// The `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.condition("Ready").is_some_and(|c| c.status == "True")
    }

    /// The pod's priority (`spec.priority`, 0 when unset).
    pub fn priority_value(&self) -> i32 {
        self.priority.unwrap_or(0)
    }

    /// Asks not to be evicted (`prefer-no-eviction` annotation).
    pub fn prefers_no_eviction(&self) -> bool {
        self.annotations.contains_key(ANNOTATION_PREFER_NO_EVICTION)
    }

    /// Total restarts of containers (and init containers when asked).
    pub fn restarts(&self, including_init: bool) -> i64 {
        let sum = |v: &[ContainerState]| v.iter().map(|c| c.restart_count as i64).sum::<i64>();
        sum(&self.container_states)
            + if including_init {
                sum(&self.init_container_states)
            } else {
                0
            }
    }
}

#[cfg(test)]
mod size_tests {
    use super::Pod;

    #[test]
    fn a_shared_pod_fits_the_448_byte_size_class() {
        // `Arc<Pod>` is the pod count's largest allocation: its two counters and the pod must
        // fit jemalloc's 448-byte class, or every pod takes 512 bytes (9.6 MB more at 150,000).
        let arc_inner = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Pod>();
        assert!(arc_inner <= 448, "Arc<Pod> allocates {arc_inner} bytes");
    }
}
