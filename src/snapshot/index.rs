//! The snapshot's pod indexes (pods by node, by namespace, by owner), built in one pass over the
//! pods in their order.
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
#[derive(Debug, Default)]
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

/// Builds the indexes of `pods` on `nodes` nodes, noting pods bound to an unknown node in
/// `found`. With [`NodesOf::Lookup`], also returns each pod's node id.
pub(super) fn build(
    pods: &[Arc<Pod>],
    nodes: usize,
    nodes_of: NodesOf<'_>,
    found: &mut Found,
) -> (PodIndex, Option<Vec<Option<NodeId>>>) {
    let mut node_ids = match nodes_of {
        NodesOf::Lookup(_) => Some(Vec::with_capacity(pods.len())),
        NodesOf::Stored => None,
    };
    let mut node_pairs = Vec::with_capacity(pods.len());
    let mut ns_pairs = Vec::with_capacity(pods.len());
    let mut owner_pairs = Vec::with_capacity(pods.len());
    let mut namespaces: FastMap<&str, u32> = FastMap::default();
    let mut ns_names: Vec<Arc<str>> = Vec::new();
    let mut owners: FastMap<&str, u32> = FastMap::default();
    let mut last_ns: Option<(&Arc<str>, u32)> = None;
    let mut last_owners: Option<&Arc<[OwnerRef]>> = None;
    let mut owner_slots: Vec<u32> = Vec::new();
    let mut parts_class = Vec::with_capacity(pods.len());
    let mut classes: FastMap<PartsKey, u32> = FastMap::default();
    let mut last_class: Option<(PartsKey, u32)> = None;
    for (i, pod) in pods.iter().enumerate() {
        let id = i as PodId;
        let node = match &nodes_of {
            NodesOf::Lookup(map) => pod
                .node_name
                .as_deref()
                .and_then(|name| map.get(name).copied()),
            NodesOf::Stored => pod.node,
        };
        if let Some(ids) = node_ids.as_mut() {
            ids.push(node);
        }
        match node {
            Some(n) if (n as usize) < nodes => node_pairs.push((n, id)),
            Some(_) => {}
            None => {
                // A pod on an unknown node stays on none (never evicted), and is reported.
                if let Some(name) = &pod.node_name {
                    found.note(InconsistencyKind::PodOnUnknownNode, || {
                        format!("{}/{} on {name}", pod.namespace, pod.name)
                    });
                }
            }
        }
        let ns = match last_ns {
            Some((a, slot)) if Arc::ptr_eq(a, &pod.namespace) => slot,
            _ => {
                let next = ns_names.len() as u32;
                let slot = *namespaces.entry(&pod.namespace[..]).or_insert(next);
                if slot == next {
                    ns_names.push(pod.namespace.clone());
                }
                last_ns = Some((&pod.namespace, slot));
                slot
            }
        };
        ns_pairs.push((ns, id));
        if !last_owners.is_some_and(|a| Arc::ptr_eq(a, &pod.owners)) {
            owner_slots.clear();
            for o in pod.owners.iter() {
                let next = owners.len() as u32;
                owner_slots.push(*owners.entry(o.uid.as_str()).or_insert(next));
            }
            last_owners = Some(&pod.owners);
        }
        owner_pairs.extend(owner_slots.iter().map(|&slot| (slot, id)));
        // Consecutive pods (in key order) are mostly of one owner: the map is read on a change.
        let key = parts_key(pod);
        let class = match last_class {
            Some((k, c)) if k == key => c,
            _ => {
                let next = classes.len() as u32;
                let c = *classes.entry(key).or_insert(next);
                last_class = Some((key, c));
                c
            }
        };
        parts_class.push(class);
    }
    let index = PodIndex {
        by_node: Buckets::from_pairs(nodes, &node_pairs),
        by_namespace: Buckets::from_pairs(ns_names.len(), &ns_pairs),
        namespaces: ns_names
            .into_iter()
            .enumerate()
            .map(|(i, ns)| (ns, i as u32))
            .collect(),
        by_owner: Buckets::from_pairs(owners.len(), &owner_pairs),
        owners: owners
            .into_iter()
            .map(|(uid, slot)| (uid.to_string(), slot))
            .collect(),
        parts_class,
        parts_classes: classes.len() as u32,
    };
    (index, node_ids)
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
