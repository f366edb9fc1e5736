//! RetireNodes (Deschedule): evicts the pods of nodes a label selector marks for retirement — a
//! node-pool upgrade or a hardware refresh — `nodesPerCycle` nodes per cycle, the nodes with the
//! fewest pods first (they empty soonest, so capacity comes back in whole nodes). Cordon or taint
//! the nodes as well so that replacements land elsewhere; with the DefaultEvictor's `nodeFit`, a
//! pod is only evicted when another node can take it.

use kube_descheduler::plugin::{
    ArgsError, DeschedulePlugin, EvictionReason, Handle, Namespaces, NodeId, PluginArgs,
    PluginFactory, PodId, Selector, SelectorExt, Snapshot, Timestamp, decode_args, parse_selector,
};
use serde::Deserialize;

/// The plugin's registered name.
pub const NAME: &str = "RetireNodes";

/// The plugin's args.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetireNodesArgs {
    /// Label selector (`kubectl -l` syntax) of the retiring nodes, e.g.
    /// `lifecycle.example.com/retire=true` or `pool-version in (1,2)`. Required.
    #[serde(default)]
    pub node_selector: String,
    /// How many retiring nodes are drained per cycle (default 1).
    #[serde(default = "one")]
    pub nodes_per_cycle: u32,
    /// Only (or all but) pods of these namespaces.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
}

fn one() -> u32 {
    1
}

impl PluginArgs for RetireNodesArgs {
    fn validate(&self) -> Result<(), ArgsError> {
        if self.node_selector.trim().is_empty() {
            return Err(ArgsError::new(
                "nodeSelector",
                "required: the label selector of the retiring nodes (an empty one would retire every node)",
            ));
        }
        if self.nodes_per_cycle == 0 {
            return Err(ArgsError::new("nodesPerCycle", "must be at least 1"));
        }
        if let Some(ns) = &self.namespaces {
            ns.validate("namespaces")?;
        }
        Ok(())
    }
}

/// The built plugin.
pub struct RetireNodes {
    name: String,
    args: RetireNodesArgs,
    selector: Selector,
}

/// The registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory::deschedule(NAME, |args| RetireNodes::from_args(NAME, args))
}

impl RetireNodes {
    /// Decodes (strictly), defaults and validates `args`.
    pub fn from_args(name: &str, args: &serde_json::Value) -> Result<Self, ArgsError> {
        let args: RetireNodesArgs = decode_args(args)?;
        let selector =
            parse_selector(&args.node_selector).map_err(|e| ArgsError::new("nodeSelector", e))?;
        Ok(RetireNodes {
            name: name.to_string(),
            args,
            selector,
        })
    }

    /// The retiring nodes among `nodes`, in drain order (fewest active pods first, then by
    /// name), and how many of them this cycle drains.
    fn retiring(&self, s: &Snapshot, nodes: &[NodeId]) -> (Vec<NodeId>, usize) {
        let mut retiring: Vec<(usize, &str, NodeId)> = nodes
            .iter()
            .filter(|&&n| self.selector.matches(&s.node(n).labels))
            .map(|&n| (s.active_pods_on_node(n).count(), s.node(n).name.as_str(), n))
            .collect();
        retiring.sort_unstable();
        let batch = retiring.len().min(self.args.nodes_per_cycle as usize);
        (retiring.into_iter().map(|(_, _, n)| n).collect(), batch)
    }

    fn in_scope(&self, s: &Snapshot, pod: PodId) -> bool {
        self.args
            .namespaces
            .as_ref()
            .is_none_or(|ns| ns.allows(&s.pod(pod).namespace))
    }
}

impl DeschedulePlugin for RetireNodes {
    fn name(&self) -> &str {
        &self.name
    }

    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let (retiring, batch) = self.retiring(h.snapshot, nodes);
        let drained = &retiring[..batch];
        h.mark_emptying(drained.iter().copied());
        for (i, &node) in drained.iter().enumerate() {
            let node_name = h.snapshot.node(node).name.clone();
            let pods: Vec<PodId> = h
                .snapshot
                .active_pods_on_node(node)
                .filter(|&p| self.in_scope(h.snapshot, p) && h.filter(p))
                .collect();
            let on_node = h.snapshot.active_pods_on_node(node).count();
            for pod in pods {
                let reason = EvictionReason::new(
                    "NodeRetiring",
                    format!(
                        "node {node_name} is retiring ({}): node {} of {batch} drained this cycle, {} retiring in all, {on_node} pods on it",
                        self.args.node_selector,
                        i + 1,
                        retiring.len()
                    ),
                )
                .with("node", node_name.as_str())
                .with("retiringNodes", retiring.len() as i64)
                .with("nodesPerCycle", i64::from(self.args.nodes_per_cycle))
                .with("podsOnNode", on_node as i64);
                match h.evict_because(pod, reason) {
                    Err(e) if e.is_total_limit() => return,
                    Err(e) if e.is_node_limit() => break,
                    _ => {}
                }
            }
        }
    }

    fn explain_pod(
        &self,
        s: &Snapshot,
        pod: PodId,
        nodes: &[NodeId],
        _now: Timestamp,
    ) -> Option<String> {
        let p = s.pod(pod);
        let Some(node) = p.node else {
            return Some("the pod is not bound to a node of the snapshot".into());
        };
        if !self.in_scope(s, pod) {
            return Some(format!("namespace {} is out of scope", p.namespace));
        }
        let name = &s.node(node).name;
        if !self.selector.matches(&s.node(node).labels) {
            return Some(format!(
                "node {name} is not retiring (its labels do not match {})",
                self.args.node_selector
            ));
        }
        let (retiring, batch) = self.retiring(s, nodes);
        match retiring.iter().position(|&n| n == node) {
            None => Some(format!(
                "node {name} is retiring but not Ready or outside the policy's nodeSelector"
            )),
            Some(i) if i >= batch => Some(format!(
                "node {name} is retiring, number {} in drain order; this cycle drains the first {batch} of {}",
                i + 1,
                retiring.len()
            )),
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1 as core;
    use kube_descheduler::testing::{
        evicted_names, node, now, pod, profile, run_profile, snapshot,
    };
    use serde_json::json;

    const RETIRE: &str = "lifecycle.example.com/retire";

    fn cluster() -> (Vec<core::Node>, Vec<core::Pod>) {
        let nodes = vec![
            node("old-a").label(RETIRE, "true").build(),
            node("old-b").label(RETIRE, "true").build(),
            node("new-1").build(),
        ];
        let pods = vec![
            pod("shop", "a1", "old-a").build(),
            pod("shop", "a2", "old-a").build(),
            pod("batch", "a3", "old-a").build(),
            pod("shop", "b1", "old-b").build(),
            pod("shop", "b2", "old-b").build(),
            pod("shop", "n1", "new-1").build(),
        ];
        (nodes, pods)
    }

    /// Runs `plugin` in profile `p` on [`cluster`]; returns the records.
    fn run(plugin: RetireNodes) -> Vec<kube_descheduler::evictor::EvictionRecord> {
        let (nodes, pods) = cluster();
        let mut snap = snapshot(nodes, pods);
        let profile = profile(vec![Box::new(plugin)], vec![]);
        run_profile(profile, &Default::default(), &mut snap)
    }

    fn evicted(args: serde_json::Value) -> Vec<String> {
        let plugin = RetireNodes::from_args(NAME, &args).expect("valid args");
        let records = run(plugin);
        let reasons: Vec<_> = records.iter().map(|r| r.reason.text.clone()).collect();
        assert!(
            records
                .iter()
                .all(|r| &*r.plugin == NAME && r.reason.code == "NodeRetiring"),
            "{reasons:?}"
        );
        evicted_names(&records)
    }

    #[test]
    fn drains_the_emptiest_retiring_node_first_one_batch_per_cycle() {
        // old-b has 2 pods, old-a 3: old-b empties first; new-1 is never touched.
        assert_eq!(
            evicted(json!({"nodeSelector": format!("{RETIRE}=true")})),
            ["shop/b1", "shop/b2"]
        );
        assert_eq!(
            evicted(json!({"nodeSelector": format!("{RETIRE}=true"), "nodesPerCycle": 2})),
            ["shop/b1", "shop/b2", "shop/a1", "shop/a2", "batch/a3"]
        );
        assert_eq!(
            evicted(
                json!({"nodeSelector": format!("{RETIRE}=true"), "nodesPerCycle": 5,
                           "namespaces": {"include": ["batch"]}})
            ),
            ["batch/a3"]
        );
        assert!(evicted(json!({"nodeSelector": "pool=none"})).is_empty());
    }

    #[test]
    fn the_reason_carries_the_numbers() {
        let plugin =
            RetireNodes::from_args(NAME, &json!({"nodeSelector": format!("{RETIRE}=true")}))
                .expect("valid");
        let records = run(plugin);
        let r = &records[0].reason;
        assert_eq!(
            r.text,
            "node old-b is retiring (lifecycle.example.com/retire=true): node 1 of 1 drained this cycle, 2 retiring in all, 2 pods on it"
        );
        assert_eq!(r.detail.number("retiringNodes"), Some(2.0));
        assert_eq!(r.detail.number("podsOnNode"), Some(2.0));
    }

    #[test]
    fn explains_why_a_pod_stays() {
        let plugin =
            RetireNodes::from_args(NAME, &json!({"nodeSelector": format!("{RETIRE}=true")}))
                .expect("valid");
        let (nodes, pods) = cluster();
        let snap = snapshot(nodes, pods);
        let all: Vec<NodeId> = (0..snap.nodes.len() as NodeId).collect();
        let id = |name: &str| {
            (0..snap.pods.len() as PodId)
                .find(|&p| snap.pod(p).name == name)
                .expect("pod")
        };
        let why = |name| plugin.explain_pod(&snap, id(name), &all, now());
        assert_eq!(why("b1"), None, "selected");
        assert_eq!(
            why("a1").as_deref(),
            Some(
                "node old-a is retiring, number 2 in drain order; this cycle drains the first 1 of 2"
            )
        );
        assert!(why("n1").is_some_and(|w| w.contains("node new-1 is not retiring")));
    }

    #[test]
    fn bad_args_name_the_field() {
        let err = |args| match RetireNodes::from_args(NAME, &args) {
            Ok(_) => panic!("{args} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err(json!({})).starts_with("args.nodeSelector: required"));
        assert_eq!(
            err(json!({"nodeSelector": "a=b", "nodesPerCycle": 0})),
            "args.nodesPerCycle: must be at least 1"
        );
        assert!(
            err(json!({"nodeSelector": "a=b", "nodesPerCycle": -1}))
                .starts_with("args.nodesPerCycle: ")
        );
        assert!(err(json!({"nodeSelector": "a=b", "batch": 2})).contains("unknown field `batch`"));
        assert!(err(json!({"nodeSelector": "a in (b"})).starts_with("args.nodeSelector: "));
        assert!(
            err(json!({"nodeSelector": "a=b", "namespaces": {"include": ["x"], "exclude": ["y"]}}))
                .starts_with("args.namespaces: ")
        );
    }
}
