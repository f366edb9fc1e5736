//! The kinds `run` watches, their API paths, and the decoding of one object's JSON straight into
//! the engine's compact parts (the same converters the snapshot file loader uses; no typed
//! Kubernetes object is kept).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::Deserialize;

use kube_descheduler_engine::snapshot::view::PodView;
use kube_descheduler_engine::snapshot::{Parts, SnapshotBuilder, autoscalers, nodes, workloads};

/// A kind `run` lists and watches (cluster-wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// core/v1 Node.
    Node,
    /// core/v1 Pod.
    Pod,
    /// core/v1 Namespace.
    Namespace,
    /// policy/v1 PodDisruptionBudget.
    PodDisruptionBudget,
    /// scheduling.k8s.io/v1 PriorityClass.
    PriorityClass,
    /// core/v1 PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// batch/v1 Job.
    Job,
    /// autoscaling/v2 HorizontalPodAutoscaler (only its Deployment scale target is kept).
    HorizontalPodAutoscaler,
}

impl Kind {
    /// Every watched kind.
    pub const ALL: [Kind; 11] = [
        Kind::Node,
        Kind::Pod,
        Kind::Namespace,
        Kind::PodDisruptionBudget,
        Kind::PriorityClass,
        Kind::PersistentVolumeClaim,
        Kind::ReplicaSet,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::Job,
        Kind::HorizontalPodAutoscaler,
    ];

    /// Position in [`Kind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The cluster-wide collection path.
    pub fn path(self) -> &'static str {
        match self {
            Kind::Node => "/api/v1/nodes",
            Kind::Pod => "/api/v1/pods",
            Kind::Namespace => "/api/v1/namespaces",
            Kind::PodDisruptionBudget => "/apis/policy/v1/poddisruptionbudgets",
            Kind::PriorityClass => "/apis/scheduling.k8s.io/v1/priorityclasses",
            Kind::PersistentVolumeClaim => "/api/v1/persistentvolumeclaims",
            Kind::ReplicaSet => "/apis/apps/v1/replicasets",
            Kind::Deployment => "/apis/apps/v1/deployments",
            Kind::StatefulSet => "/apis/apps/v1/statefulsets",
            Kind::Job => "/apis/batch/v1/jobs",
            Kind::HorizontalPodAutoscaler => "/apis/autoscaling/v2/horizontalpodautoscalers",
        }
    }

    /// The resource name (plural, lower case), for logs.
    pub fn resource(self) -> &'static str {
        self.path().rsplit('/').next().unwrap_or_default()
    }
}

/// `namespace/name` (`name` for cluster-scoped objects): the key of an object in the state.
pub fn key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

#[derive(Deserialize, Default)]
struct MetaOnly {
    #[serde(default)]
    metadata: NameOnly,
}

#[derive(Deserialize, Default)]
struct NameOnly {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

/// The state key of an object given as JSON (for DELETED events, which need nothing else).
pub fn key_of_json(raw: &str) -> Result<String, String> {
    let m: MetaOnly = serde_json::from_str(raw).map_err(|e| format!("metadata: {e}"))?;
    let name = m
        .metadata
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "metadata.name: missing".to_string())?;
    Ok(key(m.metadata.namespace.as_deref().unwrap_or(""), &name))
}

fn typed<'a, T: Deserialize<'a>>(raw: &'a str) -> Result<T, String> {
    serde_json::from_str::<T>(raw).map_err(|plain| {
        let de = &mut serde_json::Deserializer::from_str(raw);
        match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(_) => plain.to_string(),
            Err(e) => format!("field `{}`: {}", e.path(), e.inner()),
        }
    })
}

/// Converts one object of `kind` (its JSON text) into `conv`, which keeps the parts shared
/// between objects; take the result out with [`SnapshotBuilder::take_parts`]. `Ok(true)`: a pod
/// that sets its own `spec.terminationGracePeriodSeconds` (then an eviction does not override
/// it with the policy's grace period).
pub fn convert(kind: Kind, raw: &str, conv: &mut SnapshotBuilder) -> Result<bool, String> {
    match kind {
        Kind::Node => conv
            .add_node(&nodes::lean_node(raw)?)
            .map(|()| false)
            .map_err(|e| e.to_string()),
        Kind::Pod => {
            let mut view = PodView::default();
            if !view.fill_from_json(raw) {
                view = typed::<PodView>(raw)?;
            }
            conv.add_pod_view(&view)
                .map(|()| view.spec.sets_grace_period)
                .map_err(|e| e.to_string())
        }
        Kind::Namespace => {
            conv.add_namespace(&typed::<core::Namespace>(raw)?);
            Ok(false)
        }
        Kind::PodDisruptionBudget => {
            conv.add_pdb_owned(typed::<PodDisruptionBudget>(raw)?);
            Ok(false)
        }
        Kind::PriorityClass => {
            conv.add_priority_class(&typed::<PriorityClass>(raw)?);
            Ok(false)
        }
        Kind::PersistentVolumeClaim => {
            conv.add_pvc(&typed::<core::PersistentVolumeClaim>(raw)?);
            Ok(false)
        }
        Kind::ReplicaSet => {
            conv.add_replica_set_facts(workloads::replica_set_facts(raw)?);
            Ok(false)
        }
        Kind::Deployment => {
            conv.add_deployment_facts(workloads::deployment_facts(raw)?);
            Ok(false)
        }
        Kind::StatefulSet => {
            conv.add_stateful_set_owned(typed::<StatefulSet>(raw)?);
            Ok(false)
        }
        Kind::Job => {
            conv.add_job_owned(typed::<Job>(raw)?);
            Ok(false)
        }
        Kind::HorizontalPodAutoscaler => {
            // An autoscaler of anything but a Deployment converts to nothing.
            if let Some(t) = autoscalers::hpa_target(raw)? {
                conv.add_hpa_target(t);
            }
            Ok(false)
        }
    }
}

/// Objects of one kind converted into compact parts, ready to be put into the cluster state
/// together (one pass, under one lock).
pub struct Converted {
    /// The kind of every object.
    pub kind: Kind,
    /// Every object that converted, in the order given.
    pub parts: Parts,
    /// For each pod of `parts.pods`, in order: whether it sets its own termination grace
    /// period (see [`convert`]).
    pub own_grace: Vec<bool>,
    /// The objects that could not be converted: their keys and why.
    pub failed: Vec<(String, String)>,
    /// The keys of the autoscalers that converted (also those that converted to nothing: an
    /// autoscaler whose target changed to something not kept must not keep its old target).
    pub autoscaler_keys: Vec<String>,
}

/// Converts `raws` (objects of `kind` as JSON) with `conv` (which keeps what objects share).
/// The parts are taken out of `conv` once, for all objects: a list's pods cost no collection
/// of their own each.
pub fn convert_all<'a>(
    kind: Kind,
    raws: impl IntoIterator<Item = &'a str>,
    conv: &mut SnapshotBuilder,
) -> Converted {
    let raws = raws.into_iter();
    let mut own_grace = Vec::new();
    if kind == Kind::Pod {
        own_grace.reserve(raws.size_hint().0);
    }
    let mut failed = Vec::new();
    let mut autoscaler_keys = Vec::new();
    let key_or_unnamed = |raw: &str| key_of_json(raw).unwrap_or_else(|_| "<unnamed>".into());
    for raw in raws {
        match convert(kind, raw, conv) {
            Ok(grace) => {
                if kind == Kind::Pod {
                    own_grace.push(grace);
                } else if kind == Kind::HorizontalPodAutoscaler {
                    autoscaler_keys.push(key_or_unnamed(raw));
                }
            }
            Err(e) => failed.push((key_or_unnamed(raw), e)),
        }
    }
    Converted {
        kind,
        parts: conv.take_parts(),
        own_grace,
        failed,
        autoscaler_keys,
    }
}

/// Objects of one kind converted by a builder of their own (off the state's lock, in parallel
/// with other batches); the builder comes along so the state takes over what it shares.
pub struct ConvertedBatch {
    /// The objects.
    pub converted: Converted,
    /// The builder that converted them.
    pub conv: SnapshotBuilder,
}

impl ConvertedBatch {
    /// Converts `raws` (objects of `kind` as JSON) with a builder of their own.
    pub fn convert<'a>(kind: Kind, raws: impl IntoIterator<Item = &'a str>) -> Self {
        let mut conv = SnapshotBuilder::new();
        let converted = convert_all(kind, raws, &mut conv);
        ConvertedBatch { converted, conv }
    }
}
