//! RemovePodsViolatingNodeTaints args (upstream `RemovePodsViolatingNodeTaintsArgs`).

use crate::framework::args::selecting_args;

selecting_args! {
    /// Args (upstream `RemovePodsViolatingNodeTaintsArgs`).
    pub struct Args {
        /// Also act on `PreferNoSchedule` taints.
        #[serde(default)]
        pub include_prefer_no_schedule: bool,
        /// Taints (`key` or `key=value`) to ignore.
        #[serde(default)]
        pub excluded_taints: Vec<String>,
        /// Only these taints (`key` or `key=value`); unset means all, `[]` means none.
        #[serde(default)]
        pub included_taints: Option<Vec<String>>,
    }
}
