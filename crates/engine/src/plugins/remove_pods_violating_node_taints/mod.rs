//! RemovePodsViolatingNodeTaints (Deschedule): evicts pods that do not tolerate a `NoSchedule`
//! taint (and `PreferNoSchedule` when `includePreferNoSchedule`) on their node. `NoExecute` taints
//! are left to the kubelet's taint manager, as upstream.

use super::{PodQuestion, extension_point};
use std::collections::HashSet;

use k8s_openapi::api::core::v1::Taint;

use crate::evictor::EvictionReason;
use crate::framework::Handle;
use crate::framework::args::ArgsError;
use crate::framework::per_node::evict_per_node;
use crate::framework::podfilter::PodFilter;
use crate::scheduling::taints;
use crate::snapshot::model::PodPhase;
use crate::snapshot::{NodeId, PodId, Snapshot};

mod args;
pub use args::Args;

/// The plugin name.
pub const NAME: &str = "RemovePodsViolatingNodeTaints";

/// The built plugin.
pub struct RemovePodsViolatingNodeTaints {
    filter: PodFilter,
    include_prefer_no_schedule: bool,
    excluded: HashSet<String>,
    included: Option<HashSet<String>>,
}

fn named(set: &HashSet<String>, t: &Taint) -> bool {
    set.contains(&t.key)
        || t.value
            .as_deref()
            .is_some_and(|v| !v.is_empty() && set.contains(&format!("{}={v}", t.key)))
}

impl RemovePodsViolatingNodeTaints {
    /// Validates `args` and builds the plugin.
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces, a.label_selector.as_ref())?;
        if !a.excluded_taints.is_empty()
            && a.included_taints.as_ref().is_some_and(|i| !i.is_empty())
        {
            return Err(ArgsError::new(
                "includedTaints",
                "either includedTaints or excludedTaints can be set, but not both",
            ));
        }
        Ok(RemovePodsViolatingNodeTaints {
            filter,
            include_prefer_no_schedule: a.include_prefer_no_schedule,
            excluded: a.excluded_taints.into_iter().collect(),
            included: a.included_taints.map(|v| v.into_iter().collect()),
        })
    }

    /// Whether `t` is a taint this plugin enforces.
    fn considered(&self, t: &Taint) -> bool {
        let effect = t.effect == "NoSchedule"
            || (self.include_prefer_no_schedule && t.effect == "PreferNoSchedule");
        effect
            && !named(&self.excluded, t)
            && self.included.as_ref().is_none_or(|inc| named(inc, t))
    }
}

/// A taint as `kubectl` prints it: `key=value:Effect`.
fn taint_text(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

impl RemovePodsViolatingNodeTaints {
    /// The first taint of `node` this plugin enforces that `pod` does not tolerate.
    fn untolerated<'s>(&self, s: &'s Snapshot, pod: PodId, node: NodeId) -> Option<&'s Taint> {
        let tolerations = &s.pod(pod).tolerations;
        s.node(node).taints.iter().find(|t| {
            self.considered(t)
                && !taints::tolerates_all(tolerations, std::slice::from_ref(*t), |_| true)
        })
    }

    fn reason(&self, s: &Snapshot, pod: PodId, node: NodeId) -> EvictionReason {
        let name = &s.node(node).name;
        let taint = self
            .untolerated(s, pod, node)
            .map(taint_text)
            .unwrap_or_default();
        EvictionReason::new(
            "TaintNotTolerated",
            format!("{name} taint {taint} not tolerated"),
        )
        .with("node", name.as_str())
        .with("taint", taint)
    }
}

extension_point!(Deschedule for RemovePodsViolatingNodeTaints, NAME);

impl RemovePodsViolatingNodeTaints {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod) = (q.snapshot, q.pod);
        let node = s.pod(pod).node?;
        Some(match self.untolerated(s, pod, node) {
            None => format!(
                "it tolerates every taint of {} this plugin enforces",
                s.node(node).name
            ),
            Some(t) => format!(
                "{} taint {} is not tolerated, but the plugin's namespaces / labelSelector exclude the pod",
                s.node(node).name,
                taint_text(t)
            ),
        })
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        evict_per_node(h, nodes, |s, view, node, _: &mut ()| {
            let taints = &s.node(node).taints;
            s.pods_on_node(node)
                .filter(|&p| {
                    let pod = s.pod(p);
                    // Succeeded and Failed pods hold no resources and are not considered (upstream ListPodsOnANode).
                    !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed)
                        && self.filter.matches(pod)
                        && !taints::tolerates_all(&pod.tolerations, taints, |t| self.considered(t))
                        && view.filter(p)
                })
                .map(|p| (p, self.reason(s, p, node)))
                .collect()
        });
    }
}
