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
}
