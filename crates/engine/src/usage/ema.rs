//! Upstream's smoothing of node samples: an exponential moving average with weight 0.9 on the
//! previous value (`metricscollector`), cpu in millicores and memory in bytes, rounded to the
//! nearest integer. The first sample of a node is taken as is; a node missing from a later sample
//! keeps its previous value (upstream: "duplicate the previous value").

use std::collections::HashMap;

use super::CpuMemory;

/// Weight of the previous value.
pub const BETA: f64 = 0.9;

/// `round(BETA · previous + (1 − BETA) · sample)`.
pub fn weighted_average(previous: i64, sample: i64) -> i64 {
    (BETA * previous as f64 + (1.0 - BETA) * sample as f64).round() as i64
}

/// Smoothed node usage across collections.
#[derive(Debug, Clone, Default)]
pub struct NodeSmoother {
    nodes: HashMap<String, CpuMemory>,
}

impl NodeSmoother {
    /// Folds one collection of raw node samples in.
    pub fn add(&mut self, samples: &HashMap<String, CpuMemory>) {
        for (name, s) in samples {
            match self.nodes.get_mut(name) {
                None => {
                    self.nodes.insert(name.clone(), *s);
                }
                Some(prev) => {
                    prev.cpu_milli = weighted_average(prev.cpu_milli, s.cpu_milli);
                    prev.memory = weighted_average(prev.memory, s.memory);
                }
            }
        }
    }

    /// The smoothed usage of every node seen so far.
    pub fn current(&self) -> &HashMap<String, CpuMemory> {
        &self.nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(cpu_milli: i64, memory: i64) -> CpuMemory {
        CpuMemory { cpu_milli, memory }
    }

    #[test]
    fn first_sample_as_is_then_weighted_and_missing_nodes_keep_their_value() {
        let mut s = NodeSmoother::default();
        s.add(&[("a".into(), cm(1000, 1000)), ("b".into(), cm(10, 10))].into());
        assert_eq!(s.current()["a"], cm(1000, 1000));
        s.add(&[("a".into(), cm(2000, 0))].into());
        // 0.9·1000 + 0.1·2000 = 1100; 0.9·1000 + 0.1·0 = 900.
        assert_eq!(s.current()["a"], cm(1100, 900));
        assert_eq!(s.current()["b"], cm(10, 10));
        assert_eq!(weighted_average(5, 10), 6); // 5.5 rounds away from zero
        assert_eq!(weighted_average(0, 4), 0); // 0.4 rounds down
    }
}
