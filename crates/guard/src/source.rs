//! Where the webhook gets its facts: a small trait (watch caches + on-demand reads in the binary,
//! in-memory maps in tests and benchmarks) and the gathering of everything one decision needs.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::decision::{EvictionRequest, Facts};
use super::replicas::{ReplicaCensus, Sibling, census};
use kube_descheduler_engine::workload::facts::{
    DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts,
};

/// Where one pod of a Deployment runs, as the pod cache knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Pod name.
    pub name: String,
    /// Condition Ready is True.
    pub ready: bool,
    /// Being deleted.
    pub terminating: bool,
    /// `spec.nodeName`, when scheduled.
    pub node: Option<String>,
}

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
    /// The pods of a Deployment (of all its ReplicaSets) with their nodes, from the pod cache;
    /// `None` when the cache cannot say (not synced, or no cache).
    fn deployment_pods(&self, _namespace: &str, _deployment: &str) -> Option<Vec<Placement>> {
        None
    }
    /// Whether a node is cordoned (`spec.unschedulable`): the node cache, a GET on a miss;
    /// `None` when the node does not exist. The default knows no nodes.
    fn node_unschedulable<'a>(
        &'a self,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, SourceError>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    /// The [`super::annotations::PDB_SURGE`] annotation of a namespace (read on demand: only
    /// rule B needs it).
    fn namespace_pdb_surge<'a>(
        &'a self,
        _namespace: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, SourceError>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    /// `namespace/name` of a HorizontalPodAutoscaler whose scale target is the Deployment (read
    /// on demand: only rule B needs it).
    fn hpa_for<'a>(
        &'a self,
        _namespace: &'a str,
        _deployment: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, SourceError>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    /// Every Deployment that carries our surge record (the restore reconciler's work list).
    fn surged_deployments(&self) -> Vec<Arc<DeploymentFacts>> {
        Vec::new()
    }
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
    /// The Deployment's pods and whether their nodes are cordoned (only gathered when rule A
    /// or B may apply); `being_evicted` is filled in by the caller, who remembers evictions.
    pub siblings: Option<Vec<Sibling>>,
    /// The namespace's rule B opt-in (only read when rule B may apply).
    pub namespace_pdb_surge: Option<bool>,
    /// The autoscaler scaling the Deployment (only read when rule B may apply).
    pub hpa: Option<String>,
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
            census: self.census(),
            namespace_pdb_surge: self.namespace_pdb_surge,
            hpa: self.hpa.as_deref(),
        }
    }

    /// The census of the Deployment's replicas, when its pods were gathered.
    pub fn census(&self) -> Option<ReplicaCensus> {
        let pod = self.pod.as_ref()?;
        self.siblings.as_ref().map(|s| census(&pod.name, s))
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
    gather_for(source, req, lookup, false).await
}

/// [`gather_with`], and with `pdb_surge` (the webhook runs rule B) the namespace opt-in and
/// autoscaler of a Deployment whose budget blocks the eviction.
pub async fn gather_for(
    source: &dyn FactSource,
    req: &EvictionRequest,
    lookup: PodLookup,
    pdb_surge: bool,
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
    let blocked = out
        .pdbs
        .iter()
        .any(|p| p.disruptions_allowed <= 0 && p.matches(&pod));
    if let Some(d) = out.deployment.clone() {
        let rule_a = matches!(d.strategy.resolve(d.replicas), Some((s, 0)) if s >= 1);
        let rule_b = pdb_surge && blocked && d.pdb_surge != Some(false);
        if rule_a || rule_b {
            out.siblings = siblings(source, &d).await;
        }
        if rule_a {
            for claim in &pod.claims {
                // A claim we cannot read stays unknown, which rules deflection out.
                if let Ok(Some(pvc)) = source.pvc(&pod.namespace, claim).await {
                    out.pvcs.push(pvc);
                }
            }
        }
        if rule_b {
            // Unreadable: not opted in / no autoscaler known — but an autoscaler we cannot rule
            // out must not be fought, so a failed read counts as one.
            out.namespace_pdb_surge = match d.pdb_surge {
                Some(_) => None,
                None => source
                    .namespace_pdb_surge(&d.namespace)
                    .await
                    .unwrap_or(None),
            };
            out.hpa = match source.hpa_for(&d.namespace, &d.name).await {
                Ok(h) => h,
                Err(e) => Some(format!("(unknown: {e})")),
            };
        }
    }
    out.pod = Some(pod);
    Ok(out)
}

/// The Deployment's pods with their nodes' schedulability; `None` when the pod cache cannot
/// say. A node that cannot be read counts as schedulable (its pods stay: the safe side).
async fn siblings(source: &dyn FactSource, d: &DeploymentFacts) -> Option<Vec<Sibling>> {
    let pods = source.deployment_pods(&d.namespace, &d.name)?;
    let mut nodes: std::collections::HashMap<String, Option<bool>> = Default::default();
    let mut out = Vec::with_capacity(pods.len());
    for p in pods {
        let node_unschedulable = match &p.node {
            None => None,
            Some(n) => match nodes.get(n) {
                Some(v) => *v,
                None => {
                    let v = source.node_unschedulable(n).await.ok().flatten();
                    nodes.insert(n.clone(), v);
                    v
                }
            },
        };
        out.push(Sibling {
            name: p.name,
            ready: p.ready,
            terminating: p.terminating,
            node_unschedulable,
            being_evicted: false,
        });
    }
    Some(out)
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
    /// Pods of each Deployment (by `namespace/name`), as a pod cache would list them; a
    /// Deployment not listed has no census.
    pub placements: std::collections::HashMap<String, Vec<Placement>>,
    /// Nodes and whether they are cordoned.
    pub nodes: std::collections::HashMap<String, bool>,
    /// Namespaces' rule B opt-in annotations.
    pub namespace_opt_in: std::collections::HashMap<String, bool>,
    /// Autoscalers by the `namespace/name` of the Deployment they scale.
    pub hpas: std::collections::HashMap<String, String>,
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

/// An answer the memory source has at once.
fn answered<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, Result<T, SourceError>> {
    Box::pin(std::future::ready(Ok(value)))
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
        answered(self.replica_sets.get(&key(namespace, name)).cloned())
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
        answered(self.pvcs.get(&key(namespace, name)).cloned())
    }
    fn deployment_pods(&self, namespace: &str, deployment: &str) -> Option<Vec<Placement>> {
        self.placements.get(&key(namespace, deployment)).cloned()
    }
    fn node_unschedulable<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, SourceError>> {
        answered(self.nodes.get(name).copied())
    }
    fn namespace_pdb_surge<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, SourceError>> {
        answered(self.namespace_opt_in.get(namespace).copied())
    }
    fn hpa_for<'a>(
        &'a self,
        namespace: &'a str,
        deployment: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, SourceError>> {
        answered(self.hpas.get(&key(namespace, deployment)).cloned())
    }
    fn surged_deployments(&self) -> Vec<Arc<DeploymentFacts>> {
        self.deployments
            .values()
            .filter(|d| d.surge.is_some())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use kube_descheduler_engine::workload::facts::PodPhase;

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

    #[test]
    fn siblings_are_gathered_with_their_nodes_for_rule_a() {
        use kube_descheduler_engine::workload::facts::{IntOrPercent, OwnerFacts, Strategy};
        let mut s = MemorySource::new();
        let mut p = pod("u1", true);
        p.owner = Some(OwnerFacts {
            kind: "ReplicaSet".into(),
            name: "web-1a".into(),
            uid: String::new(),
        });
        s.pods.insert("shop/web-1".into(), p);
        s.replica_sets.insert(
            "shop/web-1a".into(),
            Arc::new(ReplicaSetFacts {
                namespace: "shop".into(),
                name: "web-1a".into(),
                uid: String::new(),
                owner: Some(OwnerFacts {
                    kind: "Deployment".into(),
                    name: "web".into(),
                    uid: String::new(),
                }),
                revision: None,
                pod_template_hash: None,
                desired: 3,
                replicas: 3,
                ready: 3,
            }),
        );
        let d = kube_descheduler_engine::workload::facts::DeploymentFacts::from_deployment(
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"replicas": 3, "selector": {}, "template": {}}
            }))
            .unwrap(),
        );
        assert_eq!(
            d.strategy,
            Strategy::RollingUpdate {
                max_surge: IntOrPercent::Percent(25),
                max_unavailable: IntOrPercent::Percent(25)
            }
        );
        s.deployments.insert("shop/web".into(), Arc::new(d));
        let placed = |name: &str, node: &str| Placement {
            name: name.into(),
            ready: true,
            terminating: false,
            node: Some(node.into()),
        };
        s.placements.insert(
            "shop/web".into(),
            vec![
                placed("web-1", "a"),
                placed("web-2", "a"),
                placed("web-3", "b"),
            ],
        );
        s.nodes.insert("a".into(), true);
        s.nodes.insert("b".into(), false);
        let g = block(gather(&s, &req(None))).unwrap();
        let sib = g
            .siblings
            .clone()
            .expect("gathered for a surge-able Deployment");
        let cordoned: Vec<Option<bool>> = sib.iter().map(|x| x.node_unschedulable).collect();
        assert_eq!(cordoned, vec![Some(true), Some(true), Some(false)]);
        let c = g.census().unwrap();
        assert_eq!(
            (c.other_ready, c.other_ready_staying, c.on_unschedulable),
            (2, 1, 2)
        );
        // Node b cordoned too: nobody stays.
        s.nodes.insert("b".into(), true);
        let g = block(gather(&s, &req(None))).unwrap();
        assert_eq!(g.census().map(|c| c.other_ready_staying), Some(0));
    }
}
