//! PodLifeTime (Deschedule): evicts pods older than `maxPodLifeTimeSeconds` and/or in given
//! `states`, with given `conditions` or container `exitCodes`; oldest first across all nodes.

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::framework::args::{ArgsError, Namespaces, decode};
use crate::framework::handle::FilterView;
use crate::framework::parallel;
use crate::framework::podfilter::PodFilter;
use crate::framework::registry::{ExtensionPoint, Plugin, PluginFactory};
use crate::framework::{DeschedulePlugin, Handle};
use crate::snapshot::model::ContainerState;
use crate::snapshot::{NodeId, Pod, PodId};

/// The plugin name.
pub const NAME: &str = "PodLifeTime";

/// States upstream accepts: phases, pod status reasons and container waiting/terminated reasons.
pub const ALLOWED_STATES: &[&str] = &[
    "Completed",
    "ContainerCannotRun",
    "ContainerCreating",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "DeadlineExceeded",
    "ErrImagePull",
    "Error",
    "Evicted",
    "Failed",
    "ImagePullBackOff",
    "InvalidImageName",
    "NodeAffinity",
    "NodeLost",
    "OOMKilled",
    "Pending",
    "PodInitializing",
    "Running",
    "Shutdown",
    "StartError",
    "Succeeded",
    "UnexpectedAdmissionError",
    "Unknown",
];

/// `ownerKinds`: include or exclude (not both).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnerKinds {
    /// Only pods with an owner of one of these kinds.
    #[serde(default)]
    pub include: Vec<String>,
    /// No pods with an owner of one of these kinds.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// `conditions[]`: matches a pod condition by type, status and reason, optionally only when it has
/// not changed for `minTimeSinceLastTransitionSeconds`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConditionFilter {
    /// Condition type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Condition status.
    #[serde(default)]
    pub status: String,
    /// Condition reason.
    #[serde(default)]
    pub reason: String,
    /// Minimum seconds since the condition's last transition.
    #[serde(default)]
    pub min_time_since_last_transition_seconds: Option<u64>,
}

/// Args (upstream `PodLifeTimeArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// Namespaces to include or exclude.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Only pods matching this selector.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// Owner kinds to include or exclude.
    #[serde(default)]
    pub owner_kinds: Option<OwnerKinds>,
    /// Pods older than this (seconds since creation) are evicted.
    #[serde(default)]
    pub max_pod_life_time_seconds: Option<u64>,
    /// Only pods in one of these states.
    #[serde(default)]
    pub states: Vec<String>,
    /// Only pods with a condition matching one of these.
    #[serde(default)]
    pub conditions: Vec<ConditionFilter>,
    /// Only pods with a terminated container exiting with one of these codes.
    #[serde(default)]
    pub exit_codes: Vec<i32>,
    /// Consider init containers for states and exit codes.
    #[serde(default)]
    pub including_init_containers: bool,
    /// Consider ephemeral containers for states.
    #[serde(default)]
    pub including_ephemeral_containers: bool,
}

/// The built plugin.
pub struct PodLifeTime {
    filter: PodFilter,
    args: Args,
    states: HashSet<String>,
    exit_codes: HashSet<i32>,
}

/// Registry entry.
pub fn factory() -> PluginFactory {
    PluginFactory {
        name: NAME,
        point: ExtensionPoint::Deschedule,
        build,
    }
}

fn build(args: &serde_json::Value) -> Result<Plugin, ArgsError> {
    Ok(Plugin::Deschedule(Box::new(PodLifeTime::new(decode(
        args,
    )?)?)))
}

fn age_secs(h: &FilterView<'_>, t: Option<jiff::Timestamp>) -> Option<i64> {
    t.map(|t| h.now().duration_since(t).as_secs())
}

impl PodLifeTime {
    /// Validates `args` (upstream's rules) and builds the plugin.
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces.clone(), a.label_selector.as_ref())?;
        if let Some(o) = &a.owner_kinds
            && !o.include.is_empty()
            && !o.exclude.is_empty()
        {
            return Err(ArgsError::new(
                "ownerKinds",
                "only one of Include/Exclude ownerKinds can be set",
            ));
        }
        if let Some(bad) = a
            .states
            .iter()
            .find(|s| !ALLOWED_STATES.contains(&s.as_str()))
        {
            return Err(ArgsError::new(
                "states",
                format!("{bad:?}: states must be one of {ALLOWED_STATES:?}"),
            ));
        }
        for (i, c) in a.conditions.iter().enumerate() {
            if c.type_.is_empty()
                && c.status.is_empty()
                && c.reason.is_empty()
                && c.min_time_since_last_transition_seconds.is_none()
            {
                return Err(ArgsError::new(
                    format!("conditions[{i}]"),
                    "at least one of type, status, reason, or minTimeSinceLastTransitionSeconds must be set",
                ));
            }
        }
        if a.max_pod_life_time_seconds.is_none()
            && a.states.is_empty()
            && a.conditions.is_empty()
            && a.exit_codes.is_empty()
        {
            return Err(ArgsError::new(
                "",
                "at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, conditions, or exitCodes)",
            ));
        }
        Ok(PodLifeTime {
            filter,
            states: a.states.iter().cloned().collect(),
            exit_codes: a.exit_codes.iter().copied().collect(),
            args: a,
        })
    }

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

impl DeschedulePlugin for PodLifeTime {
    fn name(&self) -> &'static str {
        NAME
    }

    fn deschedule(&self, h: &mut Handle<'_>, nodes: &[NodeId]) {
        // Which pods qualify does not depend on this plugin's evictions: judged on several threads.
        let view = h.filter_view();
        let s = h.snapshot;
        let mut pods: Vec<PodId> = parallel::map_chunks(
            nodes,
            |&n| s.pods_on_node_upper_bound(n),
            parallel::MIN_PARALLEL_WEIGHT,
            |chunk| {
                chunk
                    .iter()
                    .flat_map(|&n| s.pods_on_node(n))
                    .filter(|&p| self.qualifies(&view, p) && view.pre_eviction_filter(p))
                    .collect::<Vec<PodId>>()
            },
        )
        .into_iter()
        .flatten()
        .collect();
        // Oldest first across all nodes (a missing creation time sorts first, like Go's zero time).
        pods.sort_by_key(|&p| h.snapshot.pod(p).creation_timestamp);
        for p in pods {
            match h.evict_prefiltered(p, None) {
                Err(e) if e.is_total_limit() => return,
                _ => {}
            }
        }
    }
}
