//! RemovePodsHavingTooManyRestarts (Deschedule): evicts pods whose containers restarted at least
//! `podRestartThreshold` times, most restarts first on each node.

use super::{PodQuestion, extension_point};
use std::collections::HashSet;

use crate::evictor::EvictionReason;
use crate::framework::Handle;
use crate::framework::args::ArgsError;
use crate::framework::handle::FilterView;
use crate::framework::per_node::evict_per_node;
use crate::framework::podfilter::PodFilter;
use crate::snapshot::{NodeId, PodId};

mod args;
pub use args::Args;

/// The plugin name.
pub const NAME: &str = "RemovePodsHavingTooManyRestarts";

/// The built plugin.
pub struct RemovePodsHavingTooManyRestarts {
    filter: PodFilter,
    threshold: i64,
    including_init: bool,
    states: HashSet<String>,
}

impl RemovePodsHavingTooManyRestarts {
    /// Validates `args` and builds the plugin.
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces, a.label_selector.as_ref())?;
        if a.pod_restart_threshold < 1 {
            return Err(ArgsError::new(
                "podRestartThreshold",
                "invalid PodsHavingTooManyRestarts threshold: must be at least 1",
            ));
        }
        if let Some(bad) = a
            .states
            .iter()
            .find(|s| *s != "Running" && *s != "CrashLoopBackOff")
        {
            return Err(ArgsError::new(
                "states",
                format!("{bad:?}: states must be one of [CrashLoopBackOff Running]"),
            ));
        }
        Ok(RemovePodsHavingTooManyRestarts {
            filter,
            threshold: i64::from(a.pod_restart_threshold),
            including_init: a.including_init_containers,
            states: a.states.into_iter().collect(),
        })
    }

    fn in_state(&self, h: &FilterView<'_>, id: PodId) -> bool {
        if self.states.is_empty() {
            return true;
        }
        let pod = h.snapshot().pod(id);
        if self.states.contains(pod.phase.as_str()) {
            return true;
        }
        let init: &[_] = if self.including_init {
            &pod.init_container_states
        } else {
            &[]
        };
        pod.container_states.iter().chain(init.iter()).any(|c| {
            c.waiting_reason
                .as_deref()
                .is_some_and(|r| self.states.contains(r))
        })
    }
}

extension_point!(Deschedule for RemovePodsHavingTooManyRestarts, NAME);

impl RemovePodsHavingTooManyRestarts {
    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        evict_per_node(h, nodes, |s, view, node, _: &mut ()| {
            let mut pods: Vec<(i64, PodId)> = s
                .pods_on_node(node)
                .filter_map(|p| {
                    let pod = s.pod(p);
                    let restarts = pod.restarts(self.including_init);
                    (restarts >= self.threshold
                        && self.filter.matches(pod)
                        && self.in_state(view, p)
                        && view.filter(p))
                    .then_some((restarts, p))
                })
                .collect();
            // Most restarts first (stable for equal counts).
            pods.sort_by_key(|&(restarts, _)| std::cmp::Reverse(restarts));
            pods.into_iter()
                .map(|(restarts, p)| (p, self.reason(restarts)))
                .collect()
        });
    }

    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod) = (q.snapshot, q.pod);
        let p = s.pod(pod);
        let restarts = p.restarts(self.including_init);
        let init = if self.including_init {
            " (init containers counted)"
        } else {
            ""
        };
        Some(if restarts < self.threshold {
            format!(
                "restarts {restarts} < podRestartThreshold {}{init}",
                self.threshold
            )
        } else if !self.filter.matches(p) {
            "the plugin's namespaces / labelSelector exclude it".to_string()
        } else {
            let mut states: Vec<&str> = self.states.iter().map(String::as_str).collect();
            states.sort_unstable();
            format!(
                "restarts {restarts} >= podRestartThreshold {}, but it is in none of the states {states:?}",
                self.threshold
            )
        })
    }
}

impl RemovePodsHavingTooManyRestarts {
    /// Why a pod with `restarts` restarts is evicted.
    fn reason(&self, restarts: i64) -> EvictionReason {
        let init = if self.including_init {
            " (init containers counted)"
        } else {
            ""
        };
        EvictionReason::new(
            "TooManyRestarts",
            format!(
                "restarts {restarts} >= podRestartThreshold {}{init}",
                self.threshold
            ),
        )
        .with("restarts", restarts)
        .with("podRestartThreshold", self.threshold)
        .with("includingInitContainers", self.including_init)
    }
}
