//! RemovePodsViolatingNodeTaints args (upstream `RemovePodsViolatingNodeTaintsArgs`).

use crate::framework::args::selecting_args;

selecting_args! {
    /// Args (upstream `RemovePodsViolatingNodeTaintsArgs`).
    pub struct Args {
        namespaces,
        label_selector,
        /// Also act on `PreferNoSchedule` taints.
        pub include_prefer_no_schedule: bool,
        /// Taints (`key` or `key=value`) to ignore.
        pub excluded_taints: Vec<String>,
        /// Only these taints (`key` or `key=value`); unset means all, `[]` means none.
        pub included_taints: Option<Vec<String>>,
    }
}
