//! Eviction limits (`maxNoOfPodsToEvictPerNode`, `...PerNamespace`, `...Total`) and their counters.
//! As upstream: checked total → node → namespace before each eviction; `0` means "evict nothing".
//! Then kube-descheduler's own per-workload limits (`maxNoOfPodsToEvictPerWorkload`,
//! `maxUnavailablePerWorkload`, `workloadEvictionWindow`), which only skip the pod.

use std::sync::Arc;

use jiff::Timestamp;
use rustc_hash::FxHashMap as HashMap;

use super::limit_value::LimitValue;
use super::window::WindowLimit;
use super::workloads::{Workload, Workloads};
use crate::snapshot::{NodeId, PodId, Snapshot};

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
    /// A percentage `maxNoOfPodsToEvictPerNode` reached for this node (ends the node, as
    /// [`LimitError::Node`]).
    #[error(
        "maximum number of evicted pods per node reached (limit {percent} of {pods} pods = {limit})"
    )]
    NodeScaled {
        /// The percentage as written.
        percent: LimitValue,
        /// Pods on the node at the cycle's start.
        pods: u32,
        /// The resolved limit.
        limit: u32,
    },
    /// A percentage `maxNoOfPodsToEvictPerNamespace` reached (skips the pod, as
    /// [`LimitError::Namespace`]).
    #[error(
        "maximum number of evicted pods per namespace reached (limit {percent} of {pods} pods = {limit})"
    )]
    NamespaceScaled {
        /// The percentage as written.
        percent: LimitValue,
        /// Pods in the namespace at the cycle's start.
        pods: u32,
        /// The resolved limit.
        limit: u32,
    },
    /// `maxNoOfPodsToEvictPerWorkload` reached for the pod's workload (skips the pod).
    #[error(
        "workload {workload}: {moved} of {desired} replicas evicted this cycle, maxNoOfPodsToEvictPerWorkload {value} = {limit}"
    )]
    Workload {
        /// `Deployment shop/web`.
        workload: Arc<str>,
        /// Pods of the workload moved this cycle.
        moved: u32,
        /// Desired replicas.
        desired: u32,
        /// The limit as written.
        value: LimitValue,
        /// The resolved limit.
        limit: u32,
    },
    /// `maxUnavailablePerWorkload` would be exceeded (skips the pod).
    #[error(
        "workload {workload}: {not_ready} of {desired} replicas not Ready and {moved} moved this cycle, evicting this pod would make {after} unavailable, maxUnavailablePerWorkload {value} = {limit}"
    )]
    Unavailable {
        /// `Deployment shop/web`.
        workload: Arc<str>,
        /// Desired replicas not Ready at the cycle's start.
        not_ready: u32,
        /// Ready pods of the workload moved this cycle.
        moved: u32,
        /// Unavailable replicas if this pod were evicted.
        after: u32,
        /// Desired replicas.
        desired: u32,
        /// The limit as written.
        value: LimitValue,
        /// The resolved limit.
        limit: u32,
    },
    /// `workloadEvictionWindow.maxEvictions` reached for the pod's workload (skips the pod).
    #[error(
        "workload {workload}: {evicted} of {desired} replicas evicted in the last {window}, workloadEvictionWindow.maxEvictions {value} = {limit}"
    )]
    Window {
        /// `Deployment shop/web`.
        workload: Arc<str>,
        /// Pods of the workload moved within the window (this cycle included).
        evicted: u32,
        /// Desired replicas.
        desired: u32,
        /// `workloadEvictionWindow.duration` as written.
        window: String,
        /// The limit as written.
        value: LimitValue,
        /// The resolved limit.
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
/// Our `result` label for a `maxNoOfPodsToEvictPerWorkload` hit (upstream has no such limit).
pub const WORKLOAD_LIMIT_RESULT: &str = "maximum number of evicted pods per workload reached";
/// Our `result` label for a `maxUnavailablePerWorkload` hit.
pub const UNAVAILABLE_LIMIT_RESULT: &str =
    "maximum number of unavailable pods per workload reached";
/// Our `result` label for a `workloadEvictionWindow` hit.
pub const WINDOW_LIMIT_RESULT: &str =
    "maximum number of evicted pods per workload within the eviction window reached";

impl LimitError {
    /// The `result` label upstream v0.36 puts on `descheduler_pods_evicted_total` when this limit
    /// refuses an eviction (its error message, without our `(limit N)` suffix).
    pub fn result_label(&self) -> &'static str {
        match self {
            LimitError::Total { .. } => TOTAL_LIMIT_RESULT,
            LimitError::Node { .. } | LimitError::NodeScaled { .. } => NODE_LIMIT_RESULT,
            LimitError::Namespace { .. } | LimitError::NamespaceScaled { .. } => {
                NAMESPACE_LIMIT_RESULT
            }
            LimitError::Workload { .. } => WORKLOAD_LIMIT_RESULT,
            LimitError::Unavailable { .. } => UNAVAILABLE_LIMIT_RESULT,
            LimitError::Window { .. } => WINDOW_LIMIT_RESULT,
        }
    }

    /// Which limit (`total`, `node`, `namespace`, `workload`, `unavailable`, `window`), for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            LimitError::Total { .. } => "total",
            LimitError::Node { .. } | LimitError::NodeScaled { .. } => "node",
            LimitError::Namespace { .. } | LimitError::NamespaceScaled { .. } => "namespace",
            LimitError::Workload { .. } => "workload",
            LimitError::Unavailable { .. } => "unavailable",
            LimitError::Window { .. } => "window",
        }
    }

    /// The limit in force (a percentage resolved to a count).
    pub fn limit(&self) -> u32 {
        match self {
            LimitError::Total { limit }
            | LimitError::Node { limit }
            | LimitError::Namespace { limit }
            | LimitError::NodeScaled { limit, .. }
            | LimitError::NamespaceScaled { limit, .. }
            | LimitError::Workload { limit, .. }
            | LimitError::Unavailable { limit, .. }
            | LimitError::Window { limit, .. } => *limit,
        }
    }

    /// The refusal ends the node (the plugin moves on to the next node).
    pub fn ends_node(&self) -> bool {
        matches!(
            self,
            LimitError::Node { .. } | LimitError::NodeScaled { .. }
        )
    }

    /// The text of upstream's `EvictionFailed` Event for this hit (after "failed: "), e.g.
    /// `node eviction limit exceeded (3)`.
    pub fn event_text(&self) -> String {
        format!("{} eviction limit exceeded ({})", self.kind(), self.limit())
    }
}

/// kube-descheduler's own per-workload limits (all unset: upstream's limits only).
#[derive(Debug, Clone, Default)]
pub struct ScaledLimits {
    /// `maxNoOfPodsToEvictPerWorkload`.
    pub per_workload: Option<LimitValue>,
    /// `maxUnavailablePerWorkload`.
    pub max_unavailable_per_workload: Option<LimitValue>,
    /// `workloadEvictionWindow` (applied only when it carries a history: in `run`).
    pub window: Option<WindowLimit>,
}

impl ScaledLimits {
    /// Whether the policy uses any of these limits.
    pub fn is_set(&self) -> bool {
        self.per_workload.is_some()
            || self.max_unavailable_per_workload.is_some()
            || self.window.is_some()
    }

    /// Whether a per-workload limit is in force (so pods' workloads must be resolved).
    fn per_workload_active(&self) -> bool {
        self.per_workload.is_some()
            || self.max_unavailable_per_workload.is_some()
            || self.window.as_ref().is_some_and(|w| w.history.is_some())
    }
}

/// Limits plus the counters of the current cycle.
#[derive(Debug, Default)]
pub struct Limits {
    /// Per node: a count, or a percentage of the node's pods at the cycle's start.
    pub per_node: Option<LimitValue>,
    /// Per namespace: a count, or a percentage of the namespace's pods at the cycle's start.
    pub per_namespace: Option<LimitValue>,
    /// Per cycle.
    pub total: Option<u32>,
    node_counts: HashMap<NodeId, u32>,
    namespace_counts: HashMap<String, u32>,
    total_count: u32,
    scaled: ScaledLimits,
    workloads: Workloads,
    workloads_active: bool,
    now: Option<Timestamp>,
}

impl Limits {
    /// Limits with zeroed counters.
    pub fn new(
        per_node: Option<LimitValue>,
        per_namespace: Option<LimitValue>,
        total: Option<u32>,
    ) -> Self {
        Limits {
            per_node,
            per_namespace,
            total,
            ..Default::default()
        }
    }

    /// Adds the per-workload limits; `now` dates this cycle's evictions in the
    /// window (whose history is pruned here).
    pub fn with_scaled(mut self, scaled: ScaledLimits, now: Timestamp) -> Self {
        if let Some(w) = &scaled.window
            && let Some(h) = &w.history
        {
            h.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .prune(now, w.duration);
        }
        self.workloads_active = scaled.per_workload_active();
        if scaled.max_unavailable_per_workload.is_none() {
            self.workloads = Workloads::without_ready();
        }
        self.scaled = scaled;
        self.now = Some(now);
        self
    }

    /// Checks whether one more eviction of `pod` is allowed: total → node → namespace (upstream's
    /// order), then the pod's workload: per cycle, unavailable, window.
    pub fn check_pod(&mut self, s: &Snapshot, pod: PodId) -> Result<(), LimitError> {
        let p = s.pod(pod);
        self.check(s, p.node, &p.namespace)?;
        if self.workloads_active
            && let Some(id) = self.workloads.of_pod(s, pod)
        {
            let ready = p.is_ready() && !p.is_terminating();
            self.check_workload(self.workloads.get(id), ready)?;
        }
        Ok(())
    }

    fn check_workload(&self, w: &Workload, ready: bool) -> Result<(), LimitError> {
        if let Some(value) = self.scaled.per_workload {
            let limit = value.resolve(w.desired);
            if w.moved >= limit {
                return Err(LimitError::Workload {
                    workload: w.name(),
                    moved: w.moved,
                    desired: w.desired,
                    value,
                    limit,
                });
            }
        }
        if let Some(value) = self.scaled.max_unavailable_per_workload {
            // As a PodDisruptionBudget with maxUnavailable and the default IfHealthyBudget policy:
            // a Ready pod may go while the unavailable replicas stay within the limit; a pod that is
            // not Ready may go only while the workload is within it already.
            let limit = value.resolve(w.desired);
            let after = w.not_ready() + w.moved_ready + u32::from(ready);
            if after > limit {
                return Err(LimitError::Unavailable {
                    workload: w.name(),
                    not_ready: w.not_ready(),
                    moved: w.moved_ready,
                    after,
                    desired: w.desired,
                    value,
                    limit,
                });
            }
        }
        if let (Some(win), Some(now)) = (&self.scaled.window, self.now)
            && let Some(history) = &win.history
        {
            let evicted = history
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .count(&w.uid, now, win.duration);
            let limit = win.max.resolve(w.desired);
            if evicted >= limit {
                return Err(LimitError::Window {
                    workload: w.name(),
                    evicted,
                    desired: w.desired,
                    window: win.duration_text.clone(),
                    value: win.max,
                    limit,
                });
            }
        }
        Ok(())
    }

    /// Counts one eviction of `pod` (after [`Self::check_pod`] allowed it and the pod moved).
    pub fn count_pod(&mut self, s: &Snapshot, pod: PodId) {
        let p = s.pod(pod);
        self.count(p.node, &p.namespace);
        if self.workloads_active
            && let Some(id) = self.workloads.of_pod(s, pod)
        {
            let ready = p.is_ready() && !p.is_terminating();
            self.workloads.count(id, ready);
            if let (Some(win), Some(now)) = (&self.scaled.window, self.now)
                && let Some(history) = &win.history
            {
                history
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .record(&self.workloads.get(id).uid, now);
            }
        }
    }

    /// The node limit in force on `node` (a percentage resolved against its pods).
    fn node_limit(&self, s: &Snapshot, node: NodeId) -> Option<u32> {
        self.per_node
            .map(|v| v.resolve_with(|| s.unfinished_pods_on_node_at_start(node)))
    }

    /// Checks whether one more eviction on `node` in `namespace` is allowed: total → node →
    /// namespace (upstream's order). A percentage resolves against the pods `s` had there at the
    /// cycle's start.
    pub fn check(
        &self,
        s: &Snapshot,
        node: Option<NodeId>,
        namespace: &str,
    ) -> Result<(), LimitError> {
        if let Some(limit) = self.total
            && self.total_count >= limit
        {
            return Err(LimitError::Total { limit });
        }
        if let (Some(value), Some(node)) = (self.per_node, node) {
            reached(
                value,
                self.node_count(node),
                || s.unfinished_pods_on_node_at_start(node),
                |limit| LimitError::Node { limit },
                |percent, pods, limit| LimitError::NodeScaled {
                    percent,
                    pods,
                    limit,
                },
            )?;
        }
        if let Some(value) = self.per_namespace {
            reached(
                value,
                self.namespace_counts.get(namespace).copied().unwrap_or(0),
                || s.unfinished_pods_in_namespace_at_start(namespace),
                |limit| LimitError::Namespace { limit },
                |percent, pods, limit| LimitError::NamespaceScaled {
                    percent,
                    pods,
                    limit,
                },
            )?;
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

    /// Whether the node limit is reached for `node` (a percentage limit resolved against the
    /// node's pods in `s` at the cycle's start).
    pub fn node_limit_reached(&self, s: &Snapshot, node: NodeId) -> bool {
        self.node_limit(s, node)
            .is_some_and(|l| self.node_count(node) >= l)
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

/// Whether `count` evictions reach `value`: a count limit refuses with `plain(limit)`, a
/// percentage (of the `pods` there were) with `scaled(percent, pods, limit)`.
fn reached(
    value: LimitValue,
    count: u32,
    pods: impl FnOnce() -> u32,
    plain: impl FnOnce(u32) -> LimitError,
    scaled: impl FnOnce(LimitValue, u32, u32) -> LimitError,
) -> Result<(), LimitError> {
    match value {
        LimitValue::Count(limit) if count >= limit => Err(plain(limit)),
        LimitValue::Count(_) => Ok(()),
        LimitValue::Percent(_) => {
            let pods = pods();
            let limit = value.resolve(pods);
            if count >= limit {
                Err(scaled(value, pods, limit))
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, now, pod, snapshot};

    const fn count(n: u32) -> Option<LimitValue> {
        Some(LimitValue::Count(n))
    }

    #[test]
    fn order_is_total_then_node_then_namespace() {
        let s = snapshot(Vec::new(), Vec::new());
        let mut l = Limits::new(count(1), count(1), Some(2));
        assert_eq!(l.check(&s, Some(0), "a"), Ok(()));
        l.count(Some(0), "a");
        assert_eq!(
            l.check(&s, Some(0), "b"),
            Err(LimitError::Node { limit: 1 })
        );
        assert_eq!(
            l.check(&s, Some(1), "a"),
            Err(LimitError::Namespace { limit: 1 })
        );
        l.count(Some(1), "b");
        // Total is checked first even when the node and namespace are also exhausted.
        assert_eq!(
            l.check(&s, Some(0), "a"),
            Err(LimitError::Total { limit: 2 })
        );
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
        let s = snapshot(Vec::new(), Vec::new());
        let l = Limits::new(count(0), None, None);
        assert_eq!(
            l.check(&s, Some(3), "x"),
            Err(LimitError::Node { limit: 0 })
        );
        let l = Limits::new(None, None, Some(0));
        assert!(l.check(&s, None, "x").is_err());
        let mut l = Limits::new(None, None, None);
        for _ in 0..1000 {
            l.count(Some(0), "x");
        }
        assert_eq!(l.check(&s, Some(0), "x"), Ok(()));
    }

    /// Upstream's order holds when a limit is a percentage: total → node → namespace.
    #[test]
    fn percentages_keep_the_order_and_node_limit_reached_resolves_them() {
        let s = snapshot(
            vec![node("n1").build(), node("n2").build()],
            (0..4)
                .map(|i| pod("a", &format!("p{i}"), "n1").build())
                .chain([pod("b", "q", "n2").build()])
                .collect(),
        );
        let id = |name: &str| {
            (0..s.pods.len() as PodId)
                .find(|&p| s.pod(p).name == name)
                .expect("test pod")
        };
        let (p0, p1, q) = (id("p0"), id("p1"), id("q"));
        let n1 = s.node_id("n1").expect("n1");
        let n2 = s.node_id("n2").expect("n2");
        // 25% of n1's 4 pods = 1; namespace `a` (4 pods) 50% = 2.
        let mut l = Limits::new(
            Some(LimitValue::Percent(25)),
            Some(LimitValue::Percent(50)),
            Some(2),
        )
        .with_scaled(ScaledLimits::default(), now());
        assert_eq!(l.check_pod(&s, p0), Ok(()));
        assert!(!l.node_limit_reached(&s, n1));
        l.count_pod(&s, p0);
        assert!(l.node_limit_reached(&s, n1));
        assert!(!l.node_limit_reached(&s, n2));
        assert_eq!(
            l.check_pod(&s, p1),
            Err(LimitError::NodeScaled {
                percent: LimitValue::Percent(25),
                pods: 4,
                limit: 1
            })
        );
        l.count_pod(&s, q);
        // The total (2) is reached: it is reported before the node limit.
        assert_eq!(l.check_pod(&s, p1), Err(LimitError::Total { limit: 2 }));
        // An integer namespace limit next to a percentage node limit: node first.
        let mut l = Limits::new(Some(LimitValue::Percent(25)), count(1), None)
            .with_scaled(ScaledLimits::default(), now());
        l.count_pod(&s, p0);
        assert!(matches!(
            l.check_pod(&s, p1),
            Err(LimitError::NodeScaled { .. })
        ));
        assert_eq!(l.check_pod(&s, q), Ok(()));
    }
}
