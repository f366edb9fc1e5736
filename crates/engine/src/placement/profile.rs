//! A kube-scheduler profile as the placement simulator models it: which Filter plugins run, the
//! Score plugins' weights and `NodeResourcesFit`'s scoring strategy. [`SchedulerProfile::default`]
//! is kube-scheduler's `default-scheduler` profile (`pkg/scheduler/apis/config/v1/default_plugins.go`
//! and `defaults.go`); `--scheduler-config` builds others ([`super::config`]).

/// `NodeResourcesFit`'s `scoringStrategy.type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScoringStrategy {
    /// Prefer the node with the most free share after placing the pod (the default).
    LeastAllocated,
    /// Prefer the node with the least free share (bin packing).
    MostAllocated,
    /// Score the utilization through a piecewise-linear shape of (utilization %, score 0–10)
    /// points, sorted by utilization.
    RequestedToCapacityRatio {
        /// The shape's points.
        shape: Vec<(i64, i64)>,
    },
}

impl ScoringStrategy {
    /// The name as the configuration spells it.
    pub fn name(&self) -> &'static str {
        match self {
            ScoringStrategy::LeastAllocated => "LeastAllocated",
            ScoringStrategy::MostAllocated => "MostAllocated",
            ScoringStrategy::RequestedToCapacityRatio { .. } => "RequestedToCapacityRatio",
        }
    }
}

/// The Filter plugins the simulator models; each can be disabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filters {
    /// `NodeUnschedulable`.
    pub node_unschedulable: bool,
    /// `TaintToleration`.
    pub taint_toleration: bool,
    /// `NodeAffinity` (nodeSelector and required node affinity).
    pub node_affinity: bool,
    /// `NodePorts` (host ports free on the node).
    pub node_ports: bool,
    /// `NodeResourcesFit`.
    pub node_resources_fit: bool,
    /// `PodTopologySpread` (`DoNotSchedule` constraints).
    pub pod_topology_spread: bool,
    /// `InterPodAffinity` (required terms, and existing pods' required anti-affinity).
    pub inter_pod_affinity: bool,
}

impl Default for Filters {
    fn default() -> Self {
        Filters {
            node_unschedulable: true,
            taint_toleration: true,
            node_affinity: true,
            node_ports: true,
            node_resources_fit: true,
            pod_topology_spread: true,
            inter_pod_affinity: true,
        }
    }
}

/// Score plugin weights (0: the plugin does not score).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weights {
    /// `NodeResourcesFit` (default 1).
    pub node_resources_fit: i64,
    /// `NodeResourcesBalancedAllocation` (default 1).
    pub balanced_allocation: i64,
    /// `ImageLocality` (default 1; not modelled: the lean snapshot does not keep node images).
    pub image_locality: i64,
    /// `TaintToleration` (default 3).
    pub taint_toleration: i64,
    /// `NodeAffinity` (default 2).
    pub node_affinity: i64,
    /// `PodTopologySpread` (default 2).
    pub pod_topology_spread: i64,
    /// `InterPodAffinity` (default 2).
    pub inter_pod_affinity: i64,
}

impl Default for Weights {
    /// kube-scheduler's default profile (`default_plugins.go`, MultiPoint weights).
    fn default() -> Self {
        Weights {
            node_resources_fit: 1,
            balanced_allocation: 1,
            image_locality: 1,
            taint_toleration: 3,
            node_affinity: 2,
            pod_topology_spread: 2,
            inter_pod_affinity: 2,
        }
    }
}

/// One scheduler profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerProfile {
    /// `schedulerName` (`default-scheduler` by default).
    pub scheduler_name: String,
    /// Filter plugins in force.
    pub filters: Filters,
    /// Score plugin weights.
    pub weights: Weights,
    /// `NodeResourcesFit` `scoringStrategy.type`.
    pub strategy: ScoringStrategy,
    /// `NodeResourcesFit` `scoringStrategy.resources` (name, weight); default cpu 1, memory 1.
    pub fit_resources: Vec<(String, i64)>,
    /// `NodeResourcesBalancedAllocation` `resources`; default cpu 1, memory 1.
    pub balanced_resources: Vec<(String, i64)>,
    /// `PodTopologySpread` `defaultingType: System` (the default): pods without constraints of
    /// their own that belong to a ReplicaSet, StatefulSet or ReplicationController spread softly
    /// over hostnames (maxSkew 3) and zones (maxSkew 5).
    pub system_default_spread: bool,
    /// `NodeResourcesBalancedAllocation` scores the change the pod makes to the node's balance
    /// (kube-scheduler 1.36 and later: `50 + (50 + with − without) / 2`); false (the default,
    /// until the documented examples are regenerated): the balance with the pod alone (1.35 and
    /// earlier). See [`SchedulerProfiles::for_version`].
    pub balanced_change: bool,
}

/// The name of kube-scheduler's default profile.
pub const DEFAULT_SCHEDULER: &str = crate::snapshot::DEFAULT_SCHEDULER_NAME;

impl Default for SchedulerProfile {
    fn default() -> Self {
        SchedulerProfile {
            scheduler_name: DEFAULT_SCHEDULER.to_string(),
            filters: Filters::default(),
            weights: Weights::default(),
            strategy: ScoringStrategy::LeastAllocated,
            fit_resources: default_resources(),
            balanced_resources: default_resources(),
            system_default_spread: true,
            balanced_change: false,
        }
    }
}

/// cpu and memory with weight 1 each (`defaults.go`).
pub fn default_resources() -> Vec<(String, i64)> {
    vec![("cpu".to_string(), 1), ("memory".to_string(), 1)]
}

/// The profiles of a scheduler configuration, looked up by `schedulerName`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerProfiles(pub Vec<SchedulerProfile>);

impl Default for SchedulerProfiles {
    /// kube-scheduler without a configuration file: one `default-scheduler` profile.
    fn default() -> Self {
        SchedulerProfiles(vec![SchedulerProfile::default()])
    }
}

impl SchedulerProfiles {
    /// The profiles as kube-scheduler `major.minor` scores with them: before 1.36
    /// `NodeResourcesBalancedAllocation` scored the balance with the pod alone.
    pub fn for_version(mut self, major: u32, minor: u32) -> Self {
        let change = (major, minor) >= (1, 36);
        for p in &mut self.0 {
            p.balanced_change = change;
        }
        self
    }

    /// The profile serving `scheduler_name` (`None`: no profile does; such pods are not predicted).
    pub fn get(&self, scheduler_name: &str) -> Option<&SchedulerProfile> {
        self.0.iter().find(|p| p.scheduler_name == scheduler_name)
    }
}
