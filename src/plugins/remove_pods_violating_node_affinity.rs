//! RemovePodsViolatingNodeAffinity (Deschedule): for each `nodeAffinityType`, evicts pods whose
//! node no longer satisfies their required node affinity (when they fit some node), or — for
//! preferred affinity — when some node scores strictly higher than the current one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::framework::args::{ArgsError, Namespaces, decode};
use crate::framework::podfilter::PodFilter;
use crate::framework::registry::{ExtensionPoint, Plugin, PluginFactory};
use crate::framework::{DeschedulePlugin, Handle};
use crate::scheduling::{affinity, fit};
use crate::snapshot::model::PodPhase;
use crate::snapshot::{NodeId, PodId};

/// The plugin name.
pub const NAME: &str = "RemovePodsViolatingNodeAffinity";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// Args (upstream `RemovePodsViolatingNodeAffinityArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// Namespaces to include or exclude.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Only pods matching this selector.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// `requiredDuringSchedulingIgnoredDuringExecution` and/or `preferredDuringSchedulingIgnoredDuringExecution`.
    #[serde(default)]
    pub node_affinity_type: Vec<String>,
}

/// The built plugin.
pub struct RemovePodsViolatingNodeAffinity {
    filter: PodFilter,
    types: Vec<String>,
}

/// Registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory {
        name: NAME,
        point: ExtensionPoint::Deschedule,
        build,
    }
}

fn build(args: &serde_json::Value) -> Result<Plugin, ArgsError> {
    Ok(Plugin::Deschedule(Box::new(
        RemovePodsViolatingNodeAffinity::new(decode(args)?)?,
    )))
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
    /// preferred-affinity weight over `nodes` per shared affinity value (pods of one owner share it).
    fn violates(
        &self,
        h: &Handle<'_>,
        kind: &str,
        pod: PodId,
        node: NodeId,
        nodes: &[NodeId],
        best_scores: &mut std::collections::HashMap<usize, i64>,
    ) -> bool {
        let p = h.snapshot.pod(pod);
        let n = h.snapshot.node(node);
        match kind {
            REQUIRED => {
                affinity::has_required_node_affinity(p)
                    && !affinity::matches_node_selector_and_affinity(p, n)
                    && fit::fits_any_node(h.snapshot, pod, nodes)
            }
            _ => {
                if !affinity::has_preferred_node_affinity(p) {
                    return false;
                }
                let key = p
                    .affinity
                    .as_ref()
                    .map_or(0, |a| std::sync::Arc::as_ptr(a) as usize);
                let best = *best_scores.entry(key).or_insert_with(|| {
                    nodes
                        .iter()
                        .map(|&m| affinity::preferred_node_affinity_score(p, h.snapshot.node(m)))
                        .max()
                        .unwrap_or(0)
                });
                best > affinity::preferred_node_affinity_score(p, n)
                    && fit::fits_any_node(h.snapshot, pod, nodes)
            }
        }
    }
}

impl DeschedulePlugin for RemovePodsViolatingNodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let mut best_scores = std::collections::HashMap::new();
        for kind in &self.types {
            for &node in nodes {
                let pods: Vec<PodId> = h
                    .snapshot
                    .pods_on_node(node)
                    .filter(|&p| {
                        let pod = h.snapshot.pod(p);
                        !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed)
                            && !h.is_moved(p)
                            && self.filter.matches(pod)
                            && h.filter(p)
                            && self.violates(h, kind, p, node, nodes, &mut best_scores)
                    })
                    .collect();
                for p in pods {
                    match h.evict(p, None) {
                        Err(e) if e.is_node_limit() => break,
                        Err(e) if e.is_total_limit() => return,
                        _ => {}
                    }
                }
            }
        }
    }
}
