//! DefaultEvictor's args: the types, their upstream defaults and validation, and the protections
//! in force.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use std::time::Duration;

use crate::duration::de_opt_duration;
use crate::framework::args::{ArgsError, selecting_args};
use crate::scheduling::selector;

/// `priorityThreshold`: a value or a PriorityClass name (not both).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PriorityThreshold {
    /// A priority value.
    pub value: Option<i32>,
    /// A PriorityClass name.
    pub name: Option<String>,
}

/// A pod protection policy name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum Protection {
    /// hostPath / emptyDir pods (default on).
    PodsWithLocalStorage,
    /// System-critical pods and the priority threshold (default on).
    SystemCriticalPods,
    /// Bare pods (default on; off: bare Failed pods become evictable).
    FailedBarePods,
    /// DaemonSet pods (default on).
    DaemonSetPods,
    /// Pods with PVCs (extra).
    PodsWithPVC,
    /// Pods not covered by a PDB (extra).
    PodsWithoutPDB,
    /// Pods with DRA resource claims (extra).
    PodsWithResourceClaims,
    /// Lets pods with a PDB be evicted when their owner has a single replica (extra).
    PodsWithPDBBlockingSingleReplicaOwner,
}

pub(super) const DEFAULT_PROTECTIONS: [Protection; 4] = [
    Protection::PodsWithLocalStorage,
    Protection::SystemCriticalPods,
    Protection::FailedBarePods,
    Protection::DaemonSetPods,
];

/// `podProtections.config.PodsWithPVC.protectedStorageClasses[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtectedStorageClass {
    /// Storage class name.
    pub name: String,
}

/// `podProtections.config.PodsWithPVC`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct PodsWithPvcConfig {
    /// Only these storage classes are protected (empty: every PVC).
    pub protected_storage_classes: Vec<ProtectedStorageClass>,
}

/// `podProtections.config`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PodProtectionsConfig {
    /// Config of `PodsWithPVC`.
    #[serde(rename = "PodsWithPVC")]
    pub pods_with_pvc: Option<PodsWithPvcConfig>,
}

/// `podProtections`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct PodProtections {
    /// Extra protections to enable.
    pub extra_enabled: Vec<Protection>,
    /// Default protections to disable.
    pub default_disabled: Vec<Protection>,
    /// Per-protection configuration.
    pub config: Option<PodProtectionsConfig>,
}

selecting_args! {
    /// DefaultEvictor args (upstream `DefaultEvictorArgs`).
    pub struct DefaultEvictorArgs {
        /// Label selector string limiting the nodes `nodeFit` considers.
        pub node_selector: Option<String>,
        label_selector,
        /// Only pods in namespaces matching this selector (`matchLabels` only, as upstream).
        pub namespace_label_selector: Option<LabelSelector>,
        /// Pods at or above this priority are not evicted (with SystemCriticalPods protection).
        pub priority_threshold: Option<PriorityThreshold>,
        /// Only evict pods that fit another node.
        pub node_fit: bool,
        /// Owners with fewer pods than this are not touched (active when > 1).
        pub min_replicas: u32,
        /// Pods younger than this (since `status.startTime`) are not evicted.
        #[serde(deserialize_with = "de_opt_duration")]
        pub min_pod_age: Option<Duration>,
        /// `Preferred` (sort only) or `Mandatory` (never evict annotated pods).
        pub no_eviction_policy: Option<String>,
        /// Protections to enable or disable.
        pub pod_protections: PodProtections,
        /// Deprecated: disable `PodsWithLocalStorage`.
        pub evict_local_storage_pods: bool,
        /// Deprecated: disable `DaemonSetPods`.
        pub evict_daemon_set_pods: bool,
        /// Deprecated: disable `SystemCriticalPods`.
        pub evict_system_critical_pods: bool,
        /// Deprecated: enable `PodsWithPVC`.
        pub ignore_pvc_pods: bool,
        /// Deprecated: enable `PodsWithoutPDB`.
        #[serde(rename = "ignorePodsWithoutPDB")]
        pub ignore_pods_without_pdb: bool,
        /// Deprecated: disable `FailedBarePods`.
        pub evict_failed_bare_pods: bool,
        /// Ours: predict where each evicted pod's replacement lands: `Off` (default,
        /// upstream), `Report` (predictions reported, decisions unchanged) or `Enforce` (an eviction
        /// whose replacement would come back, fit nowhere or land on a node being emptied is refused).
        pub placement: crate::placement::PlacementMode,
    }
}

impl DefaultEvictorArgs {
    /// Upstream validation, plus checks of the protection lists and selectors.
    pub fn validate(&self) -> Result<(), ArgsError> {
        if let Some(pt) = &self.priority_threshold
            && pt.value.is_some()
            && pt.name.as_deref().is_some_and(|n| !n.is_empty())
        {
            return Err(ArgsError::new(
                "priorityThreshold",
                "priority threshold misconfigured, only one of priorityThreshold fields can be set",
            ));
        }
        if let Some(p) = &self.no_eviction_policy
            && !p.is_empty()
            && p != "Preferred"
            && p != "Mandatory"
        {
            return Err(ArgsError::new(
                "noEvictionPolicy",
                "noEvictionPolicy accepts only [\"Preferred\" \"Mandatory\"] values",
            ));
        }
        for p in &self.pod_protections.default_disabled {
            if !DEFAULT_PROTECTIONS.contains(p) {
                return Err(ArgsError::new(
                    "podProtections.defaultDisabled",
                    format!(
                        "{p:?} is not a default protection (expected one of PodsWithLocalStorage, SystemCriticalPods, FailedBarePods, DaemonSetPods)"
                    ),
                ));
            }
        }
        for p in &self.pod_protections.extra_enabled {
            if DEFAULT_PROTECTIONS.contains(p) {
                return Err(ArgsError::new(
                    "podProtections.extraEnabled",
                    format!(
                        "{p:?} is a default protection; extraEnabled accepts PodsWithPVC, PodsWithoutPDB, PodsWithResourceClaims, PodsWithPDBBlockingSingleReplicaOwner"
                    ),
                ));
            }
        }
        let uses_new = !self.pod_protections.default_disabled.is_empty()
            || !self.pod_protections.extra_enabled.is_empty();
        let uses_old = self.evict_local_storage_pods
            || self.evict_daemon_set_pods
            || self.evict_system_critical_pods
            || self.ignore_pvc_pods
            || self.ignore_pods_without_pdb
            || self.evict_failed_bare_pods;
        if uses_new && uses_old {
            return Err(ArgsError::new(
                "podProtections",
                "cannot be combined with the deprecated fields evictLocalStoragePods, evictDaemonSetPods, evictSystemCriticalPods, ignorePvcPods, ignorePodsWithoutPDB, evictFailedBarePods",
            ));
        }
        if let Some(s) = &self.node_selector {
            selector::parse(s).map_err(|e| ArgsError::new("nodeSelector", e))?;
        }
        if let Some(s) = &self.label_selector {
            selector::compile(s).map_err(|e| ArgsError::new("labelSelector", e))?;
        }
        if let Some(s) = &self.namespace_label_selector {
            selector::compile(s).map_err(|e| ArgsError::new("namespaceLabelSelector", e))?;
        }
        Ok(())
    }

    /// The protections in force: `podProtections` when it lists anything, else the deprecated booleans.
    pub fn effective_protections(&self) -> Vec<Protection> {
        let pp = &self.pod_protections;
        if !pp.default_disabled.is_empty() || !pp.extra_enabled.is_empty() {
            let mut v: Vec<Protection> = DEFAULT_PROTECTIONS
                .into_iter()
                .filter(|p| !pp.default_disabled.contains(p))
                .collect();
            v.extend(pp.extra_enabled.iter().copied());
            return v;
        }
        let mut v = Vec::new();
        if !self.evict_local_storage_pods {
            v.push(Protection::PodsWithLocalStorage);
        }
        if !self.evict_daemon_set_pods {
            v.push(Protection::DaemonSetPods);
        }
        if !self.evict_system_critical_pods {
            v.push(Protection::SystemCriticalPods);
        }
        if !self.evict_failed_bare_pods {
            v.push(Protection::FailedBarePods);
        }
        if self.ignore_pvc_pods {
            v.push(Protection::PodsWithPVC);
        }
        if self.ignore_pods_without_pdb {
            v.push(Protection::PodsWithoutPDB);
        }
        v
    }
}
