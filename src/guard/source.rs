//! Where the webhook gets its facts: a small trait (watch caches + on-demand reads in the binary,
//! in-memory maps in tests and benchmarks) and the gathering of everything one decision needs.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::decision::{EvictionRequest, Facts};
use crate::workload::facts::{DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts};

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
    /// The pod as a watch cache holds it: `None` when the cache has no entry or has not synced
    /// (a miss, not a proof that the pod does not exist). The default has no cache.
    fn cached_pod(&self, _namespace: &str, _name: &str) -> Option<PodFacts> {
        None
    }
    /// The pod read from the API, or `None` when it does not exist.
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
    /// The pod came from the watch cache (it may lag); false when read from the API.
    pub pod_from_cache: bool,
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

/// How [`gather_with`] finds the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodLookup {
    /// The watch cache when it has the pod (with the eviction's uid, if one is given); a GET
    /// otherwise. The fast path.
    PreferCache,
    /// Always a GET (before acting on what the cache said).
    Fresh,
}

/// Gathers the facts for one eviction, the pod preferably from the cache. See [`gather_with`].
pub async fn gather(
    source: &dyn FactSource,
    req: &EvictionRequest,
) -> Result<Gathered, SourceError> {
    gather_with(source, req, PodLookup::PreferCache).await
}

/// Gathers the facts for one eviction. Reads: the pod, unless the cache has it and `lookup`
/// allows it (a cache miss is never taken as "pod missing"); its ReplicaSet when the cache
/// misses; the pod's claims when it could be deflected. Everything else comes from caches.
pub async fn gather_with(
    source: &dyn FactSource,
    req: &EvictionRequest,
    lookup: PodLookup,
) -> Result<Gathered, SourceError> {
    if !source.ready() {
        return Err(SourceError::NotSynced);
    }
    let cached = match lookup {
        PodLookup::PreferCache => source
            .cached_pod(&req.namespace, &req.name)
            // A uid that differs from the precondition may be a replaced pod the cache has not
            // seen yet: ask the API rather than allow on a stale mismatch.
            .filter(|p| {
                req.uid_precondition
                    .as_deref()
                    .is_none_or(|uid| uid.is_empty() || uid == p.uid)
            }),
        PodLookup::Fresh => None,
    };
    let pod_from_cache = cached.is_some();
    let pod = match cached {
        Some(p) => p,
        None => match source.pod(&req.namespace, &req.name).await? {
            Some(p) => p,
            None => return Ok(Gathered::default()),
        },
    };
    let mut out = Gathered {
        pdbs: source.pdbs(&pod.namespace),
        pod_from_cache,
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
    /// Pods by `namespace/name` (what a GET returns).
    pub pods: std::collections::HashMap<String, PodFacts>,
    /// Pods a watch cache holds, by `namespace/name` (may differ from `pods`: a lagging cache).
    pub cached_pods: std::collections::HashMap<String, PodFacts>,
    /// Number of pod reads (GETs) answered.
    pub pod_reads: std::sync::atomic::AtomicUsize,
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
    fn cached_pod(&self, namespace: &str, name: &str) -> Option<PodFacts> {
        self.cached_pods.get(&key(namespace, name)).cloned()
    }
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodFacts>, SourceError>> {
        self.pod_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::workload::facts::PodPhase;

    fn pod(uid: &str, ready: bool) -> PodFacts {
        PodFacts {
            namespace: "shop".into(),
            name: "web-1".into(),
            uid: uid.into(),
            labels: Default::default(),
            opt_out: false,
            phase: PodPhase::Running,
            terminating: false,
            ready,
            owner: None,
            pod_template_hash: None,
            claims: Vec::new(),
            ephemeral_single_node_volume: false,
        }
    }

    fn req(uid: Option<&str>) -> EvictionRequest {
        EvictionRequest {
            namespace: "shop".into(),
            name: "web-1".into(),
            uid_precondition: uid.map(str::to_owned),
            dry_run: false,
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }

    #[test]
    fn cache_hit_answers_without_a_read() {
        let mut s = MemorySource::new();
        s.cached_pods.insert("shop/web-1".into(), pod("u1", false));
        s.pods.insert("shop/web-1".into(), pod("u1", true));
        let g = block(gather(&s, &req(Some("u1")))).unwrap();
        assert!(g.pod_from_cache);
        assert_eq!(g.pod.map(|p| p.ready), Some(false), "the cached copy");
        assert_eq!(s.pod_reads.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn cache_miss_reads_the_pod_and_never_reports_it_missing() {
        let mut s = MemorySource::new();
        s.pods.insert("shop/web-1".into(), pod("u1", true));
        let g = block(gather(&s, &req(Some("u1")))).unwrap();
        assert!(!g.pod_from_cache);
        assert_eq!(g.pod.map(|p| p.uid), Some("u1".into()));
        assert_eq!(s.pod_reads.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn cached_uid_other_than_the_precondition_is_read_again() {
        // The cache still holds the pod's predecessor of the same name.
        let mut s = MemorySource::new();
        s.cached_pods.insert("shop/web-1".into(), pod("old", true));
        s.pods.insert("shop/web-1".into(), pod("new", true));
        let g = block(gather(&s, &req(Some("new")))).unwrap();
        assert!(!g.pod_from_cache);
        assert_eq!(g.pod.map(|p| p.uid), Some("new".into()));
        assert_eq!(s.pod_reads.load(Ordering::Relaxed), 1);
        // Without a precondition the cached pod is used.
        let g = block(gather(&s, &req(None))).unwrap();
        assert!(g.pod_from_cache);
    }

    #[test]
    fn fresh_lookup_ignores_the_cache() {
        let mut s = MemorySource::new();
        s.cached_pods.insert("shop/web-1".into(), pod("u1", true));
        // Gone from the API: the cache is stale.
        let g = block(gather_with(&s, &req(Some("u1")), PodLookup::Fresh)).unwrap();
        assert!(g.pod.is_none() && !g.pod_from_cache);
        assert_eq!(s.pod_reads.load(Ordering::Relaxed), 1);
        // A failing read is an error, not "missing".
        s.pod_error = Some("connection refused".into());
        let e = block(gather_with(&s, &req(Some("u1")), PodLookup::Fresh)).unwrap_err();
        assert_eq!(e, SourceError::Api("connection refused".into()));
    }

    #[test]
    fn unsynced_caches_are_an_error() {
        let mut s = MemorySource::new();
        s.synced = false;
        s.cached_pods.insert("shop/web-1".into(), pod("u1", true));
        assert_eq!(
            block(gather(&s, &req(None))).unwrap_err(),
            SourceError::NotSynced
        );
    }
}
