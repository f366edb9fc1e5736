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

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::framework::args::{self, ArgsError, Namespaces};
use crate::framework::parallel;
use crate::framework::podfilter::PodFilter;
use crate::framework::registry::ExtensionPoint;
use crate::framework::{DeschedulePlugin, Handle, Plugin, PluginFactory, sort};
use crate::scheduling::affinity::{self, CompiledAntiAffinityTerm};
use crate::snapshot::{NodeId, PodId, Snapshot};

/// The plugin name.
pub const NAME: &str = "RemovePodsViolatingInterPodAntiAffinity";

/// Args (upstream `RemovePodsViolatingInterPodAntiAffinityArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// Only (or all but) these namespaces.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Only pods matching this selector.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
}

/// The plugin.
#[derive(Debug, Clone)]
pub struct RemovePodsViolatingInterPodAntiAffinity {
    filter: PodFilter,
}

/// The registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory {
        name: NAME,
        point: ExtensionPoint::Deschedule,
        build,
    }
}

fn build(raw: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let a: Args = args::decode(raw)?;
    Ok(Plugin::Deschedule(Box::new(
        RemovePodsViolatingInterPodAntiAffinity::new(a)?,
    )))
}

impl RemovePodsViolatingInterPodAntiAffinity {
    /// Validates `args` (namespaces include/exclude exclusive, a valid label selector).
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces.clone(), a.label_selector.as_ref())?;
        Ok(RemovePodsViolatingInterPodAntiAffinity { filter })
    }

    fn selects(&self, s: &Snapshot, pod: PodId) -> bool {
        self.filter.matches(s.pod(pod))
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
        let s = self.s;
        let cand = s.pod(candidate);
        let Some(cand_node) = cand.node else {
            return false;
        };
        for term in terms {
            if term.is_invalid() {
                return false;
            }
            let conflicts = |o: PodId| {
                let other = s.pod(o);
                other.name != cand.name && term.selects(other)
            };
            let value = s.node(cand_node).labels.get(term.topology_key);
            let Some(value) = value else {
                // Without the key only the candidate's own node is its domain.
                if self.by_node[cand_node as usize]
                    .iter()
                    .any(|&o| !self.removed.contains(&o) && conflicts(o))
                {
                    return true;
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
                domain_nodes.iter().any(|&n| {
                    self.by_node[n as usize]
                        .iter()
                        .any(|&o| !self.removed.contains(&o) && conflicts(o))
                })
            } else {
                ns_pods.iter().flat_map(|v| v.iter()).any(|&o| {
                    !self.removed.contains(&o)
                        && s.pod(o).node.is_some_and(|on| {
                            on == cand_node
                                || s.node(on).labels.get(term.topology_key) == Some(value)
                        })
                        && conflicts(o)
                })
            };
            if found {
                return true;
            }
        }
        false
    }
}

impl DeschedulePlugin for RemovePodsViolatingInterPodAntiAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let s = h.snapshot;
        let mut by_node: Vec<Vec<PodId>> = vec![Vec::new(); s.nodes.len()];
        let mut by_namespace: HashMap<&str, Vec<PodId>> = HashMap::default();
        for &n in nodes {
            if by_node[n as usize].is_empty() {
                let listed: Vec<PodId> = s
                    .active_pods_on_node(n)
                    .filter(|&p| self.selects(s, p))
                    .collect();
                for &p in &listed {
                    by_namespace.entry(&s.pod(p).namespace).or_default().push(p);
                }
                by_node[n as usize] = listed;
            }
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
            parallel::MIN_PARALLEL_WEIGHT,
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
        'nodes: for pods in flagged {
            for p in pods {
                let terms = affinity::compile_anti_affinity_terms(s.pod(p));
                if !pool.violates(p, &terms) {
                    continue;
                }
                if !h.filter(p) {
                    continue;
                }
                match h.evict(p, None) {
                    Ok(_) => {
                        pool.removed.insert(p);
                    }
                    Err(e) if e.is_node_limit() => continue 'nodes,
                    Err(e) if e.is_total_limit() => return,
                    Err(_) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evictor::EvictionRecord;
    use crate::framework::cycle::{CycleConfig, Profile};
    use crate::plugins::default_evictor::DefaultEvictor;
    use crate::testing::{
        PodBuilder, evicted_names, node, pod, run_deschedule, run_profile, snapshot,
    };
    use k8s_openapi::api::core::v1 as core;
    use serde_json::json;

    fn term(labels: &[(&str, &str)], key: &str, namespaces: &[&str]) -> core::PodAffinityTerm {
        core::PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            }),
            topology_key: key.into(),
            namespaces: (!namespaces.is_empty())
                .then(|| namespaces.iter().map(|n| n.to_string()).collect()),
            ..Default::default()
        }
    }

    fn anti(terms: Vec<core::PodAffinityTerm>) -> core::Affinity {
        core::Affinity {
            pod_anti_affinity: Some(core::PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(terms),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn preferred_only() -> core::Affinity {
        core::Affinity {
            pod_anti_affinity: Some(core::PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    core::WeightedPodAffinityTerm {
                        weight: 100,
                        pod_affinity_term: term(&[("app", "db")], "kubernetes.io/hostname", &[]),
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const HOST: &str = "kubernetes.io/hostname";

    /// A pod `ns/name` on `node` labelled `app=db` that refuses other `app=db` pods on its host.
    fn db(ns: &str, name: &str, node: &str) -> PodBuilder {
        pod(ns, name, node)
            .label("app", "db")
            .affinity(anti(vec![term(&[("app", "db")], HOST, &[])]))
    }

    fn run(
        args: serde_json::Value,
        evictor: serde_json::Value,
        nodes: Vec<core::Node>,
        pods: Vec<core::Pod>,
    ) -> Vec<String> {
        let Plugin::Deschedule(plugin) = build(&args).expect("args") else {
            panic!("not a Deschedule plugin");
        };
        let ev = DefaultEvictor::from_args(&evictor).expect("evictor args");
        let mut s = snapshot(nodes, pods);
        evicted_names(&run_deschedule(plugin, ev, &mut s))
    }

    fn nodes2() -> Vec<core::Node> {
        vec![
            node("n1").label("zone", "a").build(),
            node("n2").label("zone", "a").build(),
            node("n3").label("zone", "b").build(),
        ]
    }

    /// name, plugin args, DefaultEvictor args, pods, evicted pods in order.
    type Case = (
        &'static str,
        serde_json::Value,
        serde_json::Value,
        Vec<core::Pod>,
        Vec<&'static str>,
    );

    #[test]
    fn evictions_table() {
        let none = json!({});
        let cases: Vec<Case> = vec![
            (
                "no anti-affinity: nothing",
                none.clone(),
                none.clone(),
                vec![
                    pod("ns", "a", "n1").label("app", "db").build(),
                    pod("ns", "b", "n1").label("app", "db").build(),
                ],
                vec![],
            ),
            (
                "two conflicting pods: only the first is evicted, the second no longer conflicts",
                none.clone(),
                none.clone(),
                vec![db("ns", "a", "n1").build(), db("ns", "b", "n1").build()],
                vec!["ns/a"],
            ),
            (
                "lowest priority first",
                none.clone(),
                none.clone(),
                vec![
                    db("ns", "high", "n1").priority(100).build(),
                    db("ns", "low", "n1").priority(1).build(),
                ],
                vec!["ns/low"],
            ),
            (
                "only the pod with the term is a candidate",
                none.clone(),
                none.clone(),
                vec![
                    pod("ns", "plain", "n1")
                        .label("app", "db")
                        .priority(1)
                        .build(),
                    db("ns", "strict", "n1").priority(100).build(),
                ],
                vec!["ns/strict"],
            ),
            (
                "different nodes, hostname key: no conflict",
                none.clone(),
                none.clone(),
                vec![db("ns", "a", "n1").build(), db("ns", "b", "n2").build()],
                vec![],
            ),
            (
                "zone key: same zone on another node conflicts",
                none.clone(),
                none.clone(),
                vec![
                    pod("ns", "a", "n1")
                        .label("app", "db")
                        .affinity(anti(vec![term(&[("app", "db")], "zone", &[])]))
                        .build(),
                    pod("ns", "b", "n2").label("app", "db").build(),
                ],
                vec!["ns/a"],
            ),
            (
                "zone key: other zone does not conflict",
                none.clone(),
                none.clone(),
                vec![
                    pod("ns", "a", "n1")
                        .label("app", "db")
                        .affinity(anti(vec![term(&[("app", "db")], "zone", &[])]))
                        .build(),
                    pod("ns", "b", "n3").label("app", "db").build(),
                ],
                vec![],
            ),
            (
                "same node lacking the key still conflicts",
                none.clone(),
                none.clone(),
                vec![
                    pod("ns", "a", "n1")
                        .affinity(anti(vec![term(&[("app", "db")], "rack", &[])]))
                        .build(),
                    pod("ns", "b", "n1").label("app", "db").build(),
                ],
                vec!["ns/a"],
            ),
            (
                "other namespace is not selected by default",
                none.clone(),
                none.clone(),
                vec![
                    db("ns", "a", "n1").build(),
                    pod("other", "b", "n1").label("app", "db").build(),
                ],
                vec![],
            ),
            (
                "term namespaces select the other namespace",
                none.clone(),
                none.clone(),
                vec![
                    pod("ns", "a", "n1")
                        .affinity(anti(vec![term(&[("app", "db")], HOST, &["other"])]))
                        .build(),
                    pod("other", "b", "n1").label("app", "db").build(),
                ],
                vec!["ns/a"],
            ),
            (
                "preferred anti-affinity is ignored",
                none.clone(),
                none.clone(),
                vec![
                    pod("ns", "a", "n1")
                        .label("app", "db")
                        .affinity(preferred_only())
                        .build(),
                    pod("ns", "b", "n1").label("app", "db").build(),
                ],
                vec![],
            ),
            (
                "unevictable pods count as the other side but are not evicted",
                none.clone(),
                none.clone(),
                vec![
                    db("ns", "bare", "n1").bare().priority(1).build(),
                    db("ns", "b", "n1").priority(5).build(),
                ],
                vec!["ns/b"],
            ),
            (
                "terminal pods are not the other side",
                none.clone(),
                none.clone(),
                vec![
                    db("ns", "a", "n1").build(),
                    pod("ns", "done", "n1")
                        .label("app", "db")
                        .phase("Succeeded")
                        .build(),
                ],
                vec![],
            ),
            (
                "namespaces.exclude hides candidates and the other side",
                json!({"namespaces": {"exclude": ["other"]}}),
                none.clone(),
                vec![
                    pod("ns", "a", "n1")
                        .affinity(anti(vec![term(&[("app", "db")], HOST, &["other"])]))
                        .build(),
                    pod("other", "b", "n1").label("app", "db").build(),
                ],
                vec![],
            ),
            (
                "namespaces.include",
                json!({"namespaces": {"include": ["ns2"]}}),
                none.clone(),
                vec![
                    db("ns", "a", "n1").build(),
                    db("ns", "b", "n1").build(),
                    db("ns2", "c", "n2").build(),
                    db("ns2", "d", "n2").build(),
                ],
                vec!["ns2/c"],
            ),
            (
                "labelSelector limits candidates and the other side",
                json!({"labelSelector": {"matchLabels": {"team": "x"}}}),
                none.clone(),
                vec![
                    db("ns", "a", "n1").label("team", "x").build(),
                    db("ns", "b", "n1").build(),
                ],
                vec![],
            ),
            (
                "labelSelector selecting both",
                json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
                none.clone(),
                vec![db("ns", "a", "n1").build(), db("ns", "b", "n1").build()],
                vec!["ns/a"],
            ),
            (
                "nodeFit: no other node fits, nothing evicted",
                none.clone(),
                json!({"nodeFit": true}),
                vec![
                    db("ns", "a", "n1")
                        .node_selector("kubernetes.io/hostname", "n1")
                        .build(),
                    db("ns", "b", "n1")
                        .node_selector("kubernetes.io/hostname", "n1")
                        .build(),
                ],
                vec![],
            ),
        ];
        for (name, args, ev, pods, want) in cases {
            assert_eq!(run(args, ev, nodes2(), pods), want, "{name}");
        }
    }

    #[test]
    fn node_limit_moves_to_next_node_and_total_limit_stops() {
        let pods = || {
            vec![
                db("ns", "a1", "n1").build(),
                db("ns", "a2", "n1").build(),
                db("ns", "a3", "n1").build(),
                db("ns", "b1", "n2").build(),
                db("ns", "b2", "n2").build(),
            ]
        };
        let profile = || Profile {
            name: "p".into(),
            evictor: Box::new(DefaultEvictor::default()),
            deschedule: vec![Box::new(
                RemovePodsViolatingInterPodAntiAffinity::new(Args::default()).expect("args"),
            )],
            balance: vec![],
        };
        let go = |cfg: CycleConfig| -> Vec<String> {
            let mut s = snapshot(nodes2(), pods());
            let r: Vec<EvictionRecord> = run_profile(profile(), &cfg, &mut s);
            evicted_names(&r)
        };
        assert_eq!(go(CycleConfig::default()), vec!["ns/a1", "ns/a2", "ns/b1"]);
        assert_eq!(
            go(CycleConfig {
                max_per_node: Some(1),
                ..Default::default()
            }),
            vec!["ns/a1", "ns/b1"]
        );
        assert_eq!(
            go(CycleConfig {
                max_total: Some(1),
                ..Default::default()
            }),
            vec!["ns/a1"]
        );
    }

    #[test]
    fn invalid_term_selector_is_no_violation() {
        let bad = core::PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                        key: "app".into(),
                        operator: "Bogus".into(),
                        values: None,
                    },
                ]),
                ..Default::default()
            }),
            topology_key: HOST.into(),
            ..Default::default()
        };
        let pods = vec![
            pod("ns", "a", "n1")
                .label("app", "db")
                .affinity(anti(vec![bad, term(&[("app", "db")], HOST, &[])]))
                .build(),
            pod("ns", "b", "n1").label("app", "db").build(),
        ];
        assert!(run(json!({}), json!({}), nodes2(), pods).is_empty());
    }

    #[test]
    fn args_are_strict_and_validated() {
        assert!(build(&serde_json::Value::Null).is_ok());
        let cases = [
            (json!({"bogus": 1}), "bogus"),
            (
                json!({"namespaces": {"include": ["a"], "exclude": ["b"]}}),
                "namespaces",
            ),
            (
                json!({"namespaces": {"includ": ["a"]}}),
                "namespaces.includ",
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
                "labelSelector",
            ),
            (json!({"labelSelector": "app=x"}), "labelSelector"),
        ];
        for (args, field) in cases {
            match build(&args) {
                Err(e) => assert_eq!(e.field, field, "{args}: {e}"),
                Ok(_) => panic!("{args} should fail"),
            }
        }
        let e = build(&json!({"bogus": 1})).err().map(|e| e.message);
        assert!(e.is_some_and(|m| m.contains("bogus")));
    }
}
