//! Inconsistencies a snapshot taken from a live API server never has, but a hand-edited or
//! merged file can: found when the snapshot is built, resolved the one documented way, and
//! reported (`plan` prints one line per kind on stderr and lists them under `warnings`;
//! `--strict` makes them errors).
//!
//! What the plan does with each:
//! - **Duplicate pod namespace/name** and **duplicate pod UID**: the later item in file order
//!   replaces the earlier one (as applying the items in order would); the earlier is dropped.
//! - **Pod on an unknown node** (`spec.nodeName` names no node of the snapshot): the pod stays
//!   in the snapshot but is on no node, so node-based plugins never see it (never evicted).
//! - **Negative or zero allocatable** cpu, memory or pods on a node: a negative amount counts
//!   as 0; the node is kept, usage percentages of a zero amount count as 0 % (as the
//!   utilization plugins do), and nothing that requests the resource fits on it.

use std::fmt;
use std::sync::Arc;

use super::builder::FastMap;
use super::{Node, Pod};

/// The kinds of inconsistency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InconsistencyKind {
    /// Two pods with the same namespace and name.
    DuplicatePodName,
    /// Two pods (different namespace/name) with the same UID.
    DuplicatePodUid,
    /// A pod bound to a node the snapshot does not have.
    PodOnUnknownNode,
    /// A node whose allocatable cpu, memory or pods is negative or zero.
    NonPositiveAllocatable,
}

impl InconsistencyKind {
    /// A short stable name (`--strict` errors and JSON use it).
    pub fn as_str(self) -> &'static str {
        match self {
            InconsistencyKind::DuplicatePodName => "duplicate-pod-name",
            InconsistencyKind::DuplicatePodUid => "duplicate-pod-uid",
            InconsistencyKind::PodOnUnknownNode => "pod-on-unknown-node",
            InconsistencyKind::NonPositiveAllocatable => "non-positive-allocatable",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            InconsistencyKind::DuplicatePodName => {
                "pods with the same namespace/name (the later one in the file is used)"
            }
            InconsistencyKind::DuplicatePodUid => {
                "pods with the same UID (the later one in the file is used)"
            }
            InconsistencyKind::PodOnUnknownNode => {
                "pods bound to a node not in the snapshot (on no node: never evicted)"
            }
            InconsistencyKind::NonPositiveAllocatable => {
                "nodes with negative or zero allocatable cpu, memory or pods (negative counts as 0)"
            }
        }
    }
}

/// One kind of inconsistency: how often, and the first three examples in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inconsistency {
    /// Which kind.
    pub kind: InconsistencyKind,
    /// How many objects have it.
    pub count: usize,
    /// Up to three examples.
    pub examples: Vec<String>,
}

impl fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} [{}]: {}",
            self.count,
            self.kind.describe(),
            self.kind.as_str(),
            self.examples.join(", ")
        )?;
        if self.count > self.examples.len() {
            write!(f, ", …")?;
        }
        Ok(())
    }
}

/// Inconsistencies found so far, by kind, in the order they were found.
#[derive(Debug, Default)]
pub(super) struct Found(Vec<Inconsistency>);

impl Found {
    /// Starts from inconsistencies found before (e.g. a cluster state's nodes, checked once).
    pub(super) fn from(found: Vec<Inconsistency>) -> Self {
        Found(found)
    }

    pub(super) fn note(&mut self, kind: InconsistencyKind, example: impl FnOnce() -> String) {
        let i = match self.0.iter().position(|x| x.kind == kind) {
            Some(i) => i,
            None => {
                self.0.push(Inconsistency {
                    kind,
                    count: 0,
                    examples: Vec::new(),
                });
                self.0.len() - 1
            }
        };
        let entry = &mut self.0[i];
        entry.count += 1;
        if entry.examples.len() < 3 {
            entry.examples.push(example());
        }
    }

    /// Everything found, sorted by kind.
    pub(super) fn sorted(self) -> Vec<Inconsistency> {
        let mut out = self.0;
        out.sort_by_key(|x| x.kind);
        out
    }
}

/// Finds the inconsistencies of `nodes` and `pods` and resolves them as the module documents:
/// drops earlier duplicates of pods (keeping file order otherwise) and counts negative
/// allocatable amounts as 0. Returns them sorted by kind.
pub fn resolve(nodes: &mut [Node], pods: &mut Vec<Arc<Pod>>) -> Vec<Inconsistency> {
    let mut found = Found::from(resolve_nodes(nodes));
    resolve_duplicate_pods(pods, &mut found);
    let node_names: std::collections::HashSet<&str> =
        nodes.iter().map(|n| n.name.as_str()).collect();
    for p in pods.iter() {
        if let Some(node) = &p.node_name
            && !node_names.contains(&**node)
        {
            found.note(InconsistencyKind::PodOnUnknownNode, || {
                format!("{}/{} on {node}", p.namespace, p.name)
            });
        }
    }
    found.sorted()
}

/// The node part of [`resolve`]: counts negative allocatable amounts as 0 and reports nodes with
/// non-positive ones (in node order).
pub fn resolve_nodes(nodes: &mut [Node]) -> Vec<Inconsistency> {
    let mut found = Found::default();
    for node in nodes.iter_mut() {
        let a = &mut node.allocatable;
        let bad: Vec<String> = [
            ("cpu", &mut a.cpu_milli),
            ("memory", &mut a.memory),
            ("pods", &mut a.pods),
        ]
        .into_iter()
        .filter(|(_, v)| **v <= 0)
        .map(|(name, v)| {
            let text = format!("{name}={}", *v);
            *v = (*v).max(0);
            text
        })
        .collect();
        if !bad.is_empty() {
            found.note(InconsistencyKind::NonPositiveAllocatable, || {
                format!("node {} ({})", node.name, bad.join(", "))
            });
        }
    }
    found.0
}

/// The duplicate part of [`resolve`]: drops the earlier of pods with the same namespace/name or
/// UID, noting them in `found`.
pub(super) fn resolve_duplicate_pods(pods: &mut Vec<Arc<Pod>>, found: &mut Found) {
    let listed = in_list_order(pods);
    resolve_duplicates_in(pods, found, listed);
}

/// [`resolve_duplicate_pods`], with `listed` telling whether the pods are in list order (see
/// [`in_list_order`]).
fn resolve_duplicates_in(pods: &mut Vec<Arc<Pod>>, found: &mut Found, listed: bool) {
    // Later items win: walk backwards, keep the first of each key seen from the end.
    let mut remove = vec![false; pods.len()];
    let mut name_dups = Vec::new();
    let mut uid_dups = Vec::new();
    {
        let mut by_name = NameSeen::for_pods(pods, listed);
        let mut by_uid: FastMap<&str, usize> = FastMap::default();
        by_uid.reserve(pods.len());
        for (i, p) in pods.iter().enumerate().rev() {
            if let Some(later) = by_name.later(pods, i) {
                remove[i] = true;
                name_dups.push((i, later));
                continue;
            }
            if !p.uid.is_empty()
                && let Some(&later) = by_uid.get(p.uid.as_str())
            {
                remove[i] = true;
                uid_dups.push((i, later));
                continue;
            }
            by_name.keep(p, i);
            if !p.uid.is_empty() {
                by_uid.insert(p.uid.as_str(), i);
            }
        }
    }
    name_dups.sort_unstable();
    uid_dups.sort_unstable();
    for &(i, _) in &name_dups {
        let p = &pods[i];
        found.note(InconsistencyKind::DuplicatePodName, || {
            format!("{}/{}", p.namespace, p.name)
        });
    }
    for &(i, later) in &uid_dups {
        let (p, q) = (&pods[i], &pods[later]);
        found.note(InconsistencyKind::DuplicatePodUid, || {
            format!(
                "{} ({}/{} and {}/{})",
                p.uid, p.namespace, p.name, q.namespace, q.name
            )
        });
    }
    drop_marked(pods, &remove);
}

/// The kept pod of each `namespace/name`, for a walk from the last pod to the first. Pods in list
/// order (as the file loaders put them) have their duplicates next to each other, so only the
/// current run of one name is remembered; other pods are looked up in a map.
enum NameSeen<'a> {
    /// Pods in list order: the kept pod of the run of the pod visited last, if any.
    Adjacent(Option<usize>),
    Map(FastMap<(&'a str, &'a str), usize>),
}

impl<'a> NameSeen<'a> {
    fn for_pods(pods: &[Arc<Pod>], listed: bool) -> Self {
        if listed {
            return NameSeen::Adjacent(None);
        }
        let mut map = FastMap::default();
        map.reserve(pods.len());
        NameSeen::Map(map)
    }

    /// The kept pod with the name of `pods[i]`, if one was kept (visited pods are after `i`).
    fn later(&mut self, pods: &'a [Arc<Pod>], i: usize) -> Option<usize> {
        let p = &pods[i];
        match self {
            NameSeen::Adjacent(kept) => {
                if !pods.get(i + 1).is_some_and(|next| same_name(p, next)) {
                    *kept = None;
                }
                *kept
            }
            NameSeen::Map(map) => map.get(&(&p.namespace[..], p.name.as_str())).copied(),
        }
    }

    /// `pod` (number `i`) is kept.
    fn keep(&mut self, pod: &'a Pod, i: usize) {
        match self {
            NameSeen::Adjacent(kept) => *kept = Some(i),
            NameSeen::Map(map) => {
                map.insert((&pod.namespace[..], pod.name.as_str()), i);
            }
        }
    }
}

/// Whether every pod's duplicates directly follow it: the pods are sorted by list key and no two
/// different names have equal keys (the key joins namespace and name with `/`).
fn in_list_order(pods: &[Arc<Pod>]) -> bool {
    super::builder::is_sorted_split(pods, |a, b| {
        match super::builder::cmp_listed((&a.namespace, &a.name), (&b.namespace, &b.name)) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => same_name(a, b),
            std::cmp::Ordering::Greater => false,
        }
    })
}

fn same_name(a: &Pod, b: &Pod) -> bool {
    a.name == b.name && a.namespace == b.namespace
}

fn drop_marked(pods: &mut Vec<Arc<Pod>>, remove: &[bool]) {
    if !remove.contains(&true) {
        return;
    }
    let mut i = 0;
    pods.retain(|_| {
        let keep = !remove[i];
        i += 1;
        keep
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::SnapshotBuilder;
    use crate::testing::pod;

    fn pods(specs: &[(&str, &str, &str)]) -> Vec<Arc<Pod>> {
        let mut b = SnapshotBuilder::new();
        for &(ns, name, uid) in specs {
            let p = pod(ns, name, "n").with(|p| p.metadata.uid = Some(uid.into()));
            b.add_pod(&p.build()).expect("a valid pod");
        }
        b.take_parts().pods
    }

    fn resolved(mut pods: Vec<Arc<Pod>>, listed: bool) -> (Vec<String>, Vec<(usize, usize)>) {
        let mut found = Found::default();
        resolve_duplicates_in(&mut pods, &mut found, listed);
        let kept = pods
            .iter()
            .map(|p| format!("{}/{} {}", p.namespace, p.name, p.uid))
            .collect();
        let counts = found
            .sorted()
            .iter()
            .map(|f| (f.kind as usize, f.count))
            .collect();
        (kept, counts)
    }

    /// In list order, duplicates of a name are found next to each other, with the result of the
    /// map lookup: a run of one name whose last pod is dropped for its UID keeps the pod before.
    #[test]
    fn pods_in_list_order_resolve_as_through_the_map() {
        let listed = pods(&[
            ("a", "o", "u1"),
            ("a", "p", "u4"),
            ("a", "p", "u6"),
            ("a", "q", "u2"),
            ("a", "r", "u5"),
            ("a", "r", "u5"),
            ("a", "s", "u6"),
            ("b", "p", "u7"),
            ("b", "p", "u1"),
            ("b", "t", "u9"),
        ]);
        assert!(in_list_order(&listed));
        let adjacent = resolved(listed.clone(), true);
        assert_eq!(adjacent, resolved(listed, false));
        let (kept, counts) = adjacent;
        assert_eq!(
            kept,
            ["a/p u4", "a/q u2", "a/r u5", "a/s u6", "b/p u1", "b/t u9"]
        );
        let name = InconsistencyKind::DuplicatePodName as usize;
        let uid = InconsistencyKind::DuplicatePodUid as usize;
        assert_eq!(counts, [(name, 2), (uid, 2)]);
    }

    #[test]
    fn pods_out_of_order_or_with_keys_of_two_names_are_not_in_list_order() {
        assert!(!in_list_order(&pods(&[("b", "p", "u1"), ("a", "p", "u2")])));
        // `a/b` + `c` and `a` + `b/c` have the same key `a/b/c`.
        let joined = pods(&[("a/b", "c", "u1"), ("a", "b/c", "u2"), ("a/b", "c", "u3")]);
        assert!(!in_list_order(&joined));
        let (kept, _) = resolved(joined, false);
        assert_eq!(kept, ["a/b/c u2", "a/b/c u3"]);
    }
}
