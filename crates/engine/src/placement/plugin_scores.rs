//! A Score plugin's result in one prediction: its name, its weight and its normalised scores of
//! the feasible nodes, filled per node only when they differ between nodes.

use std::sync::Arc;

use super::resources::ResourceView;

/// One Score plugin's result: its name, its weight and its normalised score per feasible node.
pub struct PluginScores {
    /// The plugin's name.
    pub name: &'static str,
    /// Its weight.
    pub weight: i64,
    /// Its normalised scores.
    pub scores: Scores,
}

/// A Score plugin's normalised scores of the feasible nodes.
pub enum Scores {
    /// Every feasible node scores this (no per-node vector is filled: a plugin with nothing to
    /// score, e.g. NodeAffinity for a pod without preferred terms).
    Uniform(i64),
    /// Per feasible node, in order.
    PerNode(Vec<i64>),
    /// NodeResourcesFit's score, read from the pod shape's [`ResourceView`] (not normalised, so
    /// not copied).
    Fit,
    /// NodeResourcesBalancedAllocation's score, read from the [`ResourceView`].
    Balanced,
    /// PodTopologySpread's score, per node slot with exceptions.
    Spread(SpreadTable),
}

/// Normalised scores that are equal for every node of a slot (a topology domain), except for a
/// few nodes of their own.
pub struct SpreadTable {
    /// Per node, its slot.
    pub slots: Arc<[u32]>,
    /// Per slot, the score of its nodes.
    pub by_slot: Vec<i64>,
    /// Feasible nodes scoring on their own: (index among the feasible nodes, score), in order.
    pub exceptions: Vec<(usize, i64)>,
}

impl SpreadTable {
    /// The score of the `i`-th feasible node, node `n`.
    #[inline]
    pub fn at(&self, i: usize, n: usize) -> i64 {
        match self.exceptions.binary_search_by_key(&i, |e| e.0) {
            Ok(k) => self.exceptions[k].1,
            Err(_) => self.of_slot(n),
        }
    }

    /// The score of node `n` by its slot alone.
    #[inline]
    pub fn of_slot(&self, n: usize) -> i64 {
        self.slots
            .get(n)
            .and_then(|&s| self.by_slot.get(s as usize))
            .copied()
            .unwrap_or(0)
    }
}

impl PluginScores {
    /// The score of the `i`-th feasible node, node `n`.
    #[inline]
    pub fn at(&self, i: usize, n: usize, resources: &ResourceView) -> i64 {
        match &self.scores {
            Scores::Uniform(s) => *s,
            Scores::PerNode(v) => v.get(i).copied().unwrap_or(0),
            Scores::Fit => resources.fit.get(n).map_or(0, |&s| i64::from(s)),
            Scores::Balanced => resources.balanced.get(n).map_or(0, |&s| i64::from(s)),
            Scores::Spread(t) => t.at(i, n),
        }
    }
}
