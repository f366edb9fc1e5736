//! RemoveFailedPods (Deschedule): evicts pods in phase `Failed`, optionally only those older than
//! `minPodLifetimeSeconds` (default 3600), failing for given `reasons` or `exitCodes`, and not owned
//! by `excludeOwnerKinds`.

use super::{PodQuestion, extension_point};
use std::collections::HashSet;

use crate::evictor::EvictionReason;
use crate::evictor::reason::duration;
use crate::framework::Handle;
use crate::framework::args::ArgsError;
use crate::framework::handle::FilterView;
use crate::framework::per_node::evict_per_node;
use crate::framework::podfilter::PodFilter;
use crate::snapshot::model::{ContainerState, PodPhase};
use crate::snapshot::{NodeId, Pod, PodId};

mod args;
pub use args::Args;

/// The plugin name.
pub const NAME: &str = "RemoveFailedPods";

/// The built plugin.
pub struct RemoveFailedPods {
    filter: PodFilter,
    exclude_owner_kinds: HashSet<String>,
    min_age: u64,
    reasons: HashSet<String>,
    exit_codes: HashSet<i32>,
    including_init: bool,
}

impl RemoveFailedPods {
    /// Validates `args`, applies defaults and builds the plugin.
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces, a.label_selector.as_ref())?;
        Ok(RemoveFailedPods {
            filter,
            exclude_owner_kinds: a.exclude_owner_kinds.into_iter().collect(),
            min_age: a.min_pod_lifetime_seconds.unwrap_or(3600),
            reasons: a.reasons.into_iter().collect(),
            exit_codes: a.exit_codes.into_iter().collect(),
            including_init: a.including_init_containers,
        })
    }

    fn states<'p>(&self, pod: &'p Pod) -> impl Iterator<Item = &'p ContainerState> {
        let init: &[ContainerState] = if self.including_init {
            &pod.init_container_states
        } else {
            &[]
        };
        pod.container_states.iter().chain(init.iter())
    }

    fn qualifies(&self, h: &FilterView<'_>, id: PodId) -> bool {
        let pod = h.snapshot().pod(id);
        if pod.phase != PodPhase::Failed || !self.filter.matches(pod) {
            return false;
        }
        // Age since creation, truncated to whole seconds; a pod without a creation time is very old.
        let age = pod.creation_timestamp.map_or(u64::MAX, |c| {
            h.now().duration_since(c).as_secs().max(0) as u64
        });
        if age < self.min_age {
            return false;
        }
        if pod
            .owners
            .iter()
            .any(|o| self.exclude_owner_kinds.contains(&o.kind))
        {
            return false;
        }
        if !self.reasons.is_empty() {
            let pod_reason = pod.reason.as_deref().filter(|r| !r.is_empty());
            let mut reasons = self
                .states(pod)
                .flat_map(|c| [c.waiting_reason.as_deref(), c.terminated_reason.as_deref()])
                .flatten()
                .chain(pod_reason);
            if !reasons.any(|r| !r.is_empty() && self.reasons.contains(r)) {
                return false;
            }
        }
        if !self.exit_codes.is_empty()
            && !self
                .states(pod)
                .filter_map(|c| c.terminated_exit_code)
                .any(|code| self.exit_codes.contains(&code))
        {
            return false;
        }
        h.filter(id)
    }
}

extension_point!(Deschedule for RemoveFailedPods, NAME);

impl RemoveFailedPods {
    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        evict_per_node(h, nodes, |s, view, node, _: &mut ()| {
            s.pods_on_node(node)
                .filter(|&p| self.qualifies(view, p))
                .map(|p| (p, self.reason(s.pod(p), view.now())))
                .collect()
        });
    }

    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, now) = (q.snapshot, q.pod, q.now);
        let p = s.pod(pod);
        let age = age_secs(p, now);
        Some(if p.phase != PodPhase::Failed {
            format!("phase {}, not Failed", p.phase.as_str())
        } else if age < self.min_age as i64 {
            format!(
                "Failed, but age {} < minPodLifetimeSeconds {}",
                duration(age),
                self.min_age
            )
        } else {
            "Failed, but its reasons / exitCodes / owner kind / namespace do not match the plugin's args"
                .to_string()
        })
    }
}

/// Seconds since the pod was created (a pod without a creation time is very old).
fn age_secs(pod: &Pod, now: jiff::Timestamp) -> i64 {
    pod.creation_timestamp
        .map_or(i64::MAX, |c| now.duration_since(c).as_secs())
}

impl RemoveFailedPods {
    /// Why a failed pod is evicted: its reason, exit code and age.
    fn reason(&self, pod: &Pod, now: jiff::Timestamp) -> EvictionReason {
        let why = pod
            .reason
            .as_deref()
            .filter(|r| !r.is_empty())
            .or_else(|| {
                self.states(pod)
                    .find_map(|c| c.terminated_reason.as_deref())
            })
            .unwrap_or("unknown");
        let code = self.states(pod).find_map(|c| c.terminated_exit_code);
        let age = age_secs(pod, now);
        let mut text = format!("Failed (reason {why}");
        if let Some(c) = code {
            text.push_str(&format!(", exit code {c}"));
        }
        text.push_str(&format!(
            "), age {} >= minPodLifetimeSeconds {}",
            if age == i64::MAX {
                "unknown".to_string()
            } else {
                duration(age)
            },
            self.min_age
        ));
        let mut r = EvictionReason::new("PodFailed", text)
            .with("failedReason", why)
            .with("ageSeconds", age)
            .with("minPodLifetimeSeconds", self.min_age);
        if let Some(c) = code {
            r = r.with("exitCode", c);
        }
        r
    }
}
