//! The ping-pong scenario: HighNodeUtilization empties nodes that LeastAllocated scoring refills,
//! MostAllocated does not; and the incremental state when an eviction is abandoned.

use super::*;

/// Six 4-CPU nodes; `big` (2.4 CPU) on n1–n4, `small` (200m) on n5 and n6 — the issue's cluster.
fn issue_cluster() -> crate::snapshot::Snapshot {
    let nodes = (1..=6).map(|i| node(&format!("n{i}")).build()).collect();
    let replica = |app: &str, i: u32, cpu: &str, memory: &str| {
        pod("default", &format!("{app}-{i}"), &format!("n{i}"))
            .owner("ReplicaSet", app)
            .label("app", app)
            .requests(cpu, memory)
            .build()
    };
    let big = (1..=4).map(|i| replica("big", i, "2400m", "1Gi"));
    let small = (5..=6).map(|i| replica("small", i, "200m", "128Mi"));
    snapshot(nodes, big.chain(small).collect())
}

fn pod_id(s: &crate::snapshot::Snapshot, name: &str) -> crate::snapshot::PodId {
    (0..s.pods.len() as u32)
        .find(|&p| s.pod(p).name == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

fn most_allocated() -> Arc<SchedulerProfiles> {
    Arc::new(SchedulerProfiles(vec![SchedulerProfile {
        strategy: ScoringStrategy::MostAllocated,
        ..Default::default()
    }]))
}

#[test]
fn least_allocated_sends_the_small_pod_back_where_it_was() {
    let s = issue_cluster();
    let mut sim = Simulator::new(&s, &Default::default(), Arc::default());
    let small = pod_id(&s, "small-5");
    let p = sim.evaluate(&s, small).expect("predicted");
    assert_eq!(names(&s, &p.ties), vec!["n5"]);
    let cur = p.current_score.clone().expect("n5 fits");
    let (other, runner) = p.runner_up.clone().expect("another node fits");
    // The best other node: n6 (less free room) or n1 (no `small` pod yet, spreading) — not n5.
    assert_ne!(s.node(other).name, "n5");
    assert!(cur.total > runner.total, "{cur:?} vs {runner:?}");
    // LeastAllocated on n5, which still holds the terminating small-5 (kube-scheduler counts it
    // until it is gone): 400m of 4 cpu → 90, 256Mi of memory → 98 (rounded down) → 94.
    assert_eq!(cur.plugin("NodeResourcesFit"), 94);
    let report = judge(&s, small, "HighNodeUtilization", Ok(p), &Default::default());
    let refusal = report.refusal.expect("refused");
    assert_eq!(refusal.code, RefusalCode::PlacementReturn);
    assert!(
        refusal
            .message
            .starts_with("would be scheduled back onto n5: score")
            && refusal.message.contains("LeastAllocated 94 vs")
            && refusal.message.contains("use MostAllocated"),
        "{}",
        refusal.message
    );
}

#[test]
fn most_allocated_packs_the_small_pods_onto_the_big_nodes_and_spreads_them() {
    let s = issue_cluster();
    let mut sim = Simulator::new(&s, &Default::default(), most_allocated());
    let first = pod_id(&s, "small-5");
    let p = sim.evaluate(&s, first).expect("predicted");
    assert_eq!(names(&s, &p.ties), vec!["n1", "n2", "n3", "n4"]);
    let report = judge(
        &s,
        first,
        "HighNodeUtilization",
        Ok(p.clone()),
        &Default::default(),
    );
    assert_eq!(report.refusal, None);
    assert_eq!(report.predicted_node.as_deref(), Some("n1"));
    sim.commit(&s, first, p.best);
    // The second small pod sees the first on n1: spreading (system default, hostname) moves it on.
    let second = pod_id(&s, "small-6");
    let p2 = sim.evaluate(&s, second).expect("predicted");
    assert_eq!(names(&s, &p2.ties), vec!["n2", "n3", "n4"]);
    // n6 is being emptied too: were it the target, Enforce would refuse.
    let emptying = [5u32].into_iter().collect();
    let mut on_n6 = p2.clone();
    on_n6.ties = vec![5];
    on_n6.best = Some(5);
    let r = judge(&s, first, "HighNodeUtilization", Ok(on_n6), &emptying);
    assert_eq!(
        r.refusal.map(|r| r.code),
        Some(RefusalCode::PlacementTargetEmptied)
    );
}

#[test]
fn abandoning_an_eviction_restores_the_node() {
    let s = issue_cluster();
    let mut sim = Simulator::new(&s, &Default::default(), most_allocated());
    let small = pod_id(&s, "small-5");
    let uid = s.pod(small).controller().expect("owned").uid.to_string();
    let before = sim.state.loads[4].clone();
    assert_eq!(sim.state.owner_counts(&s, &uid)[4], 1);
    let _ = sim.evaluate(&s, small);
    // Evicted, it terminates on n5: the load keeps it, the spreading counts drop it.
    assert_eq!(sim.state.loads[4].pods, before.pods);
    assert_eq!(sim.state.owner_counts(&s, &uid)[4], 0);
    sim.abandon(&s, small);
    assert_eq!(sim.state.loads[4].pods, before.pods);
    assert_eq!(sim.state.loads[4].requested, before.requested);
    assert_eq!(sim.state.owner_counts(&s, &uid)[4], 1);
}
