//! Helpers for tests: concise builders of Kubernetes objects and one-call plugin runs.
//! Public so integration tests and benchmarks can use them too.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};

use crate::evictor::planner::PlanBackend;
use crate::evictor::{EvictionRecord, LimitValue};
use crate::framework::args::ArgsError;
use crate::framework::cycle::{CycleConfig, CycleReport, Profile, run_cycle};
use crate::framework::{BalancePlugin, DeschedulePlugin, Plugin};
use crate::plugins::default_evictor::DefaultEvictor;
use crate::snapshot::{Snapshot, SnapshotBuilder};

/// A fixed clock for tests: 2026-01-01T00:00:00Z.
pub fn now() -> Timestamp {
    Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `now()` minus `secs` seconds.
pub fn ago(secs: i64) -> Timestamp {
    Timestamp::from_second(now().as_second() - secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

/// Builds a test object (a node or a pod) step by step.
pub struct Builder<T>(pub T);

impl<T> Builder<T> {
    /// Applies an arbitrary change.
    pub fn with(mut self, f: impl FnOnce(&mut T)) -> Self {
        f(&mut self.0);
        self
    }
    /// The object.
    pub fn build(self) -> T {
        self.0
    }
}

impl<T: Metadata<Ty = ObjectMeta>> Builder<T> {
    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        put(&mut self.0.metadata_mut().labels, k, v);
        self
    }
    /// Adds an annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        put(&mut self.0.metadata_mut().annotations, k, v);
        self
    }
}

/// Sets `k` to `v` in `map`, creating it if absent.
fn put(map: &mut Option<BTreeMap<String, String>>, k: &str, v: &str) {
    map.get_or_insert_with(Default::default)
        .insert(k.into(), v.into());
}

/// Builds a Ready, schedulable node.
pub type NodeBuilder = Builder<core::Node>;

/// A Ready node `name` with 4 CPUs, 16Gi memory and 110 pods allocatable.
pub fn node(name: &str) -> NodeBuilder {
    let alloc: BTreeMap<String, Quantity> = [
        ("cpu".into(), q("4")),
        ("memory".into(), q("16Gi")),
        ("pods".into(), q("110")),
    ]
    .into();
    Builder(core::Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        spec: Some(core::NodeSpec::default()),
        status: Some(core::NodeStatus {
            allocatable: Some(alloc),
            conditions: Some(vec![core::NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    })
}

impl NodeBuilder {
    /// Sets allocatable cpu / memory / pods.
    pub fn allocatable(mut self, cpu: &str, memory: &str, pods: &str) -> Self {
        let s = self.0.status.get_or_insert_with(Default::default);
        let a = s.allocatable.get_or_insert_with(Default::default);
        a.insert("cpu".into(), q(cpu));
        a.insert("memory".into(), q(memory));
        a.insert("pods".into(), q(pods));
        self
    }
    /// Sets one allocatable resource.
    pub fn resource(mut self, name: &str, value: &str) -> Self {
        let s = self.0.status.get_or_insert_with(Default::default);
        s.allocatable
            .get_or_insert_with(Default::default)
            .insert(name.into(), q(value));
        self
    }
    /// Adds a taint.
    pub fn taint(mut self, key: &str, value: Option<&str>, effect: &str) -> Self {
        let spec = self.0.spec.get_or_insert_with(Default::default);
        spec.taints.get_or_insert_with(Vec::new).push(core::Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            ..Default::default()
        });
        self
    }
    /// Cordons the node.
    pub fn unschedulable(mut self) -> Self {
        self.0
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        self
    }
    /// Marks the node NotReady.
    pub fn not_ready(mut self) -> Self {
        if let Some(s) = self.0.status.as_mut() {
            s.conditions = Some(vec![core::NodeCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            }]);
        }
        self
    }
}

/// Nodes `name` labelled `zone=<zone>`, one per `(name, zone)`.
pub fn zoned_nodes(zones: &[(&str, &str)]) -> Vec<core::Node> {
    let zoned = |&(name, zone): &(&str, &str)| node(name).label("zone", zone).build();
    zones.iter().map(zoned).collect()
}

/// A selector matching `labels`.
pub fn match_labels(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels.iter().map(|&(k, v)| (k.into(), v.into())).collect()),
        ..Default::default()
    }
}

/// A pod (anti-)affinity term for pods with `labels` in the same `key` domain.
pub fn affinity_term(labels: &[(&str, &str)], key: &str) -> core::PodAffinityTerm {
    core::PodAffinityTerm {
        label_selector: Some(match_labels(labels)),
        topology_key: key.into(),
        ..Default::default()
    }
}

/// Required pod anti-affinity with `terms`.
pub fn required_anti_affinity(terms: Vec<core::PodAffinityTerm>) -> core::Affinity {
    required_pod_affinity(true, terms)
}

/// Required pod affinity with `terms`.
pub fn required_affinity(terms: Vec<core::PodAffinityTerm>) -> core::Affinity {
    required_pod_affinity(false, terms)
}

/// Required pod anti-affinity (`anti`) or affinity with `terms`.
fn required_pod_affinity(anti: bool, terms: Vec<core::PodAffinityTerm>) -> core::Affinity {
    let required = Some(terms);
    let mut affinity = core::Affinity::default();
    if anti {
        affinity.pod_anti_affinity = Some(core::PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: required,
            ..Default::default()
        });
    } else {
        affinity.pod_affinity = Some(core::PodAffinity {
            required_during_scheduling_ignored_during_execution: required,
            ..Default::default()
        });
    }
    affinity
}

/// Builds a pod.
pub type PodBuilder = Builder<core::Pod>;

/// A Running, Ready pod `namespace/name` on `node`, owned by ReplicaSet `rs-<name>`, one container
/// `app` (image `nginx`) requesting 100m CPU / 128Mi, started an hour before [`now`].
pub fn pod(namespace: &str, name: &str, node: &str) -> PodBuilder {
    let requests: BTreeMap<String, Quantity> =
        [("cpu".into(), q("100m")), ("memory".into(), q("128Mi"))].into();
    Builder(core::Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            uid: Some(format!("uid-{namespace}-{name}")),
            creation_timestamp: Some(Time(ago(3600))),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: format!("rs-{name}"),
                uid: format!("rs-uid-{namespace}-{name}"),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(core::PodSpec {
            node_name: if node.is_empty() {
                None
            } else {
                Some(node.into())
            },
            containers: vec![core::Container {
                name: "app".into(),
                image: Some("nginx".into()),
                resources: Some(core::ResourceRequirements {
                    requests: Some(requests),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            phase: Some("Running".into()),
            start_time: Some(Time(ago(3600))),
            conditions: Some(vec![core::PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            container_statuses: Some(vec![core::ContainerStatus {
                name: "app".into(),
                image: "nginx".into(),
                image_id: String::new(),
                ready: true,
                restart_count: 0,
                ..Default::default()
            }]),
            ..Default::default()
        }),
    })
}

impl PodBuilder {
    fn spec(&mut self) -> &mut core::PodSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }
    fn status(&mut self) -> &mut core::PodStatus {
        self.0.status.get_or_insert_with(Default::default)
    }
    /// Replaces the owner with one of `kind`/`name` (uid `<kind>-<name>`).
    pub fn owner(mut self, kind: &str, name: &str) -> Self {
        self.0.metadata.owner_references = Some(vec![OwnerReference {
            api_version: if kind == "Job" {
                "batch/v1".into()
            } else {
                "apps/v1".into()
            },
            kind: kind.into(),
            name: name.into(),
            uid: format!("{kind}-{name}"),
            controller: Some(true),
            ..Default::default()
        }]);
        self
    }
    /// Removes all owners (a bare pod).
    pub fn bare(mut self) -> Self {
        self.0.metadata.owner_references = None;
        self
    }
    /// Sets `spec.priority`.
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }
    /// Sets `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.into());
        self
    }
    /// Sets the first container's requests.
    pub fn requests(mut self, cpu: &str, memory: &str) -> Self {
        let c = &mut self.spec().containers[0];
        let r = c.resources.get_or_insert_with(Default::default);
        r.requests = Some([("cpu".into(), q(cpu)), ("memory".into(), q(memory))].into());
        self
    }
    /// Sets one request of the first container.
    pub fn request(mut self, name: &str, value: &str) -> Self {
        let c = &mut self.spec().containers[0];
        let r = c.resources.get_or_insert_with(Default::default);
        r.requests
            .get_or_insert_with(Default::default)
            .insert(name.into(), q(value));
        self
    }
    /// Removes every request and limit (BestEffort).
    pub fn best_effort(mut self) -> Self {
        for c in &mut self.spec().containers {
            c.resources = None;
        }
        self.status().qos_class = None;
        self
    }
    /// The first container's status, if the pod has one.
    fn first_container(&mut self) -> Option<&mut core::ContainerStatus> {
        self.status().container_statuses.as_mut()?.first_mut()
    }
    /// Sets the first container's restart count.
    pub fn restarts(mut self, n: i32) -> Self {
        if let Some(cs) = self.first_container() {
            cs.restart_count = n;
        }
        self
    }
    /// Sets the first container's state.
    fn state(mut self, state: core::ContainerState) -> Self {
        if let Some(cs) = self.first_container() {
            cs.state = Some(state);
        }
        self
    }
    /// Sets the first container's waiting reason (e.g. `CrashLoopBackOff`).
    pub fn waiting(self, reason: &str) -> Self {
        self.state(core::ContainerState {
            waiting: Some(core::ContainerStateWaiting {
                reason: Some(reason.into()),
                message: None,
            }),
            ..Default::default()
        })
    }
    /// Sets the first container's terminated state.
    pub fn terminated(self, reason: &str, exit_code: i32) -> Self {
        self.state(core::ContainerState {
            terminated: Some(core::ContainerStateTerminated {
                reason: Some(reason.into()),
                exit_code,
                ..Default::default()
            }),
            ..Default::default()
        })
    }
    /// Sets `status.startTime` (and creation time) to `secs` before [`now`].
    pub fn age(mut self, secs: i64) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(ago(secs)));
        self.status().start_time = Some(Time(ago(secs)));
        self
    }
    /// Adds `volume`.
    fn volume(mut self, volume: core::Volume) -> Self {
        self.spec()
            .volumes
            .get_or_insert_with(Vec::new)
            .push(volume);
        self
    }
    /// Adds a `hostPath` volume.
    pub fn host_path(self) -> Self {
        self.volume(core::Volume {
            name: "host".into(),
            host_path: Some(core::HostPathVolumeSource {
                path: "/var".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
    /// Adds an `emptyDir` volume.
    pub fn empty_dir(self) -> Self {
        self.volume(core::Volume {
            name: "scratch".into(),
            empty_dir: Some(Default::default()),
            ..Default::default()
        })
    }
    /// Adds a PVC volume.
    pub fn pvc(self, claim: &str) -> Self {
        self.volume(core::Volume {
            name: format!("pvc-{claim}"),
            persistent_volume_claim: Some(core::PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        })
    }
    /// Adds a toleration.
    pub fn toleration(
        mut self,
        key: &str,
        operator: &str,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(core::Toleration {
                key: Some(key.into()),
                operator: Some(operator.into()),
                value: value.map(Into::into),
                effect: effect.map(Into::into),
                ..Default::default()
            });
        self
    }
    /// Adds a nodeSelector entry.
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        put(&mut self.spec().node_selector, k, v);
        self
    }
    /// Sets `spec.affinity`.
    pub fn affinity(mut self, a: core::Affinity) -> Self {
        self.spec().affinity = Some(a);
        self
    }
    /// Marks the pod terminating.
    pub fn terminating(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(now()));
        self
    }
    /// Marks the pod not Ready.
    pub fn not_ready(mut self) -> Self {
        self.status().conditions = Some(vec![core::PodCondition {
            type_: "Ready".into(),
            status: "False".into(),
            ..Default::default()
        }]);
        self
    }
}

/// The deterministic synthetic cluster of [`crate::synth`] as a snapshot (tests only: panics if
/// it does not load).
pub fn synthetic_snapshot(nodes: usize, pods: usize, seed: u64) -> Snapshot {
    crate::snapshot::load::load_bytes(&synthetic_cluster_json(nodes, pods, seed))
        .expect("the synthetic cluster loads")
}

/// The JSON `List` of a synthetic cluster (see [`crate::synth`]).
pub fn synthetic_cluster_json(nodes: usize, pods: usize, seed: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    crate::synth::write_cluster(crate::synth::Shape { nodes, pods, seed }, &mut bytes)
        .expect("writing to memory cannot fail");
    bytes
}

/// Builds a snapshot from nodes and pods (panics on invalid test objects: tests only).
pub fn snapshot(nodes: Vec<core::Node>, pods: Vec<core::Pod>) -> Snapshot {
    let mut b = SnapshotBuilder::new();
    for n in &nodes {
        if let Err(e) = b.add_node(n) {
            panic!("invalid test node: {e}");
        }
    }
    for p in &pods {
        if let Err(e) = b.add_pod(p) {
            panic!("invalid test pod: {e}");
        }
    }
    b.build()
}

/// Runs one Deschedule plugin as a one-profile cycle with no limits; returns the records.
pub fn run_deschedule(
    plugin: Box<dyn DeschedulePlugin>,
    evictor: DefaultEvictor,
    snapshot: &mut Snapshot,
) -> Vec<EvictionRecord> {
    let profile = test_profile(evictor, vec![plugin], vec![]);
    run_profile(profile, &CycleConfig::default(), snapshot)
}

/// Runs one Balance plugin as a one-profile cycle with no limits; returns the records.
pub fn run_balance(
    plugin: Box<dyn BalancePlugin>,
    evictor: DefaultEvictor,
    snapshot: &mut Snapshot,
) -> Vec<EvictionRecord> {
    let profile = test_profile(evictor, vec![], vec![plugin]);
    run_profile(profile, &CycleConfig::default(), snapshot)
}

/// The Balance plugin `build` makes of `args` (a test fails when the args are refused or the
/// plugin is not a Balance plugin).
pub fn balance_plugin(
    build: fn(&serde_json::Value) -> Result<Plugin, ArgsError>,
    args: serde_json::Value,
) -> Box<dyn BalancePlugin> {
    match build(&args) {
        Ok(Plugin::Balance(p)) => p,
        Ok(_) => panic!("not a balance plugin"),
        Err(e) => panic!("{e}"),
    }
}

/// Runs the Balance plugin `build` makes of `args` on `nodes` and `pods` with the default
/// DefaultEvictor; returns the evicted pods' names.
pub fn run_built_balance(
    build: fn(&serde_json::Value) -> Result<Plugin, ArgsError>,
    args: serde_json::Value,
    nodes: Vec<core::Node>,
    pods: Vec<core::Pod>,
) -> Vec<String> {
    let mut snap = snapshot(nodes, pods);
    evicted_names(&run_balance(
        balance_plugin(build, args),
        DefaultEvictor::default(),
        &mut snap,
    ))
}

/// `count` pods `<prefix>0..` in `default` on `node`, each requesting `cpu` (and no memory).
pub fn pods_requesting(prefix: &str, node: &str, count: usize, cpu: &str) -> Vec<core::Pod> {
    (0..count)
        .map(|i| {
            pod("default", &format!("{prefix}{i}"), node)
                .requests(cpu, "0")
                .build()
        })
        .collect()
}

/// Profile `p` with the DefaultEvictor at its defaults and these plugins.
pub fn profile(
    deschedule: Vec<Box<dyn DeschedulePlugin>>,
    balance: Vec<Box<dyn BalancePlugin>>,
) -> Profile {
    let profile = test_profile(DefaultEvictor::default(), deschedule, balance);
    Profile {
        name: "p".into(),
        ..profile
    }
}

/// Asserts that `build` rejects every `(args, field, text)` case with an error naming `field`
/// whose message contains `text`.
pub fn assert_args_rejected(
    build: impl Fn(&serde_json::Value) -> Result<Plugin, ArgsError>,
    cases: &[(serde_json::Value, &str, &str)],
) {
    for (args, field, text) in cases {
        let e = match build(args) {
            Err(e) => e,
            Ok(_) => panic!("{args} should fail"),
        };
        assert_eq!(e.field, *field, "{args}: {e}");
        assert!(e.message.contains(text), "{args}: {e}");
    }
}

/// A cycle whose only limit is `n` evictions per node.
pub fn per_node_limit(n: u32) -> CycleConfig {
    CycleConfig {
        max_per_node: Some(LimitValue::Count(n)),
        ..Default::default()
    }
}

/// A cycle whose only limit is `n` evictions per namespace.
pub fn per_namespace_limit(n: u32) -> CycleConfig {
    CycleConfig {
        max_per_namespace: Some(LimitValue::Count(n)),
        ..Default::default()
    }
}

/// A cycle whose only limit is `n` evictions in all.
pub fn total_limit(n: u32) -> CycleConfig {
    CycleConfig {
        max_total: Some(n),
        ..Default::default()
    }
}

/// Runs a profile under `config` at [`now`], planning only; returns the records.
pub fn run_profile(
    profile: Profile,
    config: &CycleConfig,
    snapshot: &mut Snapshot,
) -> Vec<EvictionRecord> {
    plan_cycle(&[profile], config, snapshot).records
}

/// Runs `profiles` under `config` at [`now`], planning only; returns the cycle's report.
pub fn plan_cycle(
    profiles: &[Profile],
    config: &CycleConfig,
    snapshot: &mut Snapshot,
) -> CycleReport {
    let (report, _) = run_cycle(
        profiles,
        config,
        snapshot,
        now(),
        Box::new(PlanBackend::new()),
    );
    report
}

/// Profile `test` with `evictor` and these plugins.
fn test_profile(
    evictor: DefaultEvictor,
    deschedule: Vec<Box<dyn DeschedulePlugin>>,
    balance: Vec<Box<dyn BalancePlugin>>,
) -> Profile {
    Profile {
        name: "test".into(),
        evictor: Box::new(evictor),
        deschedule,
        balance,
    }
}

/// Names (`ns/name`) of the pods in `records`, in order.
pub fn evicted_names(records: &[EvictionRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.outcome.moves_pod())
        .map(|r| format!("{}/{}", r.namespace, r.name))
        .collect()
}
