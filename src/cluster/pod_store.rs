//! The pods of the cluster state: one list in `namespace/name` order (the order kube-apiserver
//! lists them in), shared with the snapshots of cycles, and the watch events not yet merged
//! into it.
//!
//! Watch events collect in a small ordered map; taking a snapshot merges them into the list in
//! one pass that moves pointers, never touching a pod it does not change. The list is shared
//! with the snapshot by pointer: a cycle costs no copy of the pods, not even of their pointers,
//! unless the list changes while the cycle still holds it (then the state copies the pointers
//! once, off the cycle's path).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use rustc_hash::{FxBuildHasher, FxHashMap};

use kube_descheduler_engine::snapshot::{NodeId, Pod, SharedList};

/// A change not yet merged: the new pod and whether it sets its own grace period, or a deletion.
type Change = Option<(Arc<Pod>, bool)>;

/// Pods in key order, with the changes not yet merged.
#[derive(Default)]
pub(super) struct PodStore {
    /// In key order; every pod's [`Pod::node`] is its node's id as of the last merge.
    pods: SharedList<Arc<Pod>>,
    /// Whether each pod of `pods` sets its own termination grace period.
    own_grace: Vec<bool>,
    pending: BTreeMap<String, Change>,
    /// How many pods of `pods` have each UID hash (pods without a UID are not counted).
    uid_hashes: FxHashMap<u64, u32>,
    /// UID hashes held by more than one pod (then UIDs may repeat; the snapshot checks them).
    shared_uid_hashes: usize,
}

/// The parts of a pod's state key (as [`super::kinds::key`] spells it: `namespace/name`, or
/// `name` without a namespace), to compare without building it.
fn key_parts(pod: &Pod) -> [&[u8]; 3] {
    if pod.namespace.is_empty() {
        [b"", b"", pod.name.as_bytes()]
    } else {
        [pod.namespace.as_bytes(), b"/", pod.name.as_bytes()]
    }
}

/// Compares the concatenations of two lists of byte strings, a run of equal length at a time
/// (keys share long prefixes: comparing byte by byte would take a step per byte).
fn cmp_concat(a: &[&[u8]], b: &[&[u8]]) -> Ordering {
    let (mut a, mut b) = (a.iter(), b.iter());
    let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
    loop {
        while x.is_empty()
            && let Some(next) = a.next()
        {
            x = next;
        }
        while y.is_empty()
            && let Some(next) = b.next()
        {
            y = next;
        }
        if x.is_empty() || y.is_empty() {
            return x.len().cmp(&y.len());
        }
        let n = x.len().min(y.len());
        let (head_x, rest_x) = x.split_at(n);
        let (head_y, rest_y) = y.split_at(n);
        match head_x.cmp(head_y) {
            Ordering::Equal => (x, y) = (rest_x, rest_y),
            unequal => return unequal,
        }
    }
}

/// The state key of a pod compared with `key`, without building it.
fn cmp_key(pod: &Pod, key: &str) -> Ordering {
    cmp_concat(&key_parts(pod), &[key.as_bytes()])
}

/// The state keys of two pods compared, without building them.
fn cmp_pods(a: &Pod, b: &Pod) -> Ordering {
    cmp_concat(&key_parts(a), &key_parts(b))
}

fn uid_hash(uid: &str) -> u64 {
    FxBuildHasher.hash_one(uid)
}

impl PodStore {
    /// Adds or replaces a pod. A pod that sorts after every pod held, with no change waiting and
    /// no snapshot holding the list (a list's pods arrive in key order), is appended at once.
    /// With `node_ids` (the current node ids by name) it gets its node id then; without, it keeps
    /// [`Pod::node`] unset and `true` is returned: the node ids must be set again
    /// ([`Self::renumber_nodes`]) before a snapshot. Other pods wait for [`Self::merge`].
    pub(super) fn upsert(
        &mut self,
        mut pod: Arc<Pod>,
        own_grace: bool,
        node_ids: Option<&FxHashMap<String, NodeId>>,
    ) -> bool {
        let after_all = self
            .pods
            .last()
            .is_none_or(|last| cmp_pods(last, &pod) == Ordering::Less);
        if after_all && self.pending.is_empty() && self.pods.is_unique() {
            let unset = match node_ids {
                Some(ids) => {
                    let node = pod.node_name.as_deref().and_then(|n| ids.get(n).copied());
                    if pod.node != node {
                        // A converted pod is not shared yet: this writes in place.
                        Arc::make_mut(&mut pod).node = node;
                    }
                    false
                }
                None => true,
            };
            self.count_uid(&pod.uid, true);
            self.pods.push(pod);
            self.own_grace.push(own_grace);
            return unset;
        }
        let key = super::kinds::key(&pod.namespace, &pod.name);
        self.pending.insert(key, Some((pod, own_grace)));
        false
    }

    /// Whether no pod is held and no change waits.
    pub(super) fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.pending.is_empty()
    }

    /// Removes the pod with state key `key`, if there is one.
    pub(super) fn remove(&mut self, key: &str) {
        self.pending.insert(key.to_string(), None);
    }

    /// Whether there are changes not merged yet, and many of them: merging then frees the pods
    /// they replace instead of holding both.
    pub(super) fn many_pending(&self) -> bool {
        self.pending.len() > 1024.max(self.pods.len() / 16)
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.pods.binary_search_by(|p| cmp_key(p, key))
    }

    /// Whether the pod with state key `key` sets its own grace period (`None`: no such pod).
    pub(super) fn own_grace(&self, key: &str) -> Option<bool> {
        match self.pending.get(key) {
            Some(change) => change.as_ref().map(|(_, g)| *g),
            None => self.position(key).ok().map(|i| self.own_grace[i]),
        }
    }

    /// Number of pods (changes must be merged first).
    pub(super) fn len(&self) -> usize {
        debug_assert!(self.pending.is_empty());
        self.pods.len()
    }

    /// Keeps only the pods whose state key `keep` accepts (changes must be merged first).
    pub(super) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        debug_assert!(self.pending.is_empty());
        let drop: Vec<bool> = self
            .pods
            .iter()
            .map(|p| !keep(&super::kinds::key(&p.namespace, &p.name)))
            .collect();
        if !drop.contains(&true) {
            return;
        }
        let mut i = 0;
        let mut uids = Vec::new();
        self.pods.retain(|p| {
            i += 1;
            if drop[i - 1] {
                uids.push(p.uid.clone());
            }
            !drop[i - 1]
        });
        let mut i = 0;
        self.own_grace.retain(|_| {
            i += 1;
            !drop[i - 1]
        });
        for uid in uids {
            self.count_uid(&uid, false);
        }
    }

    fn count_uid(&mut self, uid: &str, add: bool) {
        if uid.is_empty() {
            return;
        }
        let h = uid_hash(uid);
        if add {
            let n = self.uid_hashes.entry(h).or_insert(0);
            *n += 1;
            if *n == 2 {
                self.shared_uid_hashes += 1;
            }
        } else if let Some(n) = self.uid_hashes.get_mut(&h) {
            *n -= 1;
            if *n == 1 {
                self.shared_uid_hashes -= 1;
            } else if *n == 0 {
                self.uid_hashes.remove(&h);
            }
        }
    }

    /// Whether no two pods have the same UID (false also when two UIDs only share a hash).
    pub(super) fn unique_uids(&self) -> bool {
        self.shared_uid_hashes == 0
    }

    /// Merges the changes into the list. New pods get their node's id from `node_id`; the others
    /// keep theirs (see [`Self::renumber_nodes`]).
    pub(super) fn merge(&mut self, node_id: impl Fn(&str) -> Option<NodeId>) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        // Where each change goes in the current list (the keys are in order, so each search
        // starts where the last one ended).
        let mut at = Vec::with_capacity(pending.len());
        let mut from = 0;
        for key in pending.keys() {
            let (i, found) = match self.pods[from..].binary_search_by(|p| cmp_key(p, key)) {
                Ok(i) => (from + i, true),
                Err(i) => (from + i, false),
            };
            at.push((i, found));
            from = i;
        }
        let old = std::mem::take(&mut *self.pods);
        let old_grace = std::mem::take(&mut self.own_grace);
        let mut pods = Vec::with_capacity(old.len() + pending.len());
        let mut grace = Vec::with_capacity(old.len() + pending.len());
        let mut old = old.into_iter();
        let mut old_grace = old_grace.into_iter();
        let mut copied = 0;
        for ((i, found), change) in at.into_iter().zip(pending.into_values()) {
            pods.extend(old.by_ref().take(i - copied));
            grace.extend(old_grace.by_ref().take(i - copied));
            copied = i;
            if found {
                if let Some(gone) = old.next() {
                    self.count_uid(&gone.uid, false);
                }
                old_grace.next();
                copied += 1;
            }
            if let Some((mut pod, own_grace)) = change {
                let node = pod.node_name.as_deref().and_then(&node_id);
                if pod.node != node {
                    Arc::make_mut(&mut pod).node = node;
                }
                self.count_uid(&pod.uid, true);
                pods.push(pod);
                grace.push(own_grace);
            }
        }
        pods.extend(old);
        grace.extend(old_grace);
        *self.pods = pods;
        self.own_grace = grace;
    }

    /// Sets every pod's node id again (after nodes were added or removed, which moves the ids
    /// of the nodes after them). Pods whose id does not change are not touched.
    pub(super) fn renumber_nodes(&mut self, node_id: impl Fn(&str) -> Option<NodeId>) {
        self.merge(&node_id);
        let id_of = |p: &Arc<Pod>| p.node_name.as_deref().and_then(&node_id);
        // Found before the list is written to, so that a list shared with a snapshot is not
        // copied when every pod is right.
        let Some(first) = self.pods.iter().position(|p| p.node != id_of(p)) else {
            return;
        };
        for pod in self.pods[first..].iter_mut() {
            let node = id_of(pod);
            if pod.node != node {
                Arc::make_mut(pod).node = node;
            }
        }
    }

    /// The list, shared (changes must be merged first).
    pub(super) fn shared(&self) -> SharedList<Arc<Pod>> {
        debug_assert!(self.pending.is_empty());
        self.pods.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys compare as their text does, whatever way they are split: a namespace that is a
    /// prefix of another (`a/x` after `a-b/y`: `/` sorts after `-`), empty parts, equal keys.
    #[test]
    fn split_keys_compare_as_their_text() {
        let keys = [
            "", "a", "a/", "a/x", "a-b/y", "a/x-1", "ab/x", "a/xy", "b/a", "a-b", "a-b/",
        ];
        let splits = |k: &'static str| {
            (0..=k.len()).flat_map(move |i| {
                (i..=k.len())
                    .map(move |j| [&k.as_bytes()[..i], &k.as_bytes()[i..j], &k.as_bytes()[j..]])
            })
        };
        for a in keys {
            for b in keys {
                let want = a.as_bytes().cmp(b.as_bytes());
                for x in splits(a) {
                    for y in splits(b) {
                        assert_eq!(cmp_concat(&x, &y), want, "{x:?} vs {y:?}");
                    }
                }
            }
        }
    }
}
