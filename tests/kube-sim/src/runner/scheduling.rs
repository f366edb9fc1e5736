//! The scheduling queue: pods waiting for the default scheduler, each tried once per relevant
//! change, as kube-scheduler's `activeQ` and unschedulable pods.
//!
//! A pending pod enters [`SchedulingQueue::active`] when it appears or changes; a try that
//! finds no node moves it to [`SchedulingQueue::unschedulable`], where it stays until
//! something that may make it fit happens (upstream's queueing hints, coarsely): a node is
//! added or changes, an assigned pod leaves a node or frees requests, the controllers'
//! configuration changes, or — for pods with required pod affinity — another pod is placed.
//! A try reads the decoded nodes and the usage sums from the [`Cache`], so its cost does not
//! grow with the number of pods in the cluster.
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::cache::{Cache, Key, PodEntry};
use super::focus::term_selects;
use crate::SimState;
use crate::controllers::scheduler::{self, NodeUsage};
use crate::controllers::{Action, ClusterState};
use crate::resources::by_gvr;

/// Pending pods tried per batch (events are taken between batches).
pub const BATCH: usize = 512;

/// Pending pods to try, and those waiting for a change.
#[derive(Default, Debug)]
pub struct SchedulingQueue {
    /// To be tried at the next pass.
    pub active: BTreeSet<Key>,
    /// Tried without a fitting node; waiting for a relevant change.
    pub unschedulable: BTreeSet<Key>,
}

impl SchedulingQueue {
    /// Every pending pod of `cache` to be tried (after a resync).
    pub fn reset(&mut self, cache: &Cache) {
        self.active = cache.pending.clone();
        self.unschedulable.clear();
    }

    /// Something that can make any pod fit happened: every waiting pod is tried again.
    pub fn move_all(&mut self) {
        let waiting = std::mem::take(&mut self.unschedulable);
        self.active.extend(waiting);
    }

    /// A pod changed from `old` to `new` (entries of the index, `None` when absent).
    pub fn on_pod(&mut self, key: &Key, old: Option<&PodEntry>, new: Option<&PodEntry>, c: &Cache) {
        if new.is_some_and(|e| e.pending) {
            if !self.unschedulable.contains(key) {
                self.active.insert(key.clone());
            }
        } else {
            self.active.remove(key);
            self.unschedulable.remove(key);
        }
        let old_use = old.and_then(|e| e.usage.as_ref());
        let new_use = new.and_then(|e| e.usage.as_ref());
        match (old_use, new_use) {
            // Requests freed on a node (pod gone, terminal, or moved/shrunk).
            (Some(o), n) if n != Some(o) => self.move_all(),
            // A pod was placed: pods that need peers may fit next to it now.
            (None, Some(_)) => {
                let waiting: Vec<Key> = self
                    .unschedulable
                    .iter()
                    .filter(|k| c.pods.get(*k).is_some_and(|e| e.wants_peers))
                    .cloned()
                    .collect();
                for k in waiting {
                    self.unschedulable.remove(&k);
                    self.active.insert(k);
                }
            }
            _ => {}
        }
    }

    /// Takes up to `n` pods to try.
    pub fn take(&mut self, n: usize) -> Vec<Key> {
        let mut out = Vec::with_capacity(n.min(self.active.len()));
        while out.len() < n {
            match self.active.pop_first() {
                Some(k) => out.push(k),
                None => break,
            }
        }
        out
    }
}

/// Placed pods whose required (anti-)affinity terms involve one of `pending`, or that the
/// terms of one of `pending` select (what the InterPodAffinity filter reads).
fn affinity_peers(cache: &Cache, pending: &[Key]) -> BTreeSet<Key> {
    let mut out = BTreeSet::new();
    for p in pending {
        let Some(pe) = cache.pods.get(p) else {
            continue;
        };
        let anti = cache
            .anti_by_ns
            .get(&p.0)
            .into_iter()
            .flatten()
            .chain(&cache.anti_all_ns);
        for a in anti {
            if let Some(ae) = cache.pods.get(a)
                && ae.node.is_some()
                && ae
                    .anti_terms
                    .iter()
                    .any(|t| term_selects(t, &a.0, &p.0, pe))
            {
                out.insert(a.clone());
            }
        }
        for t in &pe.own_terms {
            let namespaces: Vec<&String> = if t.namespace_selector.is_some() {
                cache.pods_by_ns.keys().collect()
            } else {
                match &t.namespaces {
                    Some(l) if !l.is_empty() => l.iter().collect(),
                    _ => vec![&p.0],
                }
            };
            let candidates = namespaces
                .into_iter()
                .filter_map(|n| cache.pods_by_ns.get(n))
                .flatten();
            for k in candidates {
                if let Some(e) = cache.pods.get(k)
                    && e.node.is_some()
                    && term_selects(t, &p.0, &k.0, e)
                {
                    out.insert(k.clone());
                }
            }
        }
    }
    out
}

fn read_pods<'a>(st: &SimState, keys: impl Iterator<Item = &'a Key>) -> Vec<Pod> {
    let Some(def) = by_gvr("", "v1", "pods") else {
        return Vec::new();
    };
    keys.filter_map(|(ns, name)| st.store.get(def, ns, name))
        .filter_map(|v: Value| match serde_json::from_value(v) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::debug!("scheduler skips a pod: {e}");
                None
            }
        })
        .collect()
}

/// The scheduler's actions for `batch`: a state of every indexed node, the batch and its
/// affinity peers, with the usage of all other pods as base.
pub fn schedule(st: &SimState, cache: &Cache, batch: &[Key]) -> Vec<Action> {
    let peers = affinity_peers(cache, batch);
    let mut base: NodeUsage = cache.usage.clone();
    for k in &peers {
        if let Some((n, req)) = cache.pods.get(k).and_then(|e| e.usage.as_ref()) {
            let sum = base.requested.entry(n.clone()).or_default();
            for (r, v) in req {
                *sum.entry(r.clone()).or_default() -= v;
            }
            *base.pods.entry(n.clone()).or_default() -= 1;
        }
    }
    let state = ClusterState {
        now: st.store.clock().now(),
        nodes: cache.node_objs.values().cloned().collect(),
        pods: read_pods(st, batch.iter().chain(&peers)),
        replica_sets: Vec::new(),
        deployments: Vec::new(),
        pdbs: Vec::new(),
        config: st.config(),
    };
    scheduler::reconcile_with(&state, &base)
}

/// `true` when `action` binds a pod to a node.
pub fn is_binding(action: &Action) -> bool {
    matches!(action, Action::Update(v)
        if v.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty()))
}
