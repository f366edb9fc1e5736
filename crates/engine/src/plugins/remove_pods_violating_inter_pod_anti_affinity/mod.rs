//! RemovePodsViolatingInterPodAntiAffinity (Deschedule): evicts pods whose required pod
//! anti-affinity selects another pod in the same topology domain.
//!
//! As upstream: the pods considered (both as candidates and as the other side) are the
//! non-terminal pods on the given nodes that pass the plugin's `namespaces` / `labelSelector`;
//! nodes are visited in order, each node's pods from lowest to highest priority; a candidate is
//! evicted only if the DefaultEvictor's filters allow it, and an evicted pod no longer counts as
//! the other side. Terms are matched as upstream descheduler does (term `namespaces` or the pod's
//! own namespace; other pods with the candidate's name are skipped); two pods on the same node are
//! in the same domain even when the node lacks the topology key.

use super::{PodQuestion, extension_point};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::evictor::EvictionReason;
use crate::framework::parallel;
use crate::framework::podfilter::PodFilter;
use crate::framework::{Handle, sort};
use crate::scheduling::affinity::{self, CompiledAntiAffinityTerm};
use crate::snapshot::{NodeId, PodId, Snapshot};

mod args;
pub use args::Args;

/// The plugin name.
pub const NAME: &str = "RemovePodsViolatingInterPodAntiAffinity";

/// The plugin.
#[derive(Debug, Clone)]
pub struct RemovePodsViolatingInterPodAntiAffinity {
    filter: PodFilter,
}

/// The listed pods by node id and by namespace.
type Listed<'s> = (Vec<Vec<PodId>>, HashMap<&'s str, Vec<PodId>>);

/// A node's listed pods, each with its namespace, as one thread read them.
type NodeListing<'s> = (NodeId, Vec<(PodId, &'s str)>);

impl RemovePodsViolatingInterPodAntiAffinity {
    fn selects(&self, s: &Snapshot, pod: PodId) -> bool {
        self.filter.matches(s.pod(pod))
    }

    /// The pods considered: non-terminal pods on `nodes` that pass `namespaces` / `labelSelector`.
    /// The pods are read on several threads; the lists are then put together in node order, as
    /// one sequential pass would.
    fn list<'s>(&self, s: &'s Snapshot, nodes: &[NodeId]) -> Listed<'s> {
        let read: Vec<Vec<NodeListing<'s>>> = parallel::map_node_chunks(s, nodes, |chunk| {
            chunk
                .iter()
                .map(|&n| {
                    let listed = s
                        .active_pods_on_node(n)
                        .filter(|&p| self.selects(s, p))
                        .map(|p| (p, &*s.pod(p).namespace))
                        .collect();
                    (n, listed)
                })
                .collect()
        });
        let mut by_node: Vec<Vec<PodId>> = vec![Vec::new(); s.nodes.len()];
        let mut by_namespace: HashMap<&str, Vec<PodId>> = HashMap::default();
        for (n, listed) in read.into_iter().flatten() {
            // A node given twice is listed once (its first time).
            if by_node[n as usize].is_empty() {
                for &(p, ns) in &listed {
                    by_namespace.entry(ns).or_default().push(p);
                }
                by_node[n as usize] = listed.into_iter().map(|(p, _)| p).collect();
            }
        }
        (by_node, by_namespace)
    }
}

/// The pods under consideration and the indexes to find a candidate's conflicts quickly.
struct Pool<'s, 'i> {
    s: &'s Snapshot,
    /// Listed pods by node id (only nodes given to the plugin have entries).
    by_node: &'i [Vec<PodId>],
    by_namespace: &'i HashMap<&'s str, Vec<PodId>>,
    /// Topology key → value → (nodes given to the plugin with that label, pods listed on them).
    domains: HashMap<&'s str, HashMap<&'s str, (Vec<NodeId>, usize)>>,
    nodes: &'s [NodeId],
    /// Pods evicted by this plugin run.
    removed: HashSet<PodId>,
}

impl<'s, 'i> Pool<'s, 'i> {
    fn new(
        s: &'s Snapshot,
        by_node: &'i [Vec<PodId>],
        by_namespace: &'i HashMap<&'s str, Vec<PodId>>,
        nodes: &'s [NodeId],
    ) -> Self {
        Pool {
            s,
            by_node,
            by_namespace,
            domains: HashMap::default(),
            nodes,
            removed: HashSet::default(),
        }
    }

    fn domain(&mut self, key: &'s str, value: &str) -> Option<&(Vec<NodeId>, usize)> {
        if !self.domains.contains_key(key) {
            let mut by_value: HashMap<&'s str, (Vec<NodeId>, usize)> = HashMap::default();
            for &n in self.nodes {
                if let Some(v) = self.s.node(n).labels.get(key) {
                    let e = by_value.entry(v.as_str()).or_default();
                    e.0.push(n);
                    e.1 += self.by_node[n as usize].len();
                }
            }
            self.domains.insert(key, by_value);
        }
        self.domains.get(key).and_then(|m| m.get(value))
    }

    /// Whether a term of `candidate` selects another listed pod in its topology domain (upstream
    /// `CheckPodsWithAntiAffinityExist`: an invalid selector ends the check with no conflict).
    fn violates(&mut self, candidate: PodId, terms: &[CompiledAntiAffinityTerm<'s>]) -> bool {
        self.conflict(candidate, terms).is_some()
    }

    /// The first listed pod a term of `candidate` selects in its topology domain, with the term's
    /// topology key (see [`Pool::violates`]).
    fn conflict(
        &mut self,
        candidate: PodId,
        terms: &[CompiledAntiAffinityTerm<'s>],
    ) -> Option<(PodId, &'s str)> {
        let s = self.s;
        let cand = s.pod(candidate);
        let cand_node = cand.node?;
        for term in terms {
            if term.is_invalid() {
                return None;
            }
            let conflicts = |o: PodId| {
                let other = s.pod(o);
                other.name != cand.name && term.selects(other)
            };
            let value = s.node(cand_node).labels.get(term.topology_key);
            let Some(value) = value else {
                // Without the key only the candidate's own node is its domain.
                if let Some(&o) = self.by_node[cand_node as usize]
                    .iter()
                    .find(|&&o| !self.removed.contains(&o) && conflicts(o))
                {
                    return Some((o, term.topology_key));
                }
                continue;
            };
            let (domain_nodes, domain_count) = match self.domain(term.topology_key, value) {
                Some((n, c)) => (n.clone(), *c),
                None => (Vec::new(), 0),
            };
            let ns_pods: Vec<&[PodId]> = match &term.namespaces {
                affinity::TermNamespaces::Own(n) => {
                    vec![self.by_namespace.get(n).map_or(&[][..], Vec::as_slice)]
                }
                affinity::TermNamespaces::Listed(l) => {
                    let mut seen = HashSet::default();
                    l.iter()
                        .filter(|n| seen.insert(n.as_str()))
                        .map(|n| {
                            self.by_namespace
                                .get(n.as_str())
                                .map_or(&[][..], Vec::as_slice)
                        })
                        .collect()
                }
            };
            let ns_count: usize = ns_pods.iter().map(|v| v.len()).sum();
            let found = if domain_count <= ns_count {
                domain_nodes.iter().find_map(|&n| {
                    self.by_node[n as usize]
                        .iter()
                        .copied()
                        .find(|&o| !self.removed.contains(&o) && conflicts(o))
                })
            } else {
                ns_pods.iter().flat_map(|v| v.iter()).copied().find(|&o| {
                    !self.removed.contains(&o)
                        && s.pod(o).node.is_some_and(|on| {
                            on == cand_node
                                || s.node(on).labels.get(term.topology_key) == Some(value)
                        })
                        && conflicts(o)
                })
            };
            if let Some(o) = found {
                return Some((o, term.topology_key));
            }
        }
        None
    }
}

extension_point!(Deschedule for RemovePodsViolatingInterPodAntiAffinity, NAME);

impl RemovePodsViolatingInterPodAntiAffinity {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, nodes) = (q.snapshot, q.pod, q.nodes);
        let p = s.pod(pod);
        let terms = affinity::compile_anti_affinity_terms(p);
        if terms.is_empty() {
            return Some("it has no required pod anti-affinity terms".to_string());
        }
        if !self.selects(s, pod) {
            return Some("it is excluded by the plugin's namespaces / labelSelector".to_string());
        }
        let node = p.node?;
        let (by_node, by_namespace) = self.list(s, nodes);
        let mut pool = Pool::new(s, &by_node, &by_namespace, nodes);
        let node_name = &s.node(node).name;
        let mut parts = Vec::with_capacity(terms.len());
        for (i, term) in terms.iter().enumerate() {
            let key = term.topology_key;
            if term.is_invalid() {
                parts.push(format!(
                    "term {} (topologyKey {key}) has an invalid selector and selects no pod",
                    i + 1
                ));
                break;
            }
            // The listed pods in the candidate's domain, itself excluded.
            let (domain, in_domain) = match s.node(node).labels.get(key) {
                Some(v) => {
                    let count = pool.domain(key, v).map_or(0, |d| d.1);
                    (format!("{key}={v}"), count)
                }
                None => (
                    format!("{node_name} (no {key} label)"),
                    by_node[node as usize].len(),
                ),
            };
            let others =
                in_domain.saturating_sub(usize::from(by_node[node as usize].contains(&pod)));
            parts.push(match pool.conflict(pod, std::slice::from_ref(term)) {
                Some((o, _)) => {
                    let other = s.pod(o);
                    format!(
                        "term {} (topologyKey {key}) selects {}/{} on {} in {domain}, yet it was not evicted (the DefaultEvictor or a limit stopped it, or that pod was evicted first)",
                        i + 1,
                        other.namespace,
                        other.name,
                        other.node.map_or("", |n| s.node(n).name.as_str()),
                    )
                }
                None => format!(
                    "term {} (topologyKey {key}): none of the {others} other pods in {domain} matches",
                    i + 1
                ),
            });
        }
        Some(parts.join("; "))
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let s = h.snapshot;
        let (by_node, by_namespace) = self.list(s, nodes);
        if h.total_limit_reached() {
            // Every attempt is refused by the total limit: only the first is recorded, so the
            // nodes are checked one by one up to it instead of all of them ahead.
            let mut pool = Pool::new(s, &by_node, &by_namespace, nodes);
            for &n in nodes {
                let mut pods: Vec<PodId> = by_node[n as usize]
                    .iter()
                    .copied()
                    .filter(|&p| !affinity::required_anti_affinity_terms(s.pod(p)).is_empty())
                    .collect();
                sort::sort_by_priority_low_to_high(s, &mut pods);
                match evict_conflicting(h, &mut pool, pods) {
                    Stop::Node => {}
                    Stop::Plugin => return,
                }
            }
            return;
        }
        // Each node's candidates in eviction order: pods with required anti-affinity terms (the
        // sort is stable, so dropping the others first keeps the order), by priority, that
        // violate a term while no pod is evicted yet — found on several threads. An eviction only
        // removes conflicts, so the pods left out cannot violate later; the others are checked
        // again below against the pods evicted so far.
        let (by_node, by_namespace) = (&by_node, &by_namespace);
        let flagged: Vec<Vec<PodId>> = parallel::map_chunks(
            nodes,
            |&n| by_node[n as usize].len(),
            parallel::min_parallel_weight(),
            |chunk| {
                let mut pool = Pool::new(s, by_node, by_namespace, nodes);
                chunk
                    .iter()
                    .map(|&n| {
                        let mut pods: Vec<PodId> = by_node[n as usize]
                            .iter()
                            .copied()
                            .filter(|&p| {
                                !affinity::required_anti_affinity_terms(s.pod(p)).is_empty()
                            })
                            .collect();
                        sort::sort_by_priority_low_to_high(s, &mut pods);
                        pods.retain(|&p| {
                            let terms = affinity::compile_anti_affinity_terms(s.pod(p));
                            pool.violates(p, &terms)
                        });
                        pods
                    })
                    .collect::<Vec<Vec<PodId>>>()
            },
        )
        .into_iter()
        .flatten()
        .collect();
        let mut pool = Pool::new(s, by_node, by_namespace, nodes);
        for pods in flagged {
            if let Stop::Plugin = evict_conflicting(h, &mut pool, pods) {
                return;
            }
        }
    }
}

/// Where evicting a node's pods stopped.
enum Stop {
    /// Go on with the next node (all pods tried, or the node limit reached).
    Node,
    /// The total limit was reached: the plugin ends.
    Plugin,
}

/// Evicts the pods of one node (in eviction order) whose anti-affinity selects a pod still in
/// `pool`, that pass the DefaultEvictor's Filter.
fn evict_conflicting(h: &mut Handle<'_>, pool: &mut Pool<'_, '_>, pods: Vec<PodId>) -> Stop {
    let s = pool.s;
    for p in pods {
        let terms = affinity::compile_anti_affinity_terms(s.pod(p));
        let Some((other, key)) = pool.conflict(p, &terms) else {
            continue;
        };
        if !h.filter(p) {
            continue;
        }
        match h.evict_because(p, anti_affinity_reason(s, other, key)) {
            Ok(_) => {
                pool.removed.insert(p);
            }
            Err(e) if e.is_node_limit() => return Stop::Node,
            Err(e) if e.is_total_limit() => return Stop::Plugin,
            Err(_) => {}
        }
    }
    Stop::Node
}

/// Why a pod is evicted: `other` is in its topology domain (`key`) and its required
/// anti-affinity selects it.
fn anti_affinity_reason(s: &Snapshot, other: PodId, key: &str) -> EvictionReason {
    let o = s.pod(other);
    let node = o.node.map_or("", |n| s.node(n).name.as_str());
    EvictionReason::new(
        "AntiAffinityViolated",
        format!(
            "required anti-affinity (topologyKey {key}) selects {}/{} on {node}",
            o.namespace, o.name
        ),
    )
    .with("conflictingPod", format!("{}/{}", o.namespace, o.name))
    .with("conflictingNode", node)
    .with("topologyKey", key)
}

#[cfg(test)]
mod tests;
