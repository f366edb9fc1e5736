//! A focused [`ClusterState`]: the objects some queued keys need, and nothing else.
//!
//! The pure controllers reconcile every object of the state they get, so the state must be
//! closed under what each of them reads for the objects in it:
//! - a Deployment brings the ReplicaSets it controls or that carry its name prefix (the
//!   hash-collision check) — a ReplicaSet brings every pod it controls;
//! - a PDB brings the pods it selects, their ReplicaSets and those ReplicaSets' Deployments
//!   (expected scale);
//! - a pod brings its node (the kubelet). Pods waiting for the scheduler are scheduled apart
//!   ([`super::scheduling`]), against the index's decoded nodes.
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::PodAffinityTerm;
use serde::de::DeserializeOwned;

use super::cache::{Cache, Key, Kind, PodEntry};
use crate::SimState;
use crate::controllers::ClusterState;
use crate::controllers::util::selector_matches;
use crate::resources::{ResourceDef, by_gvr};

/// Keys of each kind waiting to be reconciled.
#[derive(Default, Debug)]
pub struct Roots {
    pub nodes: BTreeSet<String>,
    pub pods: BTreeSet<Key>,
    pub replica_sets: BTreeSet<Key>,
    pub deployments: BTreeSet<Key>,
    pub pdbs: BTreeSet<Key>,
}

impl Roots {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
            + self.pods.len()
            + self.replica_sets.len()
            + self.deployments.len()
            + self.pdbs.len()
    }

    pub fn add(&mut self, kind: Kind, key: Key) {
        match kind {
            Kind::Node => {
                self.nodes.insert(key.1);
            }
            Kind::Pod => {
                self.pods.insert(key);
            }
            Kind::ReplicaSet => {
                self.replica_sets.insert(key);
            }
            Kind::Deployment => {
                self.deployments.insert(key);
            }
            Kind::Pdb => {
                self.pdbs.insert(key);
            }
        }
    }

    /// Takes about `n` keys off the front (whole kinds first: PDBs, Deployments, ReplicaSets,
    /// pods, nodes — owners before the pods they pull in).
    pub fn take(&mut self, n: usize) -> Roots {
        fn split<T: Ord + Clone>(set: &mut BTreeSet<T>, n: &mut usize) -> BTreeSet<T> {
            if *n == 0 {
                return BTreeSet::new();
            }
            if set.len() <= *n {
                *n -= set.len();
                return std::mem::take(set);
            }
            let Some(pivot) = set.iter().nth(*n).cloned() else {
                return std::mem::take(set);
            };
            let rest = set.split_off(&pivot);
            *n = 0;
            std::mem::replace(set, rest)
        }
        let mut n = n.max(1);
        Roots {
            pdbs: split(&mut self.pdbs, &mut n),
            deployments: split(&mut self.deployments, &mut n),
            replica_sets: split(&mut self.replica_sets, &mut n),
            pods: split(&mut self.pods, &mut n),
            nodes: split(&mut self.nodes, &mut n),
        }
    }
}

fn def(group: &str, resource: &str) -> Option<&'static ResourceDef> {
    by_gvr(group, "v1", resource)
}

/// Reads the keyed objects from the store and decodes them; objects gone since are skipped.
fn read<'k, T: DeserializeOwned>(
    st: &SimState,
    def: Option<&'static ResourceDef>,
    keys: impl Iterator<Item = (&'k str, &'k str)>,
) -> Vec<T> {
    let Some(def) = def else {
        return Vec::new();
    };
    keys.filter_map(|(ns, name)| st.store.get(def, ns, name))
        .filter_map(|v| match serde_json::from_value(v) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::debug!("controller state skips an object: {e}");
                None
            }
        })
        .collect()
}

/// `true` when `term` of a pod in `term_ns` can select a pod in `ns` labelled `labels`.
pub(super) fn term_selects(term: &PodAffinityTerm, term_ns: &str, ns: &str, e: &PodEntry) -> bool {
    let Some(sel) = &term.label_selector else {
        return false;
    };
    let in_ns = match (&term.namespaces, &term.namespace_selector) {
        (_, Some(_)) => true,
        (Some(list), None) if !list.is_empty() => list.iter().any(|n| n == ns),
        _ => term_ns == ns,
    };
    in_ns && selector_matches(sel, Some(&e.labels))
}

/// The state for `roots` (pending pods are scheduled apart, see [`super::scheduling`]).
pub fn build(st: &SimState, cache: &Cache, roots: &Roots) -> ClusterState {
    let mut deployments = roots.deployments.clone();
    let mut replica_sets = roots.replica_sets.clone();
    let mut pods = roots.pods.clone();
    for (ns, pdb) in &roots.pdbs {
        if let Some(Some(sel)) = cache.pdbs.get(&(ns.clone(), pdb.clone())) {
            for k in cache.selector_candidates(ns, sel) {
                let Some(e) = cache.pods.get(k) else { continue };
                if selector_matches(sel, Some(&e.labels)) {
                    pods.insert(k.clone());
                    if let Some(rs) = &e.owner_rs {
                        replica_sets.insert((ns.clone(), rs.clone()));
                    }
                }
            }
        }
    }
    for rs in replica_sets.clone() {
        if let Some(Some(d)) = cache.replica_sets.get(&rs) {
            deployments.insert((rs.0.clone(), d.clone()));
        }
    }
    for (ns, d) in &deployments {
        let owned = cache.rs_by_owner.get(&(ns.clone(), d.clone()));
        replica_sets.extend(owned.into_iter().flatten().cloned());
        replica_sets.extend(cache.replica_sets_named(ns, &format!("{d}-")));
    }
    for rs in &replica_sets {
        pods.extend(cache.pods_by_owner.get(rs).into_iter().flatten().cloned());
    }
    let mut nodes: BTreeSet<String> = roots.nodes.clone();
    for k in &pods {
        if let Some(n) = cache.pods.get(k).and_then(|e| e.node.clone()) {
            nodes.insert(n);
        }
    }
    let pairs = |set: &BTreeSet<Key>| -> Vec<(String, String)> { set.iter().cloned().collect() };
    let (pd, rsd, dd, pdbd) = (
        pairs(&pods),
        pairs(&replica_sets),
        pairs(&deployments),
        pairs(&roots.pdbs),
    );
    ClusterState {
        now: st.store.clock().now(),
        nodes: read(st, def("", "nodes"), nodes.iter().map(|n| ("", n.as_str()))),
        pods: read(
            st,
            def("", "pods"),
            pd.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        ),
        replica_sets: read(
            st,
            def("apps", "replicasets"),
            rsd.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        ),
        deployments: read(
            st,
            def("apps", "deployments"),
            dd.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        ),
        pdbs: read(
            st,
            def("policy", "poddisruptionbudgets"),
            pdbd.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        ),
        config: st.config(),
    }
}
