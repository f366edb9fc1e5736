//! Whether a pod fits a node (upstream `nodeutil.NodeFit`): the node is schedulable, the pod's
//! nodeSelector and required node affinity match, NoSchedule/NoExecute taints are tolerated, the
//! pod's required anti-affinity selects no pod on the node, and — except on the pod's own node —
//! the node has a free pod slot and enough free allocatable for every requested resource.
//!
//! Usage is the sum of requests of the node's non-terminal pods ([`Snapshot::node_usage`], cached
//! per cycle), so checking many nodes is cheap. [`PodFit`] prepares a pod once for many nodes.

use super::affinity::{self, CompiledAntiAffinityTerm};
use super::taints;
use crate::snapshot::resources::PODS;
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

/// Why a pod does not fit a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    /// nodeSelector / required node affinity.
    Selector,
    /// An untolerated NoSchedule/NoExecute taint.
    Taint,
    /// Not enough of a resource (name; `pods` for no free pod slot).
    Resource(String),
    /// The node is cordoned.
    Unschedulable,
    /// The pod's required anti-affinity selects a pod on the node (or its selector is invalid).
    AntiAffinity,
}

/// A pod prepared for fit checks against many nodes (anti-affinity selectors compiled once).
pub struct PodFit<'s> {
    snapshot: &'s Snapshot,
    pod: &'s Pod,
    anti_affinity: Vec<CompiledAntiAffinityTerm<'s>>,
}

impl<'s> PodFit<'s> {
    /// Prepares `pod`.
    pub fn new(snapshot: &'s Snapshot, pod: PodId) -> Self {
        let p = snapshot.pod(pod);
        PodFit {
            snapshot,
            pod: p,
            anti_affinity: affinity::compile_anti_affinity_terms(p),
        }
    }

    /// Whether the pod fits `node` (cheapest predicates first).
    pub fn fits(&self, node: NodeId) -> bool {
        let n = self.snapshot.node(node);
        !n.unschedulable
            && affinity::matches_node_selector_and_affinity(self.pod, n)
            && taints::tolerates_all(
                &self.pod.tolerations,
                &n.taints,
                taints::is_scheduling_taint,
            )
            && (self.pod.node == Some(node) || self.insufficient_resource(node).is_none())
            && !self.anti_affinity_conflict(node)
    }

    /// Every reason the pod does not fit `node` (empty: it fits).
    pub fn misfits(&self, node: NodeId) -> Vec<Misfit> {
        let n = self.snapshot.node(node);
        let mut misfits = Vec::new();
        if n.unschedulable {
            misfits.push(Misfit::Unschedulable);
        }
        if !affinity::matches_node_selector_and_affinity(self.pod, n) {
            misfits.push(Misfit::Selector);
        }
        if !taints::tolerates_all(
            &self.pod.tolerations,
            &n.taints,
            taints::is_scheduling_taint,
        ) {
            misfits.push(Misfit::Taint);
        }
        if self.anti_affinity_conflict(node) {
            misfits.push(Misfit::AntiAffinity);
        }
        if self.pod.node != Some(node)
            && let Some(res) = self.insufficient_resource(node)
        {
            misfits.push(Misfit::Resource(res));
        }
        misfits
    }

    /// The first resource `node` lacks for the pod: a free pod slot (allocatable `pods` minus the
    /// node's non-terminal pods must be > 0), then every resource the pod requests (free =
    /// allocatable − requests of non-terminal pods; a resource the node lacks counts as 0).
    pub fn insufficient_resource(&self, node: NodeId) -> Option<String> {
        let n = self.snapshot.node(node);
        let usage = self.snapshot.node_usage(node);
        if n.allocatable.pods - usage.pods <= 0 {
            return Some(PODS.into());
        }
        for name in self.pod.requests.names() {
            if name == PODS {
                continue;
            }
            let want = self.pod.requests.get(name);
            if want > 0 && want > n.allocatable.get(name) - usage.requested.get(name) {
                return Some(name.to_string());
            }
        }
        None
    }

    /// Whether the pod's required anti-affinity rejects `node` (upstream
    /// `podMatchesInterPodAntiAffinity`): a term selects a non-terminal pod on the node with a
    /// different name and the node has the term's topology key; an invalid selector rejects every
    /// node.
    pub fn anti_affinity_conflict(&self, node: NodeId) -> bool {
        if self.anti_affinity.is_empty() {
            return false;
        }
        if self.anti_affinity.iter().any(|t| t.is_invalid()) {
            return true;
        }
        let n = self.snapshot.node(node);
        self.anti_affinity.iter().any(|t| {
            n.labels.contains_key(t.topology_key)
                && self.snapshot.active_pods_on_node(node).any(|o| {
                    let other = self.snapshot.pod(o);
                    other.name != self.pod.name && t.selects(other)
                })
        })
    }
}

/// Checks whether `pod` fits `node`, returning every reason it does not.
pub fn node_fit(snapshot: &Snapshot, pod: PodId, node: NodeId) -> Vec<Misfit> {
    PodFit::new(snapshot, pod).misfits(node)
}

/// Whether `pod` fits `node`.
pub fn fits(snapshot: &Snapshot, pod: PodId, node: NodeId) -> bool {
    PodFit::new(snapshot, pod).fits(node)
}

/// Whether `pod` fits some node of `nodes` other than its own (upstream `PodFitsAnyOtherNode`).
pub fn fits_any_other_node(snapshot: &Snapshot, pod: PodId, nodes: &[NodeId]) -> bool {
    let f = PodFit::new(snapshot, pod);
    let own = f.pod.node;
    nodes.iter().any(|&n| Some(n) != own && f.fits(n))
}

/// Whether `pod` fits some node of `nodes` (its own included; upstream `PodFitsAnyNode`).
pub fn fits_any_node(snapshot: &Snapshot, pod: PodId, nodes: &[NodeId]) -> bool {
    let f = PodFit::new(snapshot, pod);
    nodes.iter().any(|&n| f.fits(n))
}

/// The first resource `node` lacks for `pod` (see [`PodFit::insufficient_resource`]). Ignores
/// whether `node` is the pod's own node.
pub fn insufficient_resource(snapshot: &Snapshot, pod: &Pod, node: NodeId) -> Option<String> {
    PodFit {
        snapshot,
        pod,
        anti_affinity: Vec::new(),
    }
    .insufficient_resource(node)
}

/// Whether `pod`'s required anti-affinity rejects `node` (see [`PodFit::anti_affinity_conflict`]).
pub fn anti_affinity_conflict(snapshot: &Snapshot, pod: PodId, node: NodeId) -> bool {
    PodFit::new(snapshot, pod).anti_affinity_conflict(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, snapshot};
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn req(key: &str, op: &str, values: &[&str]) -> core::NodeSelectorRequirement {
        core::NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: if values.is_empty() {
                None
            } else {
                Some(values.iter().map(|v| v.to_string()).collect())
            },
        }
    }

    /// Required node affinity with one term of `exprs` and `fields`.
    fn node_affinity(
        exprs: Vec<core::NodeSelectorRequirement>,
        fields: Vec<core::NodeSelectorRequirement>,
    ) -> core::Affinity {
        core::Affinity {
            node_affinity: Some(core::NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(core::NodeSelector {
                    node_selector_terms: vec![core::NodeSelectorTerm {
                        match_expressions: (!exprs.is_empty()).then_some(exprs),
                        match_fields: (!fields.is_empty()).then_some(fields),
                    }],
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn anti_affinity(labels: &[(&str, &str)], key: &str) -> core::Affinity {
        let term = crate::testing::affinity_term(labels, key);
        crate::testing::required_anti_affinity(vec![term])
    }

    /// Target node `n2` (label `tier=web`, `gen=5`), the candidate `ns/p` on `n1`, plus `others`
    /// pods; returns the misfits of `p` on `target`.
    fn check(
        target: core::Node,
        candidate: core::Pod,
        others: Vec<core::Pod>,
        on: &str,
    ) -> Vec<Misfit> {
        let mut pods = vec![candidate];
        pods.extend(others);
        let s = snapshot(vec![node("n1").build(), target], pods);
        let (Some(p), Some(n)) = (Some(0), s.node_id(on)) else {
            panic!("missing node {on}");
        };
        let misfits = node_fit(&s, p, n);
        assert_eq!(
            fits(&s, p, n),
            misfits.is_empty(),
            "fits agrees with node_fit"
        );
        misfits
    }

    fn target() -> crate::testing::NodeBuilder {
        node("n2").label("tier", "web").label("gen", "5")
    }

    /// name, target node, candidate pod, other pods, node checked, expected misfits.
    type Case = (
        &'static str,
        core::Node,
        core::Pod,
        Vec<core::Pod>,
        &'static str,
        Vec<Misfit>,
    );

    #[test]
    fn node_fit_table() {
        use Misfit::*;
        let p = || pod("ns", "p", "n1");
        let cases: Vec<Case> = vec![
            (
                "plain pod fits",
                target().build(),
                p().build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "nodeSelector matches",
                target().build(),
                p().node_selector("tier", "web").build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "nodeSelector mismatch",
                target().build(),
                p().node_selector("tier", "db").build(),
                vec![],
                "n2",
                vec![Selector],
            ),
            (
                "affinity In",
                target().build(),
                p().affinity(node_affinity(
                    vec![req("tier", "In", &["x", "web"])],
                    vec![],
                ))
                .build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "affinity In without values is invalid",
                target().build(),
                p().affinity(node_affinity(vec![req("tier", "In", &[])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![Selector],
            ),
            (
                "affinity NotIn",
                target().build(),
                p().affinity(node_affinity(vec![req("tier", "NotIn", &["web"])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![Selector],
            ),
            (
                "affinity NotIn on a missing label matches",
                target().build(),
                p().affinity(node_affinity(vec![req("zone", "NotIn", &["a"])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "affinity Exists",
                target().build(),
                p().affinity(node_affinity(vec![req("tier", "Exists", &[])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "affinity DoesNotExist",
                target().build(),
                p().affinity(node_affinity(
                    vec![req("tier", "DoesNotExist", &[])],
                    vec![],
                ))
                .build(),
                vec![],
                "n2",
                vec![Selector],
            ),
            (
                "affinity Gt",
                target().build(),
                p().affinity(node_affinity(vec![req("gen", "Gt", &["4"])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "affinity Gt equal fails",
                target().build(),
                p().affinity(node_affinity(vec![req("gen", "Gt", &["5"])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![Selector],
            ),
            (
                "affinity Lt",
                target().build(),
                p().affinity(node_affinity(vec![req("gen", "Lt", &["6"])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "affinity Lt non-integer fails",
                target().build(),
                p().affinity(node_affinity(vec![req("tier", "Lt", &["6"])], vec![]))
                    .build(),
                vec![],
                "n2",
                vec![Selector],
            ),
            (
                "matchFields metadata.name In",
                target().build(),
                p().affinity(node_affinity(
                    vec![],
                    vec![req("metadata.name", "In", &["n2"])],
                ))
                .build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "matchFields metadata.name NotIn",
                target().build(),
                p().affinity(node_affinity(
                    vec![],
                    vec![req("metadata.name", "NotIn", &["n2"])],
                ))
                .build(),
                vec![],
                "n2",
                vec![Selector],
            ),
            (
                "taint NoSchedule untolerated",
                target()
                    .taint("dedicated", Some("gpu"), "NoSchedule")
                    .build(),
                p().build(),
                vec![],
                "n2",
                vec![Taint],
            ),
            (
                "taint NoSchedule tolerated",
                target()
                    .taint("dedicated", Some("gpu"), "NoSchedule")
                    .build(),
                p().toleration("dedicated", "Equal", Some("gpu"), Some("NoSchedule"))
                    .build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "taint NoExecute untolerated",
                target().taint("dedicated", None, "NoExecute").build(),
                p().toleration("dedicated", "Exists", None, Some("NoSchedule"))
                    .build(),
                vec![],
                "n2",
                vec![Taint],
            ),
            (
                "taint PreferNoSchedule ignored",
                target().taint("soft", None, "PreferNoSchedule").build(),
                p().build(),
                vec![],
                "n2",
                vec![],
            ),
            (
                "insufficient cpu",
                target().allocatable("1", "16Gi", "110").build(),
                p().requests("600m", "1Mi").build(),
                vec![pod("ns", "o", "n2").requests("500m", "1Mi").build()],
                "n2",
                vec![Resource("cpu".into())],
            ),
            (
                "cpu exactly fills the node",
                target().allocatable("1", "16Gi", "110").build(),
                p().requests("500m", "1Mi").build(),
                vec![pod("ns", "o", "n2").requests("500m", "1Mi").build()],
                "n2",
                vec![],
            ),
            (
                "insufficient memory",
                target().allocatable("4", "1Gi", "110").build(),
                p().requests("1m", "600Mi").build(),
                vec![pod("ns", "o", "n2").requests("1m", "500Mi").build()],
                "n2",
                vec![Resource("memory".into())],
            ),
            (
                "extended resource missing on node",
                target().build(),
                p().request("nvidia.com/gpu", "1").build(),
                vec![],
                "n2",
                vec![Resource("nvidia.com/gpu".into())],
            ),
            (
                "extended resource used up",
                target().resource("nvidia.com/gpu", "1").build(),
                p().request("nvidia.com/gpu", "1").build(),
                vec![pod("ns", "o", "n2").request("nvidia.com/gpu", "1").build()],
                "n2",
                vec![Resource("nvidia.com/gpu".into())],
            ),
            (
                "extended resource available",
                target().resource("nvidia.com/gpu", "2").build(),
                p().request("nvidia.com/gpu", "1").build(),
                vec![pod("ns", "o", "n2").request("nvidia.com/gpu", "1").build()],
                "n2",
                vec![],
            ),
            (
                "no free pod slot",
                target().allocatable("4", "16Gi", "1").build(),
                p().build(),
                vec![pod("ns", "o", "n2").build()],
                "n2",
                vec![Resource("pods".into())],
            ),
            (
                "Succeeded and Failed pods free resources and slots",
                target().allocatable("1", "16Gi", "2").build(),
                p().requests("600m", "1Mi").build(),
                vec![
                    pod("ns", "done", "n2")
                        .requests("900m", "1Mi")
                        .phase("Succeeded")
                        .build(),
                    pod("ns", "failed", "n2")
                        .requests("900m", "1Mi")
                        .phase("Failed")
                        .build(),
                    pod("ns", "o", "n2").requests("400m", "1Mi").build(),
                ],
                "n2",
                vec![],
            ),
            (
                "own node skips the resource check",
                node("n2").build(),
                p().requests("100", "1Mi").build(),
                vec![],
                "n1",
                vec![],
            ),
            (
                "unschedulable",
                target().unschedulable().build(),
                p().build(),
                vec![],
                "n2",
                vec![Unschedulable],
            ),
            (
                "anti-affinity conflict",
                target().build(),
                p().affinity(anti_affinity(&[("app", "db")], "kubernetes.io/hostname"))
                    .build(),
                vec![pod("ns", "o", "n2").label("app", "db").build()],
                "n2",
                vec![AntiAffinity],
            ),
            (
                "anti-affinity: node lacks the topology key",
                target().build(),
                p().affinity(anti_affinity(&[("app", "db")], "zone"))
                    .build(),
                vec![pod("ns", "o", "n2").label("app", "db").build()],
                "n2",
                vec![],
            ),
            (
                "anti-affinity: other namespace not selected",
                target().build(),
                p().affinity(anti_affinity(&[("app", "db")], "kubernetes.io/hostname"))
                    .build(),
                vec![pod("other", "o", "n2").label("app", "db").build()],
                "n2",
                vec![],
            ),
            (
                "anti-affinity: terminal pods do not count",
                target().build(),
                p().affinity(anti_affinity(&[("app", "db")], "kubernetes.io/hostname"))
                    .build(),
                vec![
                    pod("ns", "o", "n2")
                        .label("app", "db")
                        .phase("Succeeded")
                        .build(),
                ],
                "n2",
                vec![],
            ),
            (
                "anti-affinity: a pod with the same name is skipped",
                target().build(),
                p().affinity(anti_affinity(&[("app", "db")], "kubernetes.io/hostname"))
                    .build(),
                vec![pod("other", "p", "n2").label("app", "db").build()],
                "n2",
                vec![],
            ),
            (
                "every misfit reported",
                target()
                    .unschedulable()
                    .taint("k", None, "NoSchedule")
                    .allocatable("1", "1Gi", "110")
                    .build(),
                p().node_selector("tier", "db").requests("2", "1Mi").build(),
                vec![],
                "n2",
                vec![Unschedulable, Selector, Taint, Resource("cpu".into())],
            ),
        ];
        for (name, target, candidate, others, on, want) in cases {
            assert_eq!(check(target, candidate, others, on), want, "{name}");
        }
    }

    #[test]
    fn invalid_anti_affinity_selector_fits_nowhere() {
        let mut a = anti_affinity(&[], "kubernetes.io/hostname");
        if let Some(t) = a.pod_anti_affinity.as_mut().and_then(|x| {
            x.required_during_scheduling_ignored_during_execution
                .as_mut()
        }) {
            t[0].label_selector = Some(LabelSelector {
                match_expressions: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                        key: "app".into(),
                        operator: "In".into(),
                        values: None,
                    },
                ]),
                ..Default::default()
            });
        }
        let s = snapshot(
            vec![node("n1").build(), node("n2").build()],
            vec![pod("ns", "p", "n1").affinity(a).build()],
        );
        assert_eq!(node_fit(&s, 0, 1), vec![Misfit::AntiAffinity]);
        assert!(!fits_any_other_node(&s, 0, &[0, 1]));
    }

    #[test]
    fn any_other_node_skips_own_and_sees_evictions() {
        let mut s = snapshot(
            vec![
                node("n1").build(),
                node("n2").allocatable("1", "16Gi", "110").build(),
            ],
            vec![
                pod("ns", "p", "n1").requests("600m", "1Mi").build(),
                pod("ns", "big", "n2").requests("500m", "1Mi").build(),
            ],
        );
        assert!(fits_any_node(&s, 0, &[0, 1]), "own node always has room");
        assert!(!fits_any_other_node(&s, 0, &[0, 1]));
        // Evicting the big pod frees n2; the cached usage is dropped.
        s.mark_evicted(1);
        assert!(fits_any_other_node(&s, 0, &[0, 1]));
        s.reset_evictions();
        assert!(!fits_any_other_node(&s, 0, &[0, 1]));
        assert_eq!(
            insufficient_resource(&s, s.pod(0), 1),
            Some("cpu".to_string())
        );
        assert!(!anti_affinity_conflict(&s, 0, 1));
    }
}
