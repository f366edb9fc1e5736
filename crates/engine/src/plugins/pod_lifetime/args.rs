//! PodLifeTime args: the types (upstream `PodLifeTimeArgs`), the allowed states, decoding and
//! upstream's validation.

use serde::Deserialize;

use super::PodLifeTime;
use crate::framework::args::{ArgsError, selecting_args};
use crate::framework::podfilter::PodFilter;

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
#[serde(default, deny_unknown_fields)]
pub struct OwnerKinds {
    /// Only pods with an owner of one of these kinds.
    pub include: Vec<String>,
    /// No pods with an owner of one of these kinds.
    pub exclude: Vec<String>,
}

/// `conditions[]`: matches a pod condition by type, status and reason, optionally only when it has
/// not changed for `minTimeSinceLastTransitionSeconds`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct ConditionFilter {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Condition status.
    pub status: String,
    /// Condition reason.
    pub reason: String,
    /// Minimum seconds since the condition's last transition.
    pub min_time_since_last_transition_seconds: Option<u64>,
}

selecting_args! {
    /// Args (upstream `PodLifeTimeArgs`).
    pub struct Args {
        namespaces,
        label_selector,
        /// Owner kinds to include or exclude.
        pub owner_kinds: Option<OwnerKinds>,
        /// Pods older than this (seconds since creation) are evicted.
        pub max_pod_life_time_seconds: Option<u64>,
        /// Only pods in one of these states.
        pub states: Vec<String>,
        /// Only pods with a condition matching one of these.
        pub conditions: Vec<ConditionFilter>,
        /// Only pods with a terminated container exiting with one of these codes.
        pub exit_codes: Vec<i32>,
        /// Consider init containers for states and exit codes.
        pub including_init_containers: bool,
        /// Consider ephemeral containers for states.
        pub including_ephemeral_containers: bool,
    }
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
}
