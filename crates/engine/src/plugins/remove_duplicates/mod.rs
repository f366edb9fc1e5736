//! RemoveDuplicates (Balance): spreads pods of the same owner and images over the nodes they could
//! run on. On each node the first matching pod seen is the original and later ones duplicates; an
//! owner key (namespace / owner kind / owner name / sorted images) with `n` pods over `t` feasible
//! nodes keeps at most `ceil(n / t)` pods per node. Feasible nodes are those whose NoSchedule /
//! NoExecute taints the duplicates tolerate and whose labels match their nodeSelector and required
//! node affinity (cordoned nodes count, as upstream); fewer than two means nothing is evicted.

use super::{PodQuestion, extension_point};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use super::node_utilization::occupies;
use crate::evictor::EvictionReason;
use crate::framework::Handle;
use crate::framework::args::allows_namespace;
use crate::framework::parallel;
use crate::scheduling::{affinity, taints};
use crate::snapshot::{NodeId, Pod, PodId, Snapshot};

mod args;
mod keys;
pub use args::RemoveDuplicatesArgs;

/// The plugin name.
pub const NAME: &str = "RemoveDuplicates";

/// The RemoveDuplicates plugin.
#[derive(Debug)]
pub struct RemoveDuplicates {
    args: RemoveDuplicatesArgs,
}

/// Per-pod maps keyed by cluster data: FxHash is several times faster than SipHash here.
type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// Making one class's keys costs about as much as this many pods' cheap checks (a weight for
/// [`parallel::map_chunks`]).
const CLASS_WEIGHT: usize = 8;

/// Pods of one owner key: how many there are and the duplicates found on each node.
#[derive(Debug, Default)]
struct Group {
    occurrences: u32,
    /// Some node holds two pods with a duplicate key involving this owner key (before the
    /// evictor's filters, which can only remove pods).
    hot: bool,
    duplicates: Vec<(NodeId, Vec<PodId>)>,
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
    /// Per set of signatures (sorted): how many distinct nodes their feasible nodes cover.
    targets: FxMap<Vec<usize>, usize>,
    /// Scratch space for counting a union: per node, the last count that marked it.
    mark: Vec<u32>,
}

impl<'a> Feasibility<'a> {
    fn new(snapshot: &'a Snapshot, nodes: &'a [NodeId]) -> Self {
        Feasibility {
            snapshot,
            nodes,
            signatures: Vec::new(),
            by_hash: HashMap::new(),
            targets: FxMap::default(),
            mark: Vec::new(),
        }
    }

    /// How many distinct nodes are feasible for some of the signatures `sigs` (those with at
    /// least two feasible nodes). Groups share few sets of signatures, so each set's count is
    /// made once: a count per group would cost the number of nodes for every group.
    fn targets(&mut self, mut sigs: Vec<usize>) -> usize {
        sigs.sort_unstable();
        sigs.dedup();
        if let Some(&t) = self.targets.get(&sigs) {
            return t;
        }
        if self.mark.is_empty() {
            self.mark = vec![u32::MAX; self.snapshot.nodes.len()];
        }
        let epoch = self.targets.len() as u32;
        let mut count = 0usize;
        for &s in &sigs {
            let feasible = &self.signatures[s].1;
            if feasible.len() < 2 {
                continue;
            }
            for &n in feasible {
                if self.mark[n as usize] != epoch {
                    self.mark[n as usize] = epoch;
                    count += 1;
                }
            }
        }
        self.targets.insert(sigs, count);
        count
    }

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

extension_point!(Balance for RemoveDuplicates, NAME);

impl RemoveDuplicates {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, nodes) = (q.snapshot, q.pod, q.nodes);
        let p = s.pod(pod);
        let node = p.node?;
        let Some(owner) = p.owners.first() else {
            return Some("it has no owner, so it has no duplicates".to_string());
        };
        if let Some(o) = p
            .owners
            .iter()
            .find(|o| self.args.exclude_owner_kinds.contains(&o.kind))
        {
            return Some(format!("owner kind {} is in excludeOwnerKinds", o.kind));
        }
        if !allows_namespace(&self.args.namespaces, &p.namespace) {
            return Some(format!(
                "namespace {} is excluded by the plugin's namespaces",
                p.namespace
            ));
        }
        let counts = duplicate_counts(s, pod, nodes);
        let owner = format!("{} {}/{}", owner.kind, p.namespace, owner.name);
        let node_name = &s.node(node).name;
        let DuplicateCounts {
            on_node,
            pods,
            feasible,
        } = counts;
        let upper = pods.div_ceil(feasible.max(1));
        let per_node = pods as f64 / feasible.max(1) as f64;
        let numbers = format!(
            "{pods} pods of {owner} (same images) over {feasible} feasible nodes: {per_node:.1} per node, at most {upper} each"
        );
        Some(if on_node <= 1 {
            format!("it is the only pod of {owner} on {node_name} ({numbers})")
        } else if feasible < 2 {
            format!(
                "{on_node} pods of {owner} on {node_name}, but fewer than two feasible nodes ({feasible}): nowhere to spread them"
            )
        } else if on_node <= upper {
            format!(
                "{on_node} pods of {owner} on {node_name} <= at most {upper} per node ({numbers})"
            )
        } else {
            format!(
                "{on_node} pods of {owner} on {node_name} > at most {upper} per node ({numbers}), but this one is kept: the first {upper} on the node stay, and only pods passing the DefaultEvictor count"
            )
        })
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        let snapshot = h.snapshot;
        // Pass 1: the cheap checks; find the owner keys with co-located duplicates. The evictor's
        // filters can only remove pods, so an owner key not found here cannot have duplicates
        // and they are run in pass 2 for the pods of the others only.
        let checked = self.cheap_checked(snapshot, nodes);
        let Numbering {
            candidates,
            mut groups,
            group_ids,
            mut last_node,
        } = number_candidates(snapshot, checked);
        if h.total_limit_reached() {
            balance_lazily(h, nodes, &candidates, &mut groups, &group_ids);
            return;
        }
        // Pass 2: pods of hot owner keys that pass the Filter and the PreEvictionFilter are
        // counted; on each node the first pod of a duplicate key is the original.
        last_node.iter_mut().for_each(|n| *n = u32::MAX);
        let pass = Pass2 {
            nodes,
            candidates: &candidates,
            group_ids: &group_ids,
        };
        pass.count_duplicates(h, &mut groups, &mut last_node);
        drop(candidates);

        let mut feasibility = Feasibility::new(snapshot, nodes);
        for group in &groups {
            if let Stop::Plugin = evict_group(h, &mut feasibility, group) {
                return;
            }
        }
    }

    /// The pods on `nodes` passing the cheap checks (occupying, owned, with images, no excluded
    /// owner kind, namespace allowed), per chunk of nodes, each with its node's index.
    ///
    /// The checks read each pod and run on several threads, and so do the keys, made once per
    /// parts class (pods sharing owners, images and namespace); ids are then given on this
    /// thread in node order, so they come out as one sequential pass would give them.
    fn cheap_checked(&self, snapshot: &Snapshot, nodes: &[NodeId]) -> Vec<Vec<(u32, PodId)>> {
        let excluded_kinds = &self.args.exclude_owner_kinds;
        let indexed: Vec<(u32, NodeId)> = (0u32..).zip(nodes.iter().copied()).collect();
        parallel::map_chunks(
            &indexed,
            |&(_, n)| snapshot.pods_on_node_upper_bound(n),
            parallel::min_parallel_weight(),
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
                            out.push((ni, p));
                        }
                    }
                }
                out
            },
        )
    }
}

/// The checked pods numbered: their duplicate key and owner keys (groups), the groups with
/// `hot` set where a node holds two pods of one duplicate key, and per duplicate key the last
/// node it was seen on.
struct Numbering {
    candidates: Vec<Candidate>,
    groups: Vec<Group>,
    group_ids: Vec<u32>,
    last_node: Vec<u32>,
}

/// Numbers the checked pods' keys, made once per parts class (see
/// [`RemoveDuplicates::cheap_checked`]).
fn number_candidates(snapshot: &Snapshot, checked: Vec<Vec<(u32, PodId)>>) -> Numbering {
    let classes = snapshot.parts_classes();
    let mut candidates: Vec<Candidate> = Vec::new();
    // The classes in the order their first candidate comes, with that candidate.
    let mut slot_of_class = vec![u32::MAX; classes];
    let mut first_pods: Vec<PodId> = Vec::new();
    for &(_, p) in checked.iter().flatten() {
        let slot = &mut slot_of_class[snapshot.parts_class(p) as usize];
        if *slot == u32::MAX {
            *slot = first_pods.len() as u32;
            first_pods.push(p);
        }
    }
    let keys: Vec<keys::ClassKeys<'_>> = parallel::map_chunks(
        &first_pods,
        |_| CLASS_WEIGHT,
        parallel::min_parallel_weight(),
        |chunk| {
            snapshot
                .prefetched(chunk)
                .map(|p| keys::ClassKeys::of(snapshot.pod(p)))
                .collect::<Vec<_>>()
        },
    )
    .into_iter()
    .flatten()
    .collect();
    let numbered = keys::number(&keys);
    drop(keys);
    let mut groups: Vec<Group> = (0..numbered.groups).map(|_| Group::default()).collect();
    // Per duplicate key: the last node (index into `nodes`) it was seen on, for each pass.
    let mut last_node: Vec<u32> = vec![u32::MAX; numbered.dups];
    candidates.reserve_exact(checked.iter().map(Vec::len).sum());
    for (ni, p) in checked.into_iter().flatten() {
        let ids = numbered.classes[slot_of_class[snapshot.parts_class(p) as usize] as usize];
        if last_node[ids.dup as usize] == ni {
            for &g in numbered.groups_of(&ids) {
                groups[g as usize].hot = true;
            }
        } else {
            last_node[ids.dup as usize] = ni;
        }
        candidates.push(Candidate {
            pod: p,
            node: ni,
            dup: ids.dup,
            groups: ids.groups(),
        });
    }
    Numbering {
        candidates,
        groups,
        group_ids: numbered.group_ids,
        last_node,
    }
}

/// Pass 2 over the candidates of one run.
struct Pass2<'a> {
    nodes: &'a [NodeId],
    candidates: &'a [Candidate],
    group_ids: &'a [u32],
}

impl Pass2<'_> {
    /// Counts, per owner key, the candidates of hot keys that pass the Filter and the
    /// PreEvictionFilter, and collects the duplicates: on each node every pod of a duplicate key
    /// after its first.
    fn count_duplicates(&self, h: &Handle<'_>, groups: &mut [Group], last_node: &mut [u32]) {
        let (nodes, candidates, group_ids) = (self.nodes, self.candidates, self.group_ids);
        // The filters are pure while nothing is evicted: evaluated on several threads first.
        let view = h.filter_view();
        let passes: Vec<bool> = parallel::map_chunks(
            candidates,
            |_| 1,
            parallel::min_parallel_weight(),
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
    }
}

/// Where evicting stopped.
enum Stop {
    /// Go on with the next group.
    Next,
    /// The total limit was reached: the plugin ends.
    Plugin,
}

/// The lazy form of pass 2 and the group loop, for a run in which the total limit is already
/// reached: every attempt is refused, so only the first is recorded. Groups are completed one at
/// a time in group order, each from its own candidates (filters evaluated on demand), up to the
/// first attempt — the same groups, counts and order as the eager form, without filtering the
/// candidates of the groups after it.
fn balance_lazily(
    h: &mut Handle<'_>,
    nodes: &[NodeId],
    candidates: &[Candidate],
    groups: &mut [Group],
    group_ids: &[u32],
) {
    let snapshot = h.snapshot;
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); groups.len()];
    for (ci, c) in candidates.iter().enumerate() {
        for &g in &group_ids[c.groups.start as usize..c.groups.end as usize] {
            if groups[g as usize].hot {
                members[g as usize].push(ci as u32);
            }
        }
    }
    // Per candidate: 0 not evaluated yet, 1 passes the filters, 2 does not.
    let mut passes: Vec<u8> = vec![0; candidates.len()];
    let mut last_node: FxMap<u32, u32> = FxMap::default();
    let mut feasibility = Feasibility::new(snapshot, nodes);
    for gi in 0..groups.len() {
        if !groups[gi].hot {
            continue;
        }
        last_node.clear();
        for &ci in &members[gi] {
            let c = &candidates[ci as usize];
            let verdict = &mut passes[ci as usize];
            if *verdict == 0 {
                *verdict = if h.filter(c.pod) && h.pre_eviction_filter(c.pod) {
                    1
                } else {
                    2
                };
            }
            if *verdict != 1 {
                continue;
            }
            let group = &mut groups[gi];
            group.occurrences += 1;
            if last_node.insert(c.dup, c.node) != Some(c.node) {
                continue;
            }
            let node = nodes[c.node as usize];
            match group.duplicates.last_mut() {
                Some((n, pods)) if *n == node => pods.push(c.pod),
                _ => group.duplicates.push((node, vec![c.pod])),
            }
        }
        if let Stop::Plugin = evict_group(h, &mut feasibility, &groups[gi]) {
            return;
        }
    }
}

/// Evicts the duplicates of `group` above its per-node bound.
fn evict_group(h: &mut Handle<'_>, feasibility: &mut Feasibility<'_>, group: &Group) -> Stop {
    let snapshot = h.snapshot;
    if group.duplicates.is_empty() {
        return Stop::Next;
    }
    // Feasible nodes: the union, over the duplicates' signatures, of those with at least
    // two feasible nodes.
    let mut sigs: Vec<usize> = Vec::new();
    for (_, pods) in &group.duplicates {
        for &p in pods {
            let s = feasibility.signature(p);
            if !sigs.contains(&s) {
                sigs.push(s);
            }
        }
    }
    let targets = feasibility.targets(sigs);
    if targets < 2 {
        tracing::debug!(
            plugin = NAME,
            "fewer than two feasible nodes for duplicates"
        );
        return Stop::Next;
    }
    let upper = (group.occurrences as usize).div_ceil(targets);
    'nodes: for (node, pods) in &group.duplicates {
        // The original is not in the list: the node holds `pods.len() + 1`.
        if pods.len() < upper {
            continue;
        }
        let reason = Arc::new(duplicates_reason(
            snapshot,
            pods[0],
            *node,
            pods.len() + 1,
            group.occurrences as usize,
            targets,
            upper,
        ));
        for &p in &pods[upper.saturating_sub(1)..] {
            // Duplicates passed the PreEvictionFilter in pass 2.
            match h.evict_prefiltered_because(p, reason.clone()) {
                Ok(_) => {}
                Err(e) if e.is_total_limit() => return Stop::Plugin,
                Err(e) if e.is_node_limit() => continue 'nodes,
                Err(_) => {}
            }
        }
    }
    Stop::Next
}

/// What `--explain` counts for a pod: pods of its owner key (namespace, first owner, images).
struct DuplicateCounts {
    /// On the pod's node (itself included).
    on_node: usize,
    /// On all the plugin's nodes.
    pods: usize,
    /// Nodes whose NoSchedule / NoExecute taints the pod tolerates and whose labels match its
    /// nodeSelector and required node affinity.
    feasible: usize,
}

/// Counts the pods of `pod`'s owner key over `nodes` (before the evictor's filters, which the
/// plugin applies too: a count here is an upper bound of the plugin's).
fn duplicate_counts(s: &Snapshot, pod: PodId, nodes: &[NodeId]) -> DuplicateCounts {
    let p = s.pod(pod);
    fn sorted(pod: &Pod) -> Vec<&str> {
        let mut v: Vec<&str> = pod.images.iter().map(String::as_str).collect();
        v.sort_unstable();
        v
    }
    let images = sorted(p);
    let owner = p.owners.first();
    let same = |o: &Pod| {
        occupies(o)
            && o.namespace == p.namespace
            && owner.is_some_and(|w| {
                o.owners
                    .iter()
                    .any(|x| x.kind == w.kind && x.name == w.name)
            })
            && sorted(o) == images
    };
    let mut counts = DuplicateCounts {
        on_node: 0,
        pods: 0,
        feasible: 0,
    };
    for &n in nodes {
        let here = s.pods_on_node(n).filter(|&o| same(s.pod(o))).count();
        counts.pods += here;
        if Some(n) == p.node {
            counts.on_node = here;
        }
        let node = s.node(n);
        if taints::tolerates_all(&p.tolerations, &node.taints, taints::is_scheduling_taint)
            && affinity::matches_node_selector_and_affinity(p, node)
        {
            counts.feasible += 1;
        }
    }
    counts
}

/// Why duplicates on `node` are evicted: `on_node` pods of one owner there, `occurrences` in all
/// over `targets` feasible nodes, so at most `upper` per node.
fn duplicates_reason(
    snapshot: &Snapshot,
    pod: PodId,
    node: NodeId,
    on_node: usize,
    occurrences: usize,
    targets: usize,
    upper: usize,
) -> EvictionReason {
    let p = snapshot.pod(pod);
    let owner = p.owners.first().map_or_else(String::new, |o| {
        format!("{} {}/{}", o.kind, p.namespace, o.name)
    });
    let node = &snapshot.node(node).name;
    let per_node = occurrences as f64 / targets.max(1) as f64;
    EvictionReason::new(
        "DuplicatePods",
        format!(
            "{on_node} pods of {owner} on {node}, {per_node:.1} per feasible node ({occurrences} pods, {targets} feasible nodes: at most {upper} each)"
        ),
    )
    .with("owner", owner)
    .with("node", node.as_str())
    .with("podsOnNode", on_node)
    .with("pods", occurrences)
    .with("feasibleNodes", targets)
    .with("perNode", per_node)
    .with("upperBound", upper)
}

#[cfg(test)]
mod tests;
