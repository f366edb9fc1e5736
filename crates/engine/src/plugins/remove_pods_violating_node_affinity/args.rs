//! RemovePodsViolatingNodeAffinity args (upstream `RemovePodsViolatingNodeAffinityArgs`).

use crate::framework::args::selecting_args;

selecting_args! {
    /// Args (upstream `RemovePodsViolatingNodeAffinityArgs`).
    pub struct Args {
        /// `requiredDuringSchedulingIgnoredDuringExecution` and/or `preferredDuringSchedulingIgnoredDuringExecution`.
        #[serde(default)]
        pub node_affinity_type: Vec<String>,
    }
}
