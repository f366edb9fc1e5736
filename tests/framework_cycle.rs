//! The cycle and evictor: order of extension points, limits across profiles, effects visible to
//! later plugins, and the two-Ready-nodes rule.

mod plugins_common;

use std::sync::{Arc, Mutex};

use kube_descheduler::evictor::{EvictOutcome, EvictionBackend, EvictionRequest};
use kube_descheduler::framework::cycle::{CycleConfig, CycleReport, Profile, run_cycle};
use kube_descheduler::framework::{BalancePlugin, DeschedulePlugin, Handle};
use kube_descheduler::plugins::default_evictor::DefaultEvictor;
use kube_descheduler::snapshot::{NodeId, PodId, Snapshot};
use kube_descheduler::testing::*;

/// One cycle at [`now`] that plans its evictions (nothing is sent anywhere).
fn plan_cycle(profiles: &[Profile], cfg: &CycleConfig, snap: &mut Snapshot) -> CycleReport {
    let backend = Box::new(kube_descheduler::evictor::planner::PlanBackend::new());
    run_cycle(profiles, cfg, snap, now(), backend).0
}

/// Evicts every pod that passes the filter, node by node, and logs what it saw.
struct EvictAll {
    name: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
}

impl EvictAll {
    fn run(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        plugins_common::try_each(h, nodes, |h, p| {
            self.seen
                .lock()
                .unwrap()
                .push(format!("{}:{}", self.name, h.snapshot.pod(p).name));
        });
    }
}
impl DeschedulePlugin for EvictAll {
    fn name(&self) -> &'static str {
        self.name
    }
    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        self.run(h, nodes)
    }
}
impl BalancePlugin for EvictAll {
    fn name(&self) -> &'static str {
        self.name
    }
    fn balance(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        self.run(h, nodes)
    }
}

fn cluster() -> Snapshot {
    snapshot(
        vec![node("n1").build(), node("n2").build()],
        vec![
            pod("a", "p1", "n1").build(),
            pod("a", "p2", "n1").build(),
            pod("b", "p3", "n2").build(),
            pod("b", "p4", "n2").build(),
        ],
    )
}

fn plugin(name: &'static str, seen: &Arc<Mutex<Vec<String>>>) -> Box<EvictAll> {
    Box::new(EvictAll {
        name,
        seen: seen.clone(),
    })
}

fn profile(
    name: &str,
    d: Vec<Box<dyn DeschedulePlugin>>,
    b: Vec<Box<dyn BalancePlugin>>,
) -> Profile {
    Profile {
        name: name.into(),
        evictor: Box::new(DefaultEvictor::default()),
        deschedule: d,
        balance: b,
    }
}

#[test]
fn deschedule_of_all_profiles_runs_before_balance_and_sees_earlier_evictions() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let profiles = vec![
        profile("p1", vec![], vec![plugin("B1", &seen)]),
        profile("p2", vec![plugin("D2", &seen)], vec![]),
    ];
    let mut snap = cluster();
    let report = plan_cycle(&profiles, &CycleConfig::default(), &mut snap);
    let seen = seen.lock().unwrap().clone();
    // D2 (deschedule of profile p2) runs first and evicts everything; B1 then sees no pods at all.
    assert_eq!(seen, vec!["D2:p1", "D2:p2", "D2:p3", "D2:p4"]);
    assert_eq!(
        evicted_names(&report.records),
        vec!["a/p1", "a/p2", "b/p3", "b/p4"]
    );
    assert!(
        report
            .records
            .iter()
            .all(|r| &*r.profile == "p2" && &*r.plugin == "D2")
    );
    assert_eq!(report.timings.len(), 2);
}

#[test]
fn limits_are_shared_across_profiles_and_checked_total_node_namespace() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let run = |cfg: CycleConfig| {
        let profiles = vec![
            profile("x", vec![plugin("A", &seen)], vec![]),
            profile("y", vec![plugin("B", &seen)], vec![]),
        ];
        let mut snap = cluster();
        let report = plan_cycle(&profiles, &cfg, &mut snap);
        evicted_names(&report.records)
    };
    assert_eq!(run(per_node_limit(1)), vec!["a/p1", "b/p3"]);
    assert_eq!(run(total_limit(3)), vec!["a/p1", "a/p2", "b/p3"]);
    assert_eq!(run(per_namespace_limit(1)), vec!["a/p1", "b/p3"]);
    assert!(run(total_limit(0)).is_empty(), "0 means evict nothing");
    assert!(run(per_node_limit(0)).is_empty());
}

#[test]
fn fewer_than_two_ready_nodes_skips_the_cycle() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut snap = snapshot(
        vec![node("n1").build(), node("n2").not_ready().build()],
        vec![pod("a", "p1", "n1").build()],
    );
    let report = plan_cycle(
        &[profile("x", vec![plugin("A", &seen)], vec![])],
        &CycleConfig::default(),
        &mut snap,
    );
    assert!(report.records.is_empty());
    assert!(
        report
            .skipped
            .as_deref()
            .unwrap_or("")
            .contains("1 Ready node")
    );
    assert!(seen.lock().unwrap().is_empty(), "no plugin runs");
    // A node selector can also leave fewer than two nodes.
    let mut snap = cluster();
    let cfg = CycleConfig {
        node_selector: Some(
            kube_descheduler::scheduling::selector::parse("kubernetes.io/hostname=n1").unwrap(),
        ),
        ..Default::default()
    };
    let report = plan_cycle(
        &[profile("x", vec![plugin("A", &seen)], vec![])],
        &cfg,
        &mut snap,
    );
    assert!(report.skipped.is_some());
}

/// A backend that denies pods named in `deny` and deflects those in `deflect`.
struct Scripted {
    deny: Vec<&'static str>,
    deflect: Vec<&'static str>,
}
impl EvictionBackend for Scripted {
    fn evict(&mut self, s: &Snapshot, pod: PodId, _req: &EvictionRequest<'_>) -> EvictOutcome {
        let name = s.pod(pod).name.as_str();
        if self.deny.contains(&name) {
            EvictOutcome::Denied {
                reason: "pdb".into(),
            }
        } else if self.deflect.contains(&name) {
            EvictOutcome::Deflected {
                message: "restart".into(),
            }
        } else {
            EvictOutcome::Evicted
        }
    }
}

#[test]
fn denied_evictions_do_not_count_and_deflected_ones_do() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut snap = cluster();
    let cfg = per_node_limit(1);
    let backend = Scripted {
        deny: vec!["p1"],
        deflect: vec!["p3"],
    };
    let (report, _) = run_cycle(
        &[profile("x", vec![plugin("A", &seen)], vec![])],
        &cfg,
        &mut snap,
        now(),
        Box::new(backend),
    );
    let outcomes: Vec<(String, &str)> = report
        .records
        .iter()
        .map(|r| (r.name.clone(), r.outcome.as_str()))
        .collect();
    // p1 denied (does not count), p2 evicted (node limit reached), p3 deflected (counts), p4 not tried.
    assert_eq!(
        outcomes,
        vec![
            ("p1".into(), "denied"),
            ("p2".into(), "evicted"),
            ("p3".into(), "deflected")
        ]
    );
    assert!(!snap.is_evicted(0) && snap.is_evicted(1) && snap.is_evicted(2) && !snap.is_evicted(3));
}

#[test]
fn requested_pods_count_against_the_limits_once_and_may_be_chosen_again() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let run = |requested: Vec<PodId>, total: u32| {
        let mut snap = cluster();
        let cfg = CycleConfig {
            requested,
            ..total_limit(total)
        };
        let report = plan_cycle(
            &[profile("x", vec![plugin("A", &seen)], vec![])],
            &cfg,
            &mut snap,
        );
        (evicted_names(&report.records), report.limit_hits.len())
    };
    // p1 and p3 hold two of the three: p1 is chosen again without counting, p2 takes the last
    // place, p3 is chosen again, p4 is refused.
    let (evicted, refused) = run(vec![0, 2], 3);
    assert_eq!(evicted, vec!["a/p1", "a/p2", "b/p3"]);
    assert_eq!(refused, 1);
    // With the limit already full, the requested pods are chosen again and no other pod.
    let (evicted, refused) = run(vec![0, 1], 2);
    assert_eq!(evicted, vec!["a/p1", "a/p2"]);
    assert_eq!(refused, 1);
}
