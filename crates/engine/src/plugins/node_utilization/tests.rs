use super::*;
use crate::testing::{node, pod, snapshot};

#[test]
fn usage_percentages_caps_and_deviation() {
    let snap = snapshot(
        vec![
            node("n1")
                .allocatable("4", "16Gi", "9")
                .resource("gpu", "4")
                .build(),
            node("n2").allocatable("2", "8Gi", "10").build(),
        ],
        vec![
            pod("a", "p1", "n1")
                .requests("1", "4Gi")
                .request("gpu", "1")
                .build(),
            pod("a", "p2", "n1").requests("1", "0").build(),
            pod("a", "done", "n1")
                .requests("1", "0")
                .phase("Succeeded")
                .build(),
            pod("a", "p3", "n2").requests("500m", "2Gi").build(),
        ],
    );
    let t: Thresholds = [("gpu".to_string(), 10.0), ("cpu".to_string(), 20.0)].into();
    let u = Usage::compute(
        &snap,
        &[0, 1],
        tracked_resources(t.keys().map(String::as_str)),
    );
    let (cpu, pods, gpu) = (
        u.column("cpu").unwrap(),
        u.column("pods").unwrap(),
        u.column("gpu").unwrap(),
    );
    assert_eq!(u.used(0, cpu), 2000);
    assert_eq!(u.used(0, pods), 2);
    assert_eq!(u.percent(0, cpu), Some(50.0));
    assert_eq!(u.percent(0, gpu), Some(25.0));
    assert_eq!(u.percent(1, gpu), None);
    assert_eq!(u.percent(1, cpu), Some(25.0));
    // 50 % of 9 pods truncates to 4; no level: full allocatable; missing resource: 0.
    assert_eq!(u.capped(0, pods, Some(50.0)), 4);
    assert_eq!(u.capped(0, pods, None), 9);
    assert_eq!(u.capped(1, gpu, Some(50.0)), 0);
    // Deviation: gpu is averaged over n1 only; cpu mean 37.5.
    let lo: Thresholds = [("gpu".to_string(), 30.0), ("cpu".to_string(), 10.0)].into();
    let hi: Thresholds = [("gpu".to_string(), 90.0), ("cpu".to_string(), 10.0)].into();
    let (l, h) = u.deviation_levels(&lo, &hi);
    assert_eq!(l[gpu], Some(0.0));
    assert_eq!(h[gpu], Some(100.0));
    assert_eq!(l[cpu], Some(27.5));
    assert_eq!(h[cpu], Some(47.5));
    assert_eq!(l[pods], None);
    assert!(u.is_above(0, &h) && !u.is_below(0, &l));
    assert!(u.is_below(1, &l) && !u.is_above(1, &h));
}

#[test]
fn destination_taints_follow_upstream_quirks() {
    let snap = snapshot(
        vec![
            node("t1").taint("a", None, "NoSchedule").build(),
            node("t2")
                .taint("a", None, "NoSchedule")
                .taint("b", None, "PreferNoSchedule")
                .build(),
        ],
        vec![
            pod("x", "none", "").build(),
            pod("x", "tol-a", "")
                .toleration("a", "Exists", None, None)
                .build(),
            pod("x", "tol-all", "")
                .toleration("", "Exists", None, None)
                .build(),
        ],
    );
    let dt = DestinationTaints::new(&snap, [1].into_iter());
    // t2 has two taints (PreferNoSchedule counts too): one toleration is not enough.
    assert!(!dt.tolerated_by(snap.pod(1)));
    // A single wildcard toleration is fewer than two taints: upstream's count check rejects it.
    assert!(!dt.tolerated_by(snap.pod(2)));
    let dt = DestinationTaints::new(&snap, [0, 1].into_iter());
    assert!(!dt.tolerated_by(snap.pod(0)));
    assert!(dt.tolerated_by(snap.pod(1)));
}
