//! An in-memory stand-in for the API server's storage, for controller tests: applies
//! [`Action`]s the way the server is specified to (uid / resourceVersion / creationTimestamp /
//! generation assignment, `generateName`, compare-and-set updates, uid-checked deletes) and
//! advances the simulated clock. Also holds small object builders.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeStatus, Pod, PodSpec, PodStatus, PodTemplateSpec,
    ResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::{Metadata, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::util::{add_secs, safe_encode};
use super::{Action, ClusterState, SimConfig, reconcile_all};

/// Outcome counters of [`Sim::apply`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyStats {
    pub applied: usize,
    /// Stale resourceVersion, uid mismatch, missing object, name clash or undecodable body.
    pub rejected: usize,
}

/// Cluster state plus the counters a server would keep.
pub struct Sim {
    pub state: ClusterState,
    next_uid: u64,
    next_rv: u64,
    next_name: u64,
}

trait Obj: Serialize + DeserializeOwned + Metadata<Ty = ObjectMeta> + Resource + Clone {}
impl<T: Serialize + DeserializeOwned + Metadata<Ty = ObjectMeta> + Resource + Clone> Obj for T {}

impl Sim {
    /// Wraps a state; objects without uid/resourceVersion/creationTimestamp/generation get them.
    pub fn new(state: ClusterState) -> Self {
        let mut sim = Self {
            state,
            next_uid: 1,
            next_rv: 1,
            next_name: 1,
        };
        let now = sim.state.now;
        let mut st = std::mem::take(&mut sim.state.pods);
        st.iter_mut()
            .for_each(|o| sim.init_meta(o.metadata_mut(), now));
        sim.state.pods = st;
        let mut st = std::mem::take(&mut sim.state.nodes);
        st.iter_mut()
            .for_each(|o| sim.init_meta(o.metadata_mut(), now));
        sim.state.nodes = st;
        let mut st = std::mem::take(&mut sim.state.replica_sets);
        st.iter_mut()
            .for_each(|o| sim.init_meta(o.metadata_mut(), now));
        sim.state.replica_sets = st;
        let mut st = std::mem::take(&mut sim.state.deployments);
        st.iter_mut()
            .for_each(|o| sim.init_meta(o.metadata_mut(), now));
        sim.state.deployments = st;
        let mut st = std::mem::take(&mut sim.state.pdbs);
        st.iter_mut()
            .for_each(|o| sim.init_meta(o.metadata_mut(), now));
        sim.state.pdbs = st;
        sim
    }

    /// A state at `2026-01-01T00:00:00Z` with default config and the given nodes.
    pub fn with_nodes(nodes: Vec<Node>) -> Self {
        Self::new(ClusterState {
            now: "2026-01-01T00:00:00Z"
                .parse()
                .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
            nodes,
            pods: Vec::new(),
            replica_sets: Vec::new(),
            deployments: Vec::new(),
            pdbs: Vec::new(),
            config: SimConfig::default(),
        })
    }

    fn rv(&mut self) -> String {
        self.next_rv += 1;
        self.next_rv.to_string()
    }

    fn init_meta(&mut self, m: &mut ObjectMeta, now: jiff::Timestamp) {
        if m.uid.is_none() {
            m.uid = Some(format!("uid-{}", self.next_uid));
            self.next_uid += 1;
        }
        if m.resource_version.is_none() {
            m.resource_version = Some(self.rv());
        }
        if m.creation_timestamp.is_none() {
            m.creation_timestamp = Some(Time(now));
        }
        if m.generation.is_none() {
            m.generation = Some(1);
        }
    }

    /// Applies actions in order, like the server between two ticks.
    pub fn apply(&mut self, actions: Vec<Action>) -> ApplyStats {
        let mut stats = ApplyStats::default();
        for a in actions {
            let ok = match &a {
                Action::Create(v) | Action::Update(v) => {
                    let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("");
                    let create = matches!(a, Action::Create(_));
                    match kind {
                        "Pod" => self.write::<Pod>(v, create, |s| &mut s.state.pods),
                        "Node" => self.write::<Node>(v, create, |s| &mut s.state.nodes),
                        "ReplicaSet" => {
                            self.write::<ReplicaSet>(v, create, |s| &mut s.state.replica_sets)
                        }
                        "Deployment" => {
                            self.write::<Deployment>(v, create, |s| &mut s.state.deployments)
                        }
                        "PodDisruptionBudget" => {
                            self.write::<PodDisruptionBudget>(v, create, |s| &mut s.state.pdbs)
                        }
                        _ => false,
                    }
                }
                Action::Delete {
                    kind,
                    namespace,
                    name,
                    uid,
                    ..
                } => {
                    let ns = namespace.as_deref();
                    match kind.as_str() {
                        "Pod" => remove(&mut self.state.pods, ns, name, uid),
                        "Node" => remove(&mut self.state.nodes, ns, name, uid),
                        "ReplicaSet" => remove(&mut self.state.replica_sets, ns, name, uid),
                        "Deployment" => remove(&mut self.state.deployments, ns, name, uid),
                        "PodDisruptionBudget" => remove(&mut self.state.pdbs, ns, name, uid),
                        _ => false,
                    }
                }
            };
            if ok {
                stats.applied += 1;
            } else {
                stats.rejected += 1;
            }
        }
        stats
    }

    fn write<T: Obj>(
        &mut self,
        v: &serde_json::Value,
        create: bool,
        items: impl Fn(&mut Self) -> &mut Vec<T>,
    ) -> bool {
        let Ok(mut obj) = serde_json::from_value::<T>(v.clone()) else {
            return false;
        };
        let now = self.state.now;
        if create {
            let m = obj.metadata_mut();
            if m.name.is_none() {
                let Some(prefix) = m.generate_name.clone() else {
                    return false;
                };
                let suffix = safe_encode(&format!("{:05}", self.next_name % 100_000));
                self.next_name += 1;
                m.name = Some(format!("{prefix}{suffix}"));
            }
            m.uid = None;
            m.resource_version = None;
            m.creation_timestamp = None;
            m.generation = None;
            let mut meta = obj.metadata().clone();
            self.init_meta(&mut meta, now);
            *obj.metadata_mut() = meta;
            let key = key_of(obj.metadata());
            if items(self).iter().any(|o| key_of(o.metadata()) == key) {
                return false;
            }
            items(self).push(obj);
            return true;
        }
        let key = key_of(obj.metadata());
        let rv = self.rv();
        let list = items(self);
        let Some(stored) = list.iter_mut().find(|o| key_of(o.metadata()) == key) else {
            return false;
        };
        if obj.metadata().resource_version != stored.metadata().resource_version {
            return false;
        }
        let spec_changed = serde_json::to_value(&*stored)
            .ok()
            .and_then(|s| s.get("spec").cloned())
            != v.get("spec").cloned();
        let old = stored.metadata().clone();
        let m = obj.metadata_mut();
        m.uid = old.uid;
        m.creation_timestamp = old.creation_timestamp;
        m.generation = old.generation.map(|g| if spec_changed { g + 1 } else { g });
        m.resource_version = Some(rv);
        *stored = obj;
        true
    }

    /// One controller tick: reconcile, apply, then advance the clock by `dt` seconds.
    pub fn step(&mut self, dt: f64) -> ApplyStats {
        let actions = reconcile_all(&self.state);
        let stats = self.apply(actions);
        self.advance(dt);
        stats
    }

    /// Advances the clock.
    pub fn advance(&mut self, secs: f64) {
        self.state.now = add_secs(self.state.now, secs);
    }

    /// Steps (`dt` seconds each) until `pred` holds, at most `max_steps` times; `true` if it held.
    pub fn run_until(
        &mut self,
        dt: f64,
        max_steps: usize,
        mut pred: impl FnMut(&ClusterState) -> bool,
    ) -> bool {
        for _ in 0..max_steps {
            if pred(&self.state) {
                return true;
            }
            self.step(dt);
        }
        pred(&self.state)
    }

    /// Steps until `reconcile_all` has had nothing to do for a quiet window of simulated time
    /// (5 s, or twice the pod start delay if longer, so that timed transitions such as readiness
    /// happen), at most `max_steps` times; `true` when settled.
    pub fn settle(&mut self, dt: f64, max_steps: usize) -> bool {
        let window = (2.0 * self.state.config.pod_start_delay_seconds).max(5.0);
        let mut quiet_since: Option<jiff::Timestamp> = None;
        for _ in 0..max_steps {
            let actions = reconcile_all(&self.state);
            if actions.is_empty() {
                let since = *quiet_since.get_or_insert(self.state.now);
                if super::util::secs_between(since, self.state.now) >= window {
                    return true;
                }
            } else {
                quiet_since = None;
                self.apply(actions);
            }
            self.advance(dt);
        }
        false
    }

    /// A graceful pod deletion like `DELETE` / an eviction: sets the deletion timestamp to
    /// now + grace (the pod's `terminationGracePeriodSeconds`, default 30, unless given);
    /// unbound pods are removed at once. Returns `false` when the pod does not exist.
    pub fn delete_pod(&mut self, ns: &str, name: &str, grace: Option<i64>) -> bool {
        let now = self.state.now;
        let rv = self.rv();
        let Some(i) = self
            .state
            .pods
            .iter()
            .position(|p| key_of(&p.metadata) == (ns.to_string(), name.to_string()))
        else {
            return false;
        };
        let pod = &mut self.state.pods[i];
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some();
        if !bound {
            self.state.pods.remove(i);
            return true;
        }
        if pod.metadata.deletion_timestamp.is_none() {
            let grace = grace
                .or_else(|| {
                    pod.spec
                        .as_ref()
                        .and_then(|s| s.termination_grace_period_seconds)
                })
                .unwrap_or(30);
            pod.metadata.deletion_timestamp = Some(Time(add_secs(now, grace as f64)));
            pod.metadata.deletion_grace_period_seconds = Some(grace);
            pod.metadata.resource_version = Some(rv);
        }
        true
    }

    /// Client-side edit of a Deployment (bumps generation when the spec changes).
    pub fn edit_deployment(&mut self, ns: &str, name: &str, f: impl FnOnce(&mut Deployment)) {
        let rv = self.rv();
        if let Some(d) = self
            .state
            .deployments
            .iter_mut()
            .find(|d| key_of(&d.metadata) == (ns.to_string(), name.to_string()))
        {
            let before = serde_json::to_value(&d.spec).ok();
            f(d);
            if serde_json::to_value(&d.spec).ok() != before {
                d.metadata.generation = Some(d.metadata.generation.unwrap_or(0) + 1);
            }
            d.metadata.resource_version = Some(rv);
        }
    }

    /// Pods whose name starts with `prefix` in `ns`.
    pub fn pods_with_prefix(&self, ns: &str, prefix: &str) -> Vec<&Pod> {
        self.state
            .pods
            .iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(ns)
                    && p.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with(prefix))
            })
            .collect()
    }

    /// Deployment by name.
    pub fn deployment(&self, ns: &str, name: &str) -> Option<&Deployment> {
        self.state
            .deployments
            .iter()
            .find(|d| key_of(&d.metadata) == (ns.to_string(), name.to_string()))
    }
}

fn key_of(m: &ObjectMeta) -> (String, String) {
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

fn remove<T: Obj>(items: &mut Vec<T>, ns: Option<&str>, name: &str, uid: &str) -> bool {
    let key = (ns.unwrap_or("").to_string(), name.to_string());
    let Some(i) = items.iter().position(|o| key_of(o.metadata()) == key) else {
        return false;
    };
    if !uid.is_empty() && items[i].metadata().uid.as_deref() != Some(uid) {
        return false;
    }
    items.remove(i);
    true
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A Ready node with the given cpu / memory capacity, 110 pods and a hostname label.
pub fn node(name: &str, cpu: &str, memory: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        spec: Some(Default::default()),
        status: Some(NodeStatus {
            capacity: Some(quantities(&[
                ("cpu", cpu),
                ("memory", memory),
                ("pods", "110"),
            ])),
            allocatable: Some(quantities(&[
                ("cpu", cpu),
                ("memory", memory),
                ("pods", "110"),
            ])),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_string(),
                status: "True".to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// A pod template with one container (`app: <app>` label) requesting `cpu` if given.
pub fn template(app: &str, image: &str, cpu: Option<&str>) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some([("app".to_string(), app.to_string())].into()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".to_string(),
                image: Some(image.to_string()),
                resources: cpu.map(|c| ResourceRequirements {
                    requests: Some(quantities(&[("cpu", c)])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            termination_grace_period_seconds: Some(30),
            ..Default::default()
        }),
    }
}

/// A Pending, unbound pod `name` in `default` made from [`template`].
pub fn pending_pod(name: &str, app: &str, image: &str, cpu: Option<&str>) -> Pod {
    let t = template(app, image, cpu);
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: t.metadata.and_then(|m| m.labels),
            ..Default::default()
        },
        spec: t.spec,
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        }),
    }
}

/// A Deployment `name` in `default` selecting `app: <name>` with the default strategy.
pub fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some([("app".to_string(), name.to_string())].into()),
                ..Default::default()
            },
            template: template(name, image, None),
            strategy: Some(DeploymentStrategy::default()),
            ..Default::default()
        },
        status: None,
    }
}

/// A PDB in `default` selecting `app: <app>`.
pub fn pdb(
    name: &str,
    app: &str,
    min_available: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            }),
            min_available,
            max_unavailable,
            ..Default::default()
        }),
        status: None,
    }
}
