//! The controllers' index of the cluster (what an informer's indexer holds in
//! kube-controller-manager): a few fields per object, kept current from the store's change
//! stream, so a reconcile can find the objects it needs (pods by node, by owner, by namespace)
//! without reading the whole store. Whole objects stay in the store and are decoded on demand.
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use crate::controllers::scheduler::{NodeUsage, Resources, pod_requests};
use crate::controllers::util::selector_matches;
use crate::store::meta_str;

/// `(namespace, name)`.
pub type Key = (String, String);

/// What the index keeps of a pod.
#[derive(Clone, Debug, Default)]
pub struct PodEntry {
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeName` when set.
    pub node: Option<String>,
    /// Name of the controlling ReplicaSet, if a ReplicaSet controls it.
    pub owner_rs: Option<String>,
    /// Unassigned, not terminating, phase Pending, for the default scheduler.
    pub pending: bool,
    /// Bound and not yet settled: not Ready, or terminating (the kubelet acts on it with time).
    pub unsettled: bool,
    /// Node and requests it counts against (assigned and not terminal).
    pub usage: Option<(String, Resources)>,
    /// Required pod anti-affinity terms (they constrain pods scheduled after it).
    pub anti_terms: Vec<PodAffinityTerm>,
    /// Required pod affinity and anti-affinity terms of its own (for its scheduling).
    pub own_terms: Vec<PodAffinityTerm>,
    /// Has required pod affinity: a pod placed elsewhere may make it schedulable.
    pub wants_peers: bool,
}

/// The index. Kinds: pods, ReplicaSets, Deployments, PDBs, nodes.
#[derive(Default)]
pub struct Cache {
    pub pods: HashMap<Key, PodEntry>,
    pub pods_by_node: HashMap<String, HashSet<Key>>,
    /// `(namespace, ReplicaSet name)` → pods it controls (by name; the controller checks uids).
    pub pods_by_owner: HashMap<Key, HashSet<Key>>,
    pub pods_by_ns: HashMap<String, HashSet<Key>>,
    /// `(namespace, label key, label value)` → pods (PDB selectors look up their first
    /// `matchLabels` pair here instead of scanning the namespace).
    pub pods_by_label: HashMap<(String, String, String), HashSet<Key>>,
    /// Pending pods (candidates for the scheduler).
    pub pending: BTreeSet<Key>,
    /// Pods with required anti-affinity terms.
    pub anti_pods: HashSet<Key>,
    /// Namespace → pods with a required anti-affinity term that can select pods there.
    pub anti_by_ns: HashMap<String, HashSet<Key>>,
    /// Pods with a required anti-affinity term across all namespaces (`namespaceSelector`).
    pub anti_all_ns: HashSet<Key>,
    /// ReplicaSet → name of its controlling Deployment.
    pub replica_sets: BTreeMap<Key, Option<String>>,
    /// `(namespace, Deployment name)` → ReplicaSets it controls.
    pub rs_by_owner: HashMap<Key, HashSet<Key>>,
    pub deployments: BTreeSet<Key>,
    /// PDB → its selector.
    pub pdbs: BTreeMap<Key, Option<LabelSelector>>,
    pub nodes: BTreeSet<String>,
    /// Node name → the decoded node (the scheduler reads them on every pass).
    pub node_objs: BTreeMap<String, Node>,
    /// Summed usage of all indexed pods.
    pub usage: NodeUsage,
}

/// Which kind an object or event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    ReplicaSet,
    Deployment,
    Pdb,
}

impl Kind {
    /// The kind a store event's `(group, resource)` is about, if the controllers watch it.
    pub fn of(gr: (&str, &str)) -> Option<Kind> {
        Some(match gr {
            ("", "nodes") => Kind::Node,
            ("", "pods") => Kind::Pod,
            ("apps", "replicasets") => Kind::ReplicaSet,
            ("apps", "deployments") => Kind::Deployment,
            ("policy", "poddisruptionbudgets") => Kind::Pdb,
            _ => return None,
        })
    }
}

/// `(namespace, name)` of an object (`""` namespace for cluster-scoped ones).
pub fn key_of(obj: &Value) -> Key {
    (
        meta_str(obj, "namespace").to_string(),
        meta_str(obj, "name").to_string(),
    )
}

/// Name of the controlling owner of `kind`, if any.
fn controller_of(obj: &Value, kind: &str) -> Option<String> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .filter(|r| r.get("kind").and_then(Value::as_str) == Some(kind))
        .and_then(|r| r.get("name")?.as_str())
        .map(String::from)
}

fn pod_entry(obj: &Value) -> Option<PodEntry> {
    let pod = <Pod as serde::Deserialize>::deserialize(obj).ok()?;
    let spec = pod.spec.as_ref();
    let node = spec
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let ready = crate::controllers::util::pod_is_ready(&pod);
    let affinity = spec.and_then(|s| s.affinity.as_ref());
    let anti_terms: Vec<PodAffinityTerm> = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default();
    let mut own_terms = anti_terms.clone();
    let peer_terms = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default();
    let wants_peers = !peer_terms.is_empty();
    own_terms.extend(peer_terms);
    Some(PodEntry {
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        // Whichever its schedulerName: the scheduler leaves pods no profile serves alone.
        pending: node.is_none() && !terminating && phase == "Pending",
        unsettled: (node.is_some() || terminating) && !terminal && (!ready || terminating),
        usage: node
            .clone()
            .filter(|_| !terminal)
            .map(|n| (n, pod_requests(&pod))),
        node,
        owner_rs: controller_of(obj, "ReplicaSet"),
        anti_terms,
        own_terms,
        wants_peers,
    })
}

/// Namespaces the anti-affinity `terms` of a pod in `own_ns` can select pods in (`None`: all).
fn anti_namespaces(own_ns: &str, terms: &[PodAffinityTerm]) -> BTreeSet<Option<String>> {
    let mut out = BTreeSet::new();
    for t in terms {
        match (&t.namespace_selector, &t.namespaces) {
            (Some(_), _) => {
                out.insert(None);
            }
            (None, Some(list)) if !list.is_empty() => {
                out.extend(list.iter().map(|n| Some(n.clone())));
            }
            _ => {
                out.insert(Some(own_ns.to_string()));
            }
        }
    }
    out
}

fn add_usage(usage: &mut NodeUsage, node: &str, req: &Resources, sign: i128) {
    let sum = usage.requested.entry(node.to_string()).or_default();
    for (k, v) in req {
        *sum.entry(k.clone()).or_default() += sign * v;
    }
    *usage.pods.entry(node.to_string()).or_default() += sign;
}

fn unlink<K: Eq + std::hash::Hash>(map: &mut HashMap<K, HashSet<Key>>, k: K, key: &Key) {
    if let Some(set) = map.get_mut(&k) {
        set.remove(key);
        if set.is_empty() {
            map.remove(&k);
        }
    }
}

impl Cache {
    /// Records the current state of an object (`None` when it is gone); returns the pod entry
    /// it replaced, for pods.
    pub fn apply(&mut self, kind: Kind, key: &Key, obj: Option<&Value>) -> Option<PodEntry> {
        match kind {
            Kind::Pod => {
                let old = self.remove_pod(key);
                if let Some(e) = obj.and_then(pod_entry) {
                    self.insert_pod(key.clone(), e);
                }
                old
            }
            Kind::Node => {
                let node = obj.and_then(|o| match <Node as serde::Deserialize>::deserialize(o) {
                    Ok(n) => Some(n),
                    Err(e) => {
                        tracing::debug!("controller index skips node {}: {e}", key.1);
                        None
                    }
                });
                match node {
                    Some(n) => {
                        self.nodes.insert(key.1.clone());
                        self.node_objs.insert(key.1.clone(), n);
                    }
                    None => {
                        self.nodes.remove(&key.1);
                        self.node_objs.remove(&key.1);
                    }
                }
                None
            }
            Kind::ReplicaSet => {
                if let Some(Some(d)) = self.replica_sets.remove(key) {
                    unlink(&mut self.rs_by_owner, (key.0.clone(), d), key);
                }
                if let Some(o) = obj {
                    let owner = controller_of(o, "Deployment");
                    if let Some(d) = &owner {
                        self.rs_by_owner
                            .entry((key.0.clone(), d.clone()))
                            .or_default()
                            .insert(key.clone());
                    }
                    self.replica_sets.insert(key.clone(), owner);
                }
                None
            }
            Kind::Deployment => {
                match obj {
                    Some(_) => self.deployments.insert(key.clone()),
                    None => self.deployments.remove(key),
                };
                None
            }
            Kind::Pdb => {
                match obj {
                    Some(o) => {
                        let sel = o
                            .pointer("/spec/selector")
                            .and_then(|s| serde_json::from_value(s.clone()).ok());
                        self.pdbs.insert(key.clone(), sel);
                    }
                    None => {
                        self.pdbs.remove(key);
                    }
                }
                None
            }
        }
    }

    fn insert_pod(&mut self, key: Key, e: PodEntry) {
        if let Some(n) = &e.node {
            self.pods_by_node
                .entry(n.clone())
                .or_default()
                .insert(key.clone());
        }
        if let Some(rs) = &e.owner_rs {
            self.pods_by_owner
                .entry((key.0.clone(), rs.clone()))
                .or_default()
                .insert(key.clone());
        }
        self.pods_by_ns
            .entry(key.0.clone())
            .or_default()
            .insert(key.clone());
        for (k, v) in &e.labels {
            self.pods_by_label
                .entry((key.0.clone(), k.clone(), v.clone()))
                .or_default()
                .insert(key.clone());
        }
        if e.pending {
            self.pending.insert(key.clone());
        }
        if !e.anti_terms.is_empty() {
            self.anti_pods.insert(key.clone());
            for ns in anti_namespaces(&key.0, &e.anti_terms) {
                match ns {
                    Some(ns) => {
                        self.anti_by_ns.entry(ns).or_default().insert(key.clone());
                    }
                    None => {
                        self.anti_all_ns.insert(key.clone());
                    }
                }
            }
        }
        if let Some((n, req)) = &e.usage {
            add_usage(&mut self.usage, n, req, 1);
        }
        self.pods.insert(key, e);
    }

    fn remove_pod(&mut self, key: &Key) -> Option<PodEntry> {
        let e = self.pods.remove(key)?;
        if let Some(n) = &e.node {
            unlink(&mut self.pods_by_node, n.clone(), key);
        }
        if let Some(rs) = &e.owner_rs {
            unlink(&mut self.pods_by_owner, (key.0.clone(), rs.clone()), key);
        }
        unlink(&mut self.pods_by_ns, key.0.clone(), key);
        for (k, v) in &e.labels {
            unlink(
                &mut self.pods_by_label,
                (key.0.clone(), k.clone(), v.clone()),
                key,
            );
        }
        self.pending.remove(key);
        if self.anti_pods.remove(key) {
            for ns in anti_namespaces(&key.0, &e.anti_terms) {
                match ns {
                    Some(ns) => unlink(&mut self.anti_by_ns, ns, key),
                    None => {
                        self.anti_all_ns.remove(key);
                    }
                }
            }
        }
        if let Some((n, req)) = &e.usage {
            add_usage(&mut self.usage, n, req, -1);
        }
        Some(e)
    }

    /// Pods in `ns` a label selector may select: those carrying its first `matchLabels` pair,
    /// or every pod of the namespace when it has none (callers still apply the selector).
    pub fn selector_candidates(&self, ns: &str, sel: &LabelSelector) -> Vec<&Key> {
        let first = sel.match_labels.as_ref().and_then(|m| m.iter().next());
        let set = match first {
            Some((k, v)) => self
                .pods_by_label
                .get(&(ns.to_string(), k.clone(), v.clone())),
            None => self.pods_by_ns.get(ns),
        };
        set.into_iter().flatten().collect()
    }

    /// PDBs in `ns` whose selector matches `labels`.
    pub fn pdbs_selecting(&self, ns: &str, labels: &BTreeMap<String, String>) -> Vec<Key> {
        self.pdbs
            .range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .filter(|(_, sel)| {
                sel.as_ref()
                    .is_some_and(|s| selector_matches(s, Some(labels)))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Every PDB in `ns`.
    pub fn pdbs_in(&self, ns: &str) -> Vec<Key> {
        self.pdbs
            .range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// ReplicaSets in `ns` whose name starts with `prefix` (a Deployment's name candidates).
    pub fn replica_sets_named(&self, ns: &str, prefix: &str) -> Vec<Key> {
        self.replica_sets
            .range((ns.to_string(), prefix.to_string())..)
            .take_while(|((n, name), _)| n == ns && name.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect()
    }
}
