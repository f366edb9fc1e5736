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
    // Later items win: walk backwards, keep the first of each key seen from the end.
    let mut remove = vec![false; pods.len()];
    let mut name_dups = Vec::new();
    let mut uid_dups = Vec::new();
    {
        let mut by_name: FastMap<(&str, &str), usize> = FastMap::default();
        let mut by_uid: FastMap<&str, usize> = FastMap::default();
        by_name.reserve(pods.len());
        by_uid.reserve(pods.len());
        for (i, p) in pods.iter().enumerate().rev() {
            if let Some(&later) = by_name.get(&(&p.namespace[..], p.name.as_str())) {
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
            by_name.insert((&p.namespace[..], p.name.as_str()), i);
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
