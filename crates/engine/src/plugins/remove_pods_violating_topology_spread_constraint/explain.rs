//! `--explain` for a pod the plugin did not choose: per constraint, the pod's domain count against
//! the smallest domain and `maxSkew`, counted as the plugin counts them.

use rustc_hash::FxHashMap as HashMap;

use super::{Constraint, RemovePodsViolatingTopologySpreadConstraint};
use crate::snapshot::{NodeId, PodId, Snapshot};

/// Why the plugin left `pod` alone, with its numbers, on the cluster as the plan starts. Pods are
/// counted before the DefaultEvictor's Filter and before earlier plugins' evictions (the plugin
/// counts after both), so a count here can be higher than the plugin's.
pub(super) fn explain(
    plugin: &RemovePodsViolatingTopologySpreadConstraint,
    s: &Snapshot,
    pod: PodId,
    nodes: &[NodeId],
) -> String {
    let p = s.pod(pod);
    if p.topology_spread_constraints.is_empty() {
        return "it has no topology spread constraints".to_string();
    }
    if !plugin.filter.matches(p) {
        return "it is excluded by the plugin's namespaces / labelSelector".to_string();
    }
    let mut parts = Vec::new();
    for c in p.topology_spread_constraints.iter() {
        let key = c.topology_key.as_str();
        if !plugin.constraints.contains(&c.when_unsatisfiable) {
            parts.push(format!(
                "{key}: whenUnsatisfiable {} is not in the plugin's constraints",
                c.when_unsatisfiable
            ));
            continue;
        }
        let Some(tsc) = Constraint::new(c, p) else {
            parts.push(format!("{key}: its labelSelector is invalid"));
            continue;
        };
        let Some(own) = p.node.and_then(|n| s.node(n).labels.get(key)) else {
            parts.push(format!(
                "{key}: its node has no {key} label, so it is in no domain"
            ));
            continue;
        };
        let (counts, index) = domain_counts(plugin, s, pod, &tsc, key, nodes);
        let here = index.get(own.as_str()).map_or(0, |&i| counts[i].1);
        let Some(&(min_value, min)) = counts
            .iter()
            .min_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)))
        else {
            continue;
        };
        let skew = here as i64 - min as i64;
        let max_skew = c.max_skew;
        let numbers = format!(
            "{key} {own} has {here} matching pods, the smallest domain {min_value} has {min}: skew {skew}"
        );
        parts.push(if skew <= max_skew as i64 {
            format!("{numbers} <= maxSkew {max_skew}")
        } else {
            format!(
                "{numbers} > maxSkew {max_skew}, but other pods of {own} were chosen to move (pods with a nodeSelector or node affinity go last, then by priority), evictions earlier in the plan changed the counts, or nodeFit / the DefaultEvictor stopped it"
            )
        });
    }
    parts.join("; ")
}

/// Per domain of `key`, the pods `tsc` counts, in the plugin's node order: values of included
/// nodes, then of nodes with counted pods (a pod on an excluded node still creates its domain, as
/// the plugin does); and each value's position in that list.
fn domain_counts<'s>(
    plugin: &RemovePodsViolatingTopologySpreadConstraint,
    s: &'s Snapshot,
    pod: PodId,
    tsc: &Constraint<'_>,
    key: &str,
    nodes: &[NodeId],
) -> DomainCounts<'s> {
    let p = s.pod(pod);
    let mut counts: Vec<(&str, usize)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::default();
    let filters = tsc.filters_nodes();
    for &n in nodes {
        let node = s.node(n);
        if let Some(v) = node.labels.get(key)
            && (!filters || tsc.includes(node))
            && !index.contains_key(v.as_str())
        {
            index.insert(v.as_str(), counts.len());
            counts.push((v.as_str(), 0));
        }
    }
    for &n in nodes {
        let Some(v) = s.node(n).labels.get(key) else {
            continue;
        };
        for o in s.active_pods_on_node(n) {
            let other = s.pod(o);
            if other.namespace != p.namespace
                || other.is_terminating()
                || !plugin.filter.matches(other)
                || !tsc.counts(other)
            {
                continue;
            }
            let i = *index.entry(v.as_str()).or_insert_with(|| {
                counts.push((v.as_str(), 0));
                counts.len() - 1
            });
            counts[i].1 += 1;
        }
    }
    (counts, index)
}

/// Pods counted per domain value, and each value's position among them.
type DomainCounts<'s> = (Vec<(&'s str, usize)>, HashMap<&'s str, usize>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::args::decode;
    use crate::testing::{node, pod, snapshot};
    use k8s_openapi::api::core::v1::TopologySpreadConstraint;
    use serde_json::json;

    fn constraint(max_skew: i32, key: &str, when: &str) -> TopologySpreadConstraint {
        match serde_json::from_value(json!({"maxSkew": max_skew, "topologyKey": key,
            "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": "web"}}}))
        {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn gives_the_domain_count_against_the_smallest_and_max_skew() {
        let zone = constraint(1, "zone", "DoNotSchedule");
        let spread = |name: &str, node: &str| {
            let c = zone.clone();
            pod("ns", name, node)
                .label("app", "web")
                .with(move |p| {
                    if let Some(spec) = p.spec.as_mut() {
                        spec.topology_spread_constraints = Some(vec![c]);
                    }
                })
                .build()
        };
        // zone a: 3 pods, zone b: 2, zone c: 1 (and a pod of another app that is not counted).
        let s = snapshot(
            vec![
                node("n1").label("zone", "a").build(),
                node("n2").label("zone", "b").build(),
                node("n3").label("zone", "c").build(),
                node("n4").build(),
            ],
            vec![
                spread("a1", "n1"),
                spread("a2", "n1"),
                spread("a3", "n1"),
                spread("b1", "n2"),
                spread("b2", "n2"),
                spread("c1", "n3"),
                pod("ns", "other", "n3").label("app", "db").build(),
                spread("nowhere", "n4"),
                pod("ns", "soft", "n3")
                    .label("app", "web")
                    .with(|p| {
                        if let Some(spec) = p.spec.as_mut() {
                            spec.topology_spread_constraints =
                                Some(vec![constraint(1, "zone", "ScheduleAnyway")]);
                        }
                    })
                    .build(),
            ],
        );
        let plugin = match decode(&json!({})).map(RemovePodsViolatingTopologySpreadConstraint::new)
        {
            Ok(Ok(p)) => p,
            _ => panic!("default args"),
        };
        let nodes: Vec<NodeId> = (0..s.nodes.len() as NodeId).collect();
        let explain = |name: &str| {
            let id = s
                .pods
                .iter()
                .position(|p| p.name == name)
                .unwrap_or_else(|| panic!("no pod {name}")) as PodId;
            explain(&plugin, &s, id, &nodes)
        };
        // `soft` counts too: it is labelled app=web (the constraint's selector), whatever its own
        // constraint says; so zone c has 2.
        assert_eq!(
            explain("b1"),
            "zone b has 2 matching pods, the smallest domain b has 2: skew 0 <= maxSkew 1"
        );
        assert_eq!(
            explain("a1"),
            "zone a has 3 matching pods, the smallest domain b has 2: skew 1 <= maxSkew 1"
        );
        assert_eq!(
            explain("nowhere"),
            "zone: its node has no zone label, so it is in no domain"
        );
        assert_eq!(
            explain("soft"),
            "zone: whenUnsatisfiable ScheduleAnyway is not in the plugin's constraints"
        );
        assert_eq!(explain("other"), "it has no topology spread constraints");

        // zone a: 4, zone b: 1 (skew 3): one pod moves, the other three of zone a stay.
        let s = snapshot(
            vec![
                node("n1").label("zone", "a").build(),
                node("n2").label("zone", "b").build(),
            ],
            vec![
                spread("a1", "n1"),
                spread("a2", "n1"),
                spread("a3", "n1"),
                spread("a4", "n1"),
                spread("b1", "n2"),
            ],
        );
        let nodes: Vec<NodeId> = (0..s.nodes.len() as NodeId).collect();
        let id = s
            .pods
            .iter()
            .position(|p| p.name == "a1")
            .unwrap_or(usize::MAX) as PodId;
        assert_eq!(
            super::explain(&plugin, &s, id, &nodes),
            "zone a has 4 matching pods, the smallest domain b has 1: skew 3 > maxSkew 1, but other pods of a were chosen to move (pods with a nodeSelector or node affinity go last, then by priority), evictions earlier in the plan changed the counts, or nodeFit / the DefaultEvictor stopped it"
        );
    }
}
