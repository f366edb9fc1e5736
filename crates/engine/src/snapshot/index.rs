//! The snapshot's pod indexes (pods by node, by namespace, by owner), built by scanning
//! contiguous parts of the pods on several threads and putting the parts together in pod order
//! (the result is exactly one scan's).
//!
//! Each index is a bucket list ([`Buckets`]): one flat array of pod ids grouped by bucket, in pod
//! order within a bucket, so building it allocates a few arrays rather than one list per node or
//! owner. Consecutive pods usually share their namespace and owner references (the pods of one
//! owner sort together and share those parts), so the namespace and owner of a pod are looked
//! up only when they differ from the previous pod's.

use std::sync::Arc;

use super::builder::FastMap;
use super::consistency::{Found, InconsistencyKind};
use super::model::{NodeId, OwnerRef, Pod, PodId};

/// Pod ids grouped by bucket (a node, a namespace, an owner), in pod order within a bucket.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Buckets {
    /// Bucket `b` holds `ids[starts[b]..starts[b + 1]]`.
    starts: Vec<u32>,
    ids: Vec<PodId>,
}

impl Buckets {
    /// Groups `(bucket, pod)` pairs given in pod order (a stable counting sort).
    fn from_pairs(buckets: usize, pairs: &[(u32, PodId)]) -> Self {
        let mut starts = vec![0u32; buckets + 1];
        for &(b, _) in pairs {
            starts[b as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut next = starts.clone();
        let mut ids = vec![0; pairs.len()];
        for &(b, p) in pairs {
            let at = &mut next[b as usize];
            ids[*at as usize] = p;
            *at += 1;
        }
        Buckets { starts, ids }
    }

    /// The pods of bucket `b` (none for an unknown bucket).
    pub(super) fn get(&self, b: usize) -> &[PodId] {
        match (self.starts.get(b), self.starts.get(b + 1)) {
            (Some(&s), Some(&e)) => &self.ids[s as usize..e as usize],
            _ => &[],
        }
    }
}

/// The pod indexes of a snapshot.
#[derive(Debug, Default)]
pub(super) struct PodIndex {
    /// By node id.
    pub by_node: Buckets,
    /// Namespace → bucket of `by_namespace`.
    pub namespaces: FastMap<Arc<str>, u32>,
    pub by_namespace: Buckets,
    /// Owner uid → bucket of `by_owner`.
    pub owners: FastMap<String, u32>,
    pub by_owner: Buckets,
    /// Per pod, its [`PartsClass`]: pods with one class share their owner references, images
    /// and namespace (the same `Arc`s).
    pub parts_class: Vec<u32>,
    /// How many classes there are (the classes are `0..parts_classes`, in pod order of first
    /// sight).
    pub parts_classes: u32,
    /// Per node id, its pods that have not ended (not Succeeded or Failed).
    pub unfinished_on_node: Vec<u32>,
    /// Per bucket of `by_namespace`, its pods that have not ended.
    pub unfinished_in_namespace: Vec<u32>,
}

/// The addresses of a pod's owner references, images and namespace: pods of one owner share
/// these `Arc`s, and pods that share them have equal owners, images and namespace.
type PartsKey = (usize, usize, usize);

fn parts_key(pod: &Pod) -> PartsKey {
    (
        Arc::as_ptr(&pod.owners) as *const () as usize,
        Arc::as_ptr(&pod.images) as *const () as usize,
        Arc::as_ptr(&pod.namespace) as *const () as usize,
    )
}

/// How the pods' nodes are found.
pub(super) enum NodesOf<'a> {
    /// By `spec.nodeName` in this map; the ids found are returned for the caller to store.
    Lookup(&'a FastMap<&'a str, NodeId>),
    /// Already stored in [`Pod::node`] (a live cluster state keeps them current).
    Stored,
}

/// Below this many pods the indexes are built on one thread (splitting costs more).
const MIN_PODS_PER_PART: usize = if cfg!(test) { 1 } else { 20_000 };

/// Builds the indexes of `pods` on `nodes` nodes, noting pods bound to an unknown node in
/// `found`. With [`NodesOf::Lookup`], also returns each pod's node id.
///
/// Contiguous parts of the pods are scanned on several threads (a cycle of a live cluster state
/// rebuilds the indexes, so this is on every cycle's path), then put together in pod order; the
/// result is exactly what one scan gives.
pub(super) fn build(
    pods: &[Arc<Pod>],
    nodes: usize,
    nodes_of: NodesOf<'_>,
    found: &mut Found,
) -> (PodIndex, Option<Vec<Option<NodeId>>>) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    build_in(pods, nodes, nodes_of, found, threads)
}

/// [`build`] on at most `threads` threads.
fn build_in(
    pods: &[Arc<Pod>],
    nodes: usize,
    nodes_of: NodesOf<'_>,
    found: &mut Found,
    threads: usize,
) -> (PodIndex, Option<Vec<Option<NodeId>>>) {
    let parts = threads.min(pods.len() / MIN_PODS_PER_PART).max(1);
    let size = pods.len().div_ceil(parts).max(1);
    let scans: Vec<Scan<'_>> = if parts == 1 {
        vec![Scan::of(pods, 0, nodes, &nodes_of)]
    } else {
        std::thread::scope(|scope| {
            let nodes_of = &nodes_of;
            let running: Vec<_> = pods
                .chunks(size)
                .enumerate()
                .skip(1)
                .map(|(i, part)| scope.spawn(move || Scan::of(part, i * size, nodes, nodes_of)))
                .collect();
            let mut scans = vec![Scan::of(&pods[..size.min(pods.len())], 0, nodes, nodes_of)];
            for r in running {
                match r.join() {
                    Ok(scan) => scans.push(scan),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            scans
        })
    };
    assemble(pods, nodes, nodes_of, found, scans)
}

/// What one scan of contiguous pods found, with namespaces, owners and parts classes numbered
/// in the order this scan first saw them (renumbered when the scans are put together).
#[derive(Default)]
struct Scan<'a> {
    node_ids: Vec<Option<NodeId>>,
    /// `(node, pod)` for the pods on a node id (not checked against the node count yet).
    node_pairs: Vec<(u32, PodId)>,
    ns_pairs: Vec<(u32, PodId)>,
    ns_names: Vec<&'a Arc<str>>,
    owner_pairs: Vec<(u32, PodId)>,
    owner_uids: Vec<&'a str>,
    parts_class: Vec<u32>,
    class_keys: Vec<PartsKey>,
    /// Per node id (below the node count), its pods that have not ended.
    node_unfinished: Vec<u32>,
    /// Per namespace (by this scan's number), its pods that have not ended.
    ns_unfinished: Vec<u32>,
    /// Pods bound to a node the snapshot does not have.
    unknown_node: Vec<PodId>,
}

/// The lookups of one scan: numbers given so far and the last pod's, which consecutive pods
/// (mostly of one owner) usually repeat.
#[derive(Default)]
struct ScanMaps<'a> {
    namespaces: FastMap<&'a str, u32>,
    owners: FastMap<&'a str, u32>,
    classes: FastMap<PartsKey, u32>,
    last_ns: Option<(&'a Arc<str>, u32)>,
    last_owners: Option<&'a Arc<[OwnerRef]>>,
    owner_slots: Vec<u32>,
    last_class: Option<(PartsKey, u32)>,
}

impl<'a> Scan<'a> {
    /// Scans `pods`, the first of which has id `first`, in a snapshot of `nodes` nodes.
    fn of(pods: &'a [Arc<Pod>], first: usize, nodes: usize, nodes_of: &NodesOf<'_>) -> Self {
        let mut s = Scan {
            node_unfinished: vec![0; nodes],
            node_pairs: Vec::with_capacity(pods.len()),
            ns_pairs: Vec::with_capacity(pods.len()),
            owner_pairs: Vec::with_capacity(pods.len()),
            parts_class: Vec::with_capacity(pods.len()),
            ..Default::default()
        };
        if let NodesOf::Lookup(_) = nodes_of {
            s.node_ids.reserve_exact(pods.len());
        }
        let mut maps = ScanMaps::default();
        for (i, pod) in pods.iter().enumerate() {
            let id = (first + i) as PodId;
            let unfinished = u32::from(!pod.is_terminal());
            s.note_node(pod, id, unfinished, nodes_of);
            s.note_namespace(&mut maps, pod, id, unfinished);
            s.note_owners(&mut maps, pod, id);
            s.note_class(&mut maps, pod);
        }
        s
    }

    /// The pod's node: its id, its bucket, its count of unfinished pods.
    fn note_node(&mut self, pod: &Pod, id: PodId, unfinished: u32, nodes_of: &NodesOf<'_>) {
        let node = match nodes_of {
            NodesOf::Lookup(map) => {
                let node = pod
                    .node_name
                    .as_deref()
                    .and_then(|name| map.get(name).copied());
                self.node_ids.push(node);
                node
            }
            NodesOf::Stored => pod.node,
        };
        match node {
            Some(n) => {
                self.node_pairs.push((n, id));
                if let Some(count) = self.node_unfinished.get_mut(n as usize) {
                    *count += unfinished;
                }
            }
            None if pod.node_name.is_some() => self.unknown_node.push(id),
            None => {}
        }
    }

    /// The pod's namespace: numbered on first sight, its bucket and unfinished count.
    fn note_namespace(
        &mut self,
        maps: &mut ScanMaps<'a>,
        pod: &'a Pod,
        id: PodId,
        unfinished: u32,
    ) {
        let ns = match maps.last_ns {
            Some((a, slot)) if Arc::ptr_eq(a, &pod.namespace) => slot,
            _ => {
                let next = self.ns_names.len() as u32;
                let slot = *maps.namespaces.entry(&pod.namespace[..]).or_insert(next);
                if slot == next {
                    self.ns_names.push(&pod.namespace);
                    self.ns_unfinished.push(0);
                }
                maps.last_ns = Some((&pod.namespace, slot));
                slot
            }
        };
        self.ns_pairs.push((ns, id));
        self.ns_unfinished[ns as usize] += unfinished;
    }

    /// The pod's owners: numbered on first sight, and their buckets.
    fn note_owners(&mut self, maps: &mut ScanMaps<'a>, pod: &'a Pod, id: PodId) {
        if !maps
            .last_owners
            .is_some_and(|a| Arc::ptr_eq(a, &pod.owners))
        {
            maps.owner_slots.clear();
            for o in pod.owners.iter() {
                let next = self.owner_uids.len() as u32;
                let slot = *maps.owners.entry(o.uid.as_str()).or_insert(next);
                if slot == next {
                    self.owner_uids.push(o.uid.as_str());
                }
                maps.owner_slots.push(slot);
            }
            maps.last_owners = Some(&pod.owners);
        }
        self.owner_pairs
            .extend(maps.owner_slots.iter().map(|&slot| (slot, id)));
    }

    /// The pod's parts class (consecutive pods, in key order, are mostly of one owner: the map is
    /// read on a change).
    fn note_class(&mut self, maps: &mut ScanMaps<'a>, pod: &Pod) {
        let key = parts_key(pod);
        let class = match maps.last_class {
            Some((k, c)) if k == key => c,
            _ => {
                let next = self.class_keys.len() as u32;
                let c = *maps.classes.entry(key).or_insert(next);
                if c == next {
                    self.class_keys.push(key);
                }
                maps.last_class = Some((key, c));
                c
            }
        };
        self.parts_class.push(class);
    }
}

/// Numbers keys across scans: each scan's keys, in the order it first saw them, get the number
/// an earlier scan gave them or the next free one — the numbers one scan of all pods gives.
struct Numbering<K> {
    slots: FastMap<K, u32>,
    keys: Vec<K>,
}

impl<K: std::hash::Hash + Eq + Copy> Numbering<K> {
    fn new() -> Self {
        Numbering {
            slots: FastMap::default(),
            keys: Vec::new(),
        }
    }

    /// The global numbers of a scan's keys (by the scan's own number).
    fn renumber(&mut self, scan_keys: &[K]) -> Vec<u32> {
        scan_keys
            .iter()
            .map(|&k| {
                let next = self.keys.len() as u32;
                let slot = *self.slots.entry(k).or_insert(next);
                if slot == next {
                    self.keys.push(k);
                }
                slot
            })
            .collect()
    }
}

/// Renumbers the slots of `pairs` by `to` (unless `to` is the identity) and appends them.
fn append_renumbered(out: &mut Vec<(u32, PodId)>, pairs: &[(u32, PodId)], to: &[u32]) {
    if to.iter().enumerate().all(|(i, &t)| t == i as u32) {
        out.extend_from_slice(pairs);
    } else {
        out.extend(pairs.iter().map(|&(slot, id)| (to[slot as usize], id)));
    }
}

/// Puts the scans (of consecutive parts of `pods`, in order) together into the indexes.
fn assemble<'p>(
    pods: &'p [Arc<Pod>],
    nodes: usize,
    nodes_of: NodesOf<'_>,
    found: &mut Found,
    scans: Vec<Scan<'p>>,
) -> (PodIndex, Option<Vec<Option<NodeId>>>) {
    let mut a = Assembly {
        node_ids: match nodes_of {
            NodesOf::Lookup(_) => Some(Vec::with_capacity(pods.len())),
            NodesOf::Stored => None,
        },
        node_pairs: Vec::with_capacity(pods.len()),
        ns_pairs: Vec::with_capacity(pods.len()),
        owner_pairs: Vec::with_capacity(scans.iter().map(|s| s.owner_pairs.len()).sum()),
        parts_class: Vec::with_capacity(pods.len()),
        namespaces: Numbering::new(),
        ns_names: Vec::new(),
        owners: Numbering::new(),
        classes: Numbering::new(),
        unfinished_on_node: vec![0u32; nodes],
        unfinished_in_namespace: Vec::new(),
    };
    for scan in &scans {
        a.add_nodes(scan, pods, found);
        a.add_namespaces(scan);
        let owner_to = a.owners.renumber(&scan.owner_uids);
        append_renumbered(&mut a.owner_pairs, &scan.owner_pairs, &owner_to);
        let class_to = a.classes.renumber(&scan.class_keys);
        a.parts_class
            .extend(scan.parts_class.iter().map(|&c| class_to[c as usize]));
    }
    drop(scans);
    let node_ids = a.node_ids.take();
    (a.into_index(nodes), node_ids)
}

/// The scans put together so far, numbered as one scan of all pods numbers them.
struct Assembly<'s> {
    node_ids: Option<Vec<Option<NodeId>>>,
    node_pairs: Vec<(u32, PodId)>,
    ns_pairs: Vec<(u32, PodId)>,
    owner_pairs: Vec<(u32, PodId)>,
    parts_class: Vec<u32>,
    namespaces: Numbering<&'s str>,
    ns_names: Vec<Arc<str>>,
    owners: Numbering<&'s str>,
    classes: Numbering<PartsKey>,
    unfinished_on_node: Vec<u32>,
    unfinished_in_namespace: Vec<u32>,
}

impl<'s> Assembly<'s> {
    /// A scan's nodes: ids, buckets (of known nodes), unfinished counts; pods on an unknown
    /// node are reported (and stay on none, never evicted).
    fn add_nodes(&mut self, scan: &Scan<'s>, pods: &[Arc<Pod>], found: &mut Found) {
        let nodes = self.unfinished_on_node.len();
        for (total, n) in self
            .unfinished_on_node
            .iter_mut()
            .zip(&scan.node_unfinished)
        {
            *total += n;
        }
        if let Some(ids) = self.node_ids.as_mut() {
            ids.extend_from_slice(&scan.node_ids);
        }
        for &(n, id) in &scan.node_pairs {
            if (n as usize) < nodes {
                self.node_pairs.push((n, id));
            }
        }
        for &id in &scan.unknown_node {
            let pod = &pods[id as usize];
            if let Some(name) = &pod.node_name {
                found.note(InconsistencyKind::PodOnUnknownNode, || {
                    format!("{}/{} on {name}", pod.namespace, pod.name)
                });
            }
        }
    }

    /// A scan's namespaces: renumbered, their buckets and unfinished counts.
    fn add_namespaces(&mut self, scan: &Scan<'s>) {
        let names: Vec<&'s str> = scan.ns_names.iter().map(|&a| &a[..]).collect();
        let ns_to = self.namespaces.renumber(&names);
        for (&slot, a) in ns_to.iter().zip(&scan.ns_names) {
            // A slot not given before is the next one.
            if slot as usize == self.ns_names.len() {
                self.ns_names.push(Arc::clone(a));
                self.unfinished_in_namespace.push(0);
            }
        }
        for (&slot, n) in ns_to.iter().zip(&scan.ns_unfinished) {
            self.unfinished_in_namespace[slot as usize] += n;
        }
        append_renumbered(&mut self.ns_pairs, &scan.ns_pairs, &ns_to);
    }

    /// The index of `nodes` nodes.
    fn into_index(self, nodes: usize) -> PodIndex {
        PodIndex {
            by_node: Buckets::from_pairs(nodes, &self.node_pairs),
            by_namespace: Buckets::from_pairs(self.ns_names.len(), &self.ns_pairs),
            namespaces: self
                .ns_names
                .into_iter()
                .enumerate()
                .map(|(i, ns)| (ns, i as u32))
                .collect(),
            by_owner: Buckets::from_pairs(self.owners.keys.len(), &self.owner_pairs),
            owners: self
                .owners
                .slots
                .into_iter()
                .map(|(uid, slot)| (uid.to_string(), slot))
                .collect(),
            parts_class: self.parts_class,
            parts_classes: self.classes.keys.len() as u32,
            unfinished_on_node: self.unfinished_on_node,
            unfinished_in_namespace: self.unfinished_in_namespace,
        }
    }
}

impl PodIndex {
    /// The pods on `node`.
    pub(super) fn on_node(&self, node: NodeId) -> &[PodId] {
        self.by_node.get(node as usize)
    }

    /// The pods in `namespace`.
    pub(super) fn in_namespace(&self, namespace: &str) -> &[PodId] {
        self.namespaces
            .get(namespace)
            .map_or(&[], |&b| self.by_namespace.get(b as usize))
    }

    /// How many pods on `node` have not ended (0 for an unknown node).
    pub(super) fn unfinished_on_node(&self, node: NodeId) -> u32 {
        self.unfinished_on_node
            .get(node as usize)
            .copied()
            .unwrap_or(0)
    }

    /// How many pods in `namespace` have not ended (0 for a namespace without pods).
    pub(super) fn unfinished_in_namespace(&self, namespace: &str) -> u32 {
        self.namespaces
            .get(namespace)
            .and_then(|&b| self.unfinished_in_namespace.get(b as usize))
            .copied()
            .unwrap_or(0)
    }

    /// The pods with an owner reference to `uid`.
    pub(super) fn owned_by(&self, uid: &str) -> &[PodId] {
        self.owners
            .get(uid)
            .map_or(&[], |&b| self.by_owner.get(b as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_pod_order_within_a_bucket() {
        let b = Buckets::from_pairs(3, &[(2, 0), (0, 1), (2, 2), (0, 3)]);
        assert_eq!(b.get(0), [1, 3]);
        assert_eq!(b.get(1), [] as [PodId; 0]);
        assert_eq!(b.get(2), [0, 2]);
        assert_eq!(b.get(3), [] as [PodId; 0], "an unknown bucket is empty");
    }

    /// Scanning parts of the pods on several threads gives exactly the indexes of one scan:
    /// the same buckets, the same namespace, owner and class numbers (first seen in pod order),
    /// the same node ids, and the same pods on unknown nodes reported.
    #[test]
    fn indexes_built_in_parts_equal_one_scan() {
        let mut items =
            vec![r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}"#.to_string()];
        for i in 0..40 {
            let ns = ["a", "b", "c"][i % 3];
            let owner = format!("o{}", i % 7);
            let node = if i % 11 == 0 { "gone" } else { "n1" };
            let phase = ["Succeeded", "Running", "Pending", "Failed", "Running"][i % 5];
            items.push(format!(
                r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p{i}","namespace":"{ns}","uid":"u{i}",
                   "ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"{owner}","uid":"rs-{owner}","controller":true}},
                                      {{"apiVersion":"v1","kind":"Thing","name":"t","uid":"t-{}"}}]}},
                   "spec":{{"nodeName":"{node}","containers":[{{"name":"c","image":"img{}"}}]}},"status":{{"phase":"{phase}"}}}}"#,
                i % 2,
                i % 4
            ));
        }
        let list = format!(
            r#"{{"kind":"List","apiVersion":"v1","items":[{}]}}"#,
            items.join(",")
        );
        let snap = crate::snapshot::load::load_bytes(list.as_bytes()).expect("test snapshot");
        let names: FastMap<&str, NodeId> = [("n1", 0)].into_iter().collect();
        let one_scan = {
            let mut found = Found::from(Vec::new());
            let built = build_in(&snap.pods, 1, NodesOf::Lookup(&names), &mut found, 1);
            (built, found.sorted())
        };
        for threads in [2, 3, 4] {
            let mut found = Found::from(Vec::new());
            let (index, ids) =
                build_in(&snap.pods, 1, NodesOf::Lookup(&names), &mut found, threads);
            let ((want, want_ids), want_found) = &one_scan;
            assert_eq!(&ids, want_ids, "{threads} threads: node ids");
            assert_eq!(index.by_node, want.by_node, "{threads} threads");
            assert_eq!(index.by_namespace, want.by_namespace, "{threads} threads");
            assert_eq!(index.namespaces, want.namespaces, "{threads} threads");
            assert_eq!(index.by_owner, want.by_owner, "{threads} threads");
            assert_eq!(index.owners, want.owners, "{threads} threads");
            assert_eq!(index.parts_class, want.parts_class, "{threads} threads");
            assert_eq!(index.parts_classes, want.parts_classes, "{threads} threads");
            assert_eq!(
                index.unfinished_on_node, want.unfinished_on_node,
                "{threads} threads"
            );
            assert_eq!(
                index.unfinished_in_namespace, want.unfinished_in_namespace,
                "{threads} threads"
            );
            assert_eq!(
                format!("{:?}", found.sorted()),
                format!("{want_found:?}"),
                "{threads} threads: pods on unknown nodes"
            );
        }
        let ((want, _), want_found) = &one_scan;
        assert_eq!(
            want.owned_by("rs-o3").len(),
            6,
            "pods 3, 10, 17, 24, 31, 38"
        );
        assert_eq!(want.in_namespace("b").len(), 13);
        assert_eq!(
            want.on_node(0).len(),
            36,
            "four pods are on the unknown node"
        );
        assert_eq!(want_found.len(), 1);
        assert_eq!(want_found[0].count, 4);
        // The pods that have not ended, counted while scanning, are those of each bucket that
        // are neither Succeeded nor Failed.
        let unfinished =
            |ids: &[PodId]| ids.iter().filter(|&&p| !snap.pod(p).is_terminal()).count() as u32;
        assert_eq!(want.unfinished_on_node(0), unfinished(want.on_node(0)));
        // n1 holds 36 pods (not 0, 11, 22, 33); 14 of them are Succeeded or Failed (i % 5 is 0
        // or 3: 16 of the 40, less pods 0 and 33).
        assert_eq!(want.unfinished_on_node(0), 22);
        assert_eq!(want.unfinished_on_node(1), 0, "an unknown node");
        for ns in ["a", "b", "c"] {
            assert_eq!(
                want.unfinished_in_namespace(ns),
                unfinished(want.in_namespace(ns)),
                "{ns}"
            );
        }
        assert_eq!(want.unfinished_in_namespace("nowhere"), 0);
    }

    /// Pods sharing their owner references, images and namespace (the pods of one owner, as
    /// a converter shares them) get one parts class, whether adjacent or not; any difference
    /// gives another; classes are dense.
    #[test]
    fn parts_classes_group_pods_that_share_owners_images_and_namespace() {
        let pod = |ns: &str, name: &str, owner: &str, image: &str| {
            format!(
                r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"{ns}","uid":"u-{ns}-{name}",
                   "ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"{owner}","uid":"rs-{owner}","controller":true}}]}},
                   "spec":{{"nodeName":"n1","containers":[{{"name":"c","image":"{image}"}}]}},"status":{{"phase":"Running"}}}}"#
            )
        };
        let items = [
            r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}"#.to_string(),
            pod("a", "web-1", "web", "nginx"),
            pod("a", "web-2", "web", "nginx"),
            pod("a", "db-1", "db", "postgres"),
            pod("a", "web-3", "web", "nginx"),
            pod("b", "web-1", "web", "nginx"),
            pod("b", "web-2", "web", "httpd"),
        ];
        let list = format!(
            r#"{{"kind":"List","apiVersion":"v1","items":[{}]}}"#,
            items.join(",")
        );
        let snap = crate::snapshot::load::load_bytes(list.as_bytes()).expect("test snapshot");
        let class = |ns: &str, name: &str| {
            let id = (0..snap.pods.len() as PodId)
                .find(|&p| &*snap.pod(p).namespace == ns && snap.pod(p).name == name)
                .expect("pod in the test snapshot");
            snap.parts_class(id)
        };
        assert_eq!(class("a", "web-1"), class("a", "web-2"));
        // `load` may convert the list's halves on two threads, each sharing parts of its own:
        // the class follows the shared `Arc`s.
        let ids: Vec<PodId> = (0..snap.pods.len() as PodId).collect();
        for &x in &ids {
            for &y in &ids {
                let (p, q) = (snap.pod(x), snap.pod(y));
                let shared = Arc::ptr_eq(&p.owners, &q.owners)
                    && Arc::ptr_eq(&p.images, &q.images)
                    && Arc::ptr_eq(&p.namespace, &q.namespace);
                assert_eq!(
                    snap.parts_class(x) == snap.parts_class(y),
                    shared,
                    "{x} {y}"
                );
            }
        }
        assert_ne!(class("a", "web-1"), class("a", "db-1"), "another owner");
        assert_ne!(
            class("a", "web-1"),
            class("b", "web-1"),
            "another namespace"
        );
        assert_ne!(class("b", "web-1"), class("b", "web-2"), "other images");
        let mut all: Vec<u32> = (0..snap.pods.len() as PodId)
            .map(|p| snap.parts_class(p))
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(
            all,
            (0..snap.parts_classes() as u32).collect::<Vec<_>>(),
            "dense"
        );
        assert!(snap.parts_classes() >= 4);
    }
}
