//! Deployment controller, following pkg/controller/deployment (sync.go, rolling.go,
//! recreate.go, progress.go, util/deployment_util.go) and the "Deployments" concept doc.
//!
//! * ReplicaSets belong to a Deployment through their controller ownerReference. The new
//!   ReplicaSet is the oldest one whose pod template equals the Deployment's, ignoring the
//!   `pod-template-hash` label; it is created as `<deployment>-<hash>` where the hash is FNV-1a
//!   of the template's canonical JSON (plus `status.collisionCount`), spelled with Kubernetes'
//!   safe alphabet. A name clash with a different template bumps `collisionCount`.
//! * Revisions: the new ReplicaSet gets `max(old revisions) + 1`; the Deployment mirrors it.
//!   Scaled ReplicaSets carry `desired-replicas` / `max-replicas` annotations.
//! * RollingUpdate: maxSurge rounds up, maxUnavailable rounds down (25 % defaults), both zero →
//!   maxUnavailable 1; the new ReplicaSet grows within `replicas + maxSurge`; old ones shrink
//!   (unhealthy replicas first) only while available pods stay ≥ `replicas − maxUnavailable`.
//! * Recreate: old ReplicaSets go to 0; the new one is created/scaled once no old pod is left.
//! * Paused Deployments and scaling events only scale (proportionally during a rollout).
//! * Status and conditions (Available, Progressing with `NewReplicaSetCreated`,
//!   `FoundNewReplicaSet`, `ReplicaSetUpdated`, `NewReplicaSetAvailable`,
//!   `ProgressDeadlineExceeded`, `DeploymentPaused`, `DeploymentResumed`) as upstream.
//! * Old ReplicaSets beyond `revisionHistoryLimit` (default 10) with no pods are deleted.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::util::{
    create_action, delete_action, fnv1a32, is_controlled_by, name, ns, owner_ref, pod_is_terminal,
    safe_encode, same_json, scaled_value, selector_is_empty, update_action,
};
use super::{Action, ClusterState};

/// Label carrying the template hash on ReplicaSets and their pods.
pub const HASH_LABEL: &str = "pod-template-hash";
/// Revision annotation on Deployments and ReplicaSets.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Deployment replicas at the time a ReplicaSet was last scaled.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `replicas + maxSurge` at the time a ReplicaSet was last scaled.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";

const DEFAULT_PROGRESS_DEADLINE: i32 = 600;
/// Replica counts are clamped to this, so that sums cannot overflow on absurd input.
const MAX_REPLICAS: i32 = 1_000_000;
const DEFAULT_REVISION_HISTORY: i32 = 10;
const ANNOTATIONS_NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    "deprecated.deployment.rollback.to",
];

/// Deployment actions for one tick.
pub fn reconcile(state: &ClusterState) -> Vec<Action> {
    state
        .deployments
        .iter()
        .flat_map(|d| Sync::new(state, d).map(Sync::run).unwrap_or_default())
        .collect()
}

/// Resolved `(maxSurge, maxUnavailable)` of a Deployment (upstream `ResolveFenceposts`);
/// `(0, 0)` for Recreate.
pub fn fenceposts(d: &Deployment) -> (i32, i32) {
    let spec = &d.spec;
    let strategy = spec.strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        return (0, 0);
    }
    let replicas = spec.replicas.unwrap_or(1).clamp(0, MAX_REPLICAS);
    let ru = strategy.and_then(|s| s.rolling_update.as_ref());
    let default = IntOrString::String("25%".to_string());
    let surge_v = ru
        .and_then(|r| r.max_surge.clone())
        .unwrap_or(default.clone());
    let unavail_v = ru
        .and_then(|r| r.max_unavailable.clone())
        .unwrap_or(default);
    let surge = scaled_value(&surge_v, replicas, true)
        .or_else(|| scaled_value(&IntOrString::String("25%".into()), replicas, true))
        .unwrap_or(0)
        .clamp(0, MAX_REPLICAS);
    let mut unavailable = scaled_value(&unavail_v, replicas, false)
        .or_else(|| scaled_value(&IntOrString::String("25%".into()), replicas, false))
        .unwrap_or(0)
        .clamp(0, MAX_REPLICAS);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable)
}

/// Stable hash of a pod template, as used in ReplicaSet names and the `pod-template-hash` label.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut text = canonical_template(template).to_string();
    if let Some(c) = collision_count {
        text.push_str(&format!("/{c}"));
    }
    safe_encode(&fnv1a32(text.as_bytes()).to_string())
}

/// Template JSON without the hash label and without empty maps, for comparisons and hashing.
fn canonical_template(t: &PodTemplateSpec) -> serde_json::Value {
    let mut v = serde_json::to_value(t).unwrap_or_default();
    if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        if let Some(labels) = meta.get_mut("labels").and_then(|l| l.as_object_mut()) {
            labels.remove(HASH_LABEL);
        }
        meta.retain(|_, val| !(val.as_object().is_some_and(|o| o.is_empty()) || val.is_null()));
    }
    if let Some(obj) = v.as_object_mut() {
        obj.retain(|_, val| !(val.as_object().is_some_and(|o| o.is_empty()) || val.is_null()));
    }
    v
}

fn revision(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, REVISION_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1).clamp(0, MAX_REPLICAS)
}

fn rs_status(rs: &ReplicaSet) -> (i32, i32, i32) {
    let c = |v: i32| v.clamp(0, MAX_REPLICAS);
    rs.status.as_ref().map_or((0, 0, 0), |s| {
        (
            c(s.replicas),
            c(s.ready_replicas.unwrap_or(0)),
            c(s.available_replicas.unwrap_or(0)),
        )
    })
}

fn creation_order(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
        .then_with(|| name(&a.metadata).cmp(name(&b.metadata)))
}

fn get_condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
}

fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(c) = status.conditions.as_mut() {
        c.retain(|c| c.type_.as_deref() != Some(type_));
    }
}

/// Upstream `SetDeploymentCondition`: no-op for the same status and reason; keeps
/// `lastTransitionTime` when only the reason changes.
fn set_condition(
    status: &mut DeploymentStatus,
    now: jiff::Timestamp,
    type_: &str,
    cond_status: &str,
    reason: &str,
    message: String,
) {
    let mut ltt = Some(Time(now));
    if let Some(cur) = get_condition(status, type_) {
        if cur.status.as_deref() == Some(cond_status) && cur.reason.as_deref() == Some(reason) {
            return;
        }
        if cur.status.as_deref() == Some(cond_status) {
            ltt = cur.last_transition_time.clone();
        }
    }
    remove_condition(status, type_);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(DeploymentCondition {
            type_: Some(type_.to_string()),
            status: Some(cond_status.to_string()),
            reason: Some(reason.to_string()),
            message: Some(message),
            last_transition_time: ltt,
            last_update_time: Some(Time(now)),
        });
}

/// Working state of one Deployment's sync.
struct Sync<'a> {
    state: &'a ClusterState,
    d: &'a Deployment,
    /// The Deployment being rewritten (annotations and status).
    out_d: Deployment,
    replicas: i32,
    surge: i32,
    unavailable: i32,
    rolling: bool,
    /// Owned ReplicaSets (working copies), sorted by creation.
    rss: Vec<ReplicaSet>,
    dirty: Vec<bool>,
    /// Index of the new ReplicaSet in `rss`.
    new_idx: Option<usize>,
    /// The new ReplicaSet is created by this sync (last element of `rss`).
    created: bool,
    deletes: Vec<Action>,
}

impl<'a> Sync<'a> {
    fn new(state: &'a ClusterState, d: &'a Deployment) -> Option<Self> {
        let spec = &d.spec;
        let mut rss: Vec<ReplicaSet> = state
            .replica_sets
            .iter()
            .filter(|rs| {
                ns(&rs.metadata) == ns(&d.metadata)
                    && is_controlled_by(&rs.metadata, "Deployment", &d.metadata)
            })
            .cloned()
            .collect();
        rss.sort_by(creation_order);
        let want = canonical_template(&spec.template);
        // The oldest ReplicaSet with an equal template; failing that, the owned one named after
        // the current hash (tolerates a server that defaults ReplicaSet templates differently
        // from Deployment templates, which would otherwise create a ReplicaSet per tick).
        let hashed_name = format!(
            "{}-{}",
            name(&d.metadata),
            pod_template_hash(
                &spec.template,
                d.status.as_ref().and_then(|s| s.collision_count)
            )
        );
        let new_idx = rss
            .iter()
            .position(|rs| {
                rs.spec
                    .template
                    .as_ref()
                    .is_some_and(|t| canonical_template(t) == want)
            })
            .or_else(|| rss.iter().position(|rs| name(&rs.metadata) == hashed_name));
        let (surge, unavailable) = fenceposts(d);
        let rolling = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) != Some("Recreate");
        let mut out_d = d.clone();
        out_d.status.get_or_insert_with(Default::default);
        Some(Self {
            state,
            d,
            out_d,
            replicas: spec.replicas.unwrap_or(1).clamp(0, MAX_REPLICAS),
            surge,
            unavailable,
            rolling,
            dirty: vec![false; rss.len()],
            rss,
            new_idx,
            created: false,
            deletes: Vec::new(),
        })
    }

    fn spec(&self) -> k8s_openapi::api::apps::v1::DeploymentSpec {
        self.d.spec.clone()
    }

    fn status_mut(&mut self) -> &mut DeploymentStatus {
        self.out_d.status.get_or_insert_with(Default::default)
    }

    fn now(&self) -> jiff::Timestamp {
        self.state.now
    }

    fn progress_deadline(&self) -> Option<i32> {
        match self.spec().progress_deadline_seconds {
            Some(i32::MAX) => None,
            Some(s) => Some(s),
            None => Some(DEFAULT_PROGRESS_DEADLINE),
        }
    }

    fn old_indices(&self) -> Vec<usize> {
        (0..self.rss.len())
            .filter(|i| Some(*i) != self.new_idx)
            .collect()
    }

    fn run(mut self) -> Vec<Action> {
        let spec = self.spec();
        if selector_is_empty(&spec.selector) {
            // Upstream refuses to act on a selector that selects everything.
            let gen_ = self.d.metadata.generation;
            self.status_mut().observed_generation = gen_;
            return self.finish();
        }
        if self.d.metadata.deletion_timestamp.is_some() {
            self.sync_status_only();
            return self.finish();
        }
        self.check_paused_conditions();
        if spec.paused == Some(true) {
            self.sync_revision(false);
            self.scale();
            self.cleanup();
            self.sync_status_only();
        } else if self.is_scaling_event() {
            self.sync_revision(false);
            self.scale();
            self.sync_status_only();
        } else if self.rolling {
            self.rollout_rolling();
        } else {
            self.rollout_recreate();
        }
        self.finish()
    }

    fn finish(self) -> Vec<Action> {
        let mut out = Vec::new();
        let count = if self.created {
            self.rss.len() - 1
        } else {
            self.rss.len()
        };
        for i in 0..count {
            if self.dirty[i] {
                out.extend(update_action(&self.rss[i]));
            }
        }
        if self.created
            && let Some(rs) = self.rss.last()
        {
            let mut rs = rs.clone();
            rs.status = None;
            out.extend(create_action(&rs));
        }
        out.extend(self.deletes);
        if !same_json(self.d, &self.out_d) {
            out.extend(update_action(&self.out_d));
        }
        out
    }

    /// Upstream `checkPausedConditions`.
    fn check_paused_conditions(&mut self) {
        if self.progress_deadline().is_none() {
            return;
        }
        let paused = self.spec().paused == Some(true);
        let now = self.now();
        let reason = self
            .out_d
            .status
            .as_ref()
            .and_then(|s| get_condition(s, "Progressing"))
            .and_then(|c| c.reason.clone());
        if paused && reason.as_deref() != Some("DeploymentPaused") {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused".into(),
            );
        } else if !paused && reason.as_deref() == Some("DeploymentPaused") {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed".into(),
            );
        }
    }

    fn is_scaling_event(&self) -> bool {
        self.rss.iter().any(|rs| {
            rs_replicas(rs) > 0
                && annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION)
                    .and_then(|v| v.parse::<i32>().ok())
                    .is_some_and(|desired| desired != self.replicas)
        })
    }

    /// Sets a ReplicaSet's size and replica annotations (upstream `scaleReplicaSet`).
    fn scale_rs(&mut self, i: usize, size: i32) {
        let (replicas, max) = (
            self.replicas,
            self.replicas + if self.rolling { self.surge } else { 0 },
        );
        let rs = &mut self.rss[i];
        let before = rs.clone();
        rs.spec.replicas = Some(size.max(0));
        let ann = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
        ann.insert(DESIRED_REPLICAS_ANNOTATION.into(), replicas.to_string());
        ann.insert(MAX_REPLICAS_ANNOTATION.into(), max.to_string());
        if !same_json(&before, rs) {
            self.dirty[i] = true;
        }
    }
}

mod new_rs;
mod rollout;
mod scaling;
mod status;

#[cfg(test)]
mod tests;
