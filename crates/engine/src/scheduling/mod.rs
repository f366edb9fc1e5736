//! Scheduler predicates shared by the plugins and the DefaultEvictor's `nodeFit`: label selectors,
//! taints and tolerations, node affinity, and whether a pod fits a node.

pub mod affinity;
pub mod fit;
pub mod selector;
pub mod taints;
