//! PodTopologySpread's score (`scoring.go`) over the feasible nodes of one prediction.
//!
//! A node's raw score is, per constraint, the matching pods it counts (its own for
//! `kubernetes.io/hostname`, its domain's for another key) times `ln(domains in play + 2)`, plus
//! `maxSkew − 1`; rounded, then normalised over the feasible nodes. With at most one
//! key other than the hostname — the system defaults (hostname and zone), and nearly every
//! constraint users write — a node without matching pods of its own scores what every such node
//! of its domain scores. Such constraints are scored sparsely: once per domain (a *slot*), and
//! once per node holding matching pods (an *exception*), with the very arithmetic of the per-node
//! computation (the same function on a node of the slot). Other constraint sets are scored node
//! by node.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::plugin_scores::{Scores, SpreadTable};
use super::score;
use super::terms::{DomainIndex, Domains, HOSTNAME};
use crate::snapshot::Snapshot;

/// One constraint being scored.
pub struct Constraint<'a> {
    /// `topologyKey`.
    pub key: &'a str,
    /// `maxSkew`.
    pub max_skew: i64,
    /// Per node, the pods the constraint counts.
    pub per_node: &'a [u32],
    /// `nodeAffinityPolicy: Honor`: domain counts read only nodes the pod's node affinity admits.
    pub honor_affinity: bool,
}

/// What one spread score reads besides its constraints.
pub struct SpreadInput<'a> {
    /// The snapshot.
    pub snapshot: &'a Snapshot,
    /// Nodes lacking any constraint key are ignored (score 0, not normalised with the others):
    /// true for a pod's own constraints, false for the system defaults.
    pub require_all: bool,
    /// The feasible nodes, in node order.
    pub feasible: &'a [usize],
    /// Per node, whether the pod's nodeSelector and required node affinity admit it.
    pub affinity_ok: &'a [bool],
}

/// Nodes numbered by slot for one set of constraint keys: `0..domains` is the domain of the one
/// non-hostname key, `domains` is "no such label", `domains + 1` is "ignored" (lacks a key while
/// every key is required).
pub struct SlotMap {
    /// Per node, its slot.
    pub slots: Arc<[u32]>,
    /// How many domains the non-hostname key has (0 without one).
    pub domains: usize,
}

impl SlotMap {
    /// The "ignored" slot.
    fn ignored(&self) -> usize {
        self.domains + 1
    }
}

/// Slot maps built this cycle, by (non-hostname key, a hostname constraint, require_all).
#[derive(Default)]
pub struct SlotMaps(FxHashMap<(Option<String>, bool, bool), SlotMap>);

impl SlotMaps {
    fn get(
        &mut self,
        snapshot: &Snapshot,
        index: &mut DomainIndex,
        other: Option<&str>,
        hostname: bool,
        require_all: bool,
    ) -> &SlotMap {
        let key = (other.map(str::to_string), hostname, require_all);
        self.0.entry(key).or_insert_with(|| {
            let n_nodes = snapshot.nodes.len();
            if let Some(k) = other {
                index.get(snapshot, k);
            }
            if hostname {
                index.get(snapshot, HOSTNAME);
            }
            let other = other.and_then(|k| index.built(k));
            let host = if hostname && require_all {
                index.built(HOSTNAME)
            } else {
                None
            };
            let domains = other.map_or(0, |d| d.count);
            let slots = (0..n_nodes)
                .map(|n| {
                    let domain = other.map(|d| d.of[n]);
                    let lacks =
                        matches!(domain, Some(None)) || host.is_some_and(|h| h.of[n].is_none());
                    let slot = if require_all && lacks {
                        domains + 1
                    } else {
                        domain.flatten().map_or(domains, |d| d as usize)
                    };
                    slot as u32
                })
                .collect();
            SlotMap { slots, domains }
        })
    }
}

/// What a constraint counts for a node.
enum Count<'a> {
    /// Hostname: the node's own matching pods.
    Node(&'a [u32]),
    /// Another key: the matching pods of the node's domain.
    Domain(&'a Domains, Vec<i64>),
}

/// A constraint ready to score: its weight `ln(size + 2)`, its skew part, its count.
struct Prepared<'a> {
    weight: f64,
    skew_part: f64,
    count: Count<'a>,
}

/// Node `n`'s raw score: the constraints added in order (`score::spread_score_for_count` with
/// its weight computed once per constraint: the same arithmetic, in the same order).
#[inline]
fn raw_of(prepared: &[Prepared<'_>], n: usize) -> f64 {
    let mut raw = 0f64;
    for p in prepared {
        match &p.count {
            Count::Node(per_node) => {
                let c = i64::from(per_node.get(n).copied().unwrap_or(0));
                raw += c as f64 * p.weight + p.skew_part;
            }
            Count::Domain(domains, counts) => {
                if let Some(Some(d)) = domains.of.get(n) {
                    raw += counts[*d as usize] as f64 * p.weight + p.skew_part;
                }
            }
        }
    }
    raw
}

/// Prepares the constraints, given how many feasible, not ignored nodes there are, how many
/// domains of each key they cover (`domains_in_play`), which nodes the pod's node affinity admits
/// and which have every key (`has_all`, always true unless every key is required): a domain
/// counts the pods on those.
fn prepare<'a>(
    constraints: &'a [Constraint<'a>],
    nonzero: &[Vec<usize>],
    index: &'a DomainIndex,
    host_size: usize,
    domains_in_play: impl Fn(&str) -> usize,
    affinity_ok: impl Fn(usize) -> bool,
    has_all: impl Fn(usize) -> bool,
) -> Vec<Prepared<'a>> {
    constraints
        .iter()
        .zip(nonzero)
        .filter_map(|(c, nonzero)| {
            let domains = index.built(c.key)?;
            let size = if c.key == HOSTNAME {
                host_size
            } else {
                domains_in_play(c.key)
            };
            let weight = ((size + 2) as f64).ln();
            // kube-scheduler adds maxSkew − 1 unweighted (`scoreForCount`).
            let skew_part = (c.max_skew - 1) as f64;
            let count = if c.key == HOSTNAME {
                Count::Node(c.per_node)
            } else {
                // The domains' counts, from the nodes counting any pod.
                let mut counts = vec![0i64; domains.count];
                for &n in nonzero {
                    if let Some(Some(d)) = domains.of.get(n)
                        && (!c.honor_affinity || affinity_ok(n))
                        && has_all(n)
                        && let Some(at) = counts.get_mut(*d as usize)
                    {
                        *at += i64::from(c.per_node[n]);
                    }
                }
                Count::Domain(domains, counts)
            };
            Some(Prepared {
                weight,
                skew_part,
                count,
            })
        })
        .collect()
}

/// The spread scores of the feasible nodes (`constraints` not empty); `vector` gives an empty
/// vector for per-node scores.
pub fn score(
    input: &SpreadInput<'_>,
    constraints: &[Constraint<'_>],
    index: &mut DomainIndex,
    maps: &mut SlotMaps,
    vector: impl FnOnce() -> Vec<i64>,
) -> Scores {
    for c in constraints {
        index.get(input.snapshot, c.key);
    }
    let mut others: Vec<&str> = constraints
        .iter()
        .map(|c| c.key)
        .filter(|&k| k != HOSTNAME)
        .collect();
    others.sort_unstable();
    others.dedup();
    // Per constraint, the nodes counting any pod (the constraints of the system defaults share
    // their counts: read once).
    let mut nonzero: Vec<Vec<usize>> = Vec::with_capacity(constraints.len());
    for (i, c) in constraints.iter().enumerate() {
        let shared = constraints[..i]
            .iter()
            .position(|o| std::ptr::eq(o.per_node, c.per_node));
        nonzero.push(match shared {
            Some(j) => nonzero[j].clone(),
            None => (c.per_node.iter().enumerate())
                .filter(|(_, c)| **c > 0)
                .map(|(n, _)| n)
                .collect(),
        });
    }
    if others.len() > 1 {
        return Scores::PerNode(dense(input, constraints, &nonzero, index, vector()));
    }
    let hostname = constraints.iter().any(|c| c.key == HOSTNAME);
    let map = maps.get(
        input.snapshot,
        index,
        others.first().copied(),
        hostname,
        input.require_all,
    );
    Scores::Spread(sparse(input, constraints, &nonzero, index, map))
}

/// The sparse score: one per slot, one per node holding pods a hostname constraint counts.
fn sparse(
    input: &SpreadInput<'_>,
    constraints: &[Constraint<'_>],
    nonzero: &[Vec<usize>],
    index: &DomainIndex,
    map: &SlotMap,
) -> SpreadTable {
    let SpreadInput {
        require_all,
        feasible,
        affinity_ok,
        ..
    } = *input;
    let slots = &map.slots[..];
    let ignored = map.ignored();
    let slot_of = |n: usize| slots.get(n).map_or(ignored, |&s| s as usize);
    let n_slots = map.domains + 2;
    let (in_slot, mut first) = slot_occupancy(feasible, n_slots, slot_of);
    let mut exceptions = hostname_exceptions(constraints, nonzero, feasible);
    skip_exceptions(&mut first, &exceptions, feasible, slot_of);
    let host_size = feasible.len() - in_slot[map.ignored()];
    let in_play = in_slot[..map.domains].iter().filter(|&&c| c > 0).count();
    let has_all = |n: usize| !require_all || slot_of(n) != ignored;
    let prepared = prepare(
        constraints,
        nonzero,
        index,
        host_size,
        |_| in_play,
        |n| affinity_ok.get(n).copied().unwrap_or(false),
        has_all,
    );
    // Rounded raw scores: per slot with a representative, per exception; then the extremes.
    let mut by_slot: Vec<Option<i64>> = (0..n_slots)
        .map(|s| {
            (s != ignored && first[s] != usize::MAX)
                .then(|| score::round_score(raw_of(&prepared, feasible[first[s]])))
        })
        .collect();
    let mut raw_exceptions: Vec<Option<i64>> = exceptions
        .iter()
        .map(|&(i, _)| {
            let n = feasible[i];
            (slot_of(n) != ignored).then(|| score::round_score(raw_of(&prepared, n)))
        })
        .collect();
    let counted = by_slot.iter().chain(&raw_exceptions).flatten().copied();
    let max = counted.clone().max().unwrap_or(0);
    let min = counted.min().unwrap_or(0);
    for (e, raw) in exceptions.iter_mut().zip(raw_exceptions.drain(..)) {
        e.1 = score::spread_normalized(raw, max, min);
    }
    SpreadTable {
        slots: map.slots.clone(),
        by_slot: by_slot
            .drain(..)
            .map(|r| score::spread_normalized(r, max, min))
            .collect(),
        exceptions,
    }
}

/// Per slot, how many feasible nodes it has and the index of the first of them (`usize::MAX`:
/// none).
fn slot_occupancy(
    feasible: &[usize],
    n_slots: usize,
    slot_of: impl Fn(usize) -> usize,
) -> (Vec<usize>, Vec<usize>) {
    let mut in_slot = vec![0usize; n_slots];
    let mut first = vec![usize::MAX; n_slots];
    for (i, &n) in feasible.iter().enumerate() {
        let s = slot_of(n);
        if let Some(c) = in_slot.get_mut(s) {
            *c += 1;
            if *c == 1 {
                first[s] = i;
            }
        }
    }
    (in_slot, first)
}

/// The feasible nodes whose own counts make them differ from their slot (exceptions): those a
/// hostname constraint counts pods on, in order, by their index among the feasible nodes, each
/// with a score of 0 to fill in.
fn hostname_exceptions(
    constraints: &[Constraint<'_>],
    nonzero: &[Vec<usize>],
    feasible: &[usize],
) -> Vec<(usize, i64)> {
    let mut exceptions: Vec<(usize, i64)> = constraints
        .iter()
        .zip(nonzero)
        .filter(|(c, _)| c.key == HOSTNAME)
        .flat_map(|(_, nonzero)| nonzero.iter())
        .filter_map(|n| feasible.binary_search(n).ok())
        .map(|i| (i, 0))
        .collect();
    exceptions.sort_unstable();
    exceptions.dedup();
    exceptions
}

/// Makes each slot's representative in `first` a feasible node of it that is no exception.
fn skip_exceptions(
    first: &mut [usize],
    exceptions: &[(usize, i64)],
    feasible: &[usize],
    slot_of: impl Fn(usize) -> usize,
) {
    let is_exception = |i: usize| exceptions.binary_search_by_key(&i, |e| e.0).is_ok();
    for (s, at) in first.iter_mut().enumerate() {
        if *at != usize::MAX && is_exception(*at) {
            *at = (*at + 1..feasible.len())
                .find(|&i| slot_of(feasible[i]) == s && !is_exception(i))
                .unwrap_or(usize::MAX);
        }
    }
}

/// The per-node score, for constraint sets with several non-hostname keys.
fn dense(
    input: &SpreadInput<'_>,
    constraints: &[Constraint<'_>],
    nonzero: &[Vec<usize>],
    index: &DomainIndex,
    mut out: Vec<i64>,
) -> Vec<i64> {
    let SpreadInput {
        require_all,
        feasible,
        affinity_ok,
        ..
    } = *input;
    let domains: Vec<&Domains> = constraints
        .iter()
        .filter_map(|c| index.built(c.key))
        .collect();
    let has_all = |n: usize| domains.iter().all(|d| d.of[n].is_some());
    let ignored: Vec<bool> = if require_all {
        feasible.iter().map(|&n| !has_all(n)).collect()
    } else {
        Vec::new()
    };
    let is_ignored = |i: usize| ignored.get(i).copied().unwrap_or(false);
    let host_size = feasible.len() - ignored.iter().filter(|i| **i).count();
    // Domains of the feasible, not ignored nodes.
    let in_play = |key: &str| {
        let Some(domains) = index.built(key) else {
            return 0;
        };
        let mut seen = vec![false; domains.count];
        for (i, &n) in feasible.iter().enumerate() {
            if let Some(d) = domains.of[n]
                && !is_ignored(i)
            {
                seen[d as usize] = true;
            }
        }
        seen.iter().filter(|b| **b).count()
    };
    let prepared = prepare(
        constraints,
        nonzero,
        index,
        host_size,
        in_play,
        |n| affinity_ok.get(n).copied().unwrap_or(false),
        |n| !require_all || has_all(n),
    );
    let (mut max, mut min): (Option<i64>, Option<i64>) = (None, None);
    let start = out.len();
    for (i, &n) in feasible.iter().enumerate() {
        let r = score::round_score(raw_of(&prepared, n));
        out.push(r);
        if !is_ignored(i) {
            max = Some(max.map_or(r, |m| m.max(r)));
            min = Some(min.map_or(r, |m| m.min(r)));
        }
    }
    let (max, min) = (max.unwrap_or(0), min.unwrap_or(0));
    for (i, s) in out[start..].iter_mut().enumerate() {
        *s = score::spread_normalized((!is_ignored(i)).then_some(*s), max, min);
    }
    out
}

#[cfg(test)]
#[path = "spread_score_tests.rs"]
mod tests;
