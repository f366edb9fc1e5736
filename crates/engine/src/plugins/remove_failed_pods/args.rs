//! RemoveFailedPods args (upstream `RemoveFailedPodsArgs`).

use crate::framework::args::selecting_args;

selecting_args! {
    /// Args (upstream `RemoveFailedPodsArgs`).
    pub struct Args {
        namespaces,
        label_selector,
        /// Pods owned by these kinds are left alone.
        pub exclude_owner_kinds: Vec<String>,
        /// Minimum age (since creation) in seconds; default 3600.
        pub min_pod_lifetime_seconds: Option<u64>,
        /// Only pods failing for one of these reasons (pod or container state reasons).
        pub reasons: Vec<String>,
        /// Only pods with a terminated container exiting with one of these codes.
        pub exit_codes: Vec<i32>,
        /// Also look at init containers for reasons and exit codes.
        pub including_init_containers: bool,
    }
}
