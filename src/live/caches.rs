//! Watch caches (kube-runtime reflectors with backoff) for everything the engine reads, stripped of
//! fields it never reads, and the per-cycle [`Snapshot`] built from them (no per-node LISTs).

use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, Namespace, Node, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::snapshot::model::keep_annotation;
use crate::snapshot::{Snapshot, SnapshotBuilder};

/// The reflector stores `run` reads each cycle.
#[derive(Clone)]
pub struct Caches {
    /// Nodes.
    pub nodes: Store<Node>,
    /// Pods.
    pub pods: Store<Pod>,
    /// Namespaces.
    pub namespaces: Store<Namespace>,
    /// PodDisruptionBudgets.
    pub pdbs: Store<PodDisruptionBudget>,
    /// PriorityClasses.
    pub priority_classes: Store<PriorityClass>,
    /// PersistentVolumeClaims.
    pub pvcs: Store<PersistentVolumeClaim>,
    /// ReplicaSets.
    pub replica_sets: Store<ReplicaSet>,
    /// Deployments.
    pub deployments: Store<Deployment>,
    /// StatefulSets.
    pub stateful_sets: Store<StatefulSet>,
    /// Jobs.
    pub jobs: Store<Job>,
}

/// The reflector tasks; aborted when dropped.
pub struct CacheTasks(Vec<JoinHandle<()>>);

impl Drop for CacheTasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

fn spawn<K>(client: &Client, strip: fn(&mut K), tasks: &mut Vec<JoinHandle<()>>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let stream = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(strip)
        .reflect(writer);
    tasks.push(tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            if let Err(e) = ev {
                tracing::warn!(kind = %kind, error = %e, "watch failed; retrying with backoff");
            }
        }
    }));
    reader
}

impl Caches {
    /// Starts one list+watch per kind (cluster-wide: `list`/`watch` on nodes, pods, namespaces,
    /// poddisruptionbudgets, priorityclasses, persistentvolumeclaims, replicasets, deployments,
    /// statefulsets, jobs).
    pub fn start(client: &Client) -> (Caches, CacheTasks) {
        let mut t = Vec::new();
        let caches = Caches {
            nodes: spawn(client, strip_node, &mut t),
            pods: spawn(client, strip_pod, &mut t),
            namespaces: spawn(client, strip_meta::<Namespace>, &mut t),
            pdbs: spawn(client, strip_meta::<PodDisruptionBudget>, &mut t),
            priority_classes: spawn(client, strip_meta::<PriorityClass>, &mut t),
            pvcs: spawn(client, strip_pvc, &mut t),
            replica_sets: spawn(client, strip_replica_set, &mut t),
            deployments: spawn(client, strip_deployment, &mut t),
            stateful_sets: spawn(client, strip_stateful_set, &mut t),
            jobs: spawn(client, strip_job, &mut t),
        };
        (caches, CacheTasks(t))
    }

    /// Waits until every store has completed its initial list.
    pub async fn wait_synced(&self) -> Result<(), reflector::store::WriterDropped> {
        self.nodes.wait_until_ready().await?;
        self.pods.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await?;
        self.pdbs.wait_until_ready().await?;
        self.priority_classes.wait_until_ready().await?;
        self.pvcs.wait_until_ready().await?;
        self.replica_sets.wait_until_ready().await?;
        self.deployments.wait_until_ready().await?;
        self.stateful_sets.wait_until_ready().await?;
        self.jobs.wait_until_ready().await?;
        Ok(())
    }

    /// Builds the engine's snapshot from the current cache contents (CPU work: call it from a
    /// blocking thread). Objects that cannot be converted are skipped with a warning.
    pub fn snapshot(&self) -> Snapshot {
        let mut b = SnapshotBuilder::new();
        for n in self.nodes.state() {
            if let Err(e) = b.add_node(&n) {
                b.warn(format!(
                    "node {}: {e}",
                    n.metadata.name.as_deref().unwrap_or("?")
                ));
            }
        }
        for p in self.pods.state() {
            if let Err(e) = b.add_pod(&p) {
                b.warn(format!(
                    "pod {}/{}: {e}",
                    p.metadata.namespace.as_deref().unwrap_or("?"),
                    p.metadata.name.as_deref().unwrap_or("?")
                ));
            }
        }
        for x in self.namespaces.state() {
            b.add_namespace(&x);
        }
        for x in self.priority_classes.state() {
            b.add_priority_class(&x);
        }
        for x in self.pdbs.state() {
            b.add_pdb(&x);
        }
        for x in self.replica_sets.state() {
            b.add_replica_set(&x);
        }
        for x in self.deployments.state() {
            b.add_deployment(&x);
        }
        for x in self.stateful_sets.state() {
            b.add_stateful_set(&x);
        }
        for x in self.jobs.state() {
            b.add_job(&x);
        }
        for x in self.pvcs.state() {
            b.add_pvc(&x);
        }
        b.build()
    }
}

fn strip_meta<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

/// Nodes: drop image lists (the largest part of a node), volumes, daemon endpoints and annotations.
pub fn strip_node(n: &mut Node) {
    n.metadata.managed_fields = None;
    n.metadata.annotations = None;
    if let Some(s) = n.status.as_mut() {
        s.images = None;
        s.volumes_attached = None;
        s.volumes_in_use = None;
        s.daemon_endpoints = None;
        s.node_info = None;
        s.addresses = None;
        s.config = None;
        s.features = None;
        s.runtime_handlers = None;
        s.declared_features = None;
    }
}

fn lean_container(c: &Container) -> Container {
    Container {
        name: c.name.clone(),
        image: c.image.clone(),
        resources: c.resources.clone(),
        restart_policy: c.restart_policy.clone(),
        ..Default::default()
    }
}

/// Pods: keep only the annotations the engine reads; containers keep name, image, resources and
/// restart policy; volumes keep the kinds the evictor and guard check.
pub fn strip_pod(p: &mut Pod) {
    p.metadata.managed_fields = None;
    if let Some(a) = p.metadata.annotations.as_mut() {
        a.retain(|k, _| keep_annotation(k));
    }
    if let Some(spec) = p.spec.as_mut() {
        spec.containers = spec.containers.iter().map(lean_container).collect();
        if let Some(ic) = spec.init_containers.as_mut() {
            *ic = ic.iter().map(lean_container).collect();
        }
        spec.ephemeral_containers = None;
        if let Some(vs) = spec.volumes.as_mut() {
            for v in vs.iter_mut() {
                if v.host_path.is_none()
                    && v.empty_dir.is_none()
                    && v.persistent_volume_claim.is_none()
                    && v.ephemeral.is_none()
                {
                    *v = Volume {
                        name: std::mem::take(&mut v.name),
                        ..Default::default()
                    };
                }
            }
        }
    }
    if let Some(s) = p.status.as_mut() {
        s.message = None;
        s.pod_ips = None;
        s.host_ips = None;
        s.resource_claim_statuses = None;
        for cs in [
            s.container_statuses.as_mut(),
            s.init_container_statuses.as_mut(),
            s.ephemeral_container_statuses.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            for c in cs.iter_mut() {
                c.image_id = String::new();
                c.container_id = None;
                c.volume_mounts = None;
                c.allocated_resources = None;
                c.resources = None;
                c.user = None;
            }
        }
    }
}

fn strip_pvc(p: &mut PersistentVolumeClaim) {
    p.metadata.managed_fields = None;
    p.metadata.annotations = None;
    p.status = None;
}

fn strip_replica_set(o: &mut ReplicaSet) {
    o.metadata.managed_fields = None;
    if let Some(t) = o.spec.template.as_mut() {
        t.spec = None;
    }
}

fn strip_deployment(o: &mut Deployment) {
    o.metadata.managed_fields = None;
    o.spec.template.spec = None;
}

fn strip_stateful_set(o: &mut StatefulSet) {
    o.metadata.managed_fields = None;
    o.spec.template.spec = None;
    o.spec.volume_claim_templates = None;
}

fn strip_job(o: &mut Job) {
    o.metadata.managed_fields = None;
    if let Some(s) = o.spec.as_mut() {
        s.template.spec = None;
    }
}
