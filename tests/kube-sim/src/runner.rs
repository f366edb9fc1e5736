//! The controller loop: snapshot → `controllers::reconcile_all` → apply actions.
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

use crate::SimState;
use crate::controllers::{self, Action, ClusterState};
use crate::resources::{by_gvr, by_kind};
use crate::store::UpdateMode;

fn parse<T: serde::de::DeserializeOwned>(items: Vec<Value>) -> Vec<T> {
    items
        .into_iter()
        .filter_map(|v| match serde_json::from_value(v) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::debug!("controller snapshot skips an object: {e}");
                None
            }
        })
        .collect()
}

/// Builds the controllers' view of the cluster from one consistent store snapshot.
pub fn cluster_state(st: &SimState) -> ClusterState {
    let defs = [
        by_gvr("", "v1", "nodes"),
        by_gvr("", "v1", "pods"),
        by_gvr("apps", "v1", "replicasets"),
        by_gvr("apps", "v1", "deployments"),
        by_gvr("policy", "v1", "poddisruptionbudgets"),
    ];
    let defs: Vec<_> = defs.into_iter().flatten().collect();
    let mut snap = st.store.snapshot(&defs).into_iter();
    let mut next = || snap.next().unwrap_or_default();
    ClusterState {
        now: st.store.clock().now(),
        nodes: parse(next()),
        pods: parse(next()),
        replica_sets: parse(next()),
        deployments: parse(next()),
        pdbs: parse(next()),
        config: st.config(),
    }
}

/// Applies one action; failures (stale resourceVersion, gone objects) are dropped.
pub fn apply_action(st: &SimState, action: Action) {
    let result = match action {
        Action::Create(obj) => {
            let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
            match by_kind(av, kind) {
                Some(def) => st.store.create(def, obj, false, false).map(|_| ()),
                None => {
                    tracing::warn!("controller created unknown kind {av} {kind}");
                    Ok(())
                }
            }
        }
        Action::Update(obj) => {
            let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
            match by_kind(av, kind) {
                Some(def) => st
                    .store
                    .update(def, obj, UpdateMode::Full, false)
                    .map(|_| ()),
                None => {
                    tracing::warn!("controller updated unknown kind {av} {kind}");
                    Ok(())
                }
            }
        }
        Action::Delete {
            api_version,
            kind,
            namespace,
            name,
            uid,
        } => match by_kind(&api_version, &kind) {
            Some(def) => st
                .store
                .remove(def, namespace.as_deref().unwrap_or(""), &name, Some(&uid))
                .map(|_| ()),
            None => Ok(()),
        },
    };
    if let Err(e) = result {
        tracing::debug!("controller action dropped: {e}");
    }
}

/// Runs until shutdown, one reconcile per tick.
pub async fn run(st: Arc<SimState>, tick: Duration) {
    let mut shutdown = st.shutdown_rx();
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let state = cluster_state(&st);
        let actions = controllers::reconcile_all(&state);
        for a in actions {
            apply_action(&st, a);
        }
    }
}
