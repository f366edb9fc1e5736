//! Running the controllers against the store: the event-driven [`manager`] (with its
//! [`cache`] index and [`focus`]ed states), and the whole-cluster path used by
//! [`crate::SimHandle::reconcile_once`].
use serde_json::Value;

pub mod cache;
pub mod focus;
pub mod manager;
pub mod scheduling;

use crate::SimState;
use crate::controllers::{Action, ClusterState};
use crate::error::ApiError;
use crate::resources::{by_gvr, by_kind};
use crate::store::{DeleteOpts, UpdateMode};

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
    if let Err(e) = try_apply_action(st, action) {
        tracing::debug!("controller action dropped: {e}");
    }
}

/// Applies one action, returning why it was refused (stale resourceVersion, gone object).
pub fn try_apply_action(st: &SimState, action: Action) -> Result<(), ApiError> {
    match action {
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
                Some(def) => {
                    let delete = graceful_delete(st, def, &obj);
                    let updated = st.store.update(def, obj, UpdateMode::Full, false);
                    match (updated, delete) {
                        (Ok(_), Some((ns, name, opts))) => {
                            st.store.delete(def, &ns, &name, &opts).map(|_| ())
                        }
                        (r, _) => r.map(|_| ()),
                    }
                }
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
    }
}

/// A controller marks a pod terminating with an `Update` that sets `deletionTimestamp`; the store
/// keeps that field from the stored object (clients cannot set it), so the intent is carried
/// out as what the real controllers send: a graceful `DELETE` with the pod's uid as precondition
/// and the grace period the update carries.
fn graceful_delete(
    st: &SimState,
    def: &'static crate::resources::ResourceDef,
    obj: &Value,
) -> Option<(String, String, DeleteOpts)> {
    if !def.is("", "pods")
        || obj
            .pointer("/metadata/deletionTimestamp")
            .is_none_or(Value::is_null)
    {
        return None;
    }
    let ns = obj.pointer("/metadata/namespace")?.as_str()?.to_string();
    let name = obj.pointer("/metadata/name")?.as_str()?.to_string();
    let stored = st.store.get(def, &ns, &name)?;
    if stored
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return None;
    }
    let opts = DeleteOpts {
        grace_period_seconds: obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64),
        uid: obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(String::from),
        ..Default::default()
    };
    Some((ns, name, opts))
}
