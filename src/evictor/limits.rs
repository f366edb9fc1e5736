//! Eviction limits (`maxNoOfPodsToEvictPerNode`, `...PerNamespace`, `...Total`) and their counters.
//! As upstream: checked total → node → namespace before each eviction; `0` means "evict nothing".

use rustc_hash::FxHashMap as HashMap;

use crate::snapshot::NodeId;

/// A limit was reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// `maxNoOfPodsToEvictTotal` reached.
    #[error("maximum number of evicted pods per a descheduling cycle reached (limit {limit})")]
    Total {
        /// The limit.
        limit: u32,
    },
    /// `maxNoOfPodsToEvictPerNode` (or a plugin's node limit) reached for this node.
    #[error("maximum number of evicted pods per node reached (limit {limit})")]
    Node {
        /// The limit.
        limit: u32,
    },
    /// `maxNoOfPodsToEvictPerNamespace` reached for this namespace.
    #[error("maximum number of evicted pods per namespace reached (limit {limit})")]
    Namespace {
        /// The limit.
        limit: u32,
    },
}

/// Upstream's `descheduler_pods_evicted_total` `result` label (its error text) for a total-limit hit.
pub const TOTAL_LIMIT_RESULT: &str =
    "maximum number of evicted pods per a descheduling cycle reached";
/// Upstream's `result` label for a node-limit hit.
pub const NODE_LIMIT_RESULT: &str = "maximum number of evicted pods per node reached";
/// Upstream's `result` label for a namespace-limit hit.
pub const NAMESPACE_LIMIT_RESULT: &str = "maximum number of evicted pods per namespace reached";

impl LimitError {
    /// The `result` label upstream v0.36 puts on `descheduler_pods_evicted_total` when this limit
    /// refuses an eviction (its error message, without our `(limit N)` suffix).
    pub fn result_label(&self) -> &'static str {
        match self {
            LimitError::Total { .. } => TOTAL_LIMIT_RESULT,
            LimitError::Node { .. } => NODE_LIMIT_RESULT,
            LimitError::Namespace { .. } => NAMESPACE_LIMIT_RESULT,
        }
    }

    /// Which limit (`total`, `node`, `namespace`), for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            LimitError::Total { .. } => "total",
            LimitError::Node { .. } => "node",
            LimitError::Namespace { .. } => "namespace",
        }
    }

    /// The configured limit value.
    pub fn limit(&self) -> u32 {
        match self {
            LimitError::Total { limit }
            | LimitError::Node { limit }
            | LimitError::Namespace { limit } => *limit,
        }
    }

    /// The text of upstream's `EvictionFailed` Event for this hit (after "failed: "), e.g.
    /// `node eviction limit exceeded (3)`.
    pub fn event_text(&self) -> String {
        format!("{} eviction limit exceeded ({})", self.kind(), self.limit())
    }
}

/// Limits plus the counters of the current cycle.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Per node.
    pub per_node: Option<u32>,
    /// Per namespace.
    pub per_namespace: Option<u32>,
    /// Per cycle.
    pub total: Option<u32>,
    node_counts: HashMap<NodeId, u32>,
    namespace_counts: HashMap<String, u32>,
    total_count: u32,
}

impl Limits {
    /// Limits with zeroed counters.
    pub fn new(per_node: Option<u32>, per_namespace: Option<u32>, total: Option<u32>) -> Self {
        Limits {
            per_node,
            per_namespace,
            total,
            ..Default::default()
        }
    }

    /// Checks whether one more eviction on `node` in `namespace` is allowed.
    pub fn check(&self, node: Option<NodeId>, namespace: &str) -> Result<(), LimitError> {
        if let Some(limit) = self.total
            && self.total_count >= limit
        {
            return Err(LimitError::Total { limit });
        }
        if let (Some(limit), Some(node)) = (self.per_node, node)
            && self.node_count(node) >= limit
        {
            return Err(LimitError::Node { limit });
        }
        if let Some(limit) = self.per_namespace
            && self.namespace_counts.get(namespace).copied().unwrap_or(0) >= limit
        {
            return Err(LimitError::Namespace { limit });
        }
        Ok(())
    }

    /// Counts one eviction.
    pub fn count(&mut self, node: Option<NodeId>, namespace: &str) {
        self.total_count += 1;
        if let Some(n) = node {
            *self.node_counts.entry(n).or_default() += 1;
        }
        match self.namespace_counts.get_mut(namespace) {
            Some(n) => *n += 1,
            None => {
                self.namespace_counts.insert(namespace.to_string(), 1);
            }
        }
    }

    /// Evictions counted on `node` this cycle.
    pub fn node_count(&self, node: NodeId) -> u32 {
        self.node_counts.get(&node).copied().unwrap_or(0)
    }

    /// Evictions counted this cycle.
    pub fn total_count(&self) -> u32 {
        self.total_count
    }

    /// Whether the node limit is reached for `node`.
    pub fn node_limit_reached(&self, node: NodeId) -> bool {
        self.per_node.is_some_and(|l| self.node_count(node) >= l)
    }

    /// How many more evictions the total limit allows this cycle (`None`: no total limit).
    pub fn total_remaining(&self) -> Option<u32> {
        self.total.map(|l| l.saturating_sub(self.total_count))
    }

    /// Whether the total limit is reached.
    pub fn total_limit_reached(&self) -> bool {
        self.total.is_some_and(|l| self.total_count >= l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_total_then_node_then_namespace() {
        let mut l = Limits::new(Some(1), Some(1), Some(2));
        assert_eq!(l.check(Some(0), "a"), Ok(()));
        l.count(Some(0), "a");
        assert_eq!(l.check(Some(0), "b"), Err(LimitError::Node { limit: 1 }));
        assert_eq!(
            l.check(Some(1), "a"),
            Err(LimitError::Namespace { limit: 1 })
        );
        l.count(Some(1), "b");
        // Total is checked first even when the node and namespace are also exhausted.
        assert_eq!(l.check(Some(0), "a"), Err(LimitError::Total { limit: 2 }));
    }

    #[test]
    fn result_labels_are_upstreams_error_texts() {
        assert_eq!(
            LimitError::Total { limit: 5 }.result_label(),
            "maximum number of evicted pods per a descheduling cycle reached"
        );
        assert_eq!(
            LimitError::Node { limit: 1 }.result_label(),
            "maximum number of evicted pods per node reached"
        );
        assert_eq!(
            LimitError::Namespace { limit: 0 }.result_label(),
            "maximum number of evicted pods per namespace reached"
        );
        assert_eq!(
            LimitError::Node { limit: 3 }.event_text(),
            "node eviction limit exceeded (3)"
        );
    }

    #[test]
    fn zero_means_evict_nothing_and_none_means_unlimited() {
        let l = Limits::new(Some(0), None, None);
        assert_eq!(l.check(Some(3), "x"), Err(LimitError::Node { limit: 0 }));
        let l = Limits::new(None, None, Some(0));
        assert!(l.check(None, "x").is_err());
        let mut l = Limits::new(None, None, None);
        for _ in 0..1000 {
            l.count(Some(0), "x");
        }
        assert_eq!(l.check(Some(0), "x"), Ok(()));
    }
}
