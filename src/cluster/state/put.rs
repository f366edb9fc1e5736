//! Putting converted objects into the state: each kind into its map, the keys seen recorded for
//! a list in progress, and the objects that could not be converted remembered with their error.

use super::{Inner, NodeChange};
use crate::cluster::kinds;
use std::sync::Arc;

use kube_descheduler_engine::snapshot::{Node, Parts, Pod};

/// Puts converted objects into the state (and records why those that could not be converted
/// were not). Node transitions are pushed to `changes`.
pub(super) fn put(g: &mut Inner, c: kinds::Converted, changes: Option<&mut Vec<NodeChange>>) {
    let kind = c.kind;
    for (key, e) in c.failed {
        tracing::warn!(kind = kind.resource(), object = %key, error = %e, "object left out of the cluster state");
        if let Some(Some(seen)) = g.relisting.get_mut(&kind) {
            seen.insert(key.clone());
        }
        g.rejected.insert(
            (kind.index(), key.clone()),
            format!("{} {key}: {e}", kind.resource()),
        );
    }
    for key in &c.autoscaler_keys {
        // An autoscaler whose target changed to something other than a Deployment converts
        // to nothing: the old target must not stay.
        g.hpas.remove(key);
    }
    let want_keys = g.wants_keys(kind);
    for key in insert(g, c.parts, &c.own_grace, changes, want_keys) {
        if let Some(Some(seen)) = g.relisting.get_mut(&kind) {
            seen.insert(key.clone());
        }
        g.rejected.remove(&(kind.index(), key));
    }
}

/// Inserts converted parts (`own_grace`: for each pod, whether it sets its own grace period);
/// returns their keys (the pods' only with `pod_keys`). Node transitions are pushed to
/// `changes`.
fn insert(
    g: &mut Inner,
    mut parts: Parts,
    own_grace: &[bool],
    changes: Option<&mut Vec<NodeChange>>,
    pod_keys: bool,
) -> Vec<String> {
    let mut keys = Vec::new();
    insert_nodes(g, std::mem::take(&mut parts.nodes), changes, &mut keys);
    insert_pods(
        g,
        std::mem::take(&mut parts.pods),
        own_grace,
        pod_keys.then_some(&mut keys),
    );
    insert_other(g, parts, &mut keys);
    keys
}

/// Inserts nodes, pushing each one's transition to `changes` and its name to `keys`.
fn insert_nodes(
    g: &mut Inner,
    nodes: Vec<Node>,
    mut changes: Option<&mut Vec<NodeChange>>,
    keys: &mut Vec<String>,
) {
    for n in nodes {
        if let Some(c) = changes.as_deref_mut()
            && let Some(change) = NodeChange::between(g.nodes.get(&n.name), &n)
        {
            c.push(change);
        }
        keys.push(n.name.clone());
        g.insert_node(n);
    }
}

/// Inserts (or replaces) pods, pushing their keys to `keys` when given, and settles the pod
/// store when many changes are pending.
fn insert_pods(
    g: &mut Inner,
    new: Vec<Arc<Pod>>,
    own_grace: &[bool],
    mut keys: Option<&mut Vec<String>>,
) {
    if !new.is_empty() {
        // While the node ids are current, appended pods take theirs at once (no renumbering
        // pass over every pod before the first snapshot).
        let Inner {
            node_view,
            pods,
            renumber,
            ..
        } = &mut *g;
        let ids = node_view.as_ref().filter(|_| !*renumber).map(|v| &v.ids);
        for (i, pod) in new.into_iter().enumerate() {
            if let Some(keys) = keys.as_deref_mut() {
                keys.push(kinds::key(&pod.namespace, &pod.name));
            }
            let own_grace = own_grace.get(i).copied().unwrap_or(false);
            if pods.upsert(pod, own_grace, ids) {
                *renumber = true;
            }
        }
    }
    if g.pods.many_pending() {
        g.settle_pods();
    }
}

/// Inserts every other kind of `parts` (nodes and pods are taken out), pushing each key to
/// `keys`.
fn insert_other(g: &mut Inner, parts: Parts, keys: &mut Vec<String>) {
    // The key, after a copy of it is pushed to `keys`.
    let mut kept = |key: String| {
        keys.push(key.clone());
        key
    };
    for (name, labels) in parts.namespaces {
        let pdb_surge = parts.namespace_pdb_surge.get(&name).copied();
        g.namespaces.insert(kept(name), (labels, pdb_surge));
    }
    for (name, value) in parts.priority_classes {
        g.priority_classes.insert(kept(name), value);
    }
    let meta_key = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        kinds::key(
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or(""),
        )
    };
    for p in parts.pdbs {
        g.pdbs.insert(kept(meta_key(&p.metadata)), p);
    }
    for (k, info) in parts.pvcs {
        g.pvcs
            .insert(kept(kinds::key(&k.namespace, &k.name)), (k, info));
    }
    for rs in parts.replica_sets {
        g.replica_sets
            .insert(kept(kinds::key(&rs.namespace, &rs.name)), rs);
    }
    for d in parts.deployments {
        g.deployments
            .insert(kept(kinds::key(&d.namespace, &d.name)), d);
    }
    for s in parts.stateful_sets {
        g.stateful_sets.insert(kept(meta_key(&s.metadata)), s);
    }
    for j in parts.jobs {
        g.jobs.insert(kept(meta_key(&j.metadata)), j);
    }
    for h in parts.hpas {
        g.hpas.insert(kept(kinds::key(&h.namespace, &h.name)), h);
    }
    for w in parts.warnings {
        tracing::debug!(warning = %w, "cluster state");
    }
}
