//! RemovePodsViolatingTopologySpreadConstraint args: the type (upstream
//! `RemovePodsViolatingTopologySpreadConstraintArgs`), decoding, validation and defaults.

use super::RemovePodsViolatingTopologySpreadConstraint;
use crate::framework::args::{ArgsError, selecting_args};
use crate::framework::podfilter::PodFilter;

pub(super) const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
pub(super) const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

selecting_args! {
    /// Args (upstream `RemovePodsViolatingTopologySpreadConstraintArgs`).
    pub struct Args {
        namespaces,
        label_selector,
        /// whenUnsatisfiable values to balance (default `[DoNotSchedule]`).
        pub constraints: Vec<String>,
        /// Only evict pods that fit a node of an under-populated domain (default true).
        pub topology_balance_node_fit: Option<bool>,
    }
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// Validates `args` and applies the defaults.
    pub fn new(a: Args) -> Result<Self, ArgsError> {
        let filter = PodFilter::new(a.namespaces.clone(), a.label_selector.as_ref())?;
        for (i, c) in a.constraints.iter().enumerate() {
            if c != DO_NOT_SCHEDULE && c != SCHEDULE_ANYWAY {
                return Err(ArgsError::new(
                    format!("constraints[{i}]"),
                    format!("constraint {c} is not one of [{DO_NOT_SCHEDULE} {SCHEDULE_ANYWAY}]"),
                ));
            }
        }
        let constraints = if a.constraints.is_empty() {
            vec![DO_NOT_SCHEDULE.to_string()]
        } else {
            a.constraints
        };
        Ok(RemovePodsViolatingTopologySpreadConstraint {
            filter,
            constraints,
            node_fit: a.topology_balance_node_fit.unwrap_or(true),
        })
    }
}
