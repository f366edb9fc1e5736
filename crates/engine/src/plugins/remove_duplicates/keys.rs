//! The keys RemoveDuplicates groups pods by, made once per parts class (pods sharing their owner
//! references, images and namespace). Reading a class's parts is a cache miss per part, so the
//! keys and their hashes are made on several threads; numbering them, which must follow the
//! order the classes are first seen in, then only compares hashes and, on a match, keys that are
//! already in cache.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use rustc_hash::{FxHashMap, FxHasher};

use crate::snapshot::Pod;

/// A key with its hash computed ahead (where the key was made); maps hash only the number.
#[derive(Debug, PartialEq, Eq)]
struct Prehashed<K> {
    hash: u64,
    key: K,
}

impl<K> Hash for Prehashed<K> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

fn fx_hash(v: &impl Hash) -> u64 {
    let mut h = FxHasher::default();
    v.hash(&mut h);
    h.finish()
}

/// Namespace, owner kind, owner name and the pod's sorted images.
type OwnerKey<'k> = (&'k str, &'k str, &'k str, &'k [&'k str]);

/// What makes two pods on a node duplicates: the same namespace, owners and images. (Upstream
/// compares the sorted `namespace/kind/name/image` strings of every owner × image.)
#[derive(Debug, PartialEq, Eq)]
enum DupKey<'k> {
    /// One owner: its owner key (group id) says it all.
    Single(u32),
    /// Several owners: the namespace and the sorted (kind, name, image) triples.
    Multi(&'k str, &'k [(&'k str, &'k str, &'k str)]),
}

/// The keys of one parts class.
#[derive(Debug)]
pub(super) struct ClassKeys<'s> {
    namespace: &'s str,
    /// Sorted.
    images: Vec<&'s str>,
    /// (kind, name) of each owner reference, in order, with the hash of its [`OwnerKey`].
    owners: Vec<(&'s str, &'s str, u64)>,
    /// With several owners: the sorted (kind, name, image) triples and their hash.
    triples: Vec<(&'s str, &'s str, &'s str)>,
    triples_hash: u64,
}

impl<'s> ClassKeys<'s> {
    /// The keys of `pod`'s class (`pod` has at least one owner).
    pub(super) fn of(pod: &'s Pod) -> Self {
        let namespace: &str = &pod.namespace;
        let mut images: Vec<&str> = pod.images.iter().map(String::as_str).collect();
        images.sort_unstable();
        let owners = pod
            .owners
            .iter()
            .map(|o| {
                let key: OwnerKey<'_> = (namespace, &o.kind, &o.name, &images);
                (o.kind.as_str(), o.name.as_str(), fx_hash(&key))
            })
            .collect();
        let (triples, triples_hash) = if pod.owners.len() > 1 {
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
            let hash = fx_hash(&(namespace, &triples));
            (triples, hash)
        } else {
            (Vec::new(), 0)
        };
        ClassKeys {
            namespace,
            images,
            owners,
            triples,
            triples_hash,
        }
    }
}

/// The ids of a class: its duplicate key and the range of its owner keys' group ids in
/// [`Numbered::group_ids`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClassIds {
    pub dup: u32,
    groups_start: u32,
    groups_end: u32,
}

impl ClassIds {
    /// The range of the class's group ids in [`Numbered::group_ids`].
    pub(super) fn groups(&self) -> Range<u32> {
        self.groups_start..self.groups_end
    }
}

/// Ids for the keys of classes, given in the order of the classes.
#[derive(Debug)]
pub(super) struct Numbered {
    /// Per class, in the order given.
    pub classes: Vec<ClassIds>,
    /// The group ids of every class's owner keys, concatenated.
    pub group_ids: Vec<u32>,
    /// How many owner keys (groups) there are.
    pub groups: usize,
    /// How many duplicate keys there are.
    pub dups: usize,
}

impl Numbered {
    /// The group ids of the class with these ids.
    pub(super) fn groups_of(&self, ids: &ClassIds) -> &[u32] {
        &self.group_ids[ids.groups_start as usize..ids.groups_end as usize]
    }
}

/// Numbers owner keys (groups) and duplicate keys in the order `keys` first holds them.
pub(super) fn number(keys: &[ClassKeys<'_>]) -> Numbered {
    let mut group_of: FxHashMap<Prehashed<OwnerKey<'_>>, u32> =
        FxHashMap::with_capacity_and_hasher(keys.len(), Default::default());
    let mut dup_of: FxHashMap<Prehashed<DupKey<'_>>, u32> =
        FxHashMap::with_capacity_and_hasher(keys.len(), Default::default());
    let mut classes = Vec::with_capacity(keys.len());
    let mut group_ids = Vec::with_capacity(keys.len());
    for k in keys {
        let start = group_ids.len();
        for &(kind, name, hash) in &k.owners {
            let next = group_of.len() as u32;
            let key = Prehashed {
                hash,
                key: (k.namespace, kind, name, &k.images[..]),
            };
            group_ids.push(*group_of.entry(key).or_insert(next));
        }
        let dup_key = match &group_ids[start..] {
            [single] => Prehashed {
                hash: u64::from(*single),
                key: DupKey::Single(*single),
            },
            _ => Prehashed {
                hash: k.triples_hash,
                key: DupKey::Multi(k.namespace, &k.triples),
            },
        };
        let next = dup_of.len() as u32;
        let dup = *dup_of.entry(dup_key).or_insert(next);
        classes.push(ClassIds {
            dup,
            groups_start: start as u32,
            groups_end: group_ids.len() as u32,
        });
    }
    Numbered {
        classes,
        group_ids,
        groups: group_of.len(),
        dups: dup_of.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::OwnerRef;
    use crate::testing::{node, pod, snapshot};

    /// A pod of `namespace` with these owners (kind, name) and images, each part in an `Arc`
    /// of its own (as pods decoded apart have).
    fn pod_with(namespace: &str, owners: &[(&str, &str)], images: &[&str]) -> Pod {
        let snap = snapshot(
            vec![node("n1").build()],
            vec![pod("x", "p", "n1").owner("ReplicaSet", "r").build()],
        );
        Pod {
            namespace: namespace.into(),
            owners: owners
                .iter()
                .map(|&(kind, name)| OwnerRef {
                    api_version: "apps/v1".into(),
                    kind: kind.into(),
                    name: name.into(),
                    uid: format!("{name}-uid"),
                    controller: true,
                })
                .collect(),
            images: images.iter().map(|i| i.to_string()).collect(),
            ..snap.pod(0).clone()
        }
    }

    #[test]
    fn keys_are_numbered_by_content_in_the_order_they_first_come() {
        let pods = [
            pod_with("a", &[("ReplicaSet", "r1")], &["x", "y"]),
            // Equal content in other `Arc`s, images in another order: the same keys.
            pod_with("a", &[("ReplicaSet", "r1")], &["y", "x"]),
            pod_with("b", &[("ReplicaSet", "r1")], &["x", "y"]),
            pod_with("a", &[("ReplicaSet", "r2")], &["x"]),
            pod_with("a", &[("ReplicaSet", "r1"), ("Job", "j")], &["y", "x"]),
            // The same owners in another order: the same duplicate key.
            pod_with("a", &[("Job", "j"), ("ReplicaSet", "r1")], &["x", "y"]),
            pod_with("a", &[("ReplicaSet", "r1")], &["x"]),
        ];
        let keys: Vec<ClassKeys<'_>> = pods.iter().map(ClassKeys::of).collect();
        let numbered = number(&keys);
        let groups: Vec<&[u32]> = numbered
            .classes
            .iter()
            .map(|c| numbered.groups_of(c))
            .collect();
        assert_eq!(
            groups,
            [&[0][..], &[0], &[1], &[2], &[0, 3], &[3, 0], &[4]],
            "group ids"
        );
        let dups: Vec<u32> = numbered.classes.iter().map(|c| c.dup).collect();
        assert_eq!(dups, [0, 0, 1, 2, 3, 3, 4], "duplicate key ids");
        assert_eq!((numbered.groups, numbered.dups), (5, 5));
    }
}
