//! The order kube-apiserver lists objects in, for snapshots loaded from a file: per kind, by
//! `namespace/name` as bytes (`name` alone for cluster-scoped objects) — the key order the live
//! cluster state keeps (`src/cluster/state.rs`). Plans depend on object order (node ids, the order
//! pods are considered in), so a file's order must not: any order of the same objects gives the
//! same snapshot.

use std::cmp::Ordering;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::SnapshotBuilder;

/// Compares the list keys of two objects (`namespace/name`, or `name` without a namespace)
/// without building them.
pub(crate) fn cmp_listed(a: (&str, &str), b: (&str, &str)) -> Ordering {
    fn bytes<'a>((namespace, name): (&'a str, &'a str)) -> impl Iterator<Item = u8> + 'a {
        let sep: &[u8] = if namespace.is_empty() { b"" } else { b"/" };
        namespace
            .bytes()
            .chain(sep.iter().copied())
            .chain(name.bytes())
    }
    // Most keys differ in their namespace or not at all before the name: compare the parts
    // directly when the namespaces are equal.
    if a.0 == b.0 {
        return a.1.cmp(b.1);
    }
    bytes(a).cmp(bytes(b))
}

fn meta_key(m: &ObjectMeta) -> (&str, &str) {
    (
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or(""),
    )
}

/// The first 16 bytes of an object's list key (`namespace/name`) as a big-endian number, zero
/// padded: when two prefixes differ, the keys compare as their prefixes do.
fn key_prefix((namespace, name): (&str, &str)) -> u128 {
    let sep: &[u8] = if namespace.is_empty() { b"" } else { b"/" };
    let mut bytes = [0u8; 16];
    let key = namespace
        .bytes()
        .chain(sep.iter().copied())
        .chain(name.bytes());
    for (slot, b) in bytes.iter_mut().zip(key) {
        *slot = b;
    }
    u128::from_be_bytes(bytes)
}

/// Lists at least this long are checked and sorted in two halves on two threads (unit tests use
/// 2, so the table tests take the split path).
const SPLIT_FROM: usize = if cfg!(test) { 2 } else { 20_000 };

/// Whether a list of `len` objects is worth two threads: it is long and the machine has them.
fn worth_splitting(len: usize) -> bool {
    len >= SPLIT_FROM && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

/// Whether every neighbouring pair of `items` passes `in_order` (as [`slice::is_sorted_by`]); a
/// long list is checked in two halves on two threads (each a walk over objects behind pointers).
pub(crate) fn is_sorted_split<T: Sync>(
    items: &[T],
    in_order: impl Fn(&T, &T) -> bool + Sync,
) -> bool {
    if !worth_splitting(items.len()) {
        return items.is_sorted_by(in_order);
    }
    let mid = items.len() / 2;
    // The halves overlap by one, so the pair across the middle is checked too.
    let (left, right) = (&items[..=mid], &items[mid..]);
    std::thread::scope(|scope| {
        let left = scope.spawn(|| left.is_sorted_by(&in_order));
        let right = right.is_sorted_by(&in_order);
        right
            && left
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Sorts `items` stably by their list keys. A list already in order (as `kubectl get` writes it)
/// is checked in one pass and left alone; otherwise the items are sorted through a compact array
/// of key prefixes and positions, so most comparisons read no object (the pods' keys sit behind
/// two pointers each), and are then moved to their places once. A long list is sorted in two
/// halves on two threads and merged: the order is the same, as ties are broken by position.
fn sort_listed<T: Sync>(items: &mut Vec<T>, key: impl Fn(&T) -> (&str, &str) + Sync) {
    sort_listed_with(items, key, worth_splitting(items.len()));
}

/// [`sort_listed`], sorting on two threads or on this one as `split` says.
fn sort_listed_with<T: Sync>(
    items: &mut Vec<T>,
    key: impl Fn(&T) -> (&str, &str) + Sync,
    split: bool,
) {
    if is_sorted_split(items, |a, b| cmp_listed(key(a), key(b)).is_le()) {
        return;
    }
    let order = {
        let items = &*items;
        // Ties on the prefix are broken by the whole key, then by position (which makes the
        // result that of a stable sort, and the same however the positions were split).
        let cmp = |a: &(u128, usize), b: &(u128, usize)| {
            a.0.cmp(&b.0)
                .then_with(|| cmp_listed(key(&items[a.1]), key(&items[b.1])))
                .then(a.1.cmp(&b.1))
        };
        // Each thread gathers the keys of its half (reading every object, the slow part) and
        // sorts them.
        let sort_part = |part: &mut [(u128, usize)], first: usize| {
            for (slot, i) in part.iter_mut().zip(first..) {
                *slot = (key_prefix(key(&items[i])), i);
            }
            part.sort_unstable_by(cmp);
        };
        let mut keys = vec![(0u128, 0usize); items.len()];
        if split {
            let mid = items.len() / 2;
            let (left, right) = keys.split_at_mut(mid);
            std::thread::scope(|scope| {
                let done = scope.spawn(|| sort_part(left, 0));
                sort_part(right, mid);
                done.join()
            })
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            merged_positions(left, right, cmp)
        } else {
            sort_part(&mut keys, 0);
            keys.iter().map(|&(_, i)| i).collect()
        }
    };
    let mut slots: Vec<Option<T>> = std::mem::take(items).into_iter().map(Some).collect();
    items.extend(order.iter().filter_map(|&i| slots[i].take()));
}

/// The positions of two lists sorted by `cmp`, merged (the left one first on ties): only the
/// positions are kept, so the merge adds a quarter of the sort keys' memory.
fn merged_positions<X: Copy>(
    a: &[(X, usize)],
    b: &[(X, usize)],
    cmp: impl Fn(&(X, usize), &(X, usize)) -> Ordering,
) -> Vec<usize> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        if cmp(x, y).is_le() {
            out.push(x.1);
            i += 1;
        } else {
            out.push(y.1);
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|x| x.1));
    out.extend(b[j..].iter().map(|y| y.1));
    out
}

impl SnapshotBuilder {
    /// Puts the objects of each kind in the order the API lists them (a stable sort: objects with
    /// the same key keep their order among themselves, for the duplicate rules to see).
    pub fn order_as_listed(&mut self) {
        sort_listed(&mut self.nodes, |n| ("", &n.name));
        sort_listed(&mut self.pods, |p| (&p.namespace, &p.name));
        sort_listed(&mut self.pdbs, |p| meta_key(&p.metadata));
        sort_listed(&mut self.replica_sets, |r| (&r.namespace, &r.name));
        sort_listed(&mut self.deployments, |d| (&d.namespace, &d.name));
        sort_listed(&mut self.stateful_sets, |s| meta_key(&s.metadata));
        sort_listed(&mut self.jobs, |j| meta_key(&j.metadata));
        sort_listed(&mut self.hpas, |h| (&h.namespace, &h.name));
    }
}

#[cfg(test)]
mod tests {
    use super::{cmp_listed, is_sorted_split, sort_listed, sort_listed_with};
    use std::cmp::Ordering;

    /// Keys that tie on their 16-byte prefix, differ only past it, repeat (stability), and
    /// compare differently as `namespace/name` bytes than as (namespace, name) pairs.
    #[test]
    fn sorting_through_prefixes_equals_a_stable_sort_by_key() {
        let names = [
            "a",
            "b",
            "a-b",
            "a.b",
            "abcdefghijklmnop-1",
            "abcdefghijklmnop-0",
            "abcdefghijklmnopq",
            "abcdefghijklmno",
            "x",
            "",
        ];
        let namespaces = ["", "a", "a-b", "a.b", "team-a", "abcdefghijklmnopqrst"];
        let mut items: Vec<(String, String, usize)> = Vec::new();
        let mut n = 0;
        for round in 0..3 {
            for (i, ns) in namespaces.iter().enumerate() {
                for (j, name) in names.iter().enumerate() {
                    if (i + j + round) % 3 != 0 {
                        items.push((ns.to_string(), name.to_string(), n));
                        n += 1;
                    }
                }
            }
        }
        items.reverse();
        let mut expected = items.clone();
        expected.sort_by(|a, b| cmp_listed((&a.0, &a.1), (&b.0, &b.1)));
        let items_copy = items.clone();
        let mut sorted = items;
        sort_listed(&mut sorted, |t| (&t.0, &t.1));
        assert_eq!(sorted, expected);
        // Sorted in two halves and merged: the same order (ties included).
        let mut whole = items_copy.clone();
        sort_listed_with(&mut whole, |t| (&t.0, &t.1), false);
        let mut halves = items_copy;
        sort_listed_with(&mut halves, |t| (&t.0, &t.1), true);
        assert_eq!(whole, expected);
        assert_eq!(halves, expected);
        // Sorted input stays as it is.
        let mut again = sorted.clone();
        sort_listed(&mut again, |t| (&t.0, &t.1));
        assert_eq!(again, sorted);
    }

    /// The split check finds a pair out of order wherever it is, the pair across the middle too.
    #[test]
    fn the_split_check_agrees_with_the_whole_walk() {
        for n in 0..12usize {
            let sorted: Vec<usize> = (0..n).collect();
            assert!(is_sorted_split(&sorted, |a, b| a <= b), "{n} sorted");
            for at in 1..n {
                let mut v = sorted.clone();
                v.swap(at - 1, at);
                assert!(
                    !is_sorted_split(&v, |a, b| a <= b),
                    "{n} items, swap at {at}"
                );
            }
        }
    }

    #[test]
    fn keys_compare_as_the_api_spells_them() {
        // `a-b/x` < `a/x` as bytes ('-' < '/'), though `a` < `a-b` as a namespace.
        assert_eq!(cmp_listed(("a-b", "x"), ("a", "x")), Ordering::Less);
        assert_eq!(cmp_listed(("a", "y"), ("a", "x")), Ordering::Greater);
        assert_eq!(cmp_listed(("", "n1"), ("", "n10")), Ordering::Less);
        assert_eq!(cmp_listed(("ns", "p"), ("ns", "p")), Ordering::Equal);
        // `a/b` against the namespace `a.b`: '/' > '.'.
        assert_eq!(cmp_listed(("a", "b"), ("a.b", "c")), Ordering::Greater);
    }
}
