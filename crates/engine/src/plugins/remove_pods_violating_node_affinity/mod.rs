//! RemovePodsViolatingNodeAffinity (Deschedule): for each `nodeAffinityType`, evicts pods whose
//! node no longer satisfies their required node affinity (when they fit some node), or — for
//! preferred affinity — when some node scores strictly higher than the current one.

use super::{PodQuestion, extension_point};
use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::PreferredSchedulingTerm;

use crate::evictor::EvictionReason;
use crate::framework::Handle;
use crate::framework::args::ArgsError;
use crate::framework::per_node::evict_per_node;
use crate::framework::podfilter::PodFilter;
use crate::scheduling::{affinity, fit};
use crate::snapshot::model::PodPhase;
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

mod args;
pub use args::Args;

/// The plugin name.
pub const NAME: &str = "RemovePodsViolatingNodeAffinity";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// The built plugin.
pub struct RemovePodsViolatingNodeAffinity {
    filter: PodFilter,
    types: Vec<String>,
}

impl RemovePodsViolatingNodeAffinity {
    /// Validates `args` and builds the plugin.
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces, a.label_selector.as_ref())?;
        if a.node_affinity_type.is_empty() {
            return Err(ArgsError::new(
                "nodeAffinityType",
                "nodeAffinityType needs to be set",
            ));
        }
        if let Some(bad) = a
            .node_affinity_type
            .iter()
            .find(|t| *t != REQUIRED && *t != PREFERRED)
        {
            return Err(ArgsError::new(
                "nodeAffinityType",
                format!("{bad:?} is not one of {REQUIRED}, {PREFERRED}"),
            ));
        }
        Ok(RemovePodsViolatingNodeAffinity {
            filter,
            types: a.node_affinity_type,
        })
    }

    /// Whether `pod` on `node` violates affinity of `kind`. `best_scores` memoizes the best
    /// preferred-affinity weight over `nodes` per preferred-terms value (many owners share one).
    fn violates<'s>(
        &self,
        snapshot: &'s crate::snapshot::Snapshot,
        kind: &str,
        pod: PodId,
        node: NodeId,
        nodes: &[NodeId],
        best_scores: &mut BestScores<'s>,
    ) -> bool {
        let p = snapshot.pod(pod);
        let n = snapshot.node(node);
        match kind {
            REQUIRED => {
                affinity::has_required_node_affinity(p)
                    && !affinity::matches_node_selector_and_affinity(p, n)
                    && fit::fits_any_node(snapshot, pod, nodes)
            }
            _ => {
                if !affinity::has_preferred_node_affinity(p) {
                    return false;
                }
                let terms = preferred_terms(p);
                let bucket = best_scores.entry(terms_hash(terms)).or_default();
                let best = match bucket.iter().find(|(t, _)| *t == terms) {
                    Some(&(_, best)) => best,
                    None => {
                        let best = nodes
                            .iter()
                            .map(|&m| affinity::preferred_node_affinity_score(p, snapshot.node(m)))
                            .max()
                            .unwrap_or(0);
                        bucket.push((terms, best));
                        best
                    }
                };
                best > affinity::preferred_node_affinity_score(p, n)
                    && fit::fits_any_node(snapshot, pod, nodes)
            }
        }
    }
}

/// Why `pod` on `node` violates `kind` (after [`RemovePodsViolatingNodeAffinity::violates`] said
/// so, which filled `best_scores` for preferred terms).
fn affinity_reason(
    s: &Snapshot,
    kind: &str,
    pod: PodId,
    node: NodeId,
    best_scores: &BestScores<'_>,
) -> EvictionReason {
    let p = s.pod(pod);
    let name = &s.node(node).name;
    if kind == REQUIRED {
        return EvictionReason::new(
            "NodeAffinityRequired",
            format!("{name} does not match the pod's required node affinity / nodeSelector; another node does"),
        )
        .with("node", name.as_str());
    }
    let terms = preferred_terms(p);
    let score = affinity::preferred_node_affinity_score(p, s.node(node));
    let best = best_scores
        .get(&terms_hash(terms))
        .and_then(|b| b.iter().find(|(t, _)| *t == terms))
        .map_or(score, |&(_, b)| b);
    EvictionReason::new(
        "NodeAffinityPreferred",
        format!("preferred node affinity score {score} on {name} < {best} on another node"),
    )
    .with("node", name.as_str())
    .with("score", score)
    .with("bestScore", best)
}

/// Whether `pod` has node affinity of `kind` at all (the cheap first check of
/// [`RemovePodsViolatingNodeAffinity::violates`], made before the DefaultEvictor's Filter).
fn has_affinity(kind: &str, pod: &Pod) -> bool {
    if kind == REQUIRED {
        affinity::has_required_node_affinity(pod)
    } else {
        affinity::has_preferred_node_affinity(pod)
    }
}

/// Best preferred-affinity score over the plugin's nodes, by preferred terms (hash, then equality).
type BestScores<'s> = HashMap<u64, Vec<(&'s [PreferredSchedulingTerm], i64)>>;

/// The pod's preferred node affinity terms (empty when it has none).
fn preferred_terms(p: &Pod) -> &[PreferredSchedulingTerm] {
    p.affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or(&[])
}

/// A hash of preferred terms consistent with their equality.
fn terms_hash(terms: &[PreferredSchedulingTerm]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    for t in terms {
        t.weight.hash(&mut h);
        for (tag, reqs) in [
            (0u8, &t.preference.match_expressions),
            (1u8, &t.preference.match_fields),
        ] {
            tag.hash(&mut h);
            for r in reqs.iter().flatten() {
                (&r.key, &r.operator, &r.values).hash(&mut h);
            }
        }
    }
    h.finish()
}

extension_point!(Deschedule for RemovePodsViolatingNodeAffinity, NAME);

impl RemovePodsViolatingNodeAffinity {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, nodes) = (q.snapshot, q.pod, q.nodes);
        let p = s.pod(pod);
        let node = p.node?;
        let name = &s.node(node).name;
        Some(
            if !affinity::matches_node_selector_and_affinity(p, s.node(node)) {
                format!(
                    "{name} does not match its required node affinity / nodeSelector, but no other node fits it either (fits any node: {})",
                    fit::fits_any_node(s, pod, nodes)
                )
            } else if affinity::has_preferred_node_affinity(p) {
                format!(
                    "{name} matches its node affinity and no other node has a higher preferred score (or types excludes preferred)"
                )
            } else {
                format!("{name} matches its node affinity / nodeSelector (or it has none)")
            },
        )
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        for kind in &self.types {
            evict_per_node(
                h,
                nodes,
                |s, view, node, best_scores: &mut BestScores<'_>| {
                    s.pods_on_node(node)
                        .filter(|&p| {
                            let pod = s.pod(p);
                            !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed)
                                && has_affinity(kind, pod)
                                && !view.is_moved(p)
                                && self.filter.matches(pod)
                                && view.filter(p)
                                && self.violates(s, kind, p, node, nodes, best_scores)
                        })
                        .collect::<Vec<PodId>>()
                        .into_iter()
                        .map(|p| (p, affinity_reason(s, kind, p, node, best_scores)))
                        .collect()
                },
            );
        }
    }
}

#[cfg(test)]
mod tests;
