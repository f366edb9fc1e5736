//! Which workload a pod belongs to (its top owner) and that workload's desired and Ready replicas
//! at the cycle's start, for the per-workload limits (`maxNoOfPodsToEvictPerWorkload`,
//! `maxUnavailablePerWorkload`, `workloadEvictionWindow`).
//!
//! The top owner is found through the pod's controller reference: a ReplicaSet owned by a
//! Deployment → the Deployment; a bare ReplicaSet → itself; a Job owned by a CronJob → the CronJob;
//! a StatefulSet, DaemonSet, Job or any other controller → itself. Pods without a controller belong
//! to no workload and are not limited. Desired replicas: Deployment `spec.replicas`, ReplicaSet
//! `spec.replicas`, StatefulSet `spec.replicas` (default 1), Job `spec.parallelism` (default 1), a
//! CronJob the sum over its unfinished Jobs; a DaemonSet (not kept in the snapshot) or an owner the
//! snapshot does not hold counts its pods that have not ended.
//!
//! Everything is resolved lazily: the owner maps are built on the first pod checked, and a
//! workload's counts the first time one of its pods is.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::snapshot::{PodId, Snapshot};

/// Index of a workload in [`Workloads`].
pub type WorkloadId = u32;

/// One workload and its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// `Deployment`, `StatefulSet`, …
    pub kind: Arc<str>,
    /// `namespace/name`.
    pub key: String,
    /// `metadata.uid` (keys the eviction window across cycles).
    pub uid: String,
    /// Desired replicas at the cycle's start.
    pub desired: u32,
    /// Pods of the workload that were Ready (and not terminating) at the cycle's start.
    pub ready: u32,
    /// Pods of the workload moved (evicted or deflected) this cycle.
    pub moved: u32,
    /// Of those, the ones that were Ready.
    pub moved_ready: u32,
}

impl Workload {
    /// `Deployment shop/web`.
    pub fn name(&self) -> String {
        format!("{} {}", self.kind, self.key)
    }

    /// Desired replicas that are not Ready (never negative).
    pub fn not_ready(&self) -> u32 {
        self.desired.saturating_sub(self.ready)
    }
}

/// An owner's uid and name.
type OwnerId = (String, String);

/// What a workload needs of a Job.
#[derive(Debug)]
struct JobFacts {
    /// The controlling CronJob.
    cron: Option<OwnerId>,
    /// `spec.parallelism` (default 1).
    parallelism: u32,
    /// A `Complete` or `Failed` condition is true.
    finished: bool,
}

/// What the snapshot says about the owners of pods (built once per cycle, on first use).
#[derive(Debug, Default)]
struct OwnerMaps {
    /// ReplicaSet uid → (owning Deployment, `spec.replicas`).
    replica_sets: HashMap<String, (Option<OwnerId>, u32)>,
    /// Deployment uid → `spec.replicas`.
    deployments: HashMap<String, u32>,
    /// Deployment uid → its ReplicaSets' uids.
    deployment_sets: HashMap<String, Vec<String>>,
    /// StatefulSet uid → `spec.replicas`.
    stateful_sets: HashMap<String, u32>,
    /// Job uid → what a workload needs of it.
    jobs: HashMap<String, JobFacts>,
    /// CronJob uid → its Jobs' uids.
    cron_jobs: HashMap<String, Vec<String>>,
}

fn non_negative(v: Option<i32>, default: i32) -> u32 {
    u32::try_from(v.unwrap_or(default)).unwrap_or(0)
}

impl OwnerMaps {
    fn build(s: &Snapshot) -> Self {
        let mut m = OwnerMaps::default();
        for d in s.deployments.iter() {
            m.deployments
                .insert(d.uid.clone(), non_negative(Some(d.replicas), 1));
        }
        for rs in s.replica_sets.iter() {
            let owner = rs
                .owner
                .as_ref()
                .filter(|o| o.kind == "Deployment")
                .map(|o| (o.uid.clone(), o.name.clone()));
            if let Some((uid, _)) = &owner {
                m.deployment_sets
                    .entry(uid.clone())
                    .or_default()
                    .push(rs.uid.clone());
            }
            m.replica_sets
                .insert(rs.uid.clone(), (owner, non_negative(Some(rs.desired), 1)));
        }
        for st in &s.stateful_sets {
            if let Some(uid) = &st.metadata.uid {
                let replicas = st.spec.replicas;
                m.stateful_sets
                    .insert(uid.clone(), non_negative(replicas, 1));
            }
        }
        for j in &s.jobs {
            let Some(uid) = &j.metadata.uid else { continue };
            let owner = j
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .find(|o| o.controller == Some(true) && o.kind == "CronJob")
                .map(|o| (o.uid.clone(), o.name.clone()));
            let finished = j
                .status
                .as_ref()
                .and_then(|st| st.conditions.as_deref())
                .unwrap_or_default()
                .iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
            let parallelism = j.spec.as_ref().and_then(|sp| sp.parallelism);
            if let Some((cron, _)) = &owner {
                m.cron_jobs
                    .entry(cron.clone())
                    .or_default()
                    .push(uid.clone());
            }
            m.jobs.insert(
                uid.clone(),
                JobFacts {
                    cron: owner,
                    parallelism: non_negative(parallelism, 1),
                    finished,
                },
            );
        }
        m
    }
}

/// The workloads of the pods checked so far this cycle.
#[derive(Debug, Default)]
pub struct Workloads {
    maps: Option<OwnerMaps>,
    /// Controller uid (of a pod) → its workload (`None`: not limited).
    by_controller: HashMap<String, Option<WorkloadId>>,
    /// Top-owner uid → workload.
    by_top: HashMap<String, WorkloadId>,
    list: Vec<Workload>,
}

/// A top owner before its counts are read.
struct Top {
    kind: &'static str,
    other_kind: Option<String>,
    uid: String,
    name: String,
    /// The owners whose pods are the workload's pods.
    members: Vec<String>,
    /// Desired replicas when the snapshot holds the object (else: count the pods).
    desired: Option<u32>,
}

impl Workloads {
    /// The workload `pod` belongs to (`None`: no controller, not limited).
    pub fn of_pod(&mut self, s: &Snapshot, pod: PodId) -> Option<WorkloadId> {
        let controller = s.pod(pod).controller()?;
        if let Some(&w) = self.by_controller.get(controller.uid.as_str()) {
            return w;
        }
        let maps = self.maps.get_or_insert_with(|| OwnerMaps::build(s));
        let top = top_owner(maps, &controller.kind, &controller.uid, &controller.name);
        let id = match self.by_top.get(&top.uid) {
            Some(&id) => id,
            None => {
                let id = self.list.len() as WorkloadId;
                let namespace = &s.pod(pod).namespace;
                self.list.push(counts(s, namespace, top));
                self.by_top.insert(self.list[id as usize].uid.clone(), id);
                id
            }
        };
        self.by_controller.insert(controller.uid.clone(), Some(id));
        Some(id)
    }

    /// A workload by id.
    pub fn get(&self, id: WorkloadId) -> &Workload {
        &self.list[id as usize]
    }

    /// Counts one move of a pod of workload `id` (`ready`: the pod was Ready).
    pub fn count(&mut self, id: WorkloadId, ready: bool) {
        if let Some(w) = self.list.get_mut(id as usize) {
            w.moved += 1;
            w.moved_ready += u32::from(ready);
        }
    }
}

fn top_owner(maps: &OwnerMaps, kind: &str, uid: &str, name: &str) -> Top {
    let own = |kind: &'static str, desired: Option<u32>| Top {
        kind,
        other_kind: None,
        uid: uid.to_string(),
        name: name.to_string(),
        members: vec![uid.to_string()],
        desired,
    };
    match kind {
        "ReplicaSet" => match maps.replica_sets.get(uid) {
            Some((Some((dep_uid, dep_name)), rs_desired)) => Top {
                kind: "Deployment",
                other_kind: None,
                uid: dep_uid.clone(),
                name: dep_name.clone(),
                members: maps
                    .deployment_sets
                    .get(dep_uid)
                    .cloned()
                    .unwrap_or_else(|| vec![uid.to_string()]),
                desired: Some(maps.deployments.get(dep_uid).copied().unwrap_or_else(|| {
                    // The Deployment is not in the snapshot: its ReplicaSets' desired replicas.
                    maps.deployment_sets
                        .get(dep_uid)
                        .map_or(*rs_desired, |sets| {
                            sets.iter()
                                .filter_map(|s| maps.replica_sets.get(s))
                                .map(|(_, d)| *d)
                                .sum()
                        })
                })),
            },
            Some((None, desired)) => own("ReplicaSet", Some(*desired)),
            None => own("ReplicaSet", None),
        },
        "StatefulSet" => own("StatefulSet", maps.stateful_sets.get(uid).copied()),
        "DaemonSet" => own("DaemonSet", None),
        "Job" => match maps.jobs.get(uid) {
            Some(JobFacts {
                cron: Some((cron_uid, cron_name)),
                ..
            }) => {
                let jobs = maps.cron_jobs.get(cron_uid).cloned().unwrap_or_default();
                let desired: u32 = jobs
                    .iter()
                    .filter_map(|j| maps.jobs.get(j))
                    .filter(|j| !j.finished)
                    .map(|j| j.parallelism)
                    .sum();
                Top {
                    kind: "CronJob",
                    other_kind: None,
                    uid: cron_uid.clone(),
                    name: cron_name.clone(),
                    members: jobs,
                    desired: (desired > 0).then_some(desired),
                }
            }
            Some(j) => own("Job", Some(j.parallelism)),
            None => own("Job", None),
        },
        other => Top {
            other_kind: Some(other.to_string()),
            ..own("", None)
        },
    }
}

/// Reads a workload's Ready pods (and, without a known desired count, its pods) at cycle start.
fn counts(s: &Snapshot, namespace: &str, top: Top) -> Workload {
    let (mut pods, mut ready) = (0u32, 0u32);
    for m in &top.members {
        for &p in s.pods_owned_by_at_start(m) {
            let pod = s.pod(p);
            if pod.is_terminal() {
                continue;
            }
            pods += 1;
            if pod.is_ready() && !pod.is_terminating() {
                ready += 1;
            }
        }
    }
    let kind: Arc<str> = match top.other_kind {
        Some(k) => Arc::from(k),
        None => Arc::from(top.kind),
    };
    Workload {
        kind,
        key: format!("{namespace}/{}", top.name),
        uid: top.uid,
        desired: top.desired.unwrap_or(pods),
        ready,
        moved: 0,
        moved_ready: 0,
    }
}
