//! RemovePodsHavingTooManyRestarts args (upstream `RemovePodsHavingTooManyRestartsArgs`).

use crate::framework::args::selecting_args;

selecting_args! {
    /// Args (upstream `RemovePodsHavingTooManyRestartsArgs`).
    pub struct Args {
        namespaces,
        label_selector,
        /// Restarts at or above this count are evicted (required, ≥ 1).
        pub pod_restart_threshold: i32,
        /// Count init container restarts too.
        pub including_init_containers: bool,
        /// Only pods in these states: `Running` (phase) and/or `CrashLoopBackOff` (waiting reason).
        pub states: Vec<String>,
    }
}
