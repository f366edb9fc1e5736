//! The placement simulator's memory across the predictions of one cycle: per pod shape the
//! static filters' verdicts and node-only score inputs, the nodes' topology domains, existing
//! pods' required anti-affinity and host ports, and the buffers one prediction fills.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use rustc_hash::FxHashMap;

use super::matcher::Matcher;
use super::matcher::MatcherIndex;
use super::plugin_scores::PluginScores;
use super::ports::UsedPorts;
use super::resources::ResourceMemo;
use super::spread_score::SlotMaps;
use super::state::ClusterState;
use super::terms::{self, DomainIndex};
use crate::scheduling::{affinity, taints};
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

/// Why a Filter plugin rejects a node (the plugin's name).
pub type Rejection = &'static str;

/// Per pod shape (tolerations, nodeSelector, affinity shared by an owner's pods): the static
/// filters' verdicts and the node-only score inputs per node, computed once per cycle.
pub struct StaticFit {
    /// NodeAffinity (nodeSelector + required node affinity).
    pub affinity_ok: Vec<bool>,
    /// TaintToleration (NoSchedule / NoExecute).
    pub taints_ok: Vec<bool>,
    /// NodeUnschedulable.
    pub schedulable_ok: Vec<bool>,
    /// All three: what the default profile's node-only filters admit.
    pub static_ok: Vec<bool>,
    /// TaintToleration's score input: the node's PreferNoSchedule taints that none of the pod's
    /// tolerations with an empty or PreferNoSchedule effect tolerates (`None`: no node has one).
    pub prefer_taints: Option<Vec<i64>>,
    /// NodeAffinity's score input: the weights of the pod's preferred node affinity terms the
    /// node matches (`None`: the pod has none, every node scores 0).
    pub preferred_affinity: Option<Vec<i64>>,
}

impl StaticFit {
    /// `fit` with its combined verdict filled in.
    fn with_static_ok(mut fit: StaticFit) -> Arc<StaticFit> {
        fit.static_ok = fit
            .schedulable_ok
            .iter()
            .zip(&fit.affinity_ok)
            .zip(&fit.taints_ok)
            .map(|((s, a), t)| *s && *a && *t)
            .collect();
        Arc::new(fit)
    }
}

/// The `node.kubernetes.io/unschedulable:NoSchedule` taint a cordoned node carries.
fn unschedulable_taint() -> Taint {
    Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

/// A holder of a required anti-affinity term: the pod (`PodId::MAX - pod` for a predicted
/// replacement), its node, the term's topology key.
type AntiHolder = (PodId, NodeId, String);

/// A pod's namespace and label map.
type LabelsOf = (String, Arc<BTreeMap<String, String>>);

/// Existing pods' required anti-affinity terms, grouped by matcher (the pods of one owner share
/// theirs): an incoming pod is matched once per group, not once per pod.
#[derive(Default)]
pub(super) struct AntiIndex {
    /// Per distinct matcher: the matcher and its holders (pod — `PodId::MAX - pod` for a
    /// predicted replacement —, its node, the term's topology key).
    pub(super) groups: Vec<(Matcher, Vec<AntiHolder>)>,
    /// Matcher key → index in `groups`.
    at: FxHashMap<String, usize>,
    /// Per incoming pod's (namespace, labels): how many groups were checked, and those whose
    /// matcher picks it (groups are only ever appended, so only new ones need checking).
    picking: FxHashMap<LabelsOf, (usize, Vec<usize>)>,
    /// The groups' matchers filed by what they may pick.
    index: MatcherIndex,
}

impl AntiIndex {
    /// The groups whose matcher picks `p` (none for a terminating pod), matched once per
    /// namespace and label map, not once per prediction.
    pub(super) fn picking(&mut self, snapshot: &Snapshot, p: &Pod) -> Vec<usize> {
        if p.is_terminating() {
            return Vec::new();
        }
        let (checked, picking) = self
            .picking
            .entry((p.namespace.to_string(), p.labels.clone()))
            .or_default();
        // The groups added since this label map was last matched.
        if *checked < self.groups.len() {
            for i in self.index.candidates(&p.namespace, &p.labels) {
                if i >= *checked
                    && let Some((m, _)) = self.groups.get(i)
                    && m.picks(snapshot, p)
                {
                    picking.push(i);
                }
            }
        }
        *checked = self.groups.len();
        picking.clone()
    }

    fn push(&mut self, pod: PodId, node: NodeId, key: String, m: Matcher) {
        let k = m.key();
        let i = match self.at.get(&k) {
            Some(&i) => i,
            None => {
                let at = self.groups.len();
                self.index.add(at, &m);
                self.groups.push((m, Vec::new()));
                self.at.insert(k, at);
                at
            }
        };
        if let Some((_, holders)) = self.groups.get_mut(i) {
            holders.push((pod, node, key));
        }
    }
}

/// Buffers one prediction fills, kept across predictions (no allocation per node).
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) feasible: Vec<usize>,
    /// Per Score plugin: name, weight, scores per feasible node.
    pub(super) plugins: Vec<PluginScores>,
    pub(super) pool: Vec<Vec<i64>>,
}

/// The simulator's memory across predictions of one cycle.
#[derive(Default)]
pub struct Caches {
    /// Per pod shape, by the addresses of its shared parts.
    statics: FxHashMap<(usize, usize, usize), Arc<StaticFit>>,
    /// Per pod shape, by content: owners with equal tolerations, nodeSelector and affinity (their
    /// parts are shared within an owner only) share one [`StaticFit`].
    statics_by_content: FxHashMap<String, Arc<StaticFit>>,
    /// Per topology key, the nodes' domains.
    pub domains: DomainIndex,
    pub(super) scratch: Scratch,
    /// Pods with required anti-affinity on their node, grouped by the term's matcher, built on
    /// first need and extended by placements.
    existing_anti: Option<AntiIndex>,
    /// Pods binding host ports (NodePorts), built on first need and extended by placements.
    pub(super) ports: UsedPorts,
    /// Per resource shape, NodeResourcesFit's verdicts and the resource scores per node.
    pub(super) resources: ResourceMemo,
    /// Per set of spread constraint keys, the nodes' slots (sparse spread scores).
    pub(super) spread_slots: SlotMaps,
}

impl Caches {
    pub(super) fn statics(&mut self, snapshot: &Snapshot, p: &Pod) -> Arc<StaticFit> {
        let key = (
            Arc::as_ptr(&p.tolerations) as *const u8 as usize,
            Arc::as_ptr(&p.node_selector) as *const u8 as usize,
            p.affinity
                .as_ref()
                .map_or(0, |a| Arc::as_ptr(a) as *const u8 as usize),
        );
        if let Some(fit) = self.statics.get(&key) {
            return fit.clone();
        }
        // Debug text is equal exactly when the values are. Only node affinity of the affinity
        // counts here: pod (anti-)affinity selectors, which differ per owner, do not.
        let node_affinity = p.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
        let content = format!(
            "{:?}|{:?}|{:?}",
            p.tolerations, p.node_selector, node_affinity
        );
        let fit = self
            .statics_by_content
            .entry(content)
            .or_insert_with(|| {
                let unsched = unschedulable_taint();
                let tolerates_unsched = taints::tolerated(&p.tolerations, &unsched);
                let nodes = 0..snapshot.nodes.len() as NodeId;
                let prefer: Vec<&Toleration> = p
                    .tolerations
                    .iter()
                    .filter(|t| {
                        t.effect
                            .as_deref()
                            .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
                    })
                    .collect();
                StaticFit::with_static_ok(StaticFit {
                    static_ok: Vec::new(),
                    prefer_taints: Some(
                        nodes
                            .clone()
                            .map(|n| {
                                snapshot
                                    .node(n)
                                    .taints
                                    .iter()
                                    .filter(|t| t.effect == "PreferNoSchedule")
                                    .filter(|t| !prefer.iter().any(|tol| taints::tolerates(tol, t)))
                                    .count() as i64
                            })
                            .collect::<Vec<i64>>(),
                    )
                    .filter(|per_node| per_node.iter().any(|&c| c > 0)),
                    preferred_affinity: affinity::has_preferred_node_affinity(p).then(|| {
                        nodes
                            .clone()
                            .map(|n| affinity::preferred_node_affinity_score(p, snapshot.node(n)))
                            .collect()
                    }),
                    affinity_ok: nodes
                        .clone()
                        .map(|n| affinity::matches_node_selector_and_affinity(p, snapshot.node(n)))
                        .collect(),
                    taints_ok: nodes
                        .clone()
                        .map(|n| {
                            taints::tolerates_all(
                                &p.tolerations,
                                &snapshot.node(n).taints,
                                taints::is_scheduling_taint,
                            )
                        })
                        .collect(),
                    schedulable_ok: nodes
                        .map(|n| !snapshot.node(n).unschedulable || tolerates_unsched)
                        .collect(),
                })
            })
            .clone();
        self.statics.insert(key, fit.clone());
        fit
    }

    /// Records a replacement placed on `node` for the existing anti-affinity list.
    pub fn placed(&mut self, snapshot: &Snapshot, pod: PodId, node: NodeId) {
        self.ports.placed(snapshot, pod, node);
        if let Some(list) = &mut self.existing_anti {
            let p = snapshot.pod(pod);
            for t in affinity::required_anti_affinity_terms(p) {
                list.push(
                    PodId::MAX - pod,
                    node,
                    t.topology_key.clone(),
                    terms::term_matcher(t, p),
                );
            }
        }
    }

    pub(super) fn existing_anti(
        &mut self,
        snapshot: &Snapshot,
        state: &ClusterState,
    ) -> &mut AntiIndex {
        self.existing_anti.get_or_insert_with(|| {
            let mut list = AntiIndex::default();
            for pod in snapshot.all_pods_prefetched_whole() {
                let p = snapshot.pod(pod);
                let terms = affinity::required_anti_affinity_terms(p);
                if terms.is_empty() || !state.holds_node(snapshot, pod) {
                    continue;
                }
                if let Some(n) = p.node {
                    for t in terms {
                        list.push(pod, n, t.topology_key.clone(), terms::term_matcher(t, p));
                    }
                }
            }
            for (n, placed) in state.placed.iter().enumerate() {
                for &pod in placed {
                    let p = snapshot.pod(pod);
                    for t in affinity::required_anti_affinity_terms(p) {
                        list.push(
                            PodId::MAX - pod,
                            n as NodeId,
                            t.topology_key.clone(),
                            terms::term_matcher(t, p),
                        );
                    }
                }
            }
            list
        })
    }
}
