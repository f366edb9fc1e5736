//! PodLifeTime (Deschedule): evicts pods older than `maxPodLifeTimeSeconds` and/or in given
//! `states`, with given `conditions` or container `exitCodes`; oldest first across all nodes.

use super::{PodQuestion, extension_point};
use std::collections::HashSet;

use crate::evictor::EvictionReason;
use crate::evictor::reason::duration;
use crate::framework::Handle;
use crate::framework::handle::FilterView;
use crate::framework::parallel;
use crate::framework::podfilter::PodFilter;
use crate::snapshot::model::ContainerState;
use crate::snapshot::{NodeId, Pod, PodId};

mod args;
pub use args::{ALLOWED_STATES, Args, ConditionFilter, OwnerKinds};

/// The plugin name.
pub const NAME: &str = "PodLifeTime";

/// The built plugin.
pub struct PodLifeTime {
    filter: PodFilter,
    args: Args,
    states: HashSet<String>,
    exit_codes: HashSet<i32>,
}

fn age_secs(h: &FilterView<'_>, t: Option<jiff::Timestamp>) -> Option<i64> {
    t.map(|t| h.now().duration_since(t).as_secs())
}

impl PodLifeTime {
    fn containers<'p>(
        &self,
        pod: &'p Pod,
        ephemeral: bool,
    ) -> impl Iterator<Item = &'p ContainerState> {
        let init: &[ContainerState] = if self.args.including_init_containers {
            &pod.init_container_states
        } else {
            &[]
        };
        let eph: &[ContainerState] = if ephemeral && self.args.including_ephemeral_containers {
            &pod.ephemeral_container_states
        } else {
            &[]
        };
        pod.container_states
            .iter()
            .chain(init.iter())
            .chain(eph.iter())
    }

    fn qualifies(&self, h: &FilterView<'_>, id: PodId) -> bool {
        let pod = h.snapshot().pod(id);
        if !self.filter.matches(pod) {
            return false;
        }
        if let Some(max) = self.args.max_pod_life_time_seconds {
            // Strictly older than the max, in whole seconds; a pod without a creation time is very old.
            match age_secs(h, pod.creation_timestamp) {
                Some(age) if age < 0 || (age as u64) <= max => return false,
                _ => {}
            }
        }
        if !self.states.is_empty() {
            let by_pod = self.states.contains(pod.phase.as_str())
                || pod
                    .reason
                    .as_deref()
                    .is_some_and(|r| self.states.contains(r));
            let by_container = self.containers(pod, true).any(|c| {
                [c.waiting_reason.as_deref(), c.terminated_reason.as_deref()]
                    .into_iter()
                    .flatten()
                    .any(|r| self.states.contains(r))
            });
            if !by_pod && !by_container {
                return false;
            }
        }
        if let Some(o) = &self.args.owner_kinds {
            if !o.include.is_empty() && !pod.owners.iter().any(|x| o.include.contains(&x.kind)) {
                return false;
            }
            if o.include.is_empty() && pod.owners.iter().any(|x| o.exclude.contains(&x.kind)) {
                return false;
            }
        }
        if !self.args.conditions.is_empty() && !self.matches_conditions(h, pod) {
            return false;
        }
        if !self.exit_codes.is_empty()
            && !self
                .containers(pod, false)
                .filter_map(|c| c.terminated_exit_code)
                .any(|code| self.exit_codes.contains(&code))
        {
            return false;
        }
        h.filter(id)
    }

    fn matches_conditions(&self, h: &FilterView<'_>, pod: &Pod) -> bool {
        self.args.conditions.iter().any(|f| {
            pod.conditions.iter().any(|c| {
                let fields = (f.type_.is_empty() || c.type_ == f.type_)
                    && (f.status.is_empty() || c.status == f.status)
                    && (f.reason.is_empty() || c.reason.as_deref() == Some(f.reason.as_str()));
                if !fields {
                    return false;
                }
                match f.min_time_since_last_transition_seconds {
                    None => true,
                    Some(min) => match age_secs(h, c.last_transition) {
                        Some(idle) => idle >= 0 && idle as u64 >= min,
                        None => false,
                    },
                }
            })
        })
    }
}

impl PodLifeTime {
    /// Why a pod is evicted: its age against `maxPodLifeTimeSeconds` (and the states asked for).
    /// `max_text` is [`Self::max_text`], made once per run.
    fn reason(&self, pod: &Pod, now: jiff::Timestamp, max_text: &str) -> EvictionReason {
        let age = pod
            .creation_timestamp
            .map(|c| now.duration_since(c).as_secs());
        let age_text = age.map_or("unknown".to_string(), duration);
        let mut text = format!("age {age_text}{max_text}");
        if !self.args.states.is_empty() {
            text.push_str(&format!("; in one of the states {:?}", self.args.states));
        }
        let mut r = EvictionReason::new("PodLifeTimeExceeded", text);
        if let Some(a) = age {
            r = r.with("ageSeconds", a);
        }
        if let Some(max) = self.args.max_pod_life_time_seconds {
            r = r.with("maxPodLifeTimeSeconds", max);
        }
        r
    }
}

extension_point!(Deschedule for PodLifeTime, NAME);

impl PodLifeTime {
    fn explain(&self, q: PodQuestion<'_>) -> Option<String> {
        let (s, pod, now) = (q.snapshot, q.pod, q.now);
        let p = s.pod(pod);
        let age = p
            .creation_timestamp
            .map(|c| now.duration_since(c).as_secs());
        Some(match (age, self.args.max_pod_life_time_seconds) {
            (Some(a), Some(max)) if a <= max as i64 => format!(
                "age {} <= maxPodLifeTimeSeconds {max} ({})",
                duration(a),
                duration(max as i64)
            ),
            _ => "its namespace, labels, states, conditions or owner kind do not match the plugin's args"
                .to_string(),
        })
    }

    fn evict(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        // Which pods qualify does not depend on this plugin's evictions: judged on several threads.
        // With a total limit, the PreEvictionFilter (nodeFit: the costly part) is applied later,
        // in eviction order and only as far as the limit lets evictions go; it reads only the
        // snapshot, which does not change while the plugin runs, so the order is the same.
        let limited = h.total_remaining().is_some();
        let view = h.filter_view();
        let s = h.snapshot;
        let mut pods: Vec<PodId> = parallel::map_node_chunks(s, nodes, |chunk| {
            chunk
                .iter()
                .flat_map(|&n| s.pods_on_node(n))
                .filter(|&p| self.qualifies(&view, p) && (limited || view.pre_eviction_filter(p)))
                .collect::<Vec<PodId>>()
        })
        .into_iter()
        .flatten()
        .collect();
        // Oldest first across all nodes (a missing creation time sorts first, like Go's zero time).
        pods.sort_by_key(|&p| h.snapshot.pod(p).creation_timestamp);
        let max_text = self.max_text();
        if !limited {
            self.evict_in_order(h, pods, &max_text);
            return;
        }
        let mut rest = &pods[..];
        while !rest.is_empty() {
            // Twice the evictions still allowed (some attempts are denied), at least 64.
            let want = (2 * h.total_remaining().unwrap_or(0) as usize).max(64);
            let (batch, after) = rest.split_at(want.min(rest.len()));
            rest = after;
            let view = h.filter_view();
            let passing: Vec<PodId> = parallel::map_chunks(
                batch,
                |_| PREFILTER_WEIGHT,
                parallel::min_parallel_weight(),
                |chunk| {
                    chunk
                        .iter()
                        .copied()
                        .filter(|&p| view.pre_eviction_filter(p))
                        .collect::<Vec<PodId>>()
                },
            )
            .into_iter()
            .flatten()
            .collect();
            if self.evict_in_order(h, passing, &max_text) == Stop::Plugin {
                return;
            }
        }
    }
}

/// The work of one PreEvictionFilter call in [`parallel::map_chunks`] weight units (pods
/// looked at): nodeFit tries nodes until one fits.
const PREFILTER_WEIGHT: usize = 8;

/// Where evicting stopped.
#[derive(PartialEq, Eq)]
enum Stop {
    /// Every pod was attempted.
    Done,
    /// The total limit was reached: the plugin ends.
    Plugin,
}

impl PodLifeTime {
    /// The part of every reason after the age: ` > maxPodLifeTimeSeconds 86400 (1d)`.
    fn max_text(&self) -> String {
        match self.args.max_pod_life_time_seconds {
            Some(max) => format!(" > maxPodLifeTimeSeconds {max} ({})", duration(max as i64)),
            None => String::new(),
        }
    }

    /// Evicts prefiltered `pods` in order until the total limit is reached.
    fn evict_in_order(&self, h: &mut Handle<'_>, pods: Vec<PodId>, max_text: &str) -> Stop {
        for p in pods {
            let reason = self.reason(h.snapshot.pod(p), h.now, max_text);
            match h.evict_prefiltered_because(p, reason) {
                Err(e) if e.is_total_limit() => return Stop::Plugin,
                _ => {}
            }
        }
        Stop::Done
    }
}
