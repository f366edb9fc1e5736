//! The webhook's [`FactSource`] against a cluster: lean watch caches of Pods, Deployments,
//! ReplicaSets and PodDisruptionBudgets (converted to facts on arrival, so managedFields, pod
//! specs, templates and everything else we do not read are never kept), and on-demand GETs.
//!
//! Memory: only facts are stored; pods as [`LeanPod`]s sharing label sets and owners, and
//! ReplicaSets scaled to zero (old revisions) are skipped. Initial lists are paginated (500 per
//! page), so a full list of pods is never held. A cache miss falls back to a GET.
//!
//! Pods: the cache may lag the API. [`FactSource::cached_pod`] answers only once the pod watch
//! has synced, and a miss or an entry whose uid differs from the eviction's precondition is read
//! with a GET, so a cold or lagging cache never turns into "pod missing → allow". Callers that act
//! on a cached pod (deny, restart) re-read it first; see [`super::server`].

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::pod_cache::{LeanPod, PodStripper};
use super::source::{FactSource, Placement, SourceError};
use kube_descheduler_engine::workload::annotations::pdb_surge_opt_in;
use kube_descheduler_engine::workload::facts::{
    DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts,
};

/// Time budget of one on-demand read (the webhook answers within its 5 s timeout).
pub const READ_TIMEOUT: Duration = Duration::from_millis(1500);

/// Objects indexed by namespace, then name.
///
/// A (re-)list is applied in place: every listed object is stamped with the list's epoch and, when
/// the list is complete, objects the list did not return are dropped. So a re-list never holds a
/// second copy of the cache, and the old entries keep answering until they are replaced.
#[derive(Debug)]
pub struct LeanMap<F> {
    inner: RwLock<Maps<F>>,
    synced: AtomicBool,
}

#[derive(Debug)]
struct Maps<F> {
    by_namespace: HashMap<String, HashMap<String, Slot<F>>>,
    /// Incremented at the start of every list.
    epoch: u32,
}

#[derive(Debug)]
struct Slot<F> {
    value: Arc<F>,
    /// The list (or later event) that last wrote the entry.
    epoch: u32,
}

impl<F> Default for LeanMap<F> {
    fn default() -> Self {
        LeanMap {
            inner: RwLock::new(Maps {
                by_namespace: HashMap::new(),
                epoch: 0,
            }),
            synced: AtomicBool::new(false),
        }
    }
}

impl<F> LeanMap<F> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Maps<F>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Maps<F>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// One object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<F>> {
        let maps = self.read();
        maps.by_namespace
            .get(namespace)
            .and_then(|m| m.get(name))
            .map(|s| s.value.clone())
    }

    /// All objects of a namespace.
    pub fn namespace(&self, namespace: &str) -> Vec<Arc<F>> {
        let maps = self.read();
        maps.by_namespace
            .get(namespace)
            .map(|m| m.values().map(|s| s.value.clone()).collect())
            .unwrap_or_default()
    }

    /// All objects of a namespace with their names.
    pub fn namespace_entries(&self, namespace: &str) -> Vec<(String, Arc<F>)> {
        let maps = self.read();
        maps.by_namespace
            .get(namespace)
            .map(|m| {
                m.iter()
                    .map(|(k, s)| (k.clone(), s.value.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every object, in no particular order.
    pub fn all(&self) -> Vec<Arc<F>> {
        let maps = self.read();
        maps.by_namespace
            .values()
            .flat_map(|m| m.values().map(|s| s.value.clone()))
            .collect()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.read().by_namespace.values().map(HashMap::len).sum()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once an initial list has completed.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn insert(&self, namespace: String, name: String, f: F) {
        let mut maps = self.write();
        let epoch = maps.epoch;
        maps.by_namespace.entry(namespace).or_default().insert(
            name,
            Slot {
                value: Arc::new(f),
                epoch,
            },
        );
    }

    fn remove(&self, namespace: &str, name: &str) {
        let mut maps = self.write();
        if let Some(m) = maps.by_namespace.get_mut(namespace) {
            m.remove(name);
            if m.is_empty() {
                maps.by_namespace.remove(namespace);
            }
        }
    }

    /// A list starts: what it returns is written with a new epoch.
    fn begin_list(&self) {
        let mut maps = self.write();
        maps.epoch = maps.epoch.wrapping_add(1);
    }

    /// The list is complete: drop what it did not return; the cache is synced.
    fn finish_list(&self) {
        let mut maps = self.write();
        let epoch = maps.epoch;
        maps.by_namespace.retain(|_, m| {
            m.retain(|_, s| s.epoch == epoch);
            !m.is_empty()
        });
        drop(maps);
        self.synced.store(true, Ordering::Release);
    }
}

/// Watches one resource into a [`LeanMap`]; `convert` returns `None` for objects not worth
/// keeping. Runs until the stream ends (never, with the default backoff).
async fn run_watch<K, F, C>(api: Api<K>, store: Arc<LeanMap<F>>, mut convert: C)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    F: Send + Sync + 'static,
    C: FnMut(&K) -> Option<F> + Send + 'static,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let cfg = watcher::Config::default().page_size(500);
    let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(ev) => {
                if apply_event(&store, ev, &mut convert) {
                    tracing::info!(%kind, objects = store.len(), "cache synced");
                }
            }
            Err(e) => tracing::warn!(%kind, error = %e, "watch error; retrying"),
        }
    }
}

/// Applies one watch event to the store; returns true when a list completes (`InitDone`).
fn apply_event<K: Resource, F>(
    store: &LeanMap<F>,
    ev: Event<K>,
    convert: &mut impl FnMut(&K) -> Option<F>,
) -> bool {
    let key = |o: &K| {
        let m = o.meta();
        (
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default(),
        )
    };
    match ev {
        Event::Init => store.begin_list(),
        Event::InitApply(o) | Event::Apply(o) => {
            let (ns, name) = key(&o);
            match convert(&o) {
                Some(f) => store.insert(ns, name, f),
                None => store.remove(&ns, &name),
            }
        }
        Event::InitDone => {
            store.finish_list();
            return true;
        }
        Event::Delete(o) => {
            let (ns, name) = key(&o);
            store.remove(&ns, &name);
        }
    }
    false
}

/// Keep ReplicaSets that have or want pods; old revisions scaled to zero are left out.
fn replica_set_facts(rs: &ReplicaSet) -> Option<ReplicaSetFacts> {
    let f = ReplicaSetFacts::from_replica_set(rs);
    (f.desired > 0 || f.replicas > 0).then_some(f)
}

/// `spec.unschedulable` of a node (cordoned).
fn node_unschedulable(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// Whether an autoscaler's scale target is the Deployment `name`.
fn targets_deployment(h: &HorizontalPodAutoscaler, name: &str) -> bool {
    let t = &h.spec.scale_target_ref;
    t.kind == "Deployment"
        && t.name == name
        && t.api_version
            .as_deref()
            .is_none_or(|v| v.is_empty() || v.starts_with("apps/"))
}

/// A cluster-backed [`FactSource`].
pub struct KubeSource {
    client: Client,
    pods: Arc<LeanMap<LeanPod>>,
    deployments: Arc<LeanMap<DeploymentFacts>>,
    replica_sets: Arc<LeanMap<ReplicaSetFacts>>,
    pdbs: Arc<LeanMap<PdbFacts>>,
    /// Node name → `spec.unschedulable` (cluster-scoped: namespace "").
    nodes: Arc<LeanMap<bool>>,
}

impl KubeSource {
    /// Creates the source and spawns its four watchers (cluster-wide list/watch of Pods,
    /// Deployments, ReplicaSets and PodDisruptionBudgets).
    pub fn start(client: Client) -> Arc<Self> {
        let source = Arc::new(KubeSource {
            client: client.clone(),
            pods: Arc::default(),
            deployments: Arc::default(),
            replica_sets: Arc::default(),
            pdbs: Arc::default(),
            nodes: Arc::default(),
        });
        let mut stripper = PodStripper::default();
        tokio::spawn(run_watch(
            Api::<Pod>::all(client.clone()),
            source.pods.clone(),
            move |p: &Pod| Some(stripper.strip(p)),
        ));
        tokio::spawn(run_watch(
            Api::<Deployment>::all(client.clone()),
            source.deployments.clone(),
            |d| Some(DeploymentFacts::from_deployment(d)),
        ));
        tokio::spawn(run_watch(
            Api::<ReplicaSet>::all(client.clone()),
            source.replica_sets.clone(),
            replica_set_facts,
        ));
        tokio::spawn(run_watch(
            Api::<Node>::all(client.clone()),
            source.nodes.clone(),
            |n: &Node| Some(node_unschedulable(n)),
        ));
        tokio::spawn(run_watch(
            Api::<PodDisruptionBudget>::all(client),
            source.pdbs.clone(),
            |p| Some(PdbFacts::from_pdb(p)),
        ));
        source
    }

    /// Cached objects: (Deployments, ReplicaSets, PodDisruptionBudgets).
    pub fn cache_sizes(&self) -> (usize, usize, usize) {
        (
            self.deployments.len(),
            self.replica_sets.len(),
            self.pdbs.len(),
        )
    }

    /// Per cache: resource name, objects held, initial list done.
    pub fn cache_status(&self) -> [(&'static str, usize, bool); 5] {
        [
            ("pods", self.pods.len(), self.pods.synced()),
            (
                "deployments",
                self.deployments.len(),
                self.deployments.synced(),
            ),
            (
                "replicasets",
                self.replica_sets.len(),
                self.replica_sets.synced(),
            ),
            ("poddisruptionbudgets", self.pdbs.len(), self.pdbs.synced()),
            ("nodes", self.nodes.len(), self.nodes.synced()),
        ]
    }
}

async fn read<K, T>(
    api: Api<K>,
    name: &str,
    what: &str,
    map: fn(&K) -> T,
) -> Result<Option<T>, SourceError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match tokio::time::timeout(READ_TIMEOUT, api.get_opt(name)).await {
        Ok(Ok(o)) => Ok(o.as_ref().map(map)),
        Ok(Err(e)) => Err(SourceError::Api(format!("reading {what} {name}: {e}"))),
        Err(_) => Err(SourceError::Api(format!(
            "reading {what} {name}: timed out after {READ_TIMEOUT:?}"
        ))),
    }
}

impl FactSource for KubeSource {
    fn ready(&self) -> bool {
        self.deployments.synced() && self.replica_sets.synced() && self.pdbs.synced()
    }

    fn cached_pod(&self, namespace: &str, name: &str) -> Option<PodFacts> {
        if !self.pods.synced() {
            return None;
        }
        self.pods
            .get(namespace, name)
            .map(|p| p.facts(namespace, name))
    }

    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodFacts>, SourceError>> {
        Box::pin(read(
            Api::<Pod>::namespaced(self.client.clone(), namespace),
            name,
            "pod",
            PodFacts::from_pod,
        ))
    }

    fn replica_set<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<ReplicaSetFacts>>, SourceError>> {
        Box::pin(async move {
            if let Some(rs) = self.replica_sets.get(namespace, name) {
                return Ok(Some(rs));
            }
            let api = Api::<ReplicaSet>::namespaced(self.client.clone(), namespace);
            Ok(
                read(api, name, "replicaset", ReplicaSetFacts::from_replica_set)
                    .await?
                    .map(Arc::new),
            )
        })
    }

    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentFacts>> {
        self.deployments.get(namespace, name)
    }

    fn pdbs(&self, namespace: &str) -> Vec<Arc<PdbFacts>> {
        self.pdbs.namespace(namespace)
    }

    fn deployment_pods(&self, namespace: &str, deployment: &str) -> Option<Vec<Placement>> {
        if !self.pods.synced() {
            return None;
        }
        let owned: std::collections::HashSet<String> = self
            .replica_sets
            .namespace(namespace)
            .iter()
            .filter(|rs| {
                rs.owner
                    .as_ref()
                    .is_some_and(|o| o.kind == "Deployment" && o.name == deployment)
            })
            .map(|rs| rs.name.clone())
            .collect();
        let pods = self
            .pods
            .namespace_entries(namespace)
            .into_iter()
            .filter(|(_, p)| {
                p.owner()
                    .is_some_and(|o| o.kind == "ReplicaSet" && owned.contains(&o.name))
            })
            .map(|(name, p)| Placement {
                name,
                ready: p.ready(),
                terminating: p.terminating(),
                node: p.node().map(str::to_owned),
            })
            .collect();
        Some(pods)
    }

    fn node_unschedulable<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, SourceError>> {
        Box::pin(async move {
            if let Some(v) = self.nodes.get("", name) {
                return Ok(Some(*v));
            }
            let api = Api::<Node>::all(self.client.clone());
            read(api, name, "node", node_unschedulable).await
        })
    }

    fn namespace_pdb_surge<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Option<bool>, SourceError>> {
        Box::pin(async move {
            let api = Api::<Namespace>::all(self.client.clone());
            let got = read(api, namespace, "namespace", |n: &Namespace| {
                pdb_surge_opt_in(n.metadata.annotations.as_ref())
            })
            .await?;
            Ok(got.flatten())
        })
    }

    fn hpa_for<'a>(
        &'a self,
        namespace: &'a str,
        deployment: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, SourceError>> {
        Box::pin(async move {
            let api = Api::<HorizontalPodAutoscaler>::namespaced(self.client.clone(), namespace);
            let list = tokio::time::timeout(READ_TIMEOUT, api.list(&Default::default())).await;
            match list {
                Ok(Ok(l)) => Ok(l
                    .items
                    .iter()
                    .find(|h| targets_deployment(h, deployment))
                    .map(|h| {
                        format!(
                            "{namespace}/{}",
                            h.metadata.name.as_deref().unwrap_or_default()
                        )
                    })),
                Ok(Err(e)) => Err(SourceError::Api(format!(
                    "listing horizontalpodautoscalers in {namespace}: {e}"
                ))),
                Err(_) => Err(SourceError::Api(format!(
                    "listing horizontalpodautoscalers in {namespace}: timed out after {READ_TIMEOUT:?}"
                ))),
            }
        })
    }

    fn surged_deployments(&self) -> Vec<Arc<DeploymentFacts>> {
        self.deployments
            .all()
            .into_iter()
            .filter(|d| d.surge.is_some())
            .collect()
    }

    fn pvc<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PvcFacts>, SourceError>> {
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace);
        Box::pin(read(api, name, "persistentvolumeclaim", PvcFacts::from_pvc))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rs(name: &str, replicas: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"replicas": replicas, "selector": {}},
            "status": {"replicas": replicas}
        }))
        .unwrap()
    }

    #[test]
    fn watch_events_maintain_a_lean_store() {
        let store = LeanMap::<ReplicaSetFacts>::default();
        let mut conv: fn(&ReplicaSet) -> Option<ReplicaSetFacts> = replica_set_facts;
        let conv = &mut conv;
        assert!(!apply_event(&store, Event::Init, conv));
        apply_event(&store, Event::InitApply(rs("a", 1)), conv);
        apply_event(&store, Event::InitApply(rs("old", 0)), conv);
        assert!(!store.synced(), "not synced before InitDone");
        assert!(apply_event(&store, Event::InitDone, conv));
        assert!(store.synced());
        assert_eq!(store.len(), 1, "zero-replica ReplicaSets are skipped");
        assert!(store.get("shop", "a").is_some());

        apply_event(&store, Event::Apply(rs("b", 2)), conv);
        assert_eq!(store.get("shop", "b").map(|f| f.desired), Some(2));
        // Scaled to zero: dropped.
        apply_event(&store, Event::Apply(rs("b", 0)), conv);
        assert!(store.get("shop", "b").is_none());
        apply_event(&store, Event::Delete(rs("a", 1)), conv);
        assert!(store.is_empty());

        // A re-list: objects it does not return are dropped when it completes; until then the
        // old entries still answer, and the cache stays synced.
        apply_event(&store, Event::Apply(rs("stale", 1)), conv);
        apply_event(&store, Event::Apply(rs("kept", 1)), conv);
        apply_event(&store, Event::Init, conv);
        apply_event(&store, Event::InitApply(rs("fresh", 1)), conv);
        apply_event(&store, Event::InitApply(rs("kept", 3)), conv);
        assert!(store.synced() && store.get("shop", "stale").is_some());
        apply_event(&store, Event::InitDone, conv);
        assert!(store.get("shop", "stale").is_none() && store.get("shop", "fresh").is_some());
        assert_eq!(store.get("shop", "kept").map(|f| f.desired), Some(3));
        assert_eq!(store.namespace("shop").len(), 2);
        assert!(store.namespace("other").is_empty());
    }

    #[test]
    fn pod_cache_entries_come_from_watch_events() {
        let store = LeanMap::<LeanPod>::default();
        let mut stripper = PodStripper::default();
        let mut conv = |p: &Pod| Some(stripper.strip(p));
        let pod = |name: &str, phase: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                    "labels": {"app": "web"}},
                "status": {"phase": phase}
            }))
            .unwrap()
        };
        apply_event(&store, Event::Init, &mut conv);
        apply_event(&store, Event::InitApply(pod("a", "Running")), &mut conv);
        apply_event(&store, Event::InitDone, &mut conv);
        apply_event(&store, Event::Apply(pod("a", "Succeeded")), &mut conv);
        let facts = store.get("shop", "a").map(|p| p.facts("shop", "a"));
        assert_eq!(facts, Some(PodFacts::from_pod(&pod("a", "Succeeded"))));
        apply_event(&store, Event::Delete(pod("a", "Succeeded")), &mut conv);
        assert!(store.get("shop", "a").is_none());
    }
}
