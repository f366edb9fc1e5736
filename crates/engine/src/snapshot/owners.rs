//! The snapshot's ReplicaSets, Deployments, StatefulSets and Jobs found by uid — for the guard's
//! verdict in `plan` and for resolving a pod's workload (the per-workload limits). Built once per
//! snapshot, on first use (see [`super::Snapshot::owners`]), without copying a uid: each index
//! is a list of (hash of a uid, position in the snapshot's list) sorted by hash, and a lookup
//! compares the uids themselves, so two uids with one hash are told apart. Where a list holds
//! one uid twice, the last object wins (as a map built from the list in order).

use std::hash::Hasher;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::Snapshot;
use crate::workload::{DeploymentFacts, ReplicaSetFacts};

/// Positions in one of the snapshot's lists by the hash of a uid: an open-addressing table
/// (linear probing) of (hash, position), twice as large as the list, filled in list order. Entries
/// of one hash sit along one probe sequence in the order they were inserted, so a lookup yields
/// the positions of a uid ascending. Building it costs one insertion per object (no sort).
#[derive(Debug, Default)]
struct UidPositions {
    /// (hash, position); [`EMPTY`] as position marks a free slot. A power of two long.
    slots: Vec<(u64, u32)>,
    /// `64 − log2(slots.len())`: the slot of a hash is its top bits.
    shift: u32,
}

/// A free slot's position.
const EMPTY: u32 = u32::MAX;

fn fx_hash(uid: &str) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(uid.as_bytes());
    h.finish()
}

impl UidPositions {
    /// Indexes `(uid, position)` pairs with `hash`.
    fn new<'a>(keys: impl Iterator<Item = (&'a str, usize)>, hash: fn(&str) -> u64) -> Self {
        let pairs: Vec<(u64, u32)> = keys
            .filter_map(|(uid, at)| Some((hash(uid), u32::try_from(at).ok()?)))
            .filter(|&(_, at)| at != EMPTY)
            .collect();
        let len = (pairs.len() * 2).next_power_of_two().max(8);
        let mut t = UidPositions {
            slots: vec![(0, EMPTY); len],
            shift: 64 - len.trailing_zeros(),
        };
        let mask = len - 1;
        for (h, at) in pairs {
            let mut i = t.home(h);
            while t.slots[i].1 != EMPTY {
                i = (i + 1) & mask;
            }
            t.slots[i] = (h, at);
        }
        t
    }

    /// The first slot probed for hash `h`.
    fn home(&self, h: u64) -> usize {
        // `shift` < 64: the table has at least 8 slots.
        (h >> self.shift) as usize
    }

    /// The positions whose uid, as `uid_at` reads it, is `uid`, ascending.
    fn find<'a>(
        &'a self,
        uid: &'a str,
        hash: fn(&str) -> u64,
        uid_at: impl Fn(usize) -> Option<&'a str> + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        let h = hash(uid);
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = if self.slots.is_empty() {
            0
        } else {
            self.home(h)
        };
        std::iter::from_fn(move || {
            loop {
                let &(x, at) = self.slots.get(i)?;
                if at == EMPTY {
                    return None;
                }
                i = (i + 1) & mask;
                if x == h && uid_at(at as usize) == Some(uid) {
                    return Some(at as usize);
                }
            }
        })
    }
}

/// The uid of a Job.
fn job_uid(j: &Job) -> Option<&str> {
    j.metadata.uid.as_deref()
}

/// The StatefulSet's uid.
fn stateful_set_uid(st: &StatefulSet) -> Option<&str> {
    st.metadata.uid.as_deref()
}

/// The CronJob that controls `j` (its first controlling owner reference of kind CronJob).
pub fn cron_job_of(j: &Job) -> Option<&OwnerReference> {
    j.metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "CronJob")
}

/// The Deployment that owns `rs` (its owner, when that owner is a Deployment).
pub fn deployment_of(rs: &ReplicaSetFacts) -> Option<(&str, &str)> {
    rs.owner
        .as_ref()
        .filter(|o| o.kind == "Deployment")
        .map(|o| (o.uid.as_str(), o.name.as_str()))
}

/// The owner lookups of one snapshot.
#[derive(Debug)]
pub struct OwnerIndex {
    hash: fn(&str) -> u64,
    replica_sets: UidPositions,
    /// ReplicaSets by the uid of the Deployment that owns them.
    replica_sets_by_deployment: UidPositions,
    deployments: UidPositions,
    stateful_sets: UidPositions,
    jobs: UidPositions,
    /// Jobs by the uid of the CronJob that controls them.
    jobs_by_cron_job: UidPositions,
}

impl OwnerIndex {
    /// Indexes the snapshot's owner objects.
    pub(super) fn build(s: &Snapshot) -> Self {
        Self::with_hash(s, fx_hash)
    }

    fn with_hash(s: &Snapshot, hash: fn(&str) -> u64) -> Self {
        let rs = &s.replica_sets;
        OwnerIndex {
            hash,
            replica_sets: UidPositions::new(rs.iter().map(|r| r.uid.as_str()).zip(0..), hash),
            replica_sets_by_deployment: UidPositions::new(
                rs.iter()
                    .enumerate()
                    .filter_map(|(i, r)| Some((deployment_of(r)?.0, i))),
                hash,
            ),
            deployments: UidPositions::new(
                s.deployments.iter().map(|d| d.uid.as_str()).zip(0..),
                hash,
            ),
            stateful_sets: UidPositions::new(
                s.stateful_sets
                    .iter()
                    .enumerate()
                    .filter_map(|(i, st)| Some((stateful_set_uid(st)?, i))),
                hash,
            ),
            jobs: UidPositions::new(
                s.jobs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, j)| Some((job_uid(j)?, i))),
                hash,
            ),
            jobs_by_cron_job: UidPositions::new(
                s.jobs.iter().enumerate().filter_map(|(i, j)| {
                    job_uid(j)?;
                    Some((cron_job_of(j)?.uid.as_str(), i))
                }),
                hash,
            ),
        }
    }

    /// The ReplicaSet with `uid`.
    pub fn replica_set<'s>(&self, s: &'s Snapshot, uid: &str) -> Option<&'s ReplicaSetFacts> {
        self.replica_set_position(s, uid)
            .and_then(|i| s.replica_sets.get(i))
            .map(|r| &**r)
    }

    /// The position in `s.replica_sets` of the ReplicaSet with `uid`.
    pub fn replica_set_position(&self, s: &Snapshot, uid: &str) -> Option<usize> {
        let list = &s.replica_sets;
        self.replica_sets
            .find(uid, self.hash, |i| list.get(i).map(|r| r.uid.as_str()))
            .last()
    }

    /// The ReplicaSets a Deployment with `uid` owns, in the snapshot's order.
    pub fn replica_sets_of_deployment<'s>(
        &'s self,
        s: &'s Snapshot,
        uid: &'s str,
    ) -> impl Iterator<Item = &'s ReplicaSetFacts> + 's {
        let list = &s.replica_sets;
        self.replica_sets_by_deployment
            .find(uid, self.hash, move |i| {
                list.get(i).and_then(|r| Some(deployment_of(r)?.0))
            })
            .filter_map(move |i| list.get(i).map(|r| &**r))
    }

    /// The Deployment with `uid`.
    pub fn deployment<'s>(&self, s: &'s Snapshot, uid: &str) -> Option<&'s DeploymentFacts> {
        self.deployment_position(s, uid)
            .and_then(|i| s.deployments.get(i))
            .map(|d| &**d)
    }

    /// The position in `s.deployments` of the Deployment with `uid`.
    pub fn deployment_position(&self, s: &Snapshot, uid: &str) -> Option<usize> {
        let list = &s.deployments;
        self.deployments
            .find(uid, self.hash, |i| list.get(i).map(|d| d.uid.as_str()))
            .last()
    }

    /// The StatefulSet with `uid`.
    pub fn stateful_set<'s>(&self, s: &'s Snapshot, uid: &str) -> Option<&'s StatefulSet> {
        let list = &s.stateful_sets;
        self.stateful_sets
            .find(uid, self.hash, |i| list.get(i).and_then(stateful_set_uid))
            .last()
            .and_then(|i| list.get(i))
    }

    /// The Job with `uid`.
    pub fn job<'s>(&self, s: &'s Snapshot, uid: &str) -> Option<&'s Job> {
        let list = &s.jobs;
        self.jobs
            .find(uid, self.hash, |i| list.get(i).and_then(job_uid))
            .last()
            .and_then(|i| list.get(i))
    }

    /// The uids of the Jobs a CronJob with `uid` controls, in the snapshot's order.
    pub fn jobs_of_cron_job<'s>(
        &'s self,
        s: &'s Snapshot,
        uid: &'s str,
    ) -> impl Iterator<Item = &'s str> + 's {
        let list = &s.jobs;
        self.jobs_by_cron_job
            .find(uid, self.hash, move |i| {
                list.get(i)
                    .filter(|j| job_uid(j).is_some())
                    .and_then(cron_job_of)
                    .map(|o| o.uid.as_str())
            })
            .filter_map(move |i| list.get(i).and_then(job_uid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, snapshot};

    fn rs(uid: &str, deployment: Option<&str>, desired: i32) -> ReplicaSetFacts {
        ReplicaSetFacts {
            namespace: "ns".into(),
            name: format!("rs-{uid}"),
            uid: uid.into(),
            owner: deployment.map(|d| crate::workload::facts::OwnerFacts {
                kind: "Deployment".into(),
                name: format!("name-{d}"),
                uid: d.into(),
            }),
            revision: None,
            pod_template_hash: None,
            desired,
            replicas: desired,
            ready: desired,
        }
    }

    /// Every uid hashes alike: lookups must still tell the uids apart by comparing them.
    fn one_hash(_: &str) -> u64 {
        7
    }

    #[test]
    fn lookups_compare_uids_keep_list_order_and_the_last_duplicate() {
        let mut s = snapshot(vec![node("n1").build()], vec![pod("ns", "p", "n1").build()]);
        s.replica_sets = vec![
            std::sync::Arc::new(rs("a", Some("d1"), 1)),
            std::sync::Arc::new(rs("b", Some("d2"), 2)),
            std::sync::Arc::new(rs("c", Some("d1"), 3)),
            std::sync::Arc::new(rs("a", None, 4)),
            std::sync::Arc::new(rs("e", None, 5)),
        ]
        .into();
        for hash in [fx_hash as fn(&str) -> u64, one_hash] {
            let ix = OwnerIndex::with_hash(&s, hash);
            // The last ReplicaSet with uid `a` (no Deployment, 4 desired).
            let a = ix.replica_set(&s, "a").expect("a");
            assert_eq!((a.desired, a.owner.is_none()), (4, true));
            assert_eq!(ix.replica_set(&s, "e").map(|r| r.desired), Some(5));
            assert!(ix.replica_set(&s, "zzz").is_none());
            let of_d1: Vec<i32> = ix
                .replica_sets_of_deployment(&s, "d1")
                .map(|r| r.desired)
                .collect();
            assert_eq!(of_d1, [1, 3], "in the snapshot's order");
            assert_eq!(ix.replica_sets_of_deployment(&s, "d3").count(), 0);
            assert!(ix.deployment(&s, "d1").is_none());
            assert!(ix.job(&s, "j").is_none());
            assert!(ix.stateful_set(&s, "st").is_none());
        }
    }

    /// The table against a plain scan: 3,000 uids (every tenth twice), with the real hash and with
    /// a hash of 4 values (long probe runs crossing each other and the table's end).
    #[test]
    fn lookups_match_a_scan_of_the_list() {
        let uids: Vec<String> = (0..3000)
            .map(|i| format!("uid-{}", if i % 10 == 9 { i - 1 } else { i }))
            .collect();
        fn four(uid: &str) -> u64 {
            (uid.len() as u64 % 4) << 62
        }
        for hash in [fx_hash as fn(&str) -> u64, four] {
            let t = UidPositions::new(uids.iter().map(String::as_str).zip(0..), hash);
            for probe in [
                "uid-0", "uid-8", "uid-9", "uid-2998", "uid-1234", "nope", "",
            ] {
                let want: Vec<usize> = (0..uids.len()).filter(|&i| uids[i] == probe).collect();
                let got: Vec<usize> = t
                    .find(probe, hash, |i| uids.get(i).map(String::as_str))
                    .collect();
                assert_eq!(got, want, "{probe}");
            }
        }
        let empty = UidPositions::new(std::iter::empty(), fx_hash);
        assert_eq!(empty.find("a", fx_hash, |_| Some("a")).count(), 0);
        let none = UidPositions::default();
        assert_eq!(none.find("a", fx_hash, |_| Some("a")).count(), 0);
    }
}
