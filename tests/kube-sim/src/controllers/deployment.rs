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

    /// Finds or (when `create`) creates the new ReplicaSet and syncs revisions (upstream
    /// `getNewReplicaSet`).
    fn sync_revision(&mut self, create: bool) {
        let max_old = self
            .old_indices()
            .iter()
            .map(|i| revision(&self.rss[*i]))
            .max()
            .unwrap_or(0);
        let new_revision = max_old + 1;
        let deadline = self.progress_deadline();
        let now = self.now();
        if let Some(i) = self.new_idx {
            let min_ready = self.spec().min_ready_seconds;
            let rs = &mut self.rss[i];
            let before = rs.clone();
            if revision(rs) < new_revision {
                rs.metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .insert(REVISION_ANNOTATION.into(), new_revision.to_string());
            }
            let rs_spec = &mut rs.spec;
            if rs_spec.min_ready_seconds.unwrap_or(0) != min_ready.unwrap_or(0) {
                rs_spec.min_ready_seconds = min_ready;
            }
            if !same_json(&before, rs) {
                self.dirty[i] = true;
            }
            let rev = revision(&self.rss[i]).to_string();
            let rs_name = name(&self.rss[i].metadata).to_string();
            self.set_deployment_revision(rev);
            let has_cond = self
                .out_d
                .status
                .as_ref()
                .and_then(|s| get_condition(s, "Progressing"))
                .is_some();
            if deadline.is_some() && !has_cond {
                set_condition(
                    self.status_mut(),
                    now,
                    "Progressing",
                    "True",
                    "FoundNewReplicaSet",
                    format!("Found new replica set \"{rs_name}\""),
                );
            }
            return;
        }
        if !create {
            return;
        }
        let spec = self.spec();
        let collision = self.out_d.status.as_ref().and_then(|s| s.collision_count);
        let hash = pod_template_hash(&spec.template, collision);
        let rs_name = format!("{}-{hash}", name(&self.d.metadata));
        if self
            .state
            .replica_sets
            .iter()
            .any(|rs| ns(&rs.metadata) == ns(&self.d.metadata) && name(&rs.metadata) == rs_name)
        {
            // Name taken by a ReplicaSet we do not own: bump collisionCount and retry next tick.
            let st = self.status_mut();
            st.collision_count = Some(collision.unwrap_or(0).saturating_add(1));
            return;
        }
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH_LABEL.into(), hash.clone());
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH_LABEL.into(), hash.clone());
        let mut annotations: BTreeMap<String, String> = self
            .d
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| !ANNOTATIONS_NOT_COPIED.contains(&k.as_str()))
            .collect();
        annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
        let old_total: i32 = self
            .old_indices()
            .iter()
            .map(|i| rs_replicas(&self.rss[*i]))
            .sum();
        let size = if self.rolling {
            let max_total = self.replicas + self.surge;
            if old_total >= max_total {
                0
            } else {
                (max_total - old_total).min(self.replicas)
            }
        } else {
            self.replicas
        };
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(rs_name.clone()),
                namespace: Some(ns(&self.d.metadata).to_string()),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![owner_ref("apps/v1", "Deployment", &self.d.metadata)]),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            },
            status: None,
        };
        self.rss.push(rs);
        self.dirty.push(false);
        let i = self.rss.len() - 1;
        self.new_idx = Some(i);
        self.created = true;
        self.scale_rs(i, size);
        self.set_deployment_revision(new_revision.to_string());
        if deadline.is_some() {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                format!("Created new replica set \"{rs_name}\""),
            );
        }
    }

    fn set_deployment_revision(&mut self, rev: String) {
        self.out_d
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(REVISION_ANNOTATION.into(), rev);
    }

    /// Upstream `scale` (paused Deployments and scaling events), including proportional scaling.
    fn scale(&mut self) {
        let active: Vec<usize> = (0..self.rss.len())
            .filter(|i| rs_replicas(&self.rss[*i]) > 0)
            .collect();
        // Only one active (or none: the newest) ReplicaSet → give it the full count.
        let target = match active.as_slice() {
            [only] => Some(*only),
            [] => self
                .new_idx
                .or_else(|| (!self.rss.is_empty()).then(|| self.rss.len() - 1)),
            _ => None,
        };
        if let Some(i) = target {
            if rs_replicas(&self.rss[i]) != self.replicas {
                self.scale_rs(i, self.replicas);
            }
            return;
        }
        // New ReplicaSet saturated → old ones go away.
        if let Some(n) = self.new_idx {
            let rs = &self.rss[n];
            let saturated = rs_replicas(rs) == self.replicas
                && annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION)
                    .and_then(|v| v.parse::<i32>().ok())
                    == Some(self.replicas)
                && rs_status(rs).2 == self.replicas;
            if saturated {
                for i in self.old_indices() {
                    if rs_replicas(&self.rss[i]) > 0 {
                        self.scale_rs(i, 0);
                    }
                }
                return;
            }
        }
        if !self.rolling {
            return;
        }
        let total: i32 = active.iter().map(|i| rs_replicas(&self.rss[*i])).sum();
        let allowed = if self.replicas > 0 {
            self.replicas + self.surge
        } else {
            0
        };
        let to_add = allowed - total;
        if to_add == 0 {
            return;
        }
        let mut order = active.clone();
        order.sort_by(|a, b| {
            let (ra, rb) = (&self.rss[*a], &self.rss[*b]);
            rs_replicas(rb).cmp(&rs_replicas(ra)).then_with(|| {
                if to_add > 0 {
                    creation_order(rb, ra)
                } else {
                    creation_order(ra, rb)
                }
            })
        });
        let status_replicas = self.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let mut added = 0;
        let mut sizes: Vec<(usize, i32)> = Vec::new();
        for i in &order {
            let rs = &self.rss[*i];
            let cur = rs_replicas(rs);
            let proportion = if cur == 0 || to_add == added {
                0
            } else {
                let fraction = if self.replicas == 0 {
                    -cur
                } else {
                    let annotated = annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION)
                        .and_then(|v| v.parse::<i32>().ok())
                        .unwrap_or(status_replicas);
                    if annotated <= 0 {
                        0
                    } else {
                        let size = f64::from(cur) * f64::from(allowed) / f64::from(annotated);
                        size.round() as i32 - cur
                    }
                };
                let remaining = to_add - added;
                if to_add > 0 {
                    fraction.min(remaining)
                } else {
                    fraction.max(remaining)
                }
            };
            added += proportion;
            sizes.push((*i, cur + proportion));
        }
        if let Some(first) = sizes.first_mut() {
            first.1 = (first.1 + to_add - added).max(0);
        }
        for (i, size) in sizes {
            self.scale_rs(i, size);
        }
    }

    fn rollout_rolling(&mut self) {
        self.sync_revision(true);
        let Some(n) = self.new_idx else {
            // Creation postponed (hash collision): only report status.
            self.sync_rollout_status();
            return;
        };
        if self.reconcile_new(n) || self.reconcile_old(n) {
            self.sync_rollout_status();
            return;
        }
        if self.is_complete(self.d.status.as_ref()) {
            self.cleanup();
        }
        self.sync_rollout_status();
    }

    /// Upstream `reconcileNewReplicaSet`; `true` when the new ReplicaSet was scaled.
    fn reconcile_new(&mut self, n: usize) -> bool {
        let cur = rs_replicas(&self.rss[n]);
        if cur == self.replicas {
            return false;
        }
        if cur > self.replicas {
            self.scale_rs(n, self.replicas);
            return true;
        }
        let total: i32 = self.rss.iter().map(rs_replicas).sum();
        let max_total = self.replicas + self.surge;
        if total >= max_total {
            return false;
        }
        let up = (max_total - total).min(self.replicas - cur);
        self.scale_rs(n, cur + up);
        up > 0
    }

    /// Upstream `reconcileOldReplicaSets`; `true` when an old ReplicaSet was scaled down.
    fn reconcile_old(&mut self, n: usize) -> bool {
        let olds: Vec<usize> = self
            .old_indices()
            .into_iter()
            .filter(|i| rs_replicas(&self.rss[*i]) > 0)
            .collect();
        let old_pods: i32 = olds.iter().map(|i| rs_replicas(&self.rss[*i])).sum();
        if old_pods == 0 {
            return false;
        }
        let all_pods: i32 = self.rss.iter().map(rs_replicas).sum();
        let min_available = self.replicas - self.max_unavailable();
        let new_unavailable = rs_replicas(&self.rss[n]) - rs_status(&self.rss[n]).2;
        let max_scaled_down = all_pods - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return false;
        }
        // Unhealthy replicas of old ReplicaSets go first (oldest ReplicaSet first).
        let mut cleaned = 0;
        for i in &olds {
            if cleaned >= max_scaled_down {
                break;
            }
            let cur = rs_replicas(&self.rss[*i]);
            let unhealthy = cur - rs_status(&self.rss[*i]).2;
            if cur == 0 || unhealthy <= 0 {
                continue;
            }
            let down = (max_scaled_down - cleaned).min(unhealthy);
            self.scale_rs(*i, cur - down);
            cleaned += down;
        }
        // Then healthy ones, as long as enough pods stay available.
        let available: i32 = self.rss.iter().map(|rs| rs_status(rs).2).sum();
        let mut scaled = 0;
        if available > min_available {
            let budget = available - min_available;
            for i in &olds {
                if scaled >= budget {
                    break;
                }
                let cur = rs_replicas(&self.rss[*i]);
                if cur == 0 {
                    continue;
                }
                let down = cur.min(budget - scaled);
                self.scale_rs(*i, cur - down);
                scaled += down;
            }
        }
        cleaned + scaled > 0
    }

    fn rollout_recreate(&mut self) {
        self.sync_revision(false);
        let mut scaled = false;
        for i in self.old_indices() {
            if rs_replicas(&self.rss[i]) > 0 {
                self.scale_rs(i, 0);
                scaled = true;
            }
        }
        if scaled || self.old_pods_running() {
            self.sync_rollout_status();
            return;
        }
        if self.new_idx.is_none() {
            self.sync_revision(true);
        }
        if let Some(n) = self.new_idx
            && rs_replicas(&self.rss[n]) != self.replicas
        {
            self.scale_rs(n, self.replicas);
        }
        if self.is_complete(self.d.status.as_ref()) {
            self.cleanup();
        }
        self.sync_rollout_status();
    }

    /// Any old ReplicaSet still reports pods, or owns a pod that is not terminal.
    fn old_pods_running(&self) -> bool {
        self.old_indices().iter().any(|i| {
            let rs = &self.rss[*i];
            rs_status(rs).0 > 0
                || self.state.pods.iter().any(|p| {
                    ns(&p.metadata) == ns(&rs.metadata)
                        && is_controlled_by(&p.metadata, "ReplicaSet", &rs.metadata)
                        && !pod_is_terminal(p)
                })
        })
    }

    /// Upstream `MaxUnavailable(deployment)`.
    fn max_unavailable(&self) -> i32 {
        if !self.rolling || self.replicas == 0 {
            0
        } else {
            self.unavailable.min(self.replicas)
        }
    }

    /// Upstream `DeploymentComplete`.
    fn is_complete(&self, status: Option<&DeploymentStatus>) -> bool {
        let Some(s) = status else {
            return false;
        };
        s.updated_replicas.unwrap_or(0) == self.replicas
            && s.replicas.unwrap_or(0) == self.replicas
            && s.available_replicas.unwrap_or(0) == self.replicas
            && s.observed_generation.unwrap_or(0) >= self.d.metadata.generation.unwrap_or(0)
    }

    /// Upstream `cleanupDeployment`: deletes old, empty ReplicaSets beyond the history limit.
    fn cleanup(&mut self) {
        let limit = self
            .spec()
            .revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY);
        if limit == i32::MAX {
            return;
        }
        let mut cleanable: Vec<usize> = self
            .old_indices()
            .into_iter()
            .filter(|i| self.rss[*i].metadata.deletion_timestamp.is_none())
            .collect();
        let diff = cleanable.len() as i64 - i64::from(limit.max(0));
        if diff <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| {
            let (ra, rb) = (&self.rss[*a], &self.rss[*b]);
            revision(ra)
                .cmp(&revision(rb))
                .then_with(|| creation_order(ra, rb))
        });
        for i in cleanable.into_iter().take(diff as usize) {
            let rs = &self.rss[i];
            let observed = rs
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if rs_status(rs).0 != 0
                || rs_replicas(rs) != 0
                || self.dirty[i]
                || rs.metadata.generation.unwrap_or(0) > observed
            {
                continue;
            }
            self.deletes
                .push(delete_action("apps/v1", "ReplicaSet", &rs.metadata, true));
        }
    }

    /// Upstream `calculateStatus` into `out_d.status` (keeps conditions, sets Available).
    fn calculate_status(&mut self) {
        let (mut actual, mut ready, mut available, mut spec_total) = (0, 0, 0, 0);
        for rs in &self.rss {
            let (a, r, av) = rs_status(rs);
            actual += a;
            ready += r;
            available += av;
            spec_total += rs_replicas(rs);
        }
        let updated = self.new_idx.map_or(0, |n| rs_status(&self.rss[n]).0);
        let generation = self.d.metadata.generation;
        let min_available = self.replicas - self.max_unavailable();
        let now = self.now();
        let st = self.status_mut();
        st.observed_generation = generation;
        st.replicas = Some(actual);
        st.updated_replicas = Some(updated);
        st.ready_replicas = Some(ready);
        st.available_replicas = Some(available);
        st.unavailable_replicas = Some((spec_total - available).max(0));
        if available >= min_available {
            set_condition(
                st,
                now,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
            );
        } else {
            set_condition(
                st,
                now,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
            );
        }
    }

    fn sync_status_only(&mut self) {
        self.calculate_status();
    }

    /// Upstream `syncRolloutStatus`: status plus the Progressing condition.
    fn sync_rollout_status(&mut self) {
        self.calculate_status();
        let now = self.now();
        let Some(deadline) = self.progress_deadline() else {
            remove_condition(self.status_mut(), "Progressing");
            return;
        };
        let new_status = self.out_d.status.clone().unwrap_or_default();
        let subject = match self.new_idx {
            Some(n) => format!("ReplicaSet \"{}\"", name(&self.rss[n].metadata)),
            None => format!("Deployment \"{}\"", name(&self.d.metadata)),
        };
        let current = get_condition(&new_status, "Progressing").cloned();
        let already_complete = new_status.replicas == new_status.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some("NewReplicaSetAvailable");
        if already_complete {
            return;
        }
        if self.is_complete(Some(&new_status)) {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                format!("{subject} has successfully progressed."),
            );
        } else if self.is_progressing(&new_status) {
            let ltt = current
                .as_ref()
                .filter(|c| c.status.as_deref() == Some("True"))
                .and_then(|c| c.last_transition_time.clone());
            let st = self.status_mut();
            remove_condition(st, "Progressing");
            set_condition(
                st,
                now,
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                format!("{subject} is progressing."),
            );
            if let Some(ltt) = ltt
                && let Some(c) = st.conditions.as_mut().and_then(|cs| {
                    cs.iter_mut()
                        .find(|c| c.type_.as_deref() == Some("Progressing"))
                })
            {
                c.last_transition_time = Some(ltt);
            }
        } else if timed_out(&new_status, deadline, now) {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("{subject} has timed out progressing."),
            );
        }
    }

    /// Upstream `DeploymentProgressing`: compares the new status with the stored one.
    fn is_progressing(&self, new: &DeploymentStatus) -> bool {
        let old = self.d.status.clone().unwrap_or_default();
        let g = |v: Option<i32>| v.unwrap_or(0);
        let old_old = g(old.replicas) - g(old.updated_replicas);
        let new_old = g(new.replicas) - g(new.updated_replicas);
        g(new.updated_replicas) > g(old.updated_replicas)
            || new_old < old_old
            || g(new.ready_replicas) > g(old.ready_replicas)
            || g(new.available_replicas) > g(old.available_replicas)
    }
}

/// Upstream `DeploymentTimedOut`: the Progressing condition was last updated more than the
/// deadline ago.
fn timed_out(status: &DeploymentStatus, deadline: i32, now: jiff::Timestamp) -> bool {
    let Some(c) = get_condition(status, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| super::util::add_secs(t.0, f64::from(deadline)) < now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testing::{Sim, deployment, node};
    use crate::controllers::util::{pod_is_ready, pod_is_terminating};
    use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};

    const DT: f64 = 0.1;

    fn sim_with(d: Deployment) -> Sim {
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
        sim.state.deployments.push(d);
        let sim_state = sim.state.clone();
        let mut sim2 = Sim::new(sim_state);
        assert!(sim2.settle(DT, 500), "initial rollout settles");
        sim = sim2;
        sim
    }

    fn strategy(d: &mut Deployment, surge: Option<IntOrString>, unavail: Option<IntOrString>) {
        d.spec.strategy = Some(DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: surge,
                max_unavailable: unavail,
            }),
        });
    }

    fn restart(sim: &mut Sim, name: &str, at: &str) {
        let at = at.to_string();
        sim.edit_deployment("default", name, |d| {
            d.spec
                .template
                .metadata
                .get_or_insert_with(Default::default)
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert("kubectl.kubernetes.io/restartedAt".into(), at);
        });
    }

    /// Hash label of the Deployment's current template (the new ReplicaSet's hash).
    fn current_hash(sim: &Sim, name: &str) -> Option<String> {
        let d = sim.deployment("default", name)?;
        let want = canonical_template(&d.spec.template);
        sim.state
            .replica_sets
            .iter()
            .find(|rs| {
                rs.spec
                    .template
                    .as_ref()
                    .is_some_and(|t| canonical_template(t) == want)
            })
            .and_then(|rs| {
                rs.spec
                    .selector
                    .match_labels
                    .as_ref()?
                    .get(HASH_LABEL)
                    .cloned()
            })
    }

    struct Census {
        new_total: usize,
        new_ready: usize,
        old_total: usize,
        old_terminating: usize,
        serving: usize,
    }

    fn census(sim: &Sim, name: &str) -> Census {
        let hash = current_hash(sim, name);
        let mut c = Census {
            new_total: 0,
            new_ready: 0,
            old_total: 0,
            old_terminating: 0,
            serving: 0,
        };
        for p in sim.pods_with_prefix("default", &format!("{name}-")) {
            let h = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(HASH_LABEL))
                .cloned();
            let is_new = hash.is_some() && h == hash;
            if is_new {
                c.new_total += 1;
                c.new_ready += usize::from(pod_is_ready(p) && !pod_is_terminating(p));
            } else {
                c.old_total += 1;
                c.old_terminating += usize::from(pod_is_terminating(p));
            }
            c.serving += usize::from(pod_is_ready(p) && !pod_is_terminating(p));
        }
        c
    }

    /// What `kubectl rollout status` waits for.
    fn rollout_done(d: &Deployment) -> bool {
        let s = d.status.clone().unwrap_or_default();
        let want = d.spec.replicas.unwrap_or(1);
        s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
            && s.updated_replicas.unwrap_or(0) == want
            && s.replicas.unwrap_or(0) == s.updated_replicas.unwrap_or(0)
            && s.available_replicas.unwrap_or(0) == s.updated_replicas.unwrap_or(0)
    }

    fn progressing(d: &Deployment) -> (String, String) {
        d.status
            .as_ref()
            .and_then(|s| get_condition(s, "Progressing"))
            .map(|c| {
                (
                    c.status.clone().unwrap_or_default(),
                    c.reason.clone().unwrap_or_default(),
                )
            })
            .unwrap_or_default()
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        use IntOrString::{Int, String as S};
        type Case = (i32, Option<IntOrString>, Option<IntOrString>, (i32, i32));
        let cases: Vec<Case> = vec![
            (1, None, None, (1, 0)),
            (4, None, None, (1, 1)),
            (10, None, None, (3, 2)),
            (1, Some(Int(0)), Some(Int(1)), (0, 1)),
            (1, Some(Int(0)), Some(Int(0)), (0, 1)),
            (3, Some(S("0%".into())), Some(S("10%".into())), (0, 1)),
            (5, Some(S("50%".into())), Some(S("50%".into())), (3, 2)),
            (0, None, None, (0, 1)),
        ];
        for (replicas, surge, unavail, want) in cases {
            let mut d = deployment("x", replicas, "img");
            strategy(&mut d, surge.clone(), unavail.clone());
            assert_eq!(
                fenceposts(&d),
                want,
                "replicas {replicas} surge {surge:?} unavail {unavail:?}"
            );
        }
        let mut d = deployment("x", 3, "img");
        d.spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
        assert_eq!(fenceposts(&d), (0, 0));
    }

    #[test]
    fn template_hash_is_stable_and_ignores_hash_label() {
        let d = deployment("web", 1, "nginx");
        let h1 = pod_template_hash(&d.spec.template, None);
        assert_eq!(h1, pod_template_hash(&d.spec.template.clone(), None));
        let mut labelled = d.spec.template.clone();
        labelled
            .metadata
            .as_mut()
            .and_then(|m| m.labels.as_mut())
            .map(|l| l.insert(HASH_LABEL.into(), "zzz".into()));
        assert_eq!(h1, pod_template_hash(&labelled, None));
        assert_ne!(h1, pod_template_hash(&d.spec.template, Some(1)));
        assert_ne!(
            h1,
            pod_template_hash(&deployment("web", 1, "nginx:2").spec.template, None)
        );
        assert!(
            h1.chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
        );
    }

    #[test]
    fn initial_rollout_sets_revisions_annotations_and_status() {
        let sim = sim_with(deployment("web", 2, "nginx"));
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert!(rollout_done(&d), "{:#?}\n{:#?}", d, sim.state.replica_sets);
        assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("1"));
        assert_eq!(
            progressing(&d),
            ("True".into(), "NewReplicaSetAvailable".into())
        );
        let st = d.status.clone().unwrap_or_default();
        assert_eq!(
            (
                st.replicas,
                st.updated_replicas,
                st.ready_replicas,
                st.available_replicas,
                st.unavailable_replicas
            ),
            (Some(2), Some(2), Some(2), Some(2), Some(0))
        );
        assert_eq!(sim.state.replica_sets.len(), 1);
        let rs = &sim.state.replica_sets[0];
        let hash = pod_template_hash(&d.spec.template, None);
        assert_eq!(
            rs.metadata.name.as_deref(),
            Some(format!("web-{hash}").as_str())
        );
        assert_eq!(annotation(&rs.metadata, REVISION_ANNOTATION), Some("1"));
        assert_eq!(
            annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION),
            Some("2")
        );
        assert_eq!(annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION), Some("3"));
        for p in sim.pods_with_prefix("default", "web-") {
            assert_eq!(
                p.metadata.labels.as_ref().and_then(|l| l.get(HASH_LABEL)),
                Some(&hash)
            );
        }
        // Idempotent once settled.
        assert!(crate::controllers::reconcile_all(&sim.state).is_empty());
    }

    #[test]
    fn single_replica_rolling_update_surges_and_never_drops_to_zero_ready() {
        // Also with long ticks (a starved controller loop): one transition per tick either way.
        for dt in [DT, 0.7] {
            single_replica_rolling_update(dt);
        }
    }

    fn single_replica_rolling_update(dt: f64) {
        let mut sim = sim_with(deployment("web", 1, "nginx"));
        restart(&mut sim, "web", "2026-01-01T00:01:00Z");
        let mut saw_surge = false;
        for _ in 0..1000 {
            let c = census(&sim, "web");
            assert!(c.serving >= 1, "a Ready pod must always serve");
            let ready = sim
                .deployment("default", "web")
                .and_then(|d| d.status.as_ref())
                .and_then(|s| s.ready_replicas);
            assert!(
                ready >= Some(1),
                "Deployment status.readyReplicas must never read 0: {ready:?}"
            );
            if c.old_terminating > 0 {
                assert!(
                    c.new_ready >= 1,
                    "old pod deleted only after the new one is Ready"
                );
            }
            saw_surge |= c.new_total == 1 && c.old_total == 1;
            let d = sim.deployment("default", "web").cloned();
            if c.old_total == 0 && d.as_ref().is_some_and(rollout_done) {
                break;
            }
            sim.step(dt);
        }
        assert!(saw_surge, "a second pod is created before the old one goes");
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert!(
            rollout_done(&d),
            "kubectl rollout status would finish: {:?}",
            d.status
        );
        assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("2"));
        assert_eq!(
            progressing(&d),
            ("True".into(), "NewReplicaSetAvailable".into())
        );
        let revs: Vec<i64> = sim.state.replica_sets.iter().map(revision).collect();
        assert_eq!(revs.len(), 2);
        assert!(revs.contains(&1) && revs.contains(&2));
    }

    #[test]
    fn max_surge_zero_deletes_old_pod_first() {
        let mut d = deployment("web", 1, "nginx");
        strategy(&mut d, Some(IntOrString::Int(0)), Some(IntOrString::Int(1)));
        let mut sim = sim_with(d);
        restart(&mut sim, "web", "2026-01-01T00:01:00Z");
        let mut old_went_first = false;
        for _ in 0..1000 {
            let c = census(&sim, "web");
            assert!(
                c.new_total + c.old_total - c.old_terminating <= 1,
                "never more than 1 live pod"
            );
            if c.old_terminating == 1 && c.new_total == 0 {
                old_went_first = true;
            }
            if c.old_total == 0 && sim.deployment("default", "web").is_some_and(rollout_done) {
                break;
            }
            sim.step(DT);
        }
        assert!(old_went_first);
        assert!(sim.deployment("default", "web").is_some_and(rollout_done));
    }

    #[test]
    fn recreate_waits_for_old_pods_to_disappear() {
        let mut d = deployment("web", 2, "nginx");
        d.spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
        let mut sim = sim_with(d);
        restart(&mut sim, "web", "2026-01-01T00:01:00Z");
        let mut saw_gap = false;
        for _ in 0..2000 {
            let c = census(&sim, "web");
            assert!(
                c.old_total == 0 || c.new_total == 0,
                "old and new pods never coexist"
            );
            saw_gap |= c.old_total == 0 && c.new_total == 0;
            if c.old_total == 0 && sim.deployment("default", "web").is_some_and(rollout_done) {
                break;
            }
            sim.step(DT);
        }
        assert!(saw_gap);
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert!(rollout_done(&d));
        assert_eq!(d.status.and_then(|s| s.available_replicas), Some(2));
    }

    #[test]
    fn paused_deployment_does_not_roll_until_resumed() {
        let mut sim = sim_with(deployment("web", 1, "nginx"));
        sim.edit_deployment("default", "web", |d| d.spec.paused = Some(true));
        restart(&mut sim, "web", "2026-01-01T00:01:00Z");
        for _ in 0..100 {
            sim.step(DT);
        }
        assert_eq!(
            sim.state.replica_sets.len(),
            1,
            "no new ReplicaSet while paused"
        );
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert_eq!(
            progressing(&d),
            ("Unknown".into(), "DeploymentPaused".into())
        );
        assert!(!rollout_done(&d) || d.status.as_ref().and_then(|s| s.updated_replicas) == Some(0));
        sim.edit_deployment("default", "web", |d| d.spec.paused = Some(false));
        assert!(sim.run_until(DT, 1000, |s| {
            s.replica_sets.len() == 2 && s.deployments.iter().all(rollout_done) && s.pods.len() == 1
        }));
    }

    #[test]
    fn progress_deadline_exceeded_when_new_pod_never_ready() {
        let mut d = deployment("web", 1, "nginx");
        d.spec.progress_deadline_seconds = Some(10);
        let mut sim = sim_with(d);
        sim.state.config.crashing_images = vec!["broken".into()];
        sim.edit_deployment("default", "web", |d| {
            if let Some(spec) = d.spec.template.spec.as_mut() {
                spec.containers[0].image = Some("broken".into());
            }
        });
        // Shortly after the change the rollout is progressing.
        for _ in 0..20 {
            sim.step(DT);
        }
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert_eq!(progressing(&d).0, "True");
        let started = sim.state.now;
        assert!(sim.run_until(DT, 400, |s| {
            s.deployments
                .iter()
                .all(|d| progressing(d) == ("False".into(), "ProgressDeadlineExceeded".into()))
        }));
        let waited = crate::controllers::util::secs_between(started, sim.state.now);
        assert!(
            waited >= 7.0,
            "deadline counted from the last progress, waited {waited}"
        );
        let c = census(&sim, "web");
        assert_eq!(
            (c.serving, c.old_total, c.new_ready),
            (1, 1, 0),
            "old pod keeps serving"
        );
        // Stays exceeded (no automatic rollback) and stable.
        for _ in 0..50 {
            sim.step(DT);
        }
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert_eq!(
            progressing(&d),
            ("False".into(), "ProgressDeadlineExceeded".into())
        );
    }

    #[test]
    fn min_ready_seconds_delays_old_pod_removal() {
        let mut d = deployment("web", 1, "nginx");
        d.spec.min_ready_seconds = Some(5);
        let mut sim = sim_with(d);
        restart(&mut sim, "web", "2026-01-01T00:01:00Z");
        let mut new_ready_at = None;
        for _ in 0..2000 {
            let c = census(&sim, "web");
            if c.new_ready == 1 && new_ready_at.is_none() {
                new_ready_at = Some(sim.state.now);
            }
            if c.old_terminating > 0 {
                let ready_at = new_ready_at.unwrap_or(sim.state.now);
                let waited = crate::controllers::util::secs_between(ready_at, sim.state.now);
                assert!(
                    waited >= 4.0,
                    "old pod removed only after minReadySeconds: {waited}"
                );
                break;
            }
            sim.step(DT);
        }
        assert!(
            sim.run_until(DT, 2000, |s| s.deployments.iter().all(rollout_done)
                && s.pods.len() == 1)
        );
    }

    #[test]
    fn scaling_up_and_down_follows_replicas() {
        let mut sim = sim_with(deployment("web", 1, "nginx"));
        sim.edit_deployment("default", "web", |d| d.spec.replicas = Some(3));
        assert!(sim.run_until(DT, 500, |s| s.pods.len() == 3
            && s.deployments.iter().all(rollout_done)));
        let rs = &sim.state.replica_sets[0];
        assert_eq!(
            annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION),
            Some("3")
        );
        sim.edit_deployment("default", "web", |d| d.spec.replicas = Some(1));
        assert!(sim.run_until(DT, 1000, |s| s.pods.len() == 1
            && s.deployments.iter().all(rollout_done)));
        assert_eq!(sim.state.replica_sets.len(), 1);
    }

    #[test]
    fn revision_history_limit_deletes_old_empty_replica_sets() {
        let mut d = deployment("web", 1, "nginx");
        d.spec.revision_history_limit = Some(1);
        let mut sim = sim_with(d);
        for i in 0..3 {
            restart(&mut sim, "web", &format!("2026-01-01T00:0{i}:00Z"));
            assert!(sim.run_until(DT, 2000, |s| {
                s.pods.len() == 1
                    && s.pods
                        .iter()
                        .all(|p| p.metadata.deletion_timestamp.is_none())
                    && s.deployments.iter().all(rollout_done)
            }));
            sim.settle(DT, 100);
        }
        // New + at most one old ReplicaSet.
        assert_eq!(sim.state.replica_sets.len(), 2);
        let revs: Vec<i64> = sim.state.replica_sets.iter().map(revision).collect();
        assert!(revs.contains(&4) && revs.contains(&3), "{revs:?}");
    }

    #[test]
    fn rollback_reuses_the_old_replica_set_with_a_new_revision() {
        let mut sim = sim_with(deployment("web", 1, "nginx"));
        let original = sim.state.replica_sets[0].metadata.name.clone();
        restart(&mut sim, "web", "2026-01-01T00:01:00Z");
        assert!(sim.run_until(DT, 2000, |s| s.pods.len() == 1
            && s.replica_sets.len() == 2
            && s.deployments.iter().all(rollout_done)));
        // `kubectl rollout undo`: the template goes back to revision 1's.
        sim.edit_deployment("default", "web", |d| {
            if let Some(a) = d
                .spec
                .template
                .metadata
                .as_mut()
                .and_then(|m| m.annotations.as_mut())
            {
                a.clear();
            }
        });
        assert!(sim.run_until(DT, 2000, |s| {
            s.pods.len() == 1
                && s.pods
                    .iter()
                    .all(|p| p.metadata.deletion_timestamp.is_none())
                && s.deployments.iter().all(rollout_done)
        }));
        assert_eq!(sim.state.replica_sets.len(), 2, "no third ReplicaSet");
        let reused = sim
            .state
            .replica_sets
            .iter()
            .find(|rs| rs.metadata.name == original);
        assert_eq!(reused.map(revision), Some(3));
        assert_eq!(reused.map(rs_replicas), Some(1));
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert_eq!(annotation(&d.metadata, REVISION_ANNOTATION), Some("3"));
    }

    #[test]
    fn name_clash_bumps_collision_count() {
        let d = deployment("web", 1, "nginx");
        let hash = pod_template_hash(&d.spec.template, None);
        let mut squatter = ReplicaSet::default();
        squatter.metadata.name = Some(format!("web-{hash}"));
        squatter.metadata.namespace = Some("default".into());
        squatter.spec.replicas = Some(0);
        let mut sim = Sim::with_nodes(vec![node("n1", "4", "8Gi")]);
        sim.state.deployments.push(d);
        sim.state.replica_sets.push(squatter);
        let mut sim = Sim::new(sim.state);
        assert!(sim.settle(DT, 500));
        let d = sim
            .deployment("default", "web")
            .cloned()
            .unwrap_or_else(|| deployment("", 0, ""));
        assert_eq!(d.status.as_ref().and_then(|s| s.collision_count), Some(1));
        let want = format!("web-{}", pod_template_hash(&d.spec.template, Some(1)));
        assert!(
            sim.state
                .replica_sets
                .iter()
                .any(|rs| name(&rs.metadata) == want)
        );
        assert_eq!(sim.state.replica_sets.len(), 2);
        assert!(rollout_done(&d));
    }

    #[test]
    fn server_side_template_defaulting_does_not_spawn_replica_sets() {
        let mut sim = sim_with(deployment("web", 1, "nginx"));
        // Pretend the server defaulted a field in the stored ReplicaSet template only.
        if let Some(spec) = sim.state.replica_sets[0]
            .spec
            .template
            .as_mut()
            .and_then(|t| t.spec.as_mut())
        {
            spec.dns_policy = Some("ClusterFirst".into());
        }
        for _ in 0..50 {
            sim.step(DT);
        }
        assert_eq!(sim.state.replica_sets.len(), 1);
        assert_eq!(sim.state.pods.len(), 1);
    }

    #[test]
    fn missing_and_odd_fields_do_not_panic() {
        let mut d = deployment("odd", 1, "nginx");
        d.spec.selector = Default::default();
        d.spec.strategy = Some(DeploymentStrategy {
            type_: None,
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(IntOrString::String("bogus".into())),
                max_unavailable: None,
            }),
        });
        let mut sim = Sim::with_nodes(vec![]);
        sim.state.deployments.push(d);
        sim.state.deployments.push(Deployment::default());
        sim.state.replica_sets.push(ReplicaSet::default());
        sim.state.pods.push(Default::default());
        let _ = crate::controllers::reconcile_all(&sim.state);
        for _ in 0..5 {
            sim.step(DT);
        }
        // Absurd numbers.
        let mut huge = deployment("huge", i32::MAX, "nginx");
        strategy(
            &mut huge,
            Some(IntOrString::Int(i32::MAX)),
            Some(IntOrString::String("100%".into())),
        );
        let mut rs = ReplicaSet::default();
        rs.metadata.name = Some("huge-rs".into());
        rs.spec.replicas = Some(i32::MAX);
        rs.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
            replicas: i32::MAX,
            available_replicas: Some(i32::MIN),
            ..Default::default()
        });
        let mut budget =
            crate::controllers::testing::pdb("b", "huge", Some(IntOrString::Int(i32::MIN)), None);
        budget.metadata.generation = Some(i64::MAX);
        let mut sim = Sim::with_nodes(vec![node("n1", "1e40", "-5")]);
        sim.state.deployments = vec![huge];
        sim.state.replica_sets = vec![rs];
        sim.state.pdbs = vec![budget];
        sim.state.config.pod_start_delay_seconds = f64::NAN;
        for _ in 0..3 {
            sim.step(f64::INFINITY);
        }
    }
}
