//! Each Score plugin's arithmetic against kube-scheduler's documented examples, and its rounding.

use super::*;

fn r(requested: i64, allocatable: i64, weight: i64) -> ResourceUse {
    ResourceUse {
        requested,
        allocatable,
        weight,
    }
}

#[test]
fn least_and_most_allocated_match_kube_scheduler_examples() {
    // least_allocated_test.go / most_allocated_test.go, "nothing scheduled, resources requested,
    // differently sized nodes": the pod requests 3000m / 5000; node1 4000m / 10000, node2
    // 6000m / 10000.
    let node1 = [r(3000, 4000, 1), r(5000, 10000, 1)];
    let node2 = [r(3000, 6000, 1), r(5000, 10000, 1)];
    let cases: [(&ScoringStrategy, &[ResourceUse], i64); 4] = [
        (&ScoringStrategy::LeastAllocated, &node1, 37), // (25 + 50) / 2
        (&ScoringStrategy::LeastAllocated, &node2, 50),
        (&ScoringStrategy::MostAllocated, &node1, 62), // (75 + 50) / 2
        (&ScoringStrategy::MostAllocated, &node2, 50),
    ];
    for (s, res, want) in cases {
        assert_eq!(fit_score(s, res), want, "{s:?} {res:?}");
    }
    // Over capacity: LeastAllocated scores 0, MostAllocated caps at 100.
    assert_eq!(least_requested(5000, 4000), 0);
    assert_eq!(most_requested(5000, 4000), 100);
    // A resource the node lacks is skipped, not scored 0.
    assert_eq!(
        fit_score(
            &ScoringStrategy::LeastAllocated,
            &[r(1000, 4000, 1), r(1, 0, 1)]
        ),
        75
    );
}

#[test]
fn requested_to_capacity_ratio_follows_the_documented_bin_packing_example() {
    // "Resource Bin Packing" (kubernetes.io docs): shape {0,0},{100,10}; weights foo 5, memory 1,
    // cpu 3; node 1: foo 3 of 4, memory 512Mi of 1Gi, cpu 3 of 8 → utilizations 75, 50, 37,
    // scored on kube-scheduler's 0–100 scale: round((75·5 + 50·1 + 37·3) / 9) = 60.
    let shape = ScoringStrategy::RequestedToCapacityRatio {
        shape: vec![(0, 0), (100, 10)],
    };
    let gi = 1024 * 1024 * 1024;
    let node1 = [r(3, 4, 5), r(gi / 2, gi, 1), r(3000, 8000, 3)];
    assert_eq!(fit_score(&shape, &node1), 60);
    // Node 2: foo 4 of 8, memory 768Mi of 1Gi, cpu 4 of 8 → 50, 75, 50 → round(475 / 9) = 53.
    let node2 = [r(4, 8, 5), r(gi * 3 / 4, gi, 1), r(4000, 8000, 3)];
    assert_eq!(fit_score(&shape, &node2), 53);
    // A descending shape (bin packing reversed) and a point between two shape points.
    let down = ScoringStrategy::RequestedToCapacityRatio {
        shape: vec![(0, 10), (50, 5), (100, 0)],
    };
    assert_eq!(fit_score(&down, &[r(25, 100, 1)]), 75);
}

#[test]
fn balanced_allocation_matches_kube_scheduler_examples() {
    // balanced_allocation_test.go: 3000m / 5000 on node1 (4000m / 10000): fractions 0.75 and
    // 0.5, deviation 0.125 → 87; on node2 (6000m / 10000): 0.5 and 0.5 → 100.
    assert_eq!(balanced_score(&[r(3000, 4000, 1), r(5000, 10000, 1)]), 87);
    assert_eq!(balanced_score(&[r(3000, 6000, 1), r(5000, 10000, 1)]), 100);
    // Fractions are capped at 1.
    assert_eq!(balanced_score(&[r(8000, 4000, 1), r(5000, 10000, 1)]), 75);
}

#[test]
fn balanced_allocation_scores_the_change_in_balance_from_kube_scheduler_1_36() {
    // Measured on kube-scheduler 1.37.2 (-v=10): a 600m / 256Mi pod onto a 4-cpu, 8Gi node
    // holding 300m / 1664Mi — 93 without the pod, 99 with it — scores 50 + (50 + 99 − 93) / 2.
    let gi = 1024 * 1024 * 1024;
    let mi = 1024 * 1024;
    let without = balanced_score(&[r(300, 4000, 1), r(1664 * mi, 8 * gi, 1)]);
    let with = balanced_score(&[r(900, 4000, 1), r(1920 * mi, 8 * gi, 1)]);
    assert_eq!((without, with), (93, 99));
    assert_eq!(balanced_change(with, without), 78);
    // No change: 75; from fully imbalanced to balanced: 100; the reverse: 50.
    assert_eq!(balanced_change(90, 90), 75);
    assert_eq!(balanced_change(100, 50), 100);
    assert_eq!(balanced_change(50, 100), 50);
    // Only from 1.36 on.
    let profiles = SchedulerProfiles::default();
    assert!(!profiles.clone().for_version(1, 35).0[0].balanced_change);
    assert!(profiles.for_version(1, 37).0[0].balanced_change);
}

#[test]
fn normalisations_match_kube_scheduler() {
    // DefaultNormalizeScore (TaintToleration reverses: fewer intolerable taints is better).
    let mut s = vec![0, 1, 2];
    default_normalize(&mut s, true);
    assert_eq!(s, vec![100, 50, 0]);
    let mut s = vec![0, 0];
    default_normalize(&mut s, true);
    assert_eq!(s, vec![100, 100]);
    let mut s = vec![0, 5, 10];
    default_normalize(&mut s, false);
    assert_eq!(s, vec![0, 50, 100]);
    // PodTopologySpread: 100·(max + min − s) / max; ignored nodes 0.
    assert_eq!(
        spread_normalize(&[Some(4), Some(6), None]),
        vec![100, 66, 0]
    );
    assert_eq!(spread_normalize(&[Some(0), Some(0)]), vec![100, 100]);
    // InterPodAffinity: min–max.
    let mut s = vec![-10, 0, 10];
    min_max_normalize(&mut s);
    assert_eq!(s, vec![0, 50, 100]);
    // scoreForCount: count · ln(domains + 2) + maxSkew − 1 = ln 8 + 2.
    assert_eq!(spread_score_for_count(1, 3, 6).round() as i64, 4);
    assert_eq!(spread_score_for_count(0, 5, 3).round() as i64, 4);
}

#[test]
fn round_score_equals_f64_round() {
    use super::score::round_score;
    let edge = [
        0.0,
        0.49999999999999994,
        0.5,
        1.5,
        2.5,
        2.4999999999999996,
        4503599627370495.5,
        4503599627370497.0,
        -0.5,
        -2.5,
        f64::NAN,
        f64::INFINITY,
    ];
    for x in edge {
        assert_eq!(round_score(x), x.round() as i64, "{x}");
    }
    // Spread scores: counts times ln(domains + 2) plus skew parts.
    for domains in 0..300usize {
        let w = ((domains + 2) as f64).ln();
        for count in 0..200i64 {
            for skew in 1..6i64 {
                let x = count as f64 * w + (skew - 1) as f64 * w;
                assert_eq!(round_score(x), x.round() as i64, "{x}");
            }
        }
    }
}
