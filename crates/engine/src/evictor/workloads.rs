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
//! Everything is resolved lazily: the snapshot's owner index ([`Snapshot::owners`]) is built on
//! the first pod checked (unless the guard's verdict built it already), and a workload's counts
//! the first time one of its pods is. A pod's workload is
//! remembered by the pod's parts class (pods of one class share their owner references), so
//! after the first pod of a class the lookup is one array read.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use k8s_openapi::api::batch::v1::Job;

use crate::snapshot::model::Condition;
use crate::snapshot::owners::{OwnerIndex, cron_job_of, deployment_of};
use crate::snapshot::{PodId, Snapshot};
use crate::workload::ReplicaSetFacts;

/// Index of a workload in [`Workloads`].
pub type WorkloadId = u32;

/// One workload and its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// `Deployment`, `StatefulSet`, …
    pub kind: Arc<str>,
    /// `Deployment shop/web` (for refusal messages).
    pub label: Arc<str>,
    /// `metadata.uid` (keys the eviction window across cycles).
    pub uid: Arc<str>,
    /// Desired replicas at the cycle's start.
    pub desired: u32,
    /// Pods of the workload that were Ready (and not terminating) at the cycle's start (0 for
    /// [`Workloads::without_ready`]).
    pub ready: u32,
    /// Pods of the workload moved (evicted or deflected) this cycle.
    pub moved: u32,
    /// Of those, the ones that were Ready.
    pub moved_ready: u32,
}

impl Workload {
    /// `Deployment shop/web`.
    pub fn name(&self) -> Arc<str> {
        self.label.clone()
    }

    /// Desired replicas that are not Ready (never negative).
    pub fn not_ready(&self) -> u32 {
        self.desired.saturating_sub(self.ready)
    }
}

fn non_negative(v: Option<i32>, default: i32) -> u32 {
    u32::try_from(v.unwrap_or(default)).unwrap_or(0)
}

/// In [`Workloads::by_class`]: the class was not resolved yet.
const UNSEEN: u32 = u32::MAX;
/// In [`Workloads::by_class`]: the class's pods belong to no workload.
const NO_WORKLOAD: u32 = u32::MAX - 1;

/// The workloads of the pods checked so far this cycle.
#[derive(Debug, Default)]
pub struct Workloads {
    /// Per parts class of the snapshot: [`UNSEEN`], [`NO_WORKLOAD`] or the workload.
    by_class: Vec<u32>,
    /// Top-owner uid → workload (the key is the workload's [`Workload::uid`]).
    by_top: HashMap<Arc<str>, WorkloadId>,
    list: Vec<Workload>,
    /// Whether [`Workload::ready`] is read (`maxUnavailablePerWorkload`); without it, the pods of
    /// a workload whose desired replicas are known are not read at all.
    skip_ready: bool,
}

/// A top owner before its counts are read.
struct Top<'s> {
    kind: &'s str,
    uid: &'s str,
    name: &'s str,
    /// The owners whose pods are the workload's pods.
    members: Vec<&'s str>,
    /// Desired replicas when the snapshot holds the object (else: count the pods).
    desired: Option<u32>,
}

impl Workloads {
    /// Workloads whose [`Workload::ready`] is not needed (left 0, and when the desired replicas
    /// are known the workload's pods are not read at all).
    pub fn without_ready() -> Self {
        Workloads {
            skip_ready: true,
            ..Default::default()
        }
    }

    /// The workload `pod` belongs to (`None`: no controller, not limited).
    pub fn of_pod(&mut self, s: &Snapshot, pod: PodId) -> Option<WorkloadId> {
        if self.by_class.len() != s.parts_classes() {
            self.by_class = vec![UNSEEN; s.parts_classes()];
        }
        let class = s.parts_class(pod) as usize;
        match self.by_class.get(class).copied() {
            Some(NO_WORKLOAD) => return None,
            Some(UNSEEN) | None => {}
            Some(id) => return Some(id),
        }
        let id = self.resolve(s, pod);
        if let Some(slot) = self.by_class.get_mut(class) {
            *slot = id.unwrap_or(NO_WORKLOAD);
        }
        id
    }

    /// [`Self::of_pod`] for a pod of a class not seen yet (classes of one controller share
    /// their workload through [`Self::by_top`]).
    fn resolve(&mut self, s: &Snapshot, pod: PodId) -> Option<WorkloadId> {
        let controller = s.pod(pod).controller()?;
        let top = top_owner(
            s.owners(),
            s,
            &controller.kind,
            &controller.uid,
            &controller.name,
        );
        if let Some(&id) = self.by_top.get(top.uid) {
            return Some(id);
        }
        let id = self.list.len() as WorkloadId;
        let workload = counts(s, &s.pod(pod).namespace, top, self.skip_ready);
        self.by_top.insert(workload.uid.clone(), id);
        self.list.push(workload);
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

fn top_owner<'s>(
    owners: &'s OwnerIndex,
    s: &'s Snapshot,
    kind: &'s str,
    uid: &'s str,
    name: &'s str,
) -> Top<'s> {
    let own = |kind: &'s str, desired: Option<u32>| Top {
        kind,
        uid,
        name,
        members: vec![uid],
        desired,
    };
    match kind {
        "ReplicaSet" => match owners.replica_set(s, uid) {
            Some(rs) => match deployment_of(rs) {
                Some((dep_uid, dep_name)) => {
                    let sets: Vec<&ReplicaSetFacts> =
                        owners.replica_sets_of_deployment(s, dep_uid).collect();
                    let desired = match owners.deployment(s, dep_uid) {
                        Some(d) => non_negative(Some(d.replicas), 1),
                        // The Deployment is not in the snapshot: its ReplicaSets' desired
                        // replicas (each uid as the last ReplicaSet with that uid says).
                        None if sets.is_empty() => non_negative(Some(rs.desired), 1),
                        None => sets
                            .iter()
                            .filter_map(|r| owners.replica_set(s, &r.uid))
                            .map(|r| non_negative(Some(r.desired), 1))
                            .sum(),
                    };
                    Top {
                        kind: "Deployment",
                        uid: dep_uid,
                        name: dep_name,
                        members: if sets.is_empty() {
                            vec![uid]
                        } else {
                            sets.iter().map(|r| r.uid.as_str()).collect()
                        },
                        desired: Some(desired),
                    }
                }
                None => own("ReplicaSet", Some(non_negative(Some(rs.desired), 1))),
            },
            None => own("ReplicaSet", None),
        },
        "StatefulSet" => own(
            "StatefulSet",
            owners
                .stateful_set(s, uid)
                .map(|st| non_negative(st.spec.replicas, 1)),
        ),
        "DaemonSet" => own("DaemonSet", None),
        "Job" => match owners.job(s, uid) {
            Some(j) => match cron_job_of(j) {
                Some(cron) => {
                    let jobs: Vec<&str> = owners.jobs_of_cron_job(s, &cron.uid).collect();
                    // Each Job as the last Job with its uid says.
                    let desired: u32 = jobs
                        .iter()
                        .filter_map(|&j| owners.job(s, j))
                        .filter(|j| !job_finished(j))
                        .map(job_parallelism)
                        .sum();
                    Top {
                        kind: "CronJob",
                        uid: &cron.uid,
                        name: &cron.name,
                        members: jobs,
                        desired: (desired > 0).then_some(desired),
                    }
                }
                None => own("Job", Some(job_parallelism(j))),
            },
            None => own("Job", None),
        },
        other => own(other, None),
    }
}

/// `spec.parallelism` (default 1).
fn job_parallelism(j: &Job) -> u32 {
    non_negative(j.spec.as_ref().and_then(|sp| sp.parallelism), 1)
}

/// A `Complete` or `Failed` condition is true.
fn job_finished(j: &Job) -> bool {
    j.status
        .as_ref()
        .and_then(|st| st.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

/// Reads a workload's Ready pods (and, without a known desired count, its pods) at cycle start;
/// with `skip_ready`, Ready is not read (stays 0), and with a known desired count as well no pod
/// is read at all.
fn counts(s: &Snapshot, namespace: &str, top: Top<'_>, skip_ready: bool) -> Workload {
    let (mut pods, mut ready) = (0u32, 0u32);
    let members: &[&str] = if skip_ready && top.desired.is_some() {
        &[]
    } else {
        &top.members
    };
    // Two passes over the workload's pods: the first only loads what the counts need from each
    // pod (a short loop without branches on the pods' data, so the CPU has the loads of many
    // pods in flight at once: these are cache misses), the second decides Ready. Pods of one
    // workload mostly share one `conditions` list, so its verdict is computed once per list.
    let mut facts: Vec<PodFacts<'_>> = Vec::new();
    for m in members {
        let ids = s.pods_owned_by_at_start(m);
        facts.reserve(ids.len());
        facts.extend(ids.iter().map(|&p| {
            let pod = s.pod(p);
            PodFacts {
                terminal: pod.is_terminal(),
                terminating: pod.is_terminating(),
                conditions: &pod.conditions[..],
            }
        }));
    }
    let mut last: Option<(&[Condition], bool)> = None;
    for f in &facts {
        if f.terminal {
            continue;
        }
        pods += 1;
        if skip_ready || f.terminating {
            continue;
        }
        let is_ready = match last {
            Some((c, r)) if std::ptr::eq(c, f.conditions) => r,
            _ => {
                // `Pod::is_ready`: the `Ready` condition is `True`.
                let r = f
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .is_some_and(|c| c.status == "True");
                last = Some((f.conditions, r));
                r
            }
        };
        ready += u32::from(is_ready);
    }
    Workload {
        kind: Arc::from(top.kind),
        // `concat` rather than `format!`: one of these per workload a limit checks.
        label: Arc::from([top.kind, " ", namespace, "/", top.name].concat()),
        uid: Arc::from(top.uid),
        desired: top.desired.unwrap_or(pods),
        ready,
        moved: 0,
        moved_ready: 0,
    }
}

/// What [`counts`] reads of one pod.
struct PodFacts<'s> {
    terminal: bool,
    terminating: bool,
    /// The pod's `status.conditions` (loaded in the first pass: the list, not the pod's field).
    conditions: &'s [Condition],
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::testing::{node, pod, snapshot};
    use crate::workload::facts::OwnerFacts;

    fn rs(name: &str, deployment: Option<&str>, desired: i32) -> Arc<ReplicaSetFacts> {
        Arc::new(ReplicaSetFacts {
            namespace: "a".into(),
            name: name.into(),
            uid: format!("ReplicaSet-{name}"),
            owner: deployment.map(|d| OwnerFacts {
                kind: "Deployment".into(),
                name: d.into(),
                uid: format!("Deployment-{d}"),
            }),
            revision: None,
            pod_template_hash: None,
            desired,
            replicas: desired,
            ready: desired,
        })
    }

    /// A Deployment missing from the snapshot is its ReplicaSets (desired: their sum; pods: all
    /// of theirs), a ReplicaSet without one is itself, an unknown controller kind counts its
    /// pods, a bare pod has no workload; pods of one controller share one workload whatever
    /// their images (parts classes).
    /// Pods of Deployment `web` (ReplicaSets web-a and web-b, one not Ready, one Failed), of a
    /// bare ReplicaSet `solo`, of an unknown controller kind `Thing` x, and a bare pod.
    fn sample() -> Snapshot {
        let mut s = snapshot(
            vec![node("n1").build()],
            vec![
                pod("a", "web-a-0", "n1")
                    .owner("ReplicaSet", "web-a")
                    .build(),
                pod("a", "web-a-1", "n1")
                    .owner("ReplicaSet", "web-a")
                    .not_ready()
                    .with(|p| {
                        if let Some(spec) = p.spec.as_mut() {
                            for c in &mut spec.containers {
                                c.image = Some("other:2".into());
                            }
                        }
                    })
                    .build(),
                pod("a", "web-b-0", "n1")
                    .owner("ReplicaSet", "web-b")
                    .build(),
                pod("a", "web-b-1", "n1")
                    .owner("ReplicaSet", "web-b")
                    .phase("Failed")
                    .build(),
                pod("a", "solo-0", "n1").owner("ReplicaSet", "solo").build(),
                pod("a", "x-0", "n1").owner("Thing", "x").build(),
                pod("a", "x-1", "n1").owner("Thing", "x").build(),
                pod("a", "bare", "n1").bare().build(),
            ],
        );
        s.replica_sets = vec![
            rs("web-a", Some("web"), 2),
            rs("web-b", Some("web"), 3),
            rs("solo", None, 4),
        ]
        .into();
        s
    }

    #[test]
    fn workloads_without_their_top_object_and_across_parts_classes() {
        let s = sample();
        let id = |name: &str| {
            (0..s.pods.len() as PodId)
                .find(|&p| s.pod(p).name == name)
                .expect("test pod")
        };
        let mut w = Workloads::default();
        let web = w.of_pod(&s, id("web-a-0")).expect("web");
        assert_eq!(w.of_pod(&s, id("web-a-1")), Some(web), "another image");
        assert_eq!(w.of_pod(&s, id("web-b-0")), Some(web), "another ReplicaSet");
        let got = w.get(web);
        assert_eq!(&*got.label, "Deployment a/web");
        assert_eq!(&*got.uid, "Deployment-web");
        assert_eq!(
            (got.desired, got.ready),
            (5, 2),
            "2 + 3 desired; web-a-1 not Ready"
        );
        let solo = w.of_pod(&s, id("solo-0")).expect("solo");
        assert_eq!(&*w.get(solo).label, "ReplicaSet a/solo");
        assert_eq!(w.get(solo).desired, 4);
        let x = w.of_pod(&s, id("x-1")).expect("x");
        assert_eq!(w.of_pod(&s, id("x-0")), Some(x));
        assert_eq!((&*w.get(x).kind, w.get(x).desired), ("Thing", 2));
        assert_eq!(w.of_pod(&s, id("bare")), None);
        assert_eq!(w.of_pod(&s, id("bare")), None, "remembered");
        w.count(web, true);
        w.count(web, false);
        assert_eq!((w.get(web).moved, w.get(web).moved_ready), (2, 1));
        assert_eq!(w.list.len(), 3);
    }

    /// Without `maxUnavailablePerWorkload`, a workload with known desired replicas reads none of
    /// its pods (Ready 0); one without (an unknown controller kind) still counts its pods.
    #[test]
    fn without_ready_reads_pods_only_for_an_unknown_desired_count() {
        let s = sample();
        let id = |name: &str| {
            (0..s.pods.len() as PodId)
                .find(|&p| s.pod(p).name == name)
                .expect("test pod")
        };
        let mut w = Workloads::without_ready();
        let web = w.of_pod(&s, id("web-a-0")).expect("web");
        assert_eq!((w.get(web).desired, w.get(web).ready), (5, 0));
        let x = w.of_pod(&s, id("x-0")).expect("x");
        assert_eq!(w.get(x).desired, 2, "pods counted: desired unknown");
    }

    /// Ready is decided per pod even when the pods' `conditions` lists alternate (the verdict is
    /// remembered per list): Ready, not Ready, Ready and terminating, Ready again, Succeeded.
    #[test]
    fn ready_counts_follow_each_pods_conditions() {
        let mut s = snapshot(
            vec![node("n1").build()],
            vec![
                pod("a", "r-0", "n1").owner("ReplicaSet", "r").build(),
                pod("a", "r-1", "n1")
                    .owner("ReplicaSet", "r")
                    .not_ready()
                    .build(),
                pod("a", "r-2", "n1").owner("ReplicaSet", "r").build(),
                pod("a", "r-3", "n1")
                    .owner("ReplicaSet", "r")
                    .terminating()
                    .build(),
                pod("a", "r-4", "n1")
                    .owner("ReplicaSet", "r")
                    .not_ready()
                    .build(),
                pod("a", "r-5", "n1").owner("ReplicaSet", "r").build(),
                pod("a", "r-6", "n1")
                    .owner("ReplicaSet", "r")
                    .phase("Succeeded")
                    .build(),
            ],
        );
        s.replica_sets = vec![rs("r", None, 7)].into();
        let first = (0..s.pods.len() as PodId)
            .find(|&p| s.pod(p).name == "r-0")
            .expect("test pod");
        let mut w = Workloads::default();
        let id = w.of_pod(&s, first).expect("r");
        assert_eq!(
            (w.get(id).desired, w.get(id).ready),
            (7, 3),
            "r-0, r-2, r-5 Ready; r-3 terminating, r-6 ended"
        );
        // A workload with no known desired count counts its pods that have not ended.
        let mut w = Workloads::without_ready();
        s.replica_sets = Vec::new().into();
        let id = w.of_pod(&s, first).expect("r");
        assert_eq!((w.get(id).desired, w.get(id).ready), (6, 0));
    }
}
