//! Where the webhook gets its facts: a small trait (watch caches + on-demand reads in the binary,
//! in-memory maps in tests and benchmarks) and the gathering of everything one decision needs.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::decision::{EvictionRequest, Facts};
use super::facts::{DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts};

/// A lookup that could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The watch caches have not finished their initial list.
    #[error("caches are not synced yet")]
    NotSynced,
    /// An API read failed.
    #[error("{0}")]
    Api(String),
}

/// Read access to the cluster state the guard needs.
pub trait FactSource: Send + Sync + 'static {
    /// True once the caches hold a complete initial list.
    fn ready(&self) -> bool;
    /// The pod, or `None` when it does not exist.
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodFacts>, SourceError>>;
    /// A ReplicaSet (cache, falling back to a read).
    fn replica_set<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<ReplicaSetFacts>>, SourceError>>;
    /// A Deployment from the cache.
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentFacts>>;
    /// The PodDisruptionBudgets of a namespace.
    fn pdbs(&self, namespace: &str) -> Vec<Arc<PdbFacts>>;
    /// A PersistentVolumeClaim (read on demand: only deflection candidates with claims need it).
    fn pvc<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PvcFacts>, SourceError>>;
}

/// The facts gathered for one eviction (owned; borrow them with [`Gathered::facts`]).
#[derive(Debug, Default)]
pub struct Gathered {
    /// The pod.
    pub pod: Option<PodFacts>,
    /// Its ReplicaSet.
    pub replica_set: Option<Arc<ReplicaSetFacts>>,
    /// The ReplicaSet's Deployment.
    pub deployment: Option<Arc<DeploymentFacts>>,
    /// Budgets of the namespace.
    pub pdbs: Vec<Arc<PdbFacts>>,
    /// Claims the pod mounts (only looked up for deflection candidates).
    pub pvcs: Vec<PvcFacts>,
}

impl Gathered {
    /// Borrows the gathered facts for [`super::decision::decide`]; `pdbs` is scratch space.
    pub fn facts<'a>(
        &'a self,
        pdbs: &'a mut Vec<&'a PdbFacts>,
        first_denied_at: Option<jiff::Timestamp>,
    ) -> Facts<'a> {
        pdbs.clear();
        pdbs.extend(self.pdbs.iter().map(|p| p.as_ref()));
        Facts {
            pod: self.pod.as_ref(),
            replica_set: self.replica_set.as_deref(),
            deployment: self.deployment.as_deref(),
            pdbs,
            pvcs: &self.pvcs,
            first_denied_at,
        }
    }
}

/// Gathers the facts for one eviction. Reads: the pod; its ReplicaSet when the cache misses; the
/// pod's claims when it could be deflected. Everything else comes from caches.
pub async fn gather(
    source: &dyn FactSource,
    req: &EvictionRequest,
) -> Result<Gathered, SourceError> {
    if !source.ready() {
        return Err(SourceError::NotSynced);
    }
    let Some(pod) = source.pod(&req.namespace, &req.name).await? else {
        return Ok(Gathered::default());
    };
    let mut out = Gathered {
        pdbs: source.pdbs(&pod.namespace),
        ..Gathered::default()
    };
    if let Some(owner) = pod.owner.as_ref().filter(|o| o.kind == "ReplicaSet") {
        out.replica_set = source.replica_set(&pod.namespace, &owner.name).await?;
    }
    if let Some(rs) = &out.replica_set
        && let Some(owner) = rs.owner.as_ref().filter(|o| o.kind == "Deployment")
    {
        out.deployment = source.deployment(&rs.namespace, &owner.name);
    }
    if out.deployment.as_ref().is_some_and(|d| d.replicas == 1) {
        for claim in &pod.claims {
            // A claim we cannot read stays unknown, which rules deflection out.
            if let Ok(Some(pvc)) = source.pvc(&pod.namespace, claim).await {
                out.pvcs.push(pvc);
            }
        }
    }
    out.pod = Some(pod);
    Ok(out)
}

/// An in-memory [`FactSource`] for tests, benchmarks and offline use.
#[derive(Debug, Default)]
pub struct MemorySource {
    /// Reported by [`FactSource::ready`].
    pub synced: bool,
    /// Pods by `namespace/name`.
    pub pods: std::collections::HashMap<String, PodFacts>,
    /// ReplicaSets by `namespace/name`.
    pub replica_sets: std::collections::HashMap<String, Arc<ReplicaSetFacts>>,
    /// Deployments by `namespace/name`.
    pub deployments: std::collections::HashMap<String, Arc<DeploymentFacts>>,
    /// Budgets.
    pub pdbs: Vec<Arc<PdbFacts>>,
    /// Claims by `namespace/name`.
    pub pvcs: std::collections::HashMap<String, PvcFacts>,
    /// When set, pod reads fail with this message.
    pub pod_error: Option<String>,
}

impl MemorySource {
    /// An empty, synced source.
    pub fn new() -> Self {
        MemorySource {
            synced: true,
            ..MemorySource::default()
        }
    }
}

fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

impl FactSource for MemorySource {
    fn ready(&self) -> bool {
        self.synced
    }
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodFacts>, SourceError>> {
        let r = match &self.pod_error {
            Some(e) => Err(SourceError::Api(e.clone())),
            None => Ok(self.pods.get(&key(namespace, name)).cloned()),
        };
        Box::pin(std::future::ready(r))
    }
    fn replica_set<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<ReplicaSetFacts>>, SourceError>> {
        Box::pin(std::future::ready(Ok(self
            .replica_sets
            .get(&key(namespace, name))
            .cloned())))
    }
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentFacts>> {
        self.deployments.get(&key(namespace, name)).cloned()
    }
    fn pdbs(&self, namespace: &str) -> Vec<Arc<PdbFacts>> {
        self.pdbs
            .iter()
            .filter(|p| p.namespace == namespace)
            .cloned()
            .collect()
    }
    fn pvc<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PvcFacts>, SourceError>> {
        Box::pin(std::future::ready(Ok(self
            .pvcs
            .get(&key(namespace, name))
            .cloned())))
    }
}
