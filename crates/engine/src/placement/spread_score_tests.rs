//! The sparse spread score against kube-scheduler's formula node by node (`scoreForCount` per
//! constraint, rounded, `NormalizeScore`), and against the per-node computation, on crafted
//! counts: holders of matching pods first in their zone, zones whose feasible nodes all hold
//! some, nodes without a zone or a hostname, affinity-excluded nodes, and infeasible holders.

use super::*;
use crate::placement::score::{spread_normalize, spread_score_for_count};
use crate::placement::terms::ZONE;
use crate::testing::{node, snapshot};

/// Twelve nodes: zone a (n0–n3), b (n4–n7), c (n8–n10), n11 without a zone; racks r0/r1 by
/// parity; n7 without a hostname label.
fn cluster() -> Snapshot {
    let nodes = (0..12)
        .map(|i| {
            let mut b = node(&format!("n{i}")).label("rack", if i % 2 == 0 { "r0" } else { "r1" });
            if i < 11 {
                b = b.label(ZONE, ["a", "b", "c"][(i / 4).min(2)]);
            }
            let mut n = b.build();
            if i == 7
                && let Some(labels) = n.metadata.labels.as_mut()
            {
                labels.remove(HOSTNAME);
            }
            n
        })
        .collect();
    snapshot(nodes, Vec::new())
}

/// kube-scheduler's score of every feasible node, computed node by node from the definitions.
fn reference(
    s: &Snapshot,
    constraints: &[Constraint<'_>],
    require_all: bool,
    feasible: &[usize],
    affinity_ok: &[bool],
) -> Vec<i64> {
    let label = |n: usize, key: &str| s.node(n as u32).labels.get(key).cloned();
    let has_all = |n: usize| constraints.iter().all(|c| label(n, c.key).is_some());
    let ignored = |n: usize| require_all && !has_all(n);
    let counted: Vec<usize> = feasible.iter().copied().filter(|&n| !ignored(n)).collect();
    let raw: Vec<Option<i64>> = feasible
        .iter()
        .map(|&n| {
            if ignored(n) {
                return None;
            }
            let mut raw = 0f64;
            for c in constraints {
                let (count, size) = if c.key == HOSTNAME {
                    (i64::from(c.per_node[n]), counted.len())
                } else {
                    let Some(value) = label(n, c.key) else {
                        continue;
                    };
                    let count = (0..s.nodes.len())
                        .filter(|&m| label(m, c.key).as_ref() == Some(&value))
                        .filter(|&m| !c.honor_affinity || affinity_ok[m])
                        .filter(|&m| !require_all || has_all(m))
                        .map(|m| i64::from(c.per_node[m]))
                        .sum();
                    let mut domains: Vec<String> =
                        counted.iter().filter_map(|&m| label(m, c.key)).collect();
                    domains.sort();
                    domains.dedup();
                    (count, domains.len())
                };
                raw += spread_score_for_count(count, c.max_skew, size);
            }
            Some(raw.round() as i64)
        })
        .collect();
    spread_normalize(&raw)
}

/// Each scenario's scores through `score` (sparse or dense as it chooses) and through the
/// per-node computation, compared with the reference.
fn check(name: &str, constraints: &[Constraint<'_>], require_all: bool, feasible: &[usize]) {
    let s = cluster();
    let affinity_ok: Vec<bool> = (0..12).map(|n| n != 2 && n != 9).collect();
    let input = SpreadInput {
        snapshot: &s,
        require_all,
        feasible,
        affinity_ok: &affinity_ok,
    };
    let want = reference(&s, constraints, require_all, feasible, &affinity_ok);
    let mut index = DomainIndex::default();
    let got: Vec<i64> = match score(
        &input,
        constraints,
        &mut index,
        &mut SlotMaps::default(),
        Vec::new,
    ) {
        Scores::Spread(t) => (feasible.iter().enumerate())
            .map(|(i, &n)| t.at(i, n))
            .collect(),
        Scores::PerNode(v) => v,
        _ => panic!("{name}: a spread score is per slot or per node"),
    };
    assert_eq!(got, want, "{name}: score");
    let nonzero: Vec<Vec<usize>> = constraints
        .iter()
        .map(|c| (0..12).filter(|&n| c.per_node[n] > 0).collect())
        .collect();
    let dense = dense(&input, constraints, &nonzero, &index, Vec::new());
    assert_eq!(dense, want, "{name}: per node");
}

#[test]
fn sparse_spread_scores_equal_kube_schedulers_node_by_node() {
    // The owner's pods: n0 (first of zone a) ×2, n1, n5, n8–n10 (all of zone c), n11 (no zone).
    let owner: [u32; 12] = [2, 1, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1];
    let other: [u32; 12] = [0, 0, 3, 0, 1, 0, 0, 2, 0, 0, 0, 0];
    let all: Vec<usize> = (0..12).collect();
    let some: Vec<usize> = vec![0, 2, 3, 5, 6, 7, 8, 9, 11];
    let system = |per_node: &'static [u32]| {
        vec![
            Constraint {
                key: HOSTNAME,
                max_skew: 3,
                per_node,
                honor_affinity: true,
            },
            Constraint {
                key: ZONE,
                max_skew: 5,
                per_node,
                honor_affinity: true,
            },
        ]
    };
    let owner: &'static [u32] = Box::leak(Box::new(owner));
    let other: &'static [u32] = Box::leak(Box::new(other));
    for feasible in [&all, &some] {
        check("system defaults", &system(owner), false, feasible);
        check(
            "system defaults, another owner",
            &system(other),
            false,
            feasible,
        );
        check(
            "own zone constraint",
            &[Constraint {
                key: ZONE,
                max_skew: 1,
                per_node: owner,
                honor_affinity: true,
            }],
            true,
            feasible,
        );
        check(
            "own hostname and zone constraints, affinity ignored by one",
            &[
                Constraint {
                    key: HOSTNAME,
                    max_skew: 1,
                    per_node: other,
                    honor_affinity: false,
                },
                Constraint {
                    key: ZONE,
                    max_skew: 2,
                    per_node: owner,
                    honor_affinity: true,
                },
            ],
            true,
            feasible,
        );
        check(
            "two keys besides the hostname (per node)",
            &[
                Constraint {
                    key: ZONE,
                    max_skew: 1,
                    per_node: owner,
                    honor_affinity: true,
                },
                Constraint {
                    key: "rack",
                    max_skew: 1,
                    per_node: other,
                    honor_affinity: false,
                },
            ],
            true,
            feasible,
        );
    }
    // Zone c's feasible nodes all hold owner pods; zone a's first feasible node holds some.
    check(
        "only holders in a zone",
        &system(owner),
        false,
        &[0, 1, 3, 8, 9, 10],
    );
}
