//! Lean workload facts, independent of the Kubernetes API types: the guard decides on them and
//! the snapshot carries them for its Deployments and ReplicaSets.
//!
//! The webhook builds them from k8s-openapi objects (the `from_*` constructors); the offline
//! `plan` command can fill the plain fields from its own snapshot model.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_core::Selector;

use super::annotations::{
    RESTARTED_AT, RESTARTED_BY, REVISION, SURGE_AT, SURGE_ORIGINAL_REPLICAS, SURGE_REPLICAS,
    TEMPLATE_RESTARTED_AT, is_opt_out, pdb_surge_opt_in,
};

/// Pod phase (`status.phase`), one type for the snapshot and the guard. An absent phase is
/// `Pending`, as the API server defaults it when a pod is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PodPhase {
    /// Not all containers started (includes unscheduled pods); also an absent phase.
    #[default]
    Pending,
    /// Bound and running.
    Running,
    /// Terminated successfully.
    Succeeded,
    /// Terminated with a failure.
    Failed,
    /// The node stopped reporting, or an unrecognised value.
    Unknown,
}

impl PodPhase {
    /// Parses `status.phase`: absent or empty is `Pending`, an unrecognised value `Unknown`.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            None | Some("") | Some("Pending") => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some(_) => PodPhase::Unknown,
        }
    }

    /// The phase as Kubernetes spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
        }
    }
}

/// The controlling owner of an object (the owner reference with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerFacts {
    /// Owner kind, e.g. `ReplicaSet`.
    pub kind: String,
    /// Owner name (same namespace as the owned object).
    pub name: String,
    /// Owner uid.
    pub uid: String,
}

impl OwnerFacts {
    fn controller_of(meta: &ObjectMeta) -> Option<Self> {
        let refs: &[OwnerReference] = meta.owner_references.as_deref().unwrap_or_default();
        refs.iter()
            .find(|r| r.controller == Some(true))
            .map(|r| OwnerFacts {
                kind: r.kind.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            })
    }
}

/// Facts about the pod being evicted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// Labels (matched against PDB selectors).
    pub labels: std::sync::Arc<BTreeMap<String, String>>,
    /// The pod carries our opt-out annotation.
    pub opt_out: bool,
    /// `status.phase`.
    pub phase: PodPhase,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// Condition `Ready` is `True`.
    pub ready: bool,
    /// Controlling owner, if any.
    pub owner: Option<OwnerFacts>,
    /// Label `pod-template-hash`.
    pub pod_template_hash: Option<String>,
    /// Names of PersistentVolumeClaims mounted through `persistentVolumeClaim` volumes.
    pub claims: Vec<String>,
    /// A generic ephemeral volume requests ReadWriteOnce or ReadWriteOncePod.
    pub ephemeral_single_node_volume: bool,
}

impl PodFacts {
    /// Builds pod facts from an API Pod.
    pub fn from_pod(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let labels = meta.labels.clone().unwrap_or_default();
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let mut claims = Vec::new();
        let mut ephemeral_single_node_volume = false;
        for vol in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            if let Some(pvc) = &vol.persistent_volume_claim {
                claims.push(pvc.claim_name.clone());
            }
            if let Some(eph) = &vol.ephemeral {
                let modes = eph
                    .volume_claim_template
                    .as_ref()
                    .and_then(|t| t.spec.access_modes.clone())
                    .unwrap_or_default();
                // An ephemeral claim without access modes is invalid; be conservative.
                if modes.is_empty() || modes.iter().any(|m| is_single_node_mode(m)) {
                    ephemeral_single_node_volume = true;
                }
            }
        }
        PodFacts {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            pod_template_hash: labels.get("pod-template-hash").cloned(),
            opt_out: is_opt_out(meta.annotations.as_ref()),
            labels: std::sync::Arc::new(labels),
            phase: PodPhase::parse(status.and_then(|s| s.phase.as_deref())),
            terminating: meta.deletion_timestamp.is_some(),
            ready,
            owner: OwnerFacts::controller_of(meta),
            claims,
            ephemeral_single_node_volume,
        }
    }
}

/// `ReadWriteOnce` and `ReadWriteOncePod` tie a volume to one node (or one pod).
pub fn is_single_node_mode(mode: &str) -> bool {
    mode == "ReadWriteOnce" || mode == "ReadWriteOncePod"
}

/// Facts about a PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvcFacts {
    /// Claim name.
    pub name: String,
    /// `spec.accessModes` (falls back to `status.accessModes`).
    pub access_modes: Vec<String>,
}

impl PvcFacts {
    /// Builds claim facts from an API PersistentVolumeClaim.
    pub fn from_pvc(pvc: &PersistentVolumeClaim) -> Self {
        let spec_modes = pvc
            .spec
            .as_ref()
            .and_then(|s| s.access_modes.clone())
            .unwrap_or_default();
        let access_modes = if spec_modes.is_empty() {
            pvc.status
                .as_ref()
                .and_then(|s| s.access_modes.clone())
                .unwrap_or_default()
        } else {
            spec_modes
        };
        PvcFacts {
            name: pvc.metadata.name.clone().unwrap_or_default(),
            access_modes,
        }
    }

    /// The claim can be attached on one node only.
    pub fn single_node(&self) -> bool {
        self.access_modes.iter().any(|m| is_single_node_mode(m))
    }
}

/// Facts about a ReplicaSet (its pod template is not kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSetFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// Controlling owner (a Deployment, normally).
    pub owner: Option<OwnerFacts>,
    /// Annotation `deployment.kubernetes.io/revision`.
    pub revision: Option<i64>,
    /// Label `pod-template-hash`.
    pub pod_template_hash: Option<String>,
    /// `spec.replicas` (default 1).
    pub desired: i32,
    /// `status.replicas`.
    pub replicas: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
}

impl ReplicaSetFacts {
    /// Builds ReplicaSet facts from an API ReplicaSet.
    pub fn from_replica_set(rs: &ReplicaSet) -> Self {
        let meta = &rs.metadata;
        let status = rs.status.as_ref();
        ReplicaSetFacts {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            owner: OwnerFacts::controller_of(meta),
            revision: annotation(meta, REVISION).and_then(|v| v.trim().parse().ok()),
            pod_template_hash: meta
                .labels
                .as_ref()
                .and_then(|l| l.get("pod-template-hash").cloned()),
            desired: rs.spec.replicas.unwrap_or(1),
            replicas: status.map_or(0, |s| s.replicas),
            ready: status.and_then(|s| s.ready_replicas).unwrap_or(0),
        }
    }
}

/// A RollingUpdate bound: an absolute number or a percentage of the desired replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    /// Absolute count.
    Int(i32),
    /// Percentage (e.g. 25 for "25%").
    Percent(i32),
}

impl IntOrPercent {
    /// Parses an IntOrString; `None` when it is a string that is not `N%`.
    pub fn from_int_or_string(v: &IntOrString) -> Option<Self> {
        match v {
            IntOrString::Int(i) => Some(IntOrPercent::Int(*i)),
            IntOrString::String(s) => {
                let s = s.trim();
                if let Some(p) = s.strip_suffix('%') {
                    p.trim().parse().ok().map(IntOrPercent::Percent)
                } else {
                    // The API server accepts digit strings too; treat them as counts.
                    s.parse().ok().map(IntOrPercent::Int)
                }
            }
        }
    }

    /// Resolves against `total`, rounding up or down as the Deployment controller does.
    pub fn resolve(self, total: i32, round_up: bool) -> i32 {
        match self {
            IntOrPercent::Int(i) => i,
            IntOrPercent::Percent(p) => {
                let num = i64::from(p) * i64::from(total);
                let v = if round_up {
                    (num + 99).div_euclid(100)
                } else {
                    num.div_euclid(100)
                };
                i32::try_from(v).unwrap_or(i32::MAX)
            }
        }
    }
}

/// The Deployment's update strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Kill all old pods first.
    Recreate,
    /// Rolling update with surge / unavailability bounds (defaults 25 % / 25 %).
    RollingUpdate {
        /// `maxSurge`.
        max_surge: IntOrPercent,
        /// `maxUnavailable`.
        max_unavailable: IntOrPercent,
    },
}

impl Strategy {
    /// Resolved `(maxSurge, maxUnavailable)` for `replicas`, as the Deployment controller computes
    /// them: surge rounds up, unavailable rounds down, and if both are 0 unavailable becomes 1.
    /// `None` for Recreate.
    pub fn resolve(&self, replicas: i32) -> Option<(i32, i32)> {
        match *self {
            Strategy::Recreate => None,
            Strategy::RollingUpdate {
                max_surge,
                max_unavailable,
            } => {
                let surge = max_surge.resolve(replicas, true);
                let mut unavailable = max_unavailable.resolve(replicas, false);
                if surge == 0 && unavailable == 0 {
                    unavailable = 1;
                }
                Some((surge, unavailable))
            }
        }
    }
}

/// What we recorded on a Deployment when we restarted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRestart {
    /// When we restarted it (also the `restartedAt` value we wrote into the template).
    pub at: Timestamp,
    /// Who asked (free text: webhook instance and requesting user / pod).
    pub by: Option<String>,
}

/// What we recorded on a Deployment when we raised its replicas because a
/// PodDisruptionBudget blocked a drain (rule B).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedSurge {
    /// `spec.replicas` before the surge (restored afterwards).
    pub original_replicas: i32,
    /// `spec.replicas` we set.
    pub surged_replicas: i32,
    /// When.
    pub at: Timestamp,
}

/// Facts about a Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.replicas` (default 1).
    pub replicas: i32,
    /// `spec.strategy` (default RollingUpdate 25 % / 25 %).
    pub strategy: Strategy,
    /// `spec.paused`.
    pub paused: bool,
    /// Condition Progressing=False with reason ProgressDeadlineExceeded.
    pub progress_deadline_exceeded: bool,
    /// The Deployment carries our opt-out annotation.
    pub opt_out: bool,
    /// Annotation `deployment.kubernetes.io/revision`.
    pub revision: Option<i64>,
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// `status.replicas` (all pods of all ReplicaSets).
    pub status_replicas: i32,
    /// `status.updatedReplicas`.
    pub updated_replicas: i32,
    /// `status.readyReplicas`.
    pub ready_replicas: i32,
    /// `status.availableReplicas`.
    pub available_replicas: i32,
    /// Our restart record, only when it still matches the template's `restartedAt`
    /// (someone restarting after us makes it stale).
    pub restart: Option<RecordedRestart>,
    /// The [`super::annotations::PDB_SURGE`] annotation: `Some(true)` opted in, `Some(false)`
    /// opted out, `None` absent.
    pub pdb_surge: Option<bool>,
    /// Our surge record, when the Deployment is surged.
    pub surge: Option<RecordedSurge>,
}

impl DeploymentFacts {
    /// Builds Deployment facts from an API Deployment.
    pub fn from_deployment(d: &Deployment) -> Self {
        let meta = &d.metadata;
        let spec = Some(&d.spec);
        let status = d.status.as_ref();
        let default_bound = IntOrPercent::Percent(25);
        let strategy = match spec.and_then(|s| s.strategy.as_ref()) {
            Some(s) if s.type_.as_deref() == Some("Recreate") => Strategy::Recreate,
            s => {
                let ru = s.and_then(|s| s.rolling_update.as_ref());
                let bound = |v: Option<&IntOrString>| {
                    v.and_then(IntOrPercent::from_int_or_string)
                        .unwrap_or(default_bound)
                };
                Strategy::RollingUpdate {
                    max_surge: bound(ru.and_then(|r| r.max_surge.as_ref())),
                    max_unavailable: bound(ru.and_then(|r| r.max_unavailable.as_ref())),
                }
            }
        };
        let progress_deadline_exceeded =
            status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_.as_deref() == Some("Progressing")
                            && c.status.as_deref() == Some("False")
                            && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
                    })
                });
        let template_restarted_at = spec
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(TEMPLATE_RESTARTED_AT));
        let restart = annotation(meta, RESTARTED_AT).and_then(|ours| {
            (template_restarted_at.map(String::as_str) == Some(ours)).then_some(())?;
            let at: Timestamp = ours.parse().ok()?;
            Some(RecordedRestart {
                at,
                by: annotation(meta, RESTARTED_BY).map(str::to_owned),
            })
        });
        DeploymentFacts {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
            strategy,
            paused: spec.and_then(|s| s.paused).unwrap_or(false),
            progress_deadline_exceeded,
            opt_out: is_opt_out(meta.annotations.as_ref()),
            revision: annotation(meta, REVISION).and_then(|v| v.trim().parse().ok()),
            generation: meta.generation.unwrap_or(0),
            observed_generation: status.and_then(|s| s.observed_generation).unwrap_or(0),
            status_replicas: status.and_then(|s| s.replicas).unwrap_or(0),
            updated_replicas: status.and_then(|s| s.updated_replicas).unwrap_or(0),
            ready_replicas: status.and_then(|s| s.ready_replicas).unwrap_or(0),
            available_replicas: status.and_then(|s| s.available_replicas).unwrap_or(0),
            restart,
            pdb_surge: pdb_surge_opt_in(meta.annotations.as_ref()),
            surge: recorded_surge(meta),
        }
    }

    /// The controller has not finished rolling out the current spec: it has not observed the
    /// latest generation, or not all replicas are updated and available, or old pods remain.
    pub fn rollout_in_progress(&self) -> bool {
        self.observed_generation < self.generation
            || self.updated_replicas < self.replicas
            || self.status_replicas > self.updated_replicas
            || self.available_replicas < self.updated_replicas
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Facts about a PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdbFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.selector`; `None` (absent or unparsable) matches no pod, an empty selector matches all.
    pub selector: Option<Selector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
}

impl PdbFacts {
    /// Builds budget facts from an API PodDisruptionBudget.
    pub fn from_pdb(pdb: &PodDisruptionBudget) -> Self {
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .and_then(|sel| Selector::try_from(sel).ok());
        PdbFacts {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector,
            disruptions_allowed: pdb
                .status
                .as_ref()
                .and_then(|s| s.disruptions_allowed)
                .unwrap_or(0),
        }
    }

    /// The budget selects `pod` (same namespace and selector matches its labels).
    pub fn matches(&self, pod: &PodFacts) -> bool {
        use kube_core::SelectorExt;
        self.namespace == pod.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }
}

/// The surge record of a Deployment: all three annotations present and well-formed.
fn recorded_surge(meta: &ObjectMeta) -> Option<RecordedSurge> {
    let int = |k: &str| annotation(meta, k).and_then(|v| v.trim().parse::<i32>().ok());
    Some(RecordedSurge {
        original_replicas: int(SURGE_ORIGINAL_REPLICAS)?,
        surged_replicas: int(SURGE_REPLICAS)?,
        at: annotation(meta, SURGE_AT)?.trim().parse().ok()?,
    })
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn pod_facts_from_api_pod() {
        let pod: Pod = from(json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u1",
                "labels": {"app": "web", "pod-template-hash": "abc"},
                "annotations": {"kube-descheduler.io/eviction-guard": "disabled"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "x"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs1", "controller": true}]},
            "spec": {"containers": [{"name": "c"}], "volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        let f = PodFacts::from_pod(&pod);
        assert_eq!(
            (f.namespace.as_str(), f.name.as_str(), f.uid.as_str()),
            ("shop", "web-1", "u1")
        );
        assert!(f.ready && f.opt_out && !f.terminating);
        assert_eq!(f.phase, PodPhase::Running);
        assert_eq!(
            f.owner,
            Some(OwnerFacts {
                kind: "ReplicaSet".into(),
                name: "web-abc".into(),
                uid: "rs1".into()
            })
        );
        assert_eq!(f.pod_template_hash.as_deref(), Some("abc"));
        assert_eq!(f.claims, vec!["data".to_string()]);
        assert!(f.ephemeral_single_node_volume);

        let unready: Pod = from(
            json!({"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        let f = PodFacts::from_pod(&unready);
        assert!(!f.ready && f.terminating && !f.opt_out);
    }

    #[test]
    fn deployment_facts_from_api_deployment() {
        let at = "2026-11-22T11:59:00Z";
        let d: Deployment = from(json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "d1", "generation": 7,
                "annotations": {"deployment.kubernetes.io/revision": "4", RESTARTED_AT: at, RESTARTED_BY: "guard-0"}},
            "spec": {"replicas": 1, "selector": {}, "paused": true,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 0}},
                "template": {"metadata": {"annotations": {TEMPLATE_RESTARTED_AT: at}}}},
            "status": {"observedGeneration": 6, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}
        }));
        let f = DeploymentFacts::from_deployment(&d);
        assert_eq!(
            f.strategy,
            Strategy::RollingUpdate {
                max_surge: IntOrPercent::Percent(50),
                max_unavailable: IntOrPercent::Int(0)
            }
        );
        assert!(f.paused && f.progress_deadline_exceeded);
        assert_eq!(
            (f.revision, f.generation, f.observed_generation),
            (Some(4), 7, 6)
        );
        assert!(f.rollout_in_progress());
        let r = f.restart.clone().unwrap();
        assert_eq!(r.at, at.parse::<Timestamp>().unwrap());
        assert_eq!(r.by.as_deref(), Some("guard-0"));

        // Someone restarted after us: our record is stale.
        let mut d2 = d.clone();
        d2.spec
            .template
            .metadata
            .as_mut()
            .unwrap()
            .annotations
            .as_mut()
            .unwrap()
            .insert(TEMPLATE_RESTARTED_AT.into(), "2026-11-22T12:00:00Z".into());
        assert_eq!(DeploymentFacts::from_deployment(&d2).restart, None);

        // Defaults: RollingUpdate 25%/25%, replicas 1.
        let bare: Deployment =
            from(json!({"metadata": {"name": "x"}, "spec": {"selector": {}, "template": {}}}));
        let f = DeploymentFacts::from_deployment(&bare);
        assert_eq!(f.replicas, 1);
        assert_eq!(f.strategy.resolve(1), Some((1, 0)));
        let recreate: Deployment = from(
            json!({"metadata": {"name": "x"}, "spec": {"selector": {}, "template": {}, "strategy": {"type": "Recreate"}}}),
        );
        assert_eq!(
            DeploymentFacts::from_deployment(&recreate).strategy,
            Strategy::Recreate
        );
    }

    #[test]
    fn replica_set_pdb_and_pvc_facts() {
        let rs: ReplicaSet = from(json!({
            "metadata": {"name": "web-abc", "namespace": "shop", "uid": "rs1",
                "labels": {"pod-template-hash": "abc"}, "annotations": {"deployment.kubernetes.io/revision": "3"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1", "controller": true}]},
            "spec": {"replicas": 2, "selector": {}},
            "status": {"replicas": 2, "readyReplicas": 1}
        }));
        let f = ReplicaSetFacts::from_replica_set(&rs);
        assert_eq!(
            (f.revision, f.desired, f.replicas, f.ready),
            (Some(3), 2, 2, 1)
        );
        assert_eq!(f.owner.map(|o| o.name), Some("web".into()));

        let pdb: PodDisruptionBudget = from(json!({
            "metadata": {"name": "b", "namespace": "shop"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
        }));
        let b = PdbFacts::from_pdb(&pdb);
        let pod = PodFacts::from_pod(&from(
            json!({"metadata": {"name": "p", "namespace": "shop", "labels": {"app": "web"}}}),
        ));
        assert!(b.matches(&pod));
        assert_eq!(b.disruptions_allowed, 0);
        let empty = PdbFacts::from_pdb(&from(
            json!({"metadata": {"name": "all", "namespace": "shop"}, "spec": {"selector": {}}}),
        ));
        assert!(
            empty.matches(&pod),
            "an empty selector selects every pod of the namespace"
        );
        let none = PdbFacts::from_pdb(&from(
            json!({"metadata": {"name": "none", "namespace": "shop"}, "spec": {}}),
        ));
        assert!(!none.matches(&pod), "a missing selector selects nothing");

        let pvc = PvcFacts::from_pvc(&from(
            json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteMany"]}}),
        ));
        assert!(!pvc.single_node());
        let pvc = PvcFacts::from_pvc(&from(
            json!({"metadata": {"name": "data"}, "spec": {}, "status": {"accessModes": ["ReadWriteOncePod"]}}),
        ));
        assert!(pvc.single_node());
    }
}
