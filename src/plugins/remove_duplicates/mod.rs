//! RemoveDuplicates (Balance): spreads pods of the same owner and images over the nodes they could
//! run on. On each node the first matching pod seen is the original and later ones duplicates; an
//! owner key (namespace / owner kind / owner name / sorted images) with `n` pods over `t` feasible
//! nodes keeps at most `ceil(n / t)` pods per node. Feasible nodes are those whose NoSchedule /
//! NoExecute taints the duplicates tolerate and whose labels match their nodeSelector and required
//! node affinity (cordoned nodes count, as upstream); fewer than two means nothing is evicted.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use serde::Deserialize;

use super::node_utilization::occupies;
use crate::framework::args::{ArgsError, Namespaces, allows_namespace, decode};
use crate::framework::parallel;
use crate::framework::registry::ExtensionPoint;
use crate::framework::{BalancePlugin, Handle, Plugin, PluginFactory};
use crate::scheduling::{affinity, taints};
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

/// The plugin name.
pub const NAME: &str = "RemoveDuplicates";

/// RemoveDuplicates args (upstream `RemoveDuplicatesArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoveDuplicatesArgs {
    /// Namespaces to include or exclude.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Pods with an owner of one of these kinds are ignored.
    #[serde(default)]
    pub exclude_owner_kinds: Vec<String>,
}

/// The RemoveDuplicates plugin.
#[derive(Debug)]
pub struct RemoveDuplicates {
    args: RemoveDuplicatesArgs,
}

impl RemoveDuplicates {
    /// A plugin with validated `args`.
    pub fn new(args: RemoveDuplicatesArgs) -> Result<Self, ArgsError> {
        if let Some(ns) = &args.namespaces {
            ns.validate("namespaces")?;
        }
        Ok(RemoveDuplicates { args })
    }
}

fn build(args: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let args: RemoveDuplicatesArgs = decode(args)?;
    Ok(Plugin::Balance(Box::new(RemoveDuplicates::new(args)?)))
}

/// The registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory {
        name: NAME,
        point: ExtensionPoint::Balance,
        build,
    }
}

/// Per-pod maps keyed by cluster data: FxHash is several times faster than SipHash here.
type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// Namespace, owner kind, owner name and the id of the pod's sorted image list.
type OwnerKey<'a> = (&'a str, &'a str, &'a str, u32);

/// What makes two pods on a node duplicates: the same namespace, owners and images. (Upstream
/// compares the sorted `namespace/kind/name/image` strings of every owner × image.)
#[derive(Debug, PartialEq, Eq, Hash)]
enum DupKey<'a> {
    /// One owner: its owner key (group index) says it all.
    Single(u32),
    /// Several owners: the namespace and the sorted (kind, name, image) triples.
    Multi(&'a str, Vec<(&'a str, &'a str, &'a str)>),
}

/// Pods of one owner key: how many there are and the duplicates found on each node.
#[derive(Debug, Default)]
struct Group {
    occurrences: u32,
    /// Some node holds two pods with a duplicate key involving this owner key (before the
    /// evictor's filters, which can only remove pods).
    hot: bool,
    duplicates: Vec<(NodeId, Vec<PodId>)>,
}

/// The allocation addresses of a pod's owner list, image list and namespace: pods of one owner
/// share them, and so their duplicate and owner keys.
type MemoKey = (usize, usize, usize);

fn memo_key(pod: &Pod) -> MemoKey {
    (
        Arc::as_ptr(&pod.owners) as *const () as usize,
        Arc::as_ptr(&pod.images) as *const () as usize,
        Arc::as_ptr(&pod.namespace) as *const () as usize,
    )
}

/// A pod that passed the cheap checks (owners, namespace, excluded kinds).
struct Candidate {
    pod: PodId,
    node: u32,
    dup: u32,
    groups: std::ops::Range<u32>,
}

/// Hash of a pod's scheduling signature (tolerations, nodeSelector, required node affinity).
fn signature_hash(p: &Pod) -> u64 {
    let mut h = DefaultHasher::new();
    for t in p.tolerations.iter() {
        (
            &t.key,
            &t.operator,
            &t.value,
            &t.effect,
            t.toleration_seconds,
        )
            .hash(&mut h);
    }
    p.node_selector.hash(&mut h);
    for term in affinity::required_node_terms(p).unwrap_or(&[]) {
        for e in term.match_expressions.iter().flatten() {
            (0u8, &e.key, &e.operator, &e.values).hash(&mut h);
        }
        for f in term.match_fields.iter().flatten() {
            (1u8, &f.key, &f.operator, &f.values).hash(&mut h);
        }
        2u8.hash(&mut h);
    }
    h.finish()
}

/// The nodes a pod could land on, by scheduling signature; pods with equal signatures share it.
struct Feasibility<'a> {
    snapshot: &'a Snapshot,
    nodes: &'a [NodeId],
    signatures: Vec<(PodId, Vec<NodeId>)>,
    by_hash: HashMap<u64, Vec<usize>>,
}

impl<'a> Feasibility<'a> {
    fn same_signature(a: &Pod, b: &Pod) -> bool {
        a.tolerations == b.tolerations
            && a.node_selector == b.node_selector
            && affinity::required_node_terms(a) == affinity::required_node_terms(b)
    }

    /// Index of the signature of `pod`, computing its feasible nodes on first sight: NoSchedule /
    /// NoExecute taints tolerated, nodeSelector and required node affinity matched.
    fn signature(&mut self, pod: PodId) -> usize {
        let p = self.snapshot.pod(pod);
        let bucket = self.by_hash.entry(signature_hash(p)).or_default();
        if let Some(&i) = bucket
            .iter()
            .find(|&&i| Self::same_signature(self.snapshot.pod(self.signatures[i].0), p))
        {
            return i;
        }
        let feasible = self
            .nodes
            .iter()
            .copied()
            .filter(|&n| {
                let node = self.snapshot.node(n);
                taints::tolerates_all(&p.tolerations, &node.taints, taints::is_scheduling_taint)
                    && affinity::matches_node_selector_and_affinity(p, node)
            })
            .collect();
        let i = self.signatures.len();
        self.signatures.push((pod, feasible));
        bucket.push(i);
        i
    }
}

impl BalancePlugin for RemoveDuplicates {
    fn name(&self) -> &'static str {
        NAME
    }

    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let snapshot = h.snapshot;
        let excluded_kinds = &self.args.exclude_owner_kinds;
        let mut image_ids: FxMap<Vec<&str>, u32> = FxMap::default();
        let mut group_of: FxMap<OwnerKey<'_>, u32> = FxMap::default();
        let mut groups: Vec<Group> = Vec::new();
        let mut dup_ids: FxMap<DupKey<'_>, u32> = FxMap::default();
        // Per duplicate key: the last node (index into `nodes`) it was seen on, for each pass.
        let mut last_node: Vec<u32> = Vec::new();
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut group_ids: Vec<u32> = Vec::new();
        let mut images: Vec<&str> = Vec::new();
        // Memo key → (duplicate key, group ids range).
        let mut memo: FxMap<MemoKey, (u32, u32, u32)> = FxMap::default();

        // Pass 1: the cheap checks; find the owner keys with co-located duplicates. The evictor's
        // filters can only remove pods, so an owner key not found here cannot have duplicates
        // and they are run in pass 2 for the pods of the others only.
        //
        // The checks read each pod and run on several threads; ids are then given on this thread
        // in node order, so they come out as one sequential pass would give them.
        let indexed: Vec<(u32, NodeId)> = (0u32..).zip(nodes.iter().copied()).collect();
        let checked: Vec<Vec<(u32, PodId, MemoKey)>> = parallel::map_chunks(
            &indexed,
            |&(_, n)| snapshot.pods_on_node_upper_bound(n),
            parallel::MIN_PARALLEL_WEIGHT,
            |chunk| {
                let mut out = Vec::new();
                for &(ni, node) in chunk {
                    for p in snapshot.pods_on_node(node) {
                        let pod = snapshot.pod(p);
                        if occupies(pod)
                            && !pod.owners.is_empty()
                            && !pod.images.is_empty()
                            && !pod.owners.iter().any(|o| excluded_kinds.contains(&o.kind))
                            && allows_namespace(&self.args.namespaces, &pod.namespace)
                        {
                            out.push((ni, p, memo_key(pod)));
                        }
                    }
                }
                out
            },
        );
        for (ni, p, memo_key) in checked.into_iter().flatten() {
            // Pods of one owner share their owner and image lists: their keys are computed once,
            // for the first of them (same ids, in the same first-seen order).
            let (dup, range) = if let Some(&(dup, start, end)) = memo.get(&memo_key) {
                (dup, start..end)
            } else {
                let pod = snapshot.pod(p);
                images.clear();
                images.extend(pod.images.iter().map(String::as_str));
                images.sort_unstable();
                let next_id = image_ids.len() as u32;
                let images_id = match image_ids.get(images.as_slice()) {
                    Some(&id) => id,
                    None => {
                        image_ids.insert(images.clone(), next_id);
                        next_id
                    }
                };
                let ns: &str = &pod.namespace;
                let first = group_ids.len() as u32;
                for o in pod.owners.iter() {
                    let next = groups.len() as u32;
                    let g = *group_of
                        .entry((ns, o.kind.as_str(), o.name.as_str(), images_id))
                        .or_insert(next);
                    if g == next {
                        groups.push(Group::default());
                    }
                    group_ids.push(g);
                }
                let dup_key = if pod.owners.len() == 1 {
                    DupKey::Single(group_ids[first as usize])
                } else {
                    let mut triples: Vec<_> = pod
                        .owners
                        .iter()
                        .flat_map(|o| {
                            images
                                .iter()
                                .map(|&img| (o.kind.as_str(), o.name.as_str(), img))
                        })
                        .collect();
                    triples.sort_unstable();
                    DupKey::Multi(ns, triples)
                };
                let next = dup_ids.len() as u32;
                let dup = *dup_ids.entry(dup_key).or_insert(next);
                if dup == next {
                    last_node.push(u32::MAX);
                }
                let range = first..group_ids.len() as u32;
                memo.insert(memo_key, (dup, range.start, range.end));
                (dup, range)
            };
            if last_node[dup as usize] == ni {
                for &g in &group_ids[range.start as usize..range.end as usize] {
                    groups[g as usize].hot = true;
                }
            } else {
                last_node[dup as usize] = ni;
            }
            candidates.push(Candidate {
                pod: p,
                node: ni,
                dup,
                groups: range,
            });
        }

        // Pass 2: pods of hot owner keys that pass the Filter and the PreEvictionFilter are
        // counted; on each node the first pod of a duplicate key is the original.
        last_node.iter_mut().for_each(|n| *n = u32::MAX);
        // The filters are pure while nothing is evicted: evaluated on several threads first.
        let view = h.filter_view();
        let passes: Vec<bool> = parallel::map_chunks(
            &candidates,
            |_| 1,
            parallel::MIN_PARALLEL_WEIGHT,
            |chunk| {
                chunk
                    .iter()
                    .map(|c| {
                        group_ids[c.groups.start as usize..c.groups.end as usize]
                            .iter()
                            .any(|&g| groups[g as usize].hot)
                            && view.filter(c.pod)
                            && view.pre_eviction_filter(c.pod)
                    })
                    .collect::<Vec<bool>>()
            },
        )
        .into_iter()
        .flatten()
        .collect();
        for (c, _) in candidates.iter().zip(&passes).filter(|(_, pass)| **pass) {
            let gs = &group_ids[c.groups.start as usize..c.groups.end as usize];
            for &g in gs {
                groups[g as usize].occurrences += 1;
            }
            if last_node[c.dup as usize] != c.node {
                last_node[c.dup as usize] = c.node;
                continue;
            }
            let node = nodes[c.node as usize];
            for &g in gs {
                let dups = &mut groups[g as usize].duplicates;
                match dups.last_mut() {
                    Some((n, pods)) if *n == node => pods.push(c.pod),
                    _ => dups.push((node, vec![c.pod])),
                }
            }
        }
        drop(candidates);

        let mut feasibility = Feasibility {
            snapshot,
            nodes,
            signatures: Vec::new(),
            by_hash: HashMap::new(),
        };
        let mut mark = vec![u32::MAX; snapshot.nodes.len()];
        let mut sigs: Vec<usize> = Vec::new();
        for (gi, group) in groups.iter().enumerate() {
            if group.duplicates.is_empty() {
                continue;
            }
            // Feasible nodes: the union, over the duplicates' signatures, of those with at least
            // two feasible nodes.
            sigs.clear();
            for (_, pods) in &group.duplicates {
                for &p in pods {
                    let s = feasibility.signature(p);
                    if !sigs.contains(&s) {
                        sigs.push(s);
                    }
                }
            }
            let mut targets = 0usize;
            for &s in &sigs {
                let feasible = &feasibility.signatures[s].1;
                if feasible.len() < 2 {
                    continue;
                }
                for &n in feasible {
                    if mark[n as usize] != gi as u32 {
                        mark[n as usize] = gi as u32;
                        targets += 1;
                    }
                }
            }
            if targets < 2 {
                tracing::debug!(
                    plugin = NAME,
                    "fewer than two feasible nodes for duplicates"
                );
                continue;
            }
            let upper = (group.occurrences as usize).div_ceil(targets);
            'nodes: for (_, pods) in &group.duplicates {
                // The original is not in the list: the node holds `pods.len() + 1`.
                if pods.len() < upper {
                    continue;
                }
                for &p in &pods[upper.saturating_sub(1)..] {
                    // Duplicates passed the PreEvictionFilter in pass 2.
                    match h.evict_prefiltered(p, None) {
                        Ok(_) => {}
                        Err(e) if e.is_total_limit() => return,
                        Err(e) if e.is_node_limit() => continue 'nodes,
                        Err(_) => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::cycle::{CycleConfig, Profile};
    use crate::plugins::default_evictor::DefaultEvictor;
    use crate::testing::{evicted_names, node, pod, run_balance, run_profile, snapshot};
    use k8s_openapi::api::core::v1 as core;
    use serde_json::{Value, json};

    fn plugin(args: Value) -> Box<dyn BalancePlugin> {
        match build(&args) {
            Ok(Plugin::Balance(p)) => p,
            Ok(_) => panic!("not a balance plugin"),
            Err(e) => panic!("{e}"),
        }
    }

    fn run(args: Value, nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Vec<String> {
        let mut snap = snapshot(nodes, pods);
        evicted_names(&run_balance(
            plugin(args),
            DefaultEvictor::default(),
            &mut snap,
        ))
    }

    /// `count` replicas `<rs>-<i>` of ReplicaSet `rs` in `ns` on `node`.
    fn replicas(ns: &str, rs: &str, node: &str, count: usize) -> Vec<core::Pod> {
        (0..count)
            .map(|i| {
                pod(ns, &format!("{rs}-{node}-{i}"), node)
                    .owner("ReplicaSet", rs)
                    .build()
            })
            .collect()
    }

    fn three_nodes() -> Vec<core::Node> {
        vec![node("n1").build(), node("n2").build(), node("n3").build()]
    }

    #[test]
    fn evicts_above_the_upper_average() {
        // 6 pods on n1, 0 elsewhere: ceil(6 / 3) = 2 stay.
        let pods = replicas("default", "rs", "n1", 6);
        assert_eq!(
            run(json!({}), three_nodes(), pods),
            [
                "default/rs-n1-2",
                "default/rs-n1-3",
                "default/rs-n1-4",
                "default/rs-n1-5"
            ]
        );
    }

    #[test]
    fn upper_average_counts_every_node() {
        // n1: 5, n2: 2, n3: 0 → ceil(7 / 3) = 3: n1 loses 2, n2 keeps its 2.
        let mut pods = replicas("default", "rs", "n1", 5);
        pods.extend(replicas("default", "rs", "n2", 2));
        assert_eq!(
            run(json!({}), three_nodes(), pods),
            ["default/rs-n1-3", "default/rs-n1-4"]
        );
        // n1: 2, n2: 2, n3: 2 → nothing.
        let mut pods = replicas("default", "rs", "n1", 2);
        pods.extend(replicas("default", "rs", "n2", 2));
        pods.extend(replicas("default", "rs", "n3", 2));
        assert!(run(json!({}), three_nodes(), pods).is_empty());
    }

    #[test]
    fn different_images_or_owners_are_not_duplicates() {
        let mut pods = replicas("default", "rs", "n1", 2);
        pods[1] = pod("default", "other-image", "n1")
            .owner("ReplicaSet", "rs")
            .with(|p| {
                p.spec.as_mut().unwrap().containers[0].image = Some("redis".into());
            })
            .build();
        pods.push(
            pod("default", "other-rs", "n1")
                .owner("ReplicaSet", "rs2")
                .build(),
        );
        pods.push(
            pod("other", "other-ns", "n1")
                .owner("ReplicaSet", "rs")
                .build(),
        );
        pods.push(pod("default", "bare", "n1").bare().build());
        pods.push(pod("default", "bare2", "n1").bare().build());
        assert!(run(json!({}), three_nodes(), pods).is_empty());
    }

    #[test]
    fn image_order_does_not_matter() {
        let two_images = |name: &str, first: &str, second: &str| {
            let (first, second) = (first.to_string(), second.to_string());
            pod("default", name, "n1")
                .owner("ReplicaSet", "rs")
                .with(move |p| {
                    let spec = p.spec.as_mut().unwrap();
                    spec.containers[0].image = Some(first);
                    let mut c = spec.containers[0].clone();
                    c.name = "sidecar".into();
                    c.image = Some(second);
                    spec.containers.push(c);
                })
                .build()
        };
        let pods = vec![
            two_images("a", "nginx", "envoy"),
            two_images("b", "envoy", "nginx"),
            two_images("c", "nginx", "envoy"),
        ];
        // ceil(3 / 3) = 1: both later pods are duplicates of the first.
        assert_eq!(
            run(json!({}), three_nodes(), pods),
            ["default/b", "default/c"]
        );
    }

    #[test]
    fn exclude_owner_kinds() {
        let mut pods = replicas("default", "rs", "n1", 4);
        pods.extend((0..4).map(|i| {
            pod("default", &format!("job-{i}"), "n1")
                .owner("Job", "job")
                .build()
        }));
        assert_eq!(
            run(
                json!({"excludeOwnerKinds": ["ReplicaSet"]}),
                three_nodes(),
                pods.clone()
            ),
            ["default/job-2", "default/job-3"]
        );
        assert_eq!(run(json!({}), three_nodes(), pods).len(), 4);
    }

    #[test]
    fn namespaces_include_and_exclude() {
        let mut pods = replicas("a", "rs", "n1", 3);
        pods.extend(replicas("b", "rs", "n1", 3));
        assert_eq!(
            run(
                json!({"namespaces": {"include": ["a"]}}),
                three_nodes(),
                pods.clone()
            ),
            ["a/rs-n1-1", "a/rs-n1-2"]
        );
        assert_eq!(
            run(
                json!({"namespaces": {"exclude": ["a"]}}),
                three_nodes(),
                pods.clone()
            ),
            ["b/rs-n1-1", "b/rs-n1-2"]
        );
        assert_eq!(
            run(json!({}), three_nodes(), pods),
            ["a/rs-n1-1", "a/rs-n1-2", "b/rs-n1-1", "b/rs-n1-2"]
        );
    }

    #[test]
    fn infeasible_nodes_do_not_count() {
        let nodes = vec![
            node("n1").build(),
            node("n2").unschedulable().build(),
            node("n3").taint("dedicated", None, "NoSchedule").build(),
            node("n4")
                .taint("soft", None, "PreferNoSchedule")
                .label("zone", "b")
                .build(),
        ];
        let pods = replicas("default", "rs", "n1", 6);
        // n1, n2 (cordoned still counts) and n4 (PreferNoSchedule ignored): ceil(6 / 3) = 2.
        assert_eq!(run(json!({}), nodes.clone(), pods).len(), 4);
        // With a nodeSelector on zone=b only n4 matches: fewer than two targets.
        let pods: Vec<core::Pod> = (0..6)
            .map(|i| {
                pod("default", &format!("z{i}"), "n1")
                    .owner("ReplicaSet", "rs")
                    .node_selector("zone", "b")
                    .build()
            })
            .collect();
        assert!(run(json!({}), nodes.clone(), pods).is_empty());
        // Tolerating the taint brings n3 in: 4 targets → ceil(6 / 4) = 2 stay.
        let pods: Vec<core::Pod> = (0..6)
            .map(|i| {
                pod("default", &format!("t{i}"), "n1")
                    .owner("ReplicaSet", "rs")
                    .toleration("dedicated", "Exists", None, None)
                    .build()
            })
            .collect();
        assert_eq!(
            run(json!({}), nodes, pods),
            ["default/t2", "default/t3", "default/t4", "default/t5"]
        );
    }

    #[test]
    fn taint_reduces_the_target_count() {
        let nodes = vec![
            node("n1").build(),
            node("n2").build(),
            node("n3").taint("dedicated", None, "NoExecute").build(),
        ];
        // Two targets: ceil(6 / 2) = 3 stay.
        assert_eq!(
            run(json!({}), nodes, replicas("default", "rs", "n1", 6)),
            ["default/rs-n1-3", "default/rs-n1-4", "default/rs-n1-5"]
        );
    }

    #[test]
    fn fewer_than_two_targets_evicts_nothing() {
        let nodes = vec![
            node("n1").build(),
            node("n2").taint("dedicated", None, "NoSchedule").build(),
        ];
        assert!(run(json!({}), nodes, replicas("default", "rs", "n1", 4)).is_empty());
    }

    #[test]
    fn unevictable_pods_are_neither_originals_nor_counted() {
        // The first pod has local storage (not evictable): the second is the original.
        let mut pods = replicas("default", "rs", "n1", 4);
        pods[0] = pod("default", "local", "n1")
            .owner("ReplicaSet", "rs")
            .empty_dir()
            .build();
        // 3 evictable pods over 3 nodes: 1 stays.
        assert_eq!(
            run(json!({}), three_nodes(), pods),
            ["default/rs-n1-2", "default/rs-n1-3"]
        );
    }

    #[test]
    fn node_limit_moves_to_the_next_node() {
        let mut pods = replicas("default", "rs", "n1", 4);
        pods.extend(replicas("default", "rs", "n2", 4));
        let nodes = vec![
            node("n1").build(),
            node("n2").build(),
            node("n3").build(),
            node("n4").build(),
        ];
        let mut snap = snapshot(nodes, pods);
        let records = run_profile(
            Profile {
                name: "p".into(),
                evictor: Box::new(DefaultEvictor::default()),
                deschedule: vec![],
                balance: vec![plugin(json!({}))],
            },
            &CycleConfig {
                max_per_node: Some(1),
                ..Default::default()
            },
            &mut snap,
        );
        // ceil(8 / 4) = 2: two to go per node, the node limit allows one each.
        assert_eq!(
            evicted_names(&records),
            ["default/rs-n1-2", "default/rs-n2-2"]
        );
    }

    #[test]
    fn pre_eviction_filter_applies_before_counting() {
        // nodeFit: n1's first pod fits nowhere else (nodeSelector to n1), so it is neither the
        // original nor counted: 4 over 3 nodes → 2 stay (counting it, 3 would be evicted).
        let mut pods = replicas("default", "rs", "n1", 5);
        pods[0] = pod("default", "pinned", "n1")
            .owner("ReplicaSet", "rs")
            .node_selector("kubernetes.io/hostname", "n1")
            .build();
        let mut snap = snapshot(three_nodes(), pods);
        let evictor = DefaultEvictor::from_args(&json!({"nodeFit": true})).unwrap();
        let records = run_balance(plugin(json!({})), evictor, &mut snap);
        assert_eq!(
            evicted_names(&records),
            ["default/rs-n1-3", "default/rs-n1-4"]
        );
    }

    #[test]
    fn feasible_nodes_are_the_union_over_duplicate_signatures() {
        let nodes = vec![
            node("n1").label("zone", "a").build(),
            node("n2").label("zone", "a").build(),
            node("n3").label("zone", "b").build(),
            node("n4").label("zone", "b").build(),
            node("n5").label("zone", "c").build(),
        ];
        let in_zone = |name: &str, zone: &str| {
            pod("default", name, "n1")
                .owner("ReplicaSet", "rs")
                .node_selector("zone", zone)
                .build()
        };
        // Duplicates select zone a (2 nodes) and zone b (2 nodes); zone c is never targeted.
        // 8 pods over 4 targets → 2 stay.
        let mut pods = vec![in_zone("p0", "a")];
        pods.extend((1..4).map(|i| in_zone(&format!("p{i}"), "a")));
        pods.extend((4..8).map(|i| in_zone(&format!("p{i}"), "b")));
        assert_eq!(
            run(json!({}), nodes, pods),
            [
                "default/p2",
                "default/p3",
                "default/p4",
                "default/p5",
                "default/p6",
                "default/p7"
            ]
        );
    }

    #[test]
    fn pods_with_several_owners() {
        let two_owners = |name: &str| {
            pod("default", name, "n1")
                .with(|p| {
                    let mut second = p.metadata.owner_references.as_ref().unwrap()[0].clone();
                    second.kind = "Foo".into();
                    second.name = "foo".into();
                    second.uid = "foo".into();
                    second.controller = None;
                    let refs = p.metadata.owner_references.as_mut().unwrap();
                    refs[0].name = "rs".into();
                    refs.push(second);
                })
                .build()
        };
        // Same two owners and image: duplicates, counted under both owner keys.
        let pods = vec![two_owners("a"), two_owners("b"), two_owners("c")];
        let mut snap = snapshot(three_nodes(), pods);
        let records = run_balance(plugin(json!({})), DefaultEvictor::default(), &mut snap);
        // Both keys evict b and c; the second attempt is refused as already evicted.
        assert_eq!(evicted_names(&records), ["default/b", "default/c"]);
        // A pod with only one of those owners is not their duplicate.
        let pods = vec![
            two_owners("a"),
            pod("default", "b", "n1").owner("ReplicaSet", "rs").build(),
        ];
        assert!(run(json!({}), three_nodes(), pods).is_empty());
    }

    #[test]
    fn validation() {
        let e = match build(&json!({"namespaces": {"include": ["a"], "exclude": ["b"]}})) {
            Err(e) => e,
            Ok(_) => panic!("should fail"),
        };
        assert_eq!(e.field, "namespaces");
        let e = match build(&json!({"excludeOwnerKind": ["Job"]})) {
            Err(e) => e,
            Ok(_) => panic!("should fail"),
        };
        assert_eq!(e.field, "excludeOwnerKind");
        assert!(build(&json!(null)).is_ok());
        assert!(
            build(&json!({"excludeOwnerKinds": ["Job"], "namespaces": {"exclude": ["x"]}})).is_ok()
        );
    }
}
