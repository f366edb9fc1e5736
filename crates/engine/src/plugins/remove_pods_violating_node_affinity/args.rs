//! RemovePodsViolatingNodeAffinity args (upstream `RemovePodsViolatingNodeAffinityArgs`).

use crate::framework::args::selecting_args;

selecting_args! {
    /// Args (upstream `RemovePodsViolatingNodeAffinityArgs`).
    pub struct Args {
        namespaces,
        label_selector,
        /// `requiredDuringSchedulingIgnoredDuringExecution` and/or `preferredDuringSchedulingIgnoredDuringExecution`.
        pub node_affinity_type: Vec<String>,
    }
}
