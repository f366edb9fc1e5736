//! [`PodView`]: the few pod fields the engine reads, borrowed. Deserialized straight from JSON
//! (strings borrowed from the input, everything else skipped) when loading a snapshot file, or
//! built from a `k8s_openapi` Pod in live mode — one conversion path into the model either way.

mod fast;
mod reader;

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::api::core::v1 as core;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

/// A string map (labels, nodeSelector, resource lists) as borrowed pairs, in input order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Pairs<'a>(pub Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> Pairs<'a> {
    /// Borrows the pairs of a map of strings.
    pub fn from_map(m: Option<&'a std::collections::BTreeMap<String, String>>) -> Self {
        Pairs(
            m.into_iter()
                .flatten()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), Cow::Borrowed(v.as_str())))
                .collect(),
        )
    }
    /// Borrows the pairs of a resource list.
    pub fn from_quantities(
        m: Option<
            &'a std::collections::BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >,
        >,
    ) -> Self {
        Pairs(
            m.into_iter()
                .flatten()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), Cow::Borrowed(v.0.as_str())))
                .collect(),
        )
    }
    /// Whether these pairs equal the map `m` (order-independent; keys are unique in both).
    pub fn equals(&self, m: &std::collections::BTreeMap<String, String>) -> bool {
        self.0.len() == m.len()
            && self
                .0
                .iter()
                .all(|(k, v)| m.get(k.as_ref()).is_some_and(|x| x == v))
    }
    /// An owned map.
    pub fn to_map(&self) -> std::collections::BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Pairs<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Pairs<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs<'a>, A::Error> {
                let mut v = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(k) = map.next_key::<Cow<'de, str>>()? {
                    let val = map.next_value::<QuantityOrString<'de>>()?;
                    v.push((k, val.0));
                }
                Ok(Pairs(v))
            }
            fn visit_unit<E>(self) -> Result<Pairs<'a>, E> {
                Ok(Pairs::default())
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A string value; resource quantities may also be written as bare numbers.
struct QuantityOrString<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for QuantityOrString<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = QuantityOrString<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(QuantityOrString(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(QuantityOrString(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(QuantityOrString(Cow::Owned(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(QuantityOrString(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(QuantityOrString(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(QuantityOrString(Cow::Owned(v.to_string())))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(QuantityOrString(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// `metadata.ownerReferences[]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerView<'a> {
    /// apiVersion.
    #[serde(borrow, default)]
    pub api_version: Cow<'a, str>,
    /// kind.
    #[serde(borrow, default)]
    pub kind: Cow<'a, str>,
    /// name.
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// uid.
    #[serde(borrow, default)]
    pub uid: Cow<'a, str>,
    /// controller.
    #[serde(default)]
    pub controller: Option<bool>,
}

/// `metadata`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaView<'a> {
    /// name.
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    /// namespace.
    #[serde(borrow, default)]
    pub namespace: Option<Cow<'a, str>>,
    /// uid.
    #[serde(borrow, default)]
    pub uid: Option<Cow<'a, str>>,
    /// labels.
    #[serde(borrow, default)]
    pub labels: Pairs<'a>,
    /// annotations.
    #[serde(borrow, default)]
    pub annotations: Pairs<'a>,
    /// ownerReferences.
    #[serde(borrow, default)]
    pub owner_references: Option<Vec<OwnerView<'a>>>,
    /// creationTimestamp.
    #[serde(borrow, default)]
    pub creation_timestamp: Option<Cow<'a, str>>,
    /// deletionTimestamp.
    #[serde(borrow, default)]
    pub deletion_timestamp: Option<Cow<'a, str>>,
}

/// `resources`.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ResourcesView<'a> {
    /// requests.
    #[serde(borrow, default)]
    pub requests: Pairs<'a>,
    /// limits.
    #[serde(borrow, default)]
    pub limits: Pairs<'a>,
}

/// A container (or init container).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView<'a> {
    /// name (to find the container's status).
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// image.
    #[serde(borrow, default)]
    pub image: Option<Cow<'a, str>>,
    /// resources.
    #[serde(borrow, default)]
    pub resources: Option<ResourcesView<'a>>,
    /// restartPolicy (sidecar init containers: `Always`).
    #[serde(borrow, default)]
    pub restart_policy: Option<Cow<'a, str>>,
    /// ports, only those with a `hostPort` > 0 (the rest matter to no one here, and most
    /// containers have none of those: no allocation).
    #[serde(borrow, default, rename = "ports", deserialize_with = "host_ports")]
    pub host_ports: Vec<PortView<'a>>,
}

/// A container port.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct PortView<'a> {
    /// hostPort.
    #[serde(default, rename = "hostPort")]
    pub host_port: Option<i32>,
    /// protocol.
    #[serde(borrow, default)]
    pub protocol: Option<Cow<'a, str>>,
    /// hostIP.
    #[serde(borrow, default, rename = "hostIP")]
    pub host_ip: Option<Cow<'a, str>>,
}

impl PortView<'_> {
    /// Binds a port on the node: `hostPort` > 0.
    pub fn binds_host_port(&self) -> bool {
        self.host_port.unwrap_or(0) > 0
    }
}

/// `ports` (null or a list), keeping the entries with a host port.
fn host_ports<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Vec<PortView<'a>>, D::Error> {
    let mut ports = Option::<Vec<PortView<'a>>>::deserialize(d)?.unwrap_or_default();
    ports.retain(PortView::binds_host_port);
    Ok(ports)
}

/// `persistentVolumeClaim`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView<'a> {
    /// claimName.
    #[serde(borrow, default)]
    pub claim_name: Cow<'a, str>,
}

/// A volume: only its type (and claim name) matter.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeView<'a> {
    /// name.
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// hostPath present.
    #[serde(default, deserialize_with = "present")]
    pub host_path: bool,
    /// emptyDir present.
    #[serde(default, deserialize_with = "present")]
    pub empty_dir: bool,
    /// ephemeral present.
    #[serde(default, deserialize_with = "present")]
    pub ephemeral: bool,
    /// persistentVolumeClaim.
    #[serde(borrow, default)]
    pub persistent_volume_claim: Option<ClaimView<'a>>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(d)?.is_some())
}

/// `spec`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView<'a> {
    /// nodeName.
    #[serde(borrow, default)]
    pub node_name: Option<Cow<'a, str>>,
    /// priority.
    #[serde(default)]
    pub priority: Option<i32>,
    /// priorityClassName.
    #[serde(borrow, default)]
    pub priority_class_name: Option<Cow<'a, str>>,
    /// schedulerName.
    #[serde(borrow, default)]
    pub scheduler_name: Option<Cow<'a, str>>,
    /// nodeSelector.
    #[serde(borrow, default)]
    pub node_selector: Pairs<'a>,
    /// affinity.
    #[serde(default)]
    pub affinity: Option<Cow<'a, core::Affinity>>,
    /// tolerations.
    #[serde(default)]
    pub tolerations: Option<Cow<'a, [core::Toleration]>>,
    /// topologySpreadConstraints.
    #[serde(default)]
    pub topology_spread_constraints: Option<Cow<'a, [core::TopologySpreadConstraint]>>,
    /// containers.
    #[serde(borrow, default)]
    pub containers: Vec<ContainerView<'a>>,
    /// initContainers.
    #[serde(borrow, default)]
    pub init_containers: Vec<ContainerView<'a>>,
    /// overhead.
    #[serde(borrow, default)]
    pub overhead: Pairs<'a>,
    /// resources (pod-level requests and limits).
    #[serde(borrow, default)]
    pub resources: Option<ResourcesView<'a>>,
    /// volumes.
    #[serde(borrow, default)]
    pub volumes: Vec<VolumeView<'a>>,
    /// resourceClaims is non-empty.
    #[serde(default, deserialize_with = "non_empty_list")]
    pub resource_claims: bool,
    /// terminationGracePeriodSeconds is present (even `null`): the pod sets its own grace
    /// period, which an eviction does not override with the policy's.
    #[serde(
        default,
        rename = "terminationGracePeriodSeconds",
        deserialize_with = "key_present"
    )]
    pub sets_grace_period: bool,
}

/// The key is there, whatever its value (`null` too).
fn key_present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(d).map(|_| true)
}

fn non_empty_list<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<Vec<IgnoredAny>>::deserialize(d)?.is_some_and(|v| !v.is_empty()))
}

/// A pod condition.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView<'a> {
    /// type.
    #[serde(borrow, default, rename = "type")]
    pub type_: Cow<'a, str>,
    /// status.
    #[serde(borrow, default)]
    pub status: Cow<'a, str>,
    /// reason.
    #[serde(borrow, default)]
    pub reason: Option<Cow<'a, str>>,
    /// lastTransitionTime.
    #[serde(borrow, default)]
    pub last_transition_time: Option<Cow<'a, str>>,
}

/// `state.waiting` / `state.terminated`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateDetailView<'a> {
    /// reason.
    #[serde(borrow, default)]
    pub reason: Option<Cow<'a, str>>,
    /// exitCode (terminated only).
    #[serde(default)]
    pub exit_code: Option<i32>,
}

/// `state` / `lastState`.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct StateView<'a> {
    /// waiting.
    #[serde(borrow, default)]
    pub waiting: Option<StateDetailView<'a>>,
    /// terminated.
    #[serde(borrow, default)]
    pub terminated: Option<StateDetailView<'a>>,
}

/// A container status.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatusView<'a> {
    /// name.
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// restartCount.
    #[serde(default)]
    pub restart_count: i32,
    /// ready.
    #[serde(default)]
    pub ready: bool,
    /// state.
    #[serde(borrow, default)]
    pub state: Option<StateView<'a>>,
    /// lastState.
    #[serde(borrow, default)]
    pub last_state: Option<StateView<'a>>,
    /// allocatedResources (what the kubelet admitted, after an in-place resize too).
    #[serde(borrow, default)]
    pub allocated_resources: Pairs<'a>,
    /// resources (what the container runtime actuates).
    #[serde(borrow, default)]
    pub resources: Option<ResourcesView<'a>>,
}

/// `status`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView<'a> {
    /// phase.
    #[serde(borrow, default)]
    pub phase: Option<Cow<'a, str>>,
    /// reason.
    #[serde(borrow, default)]
    pub reason: Option<Cow<'a, str>>,
    /// startTime.
    #[serde(borrow, default)]
    pub start_time: Option<Cow<'a, str>>,
    /// qosClass.
    #[serde(borrow, default)]
    pub qos_class: Option<Cow<'a, str>>,
    /// conditions.
    #[serde(borrow, default)]
    pub conditions: Vec<ConditionView<'a>>,
    /// containerStatuses.
    #[serde(borrow, default)]
    pub container_statuses: Vec<ContainerStatusView<'a>>,
    /// initContainerStatuses.
    #[serde(borrow, default)]
    pub init_container_statuses: Vec<ContainerStatusView<'a>>,
    /// ephemeralContainerStatuses.
    #[serde(borrow, default)]
    pub ephemeral_container_statuses: Vec<ContainerStatusView<'a>>,
    /// allocatedResources (pod level).
    #[serde(borrow, default)]
    pub allocated_resources: Pairs<'a>,
    /// resources (pod level, actuated).
    #[serde(borrow, default)]
    pub resources: Option<ResourcesView<'a>>,
}

/// The pod fields the engine reads.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct PodView<'a> {
    /// metadata.
    #[serde(borrow, default)]
    pub metadata: MetaView<'a>,
    /// spec.
    #[serde(borrow, default)]
    pub spec: SpecView<'a>,
    /// status.
    #[serde(borrow, default)]
    pub status: StatusView<'a>,
}

fn b(s: &Option<String>) -> Option<Cow<'_, str>> {
    s.as_deref().map(Cow::Borrowed)
}

fn time(
    t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> Option<Cow<'static, str>> {
    t.as_ref().map(|t| Cow::Owned(t.0.to_string()))
}

fn resources_view(r: &core::ResourceRequirements) -> ResourcesView<'_> {
    ResourcesView {
        requests: Pairs::from_quantities(r.requests.as_ref()),
        limits: Pairs::from_quantities(r.limits.as_ref()),
    }
}

fn container_view(c: &core::Container) -> ContainerView<'_> {
    ContainerView {
        name: Cow::Borrowed(&c.name),
        image: b(&c.image),
        resources: c.resources.as_ref().map(resources_view),
        restart_policy: b(&c.restart_policy),
        host_ports: c
            .ports
            .iter()
            .flatten()
            .map(|p| PortView {
                host_port: p.host_port,
                protocol: b(&p.protocol),
                host_ip: b(&p.host_ip),
            })
            .filter(PortView::binds_host_port)
            .collect(),
    }
}

fn state_view(st: &Option<core::ContainerState>) -> StateView<'_> {
    StateView {
        waiting: st
            .as_ref()
            .and_then(|x| x.waiting.as_ref())
            .map(|w| StateDetailView {
                reason: b(&w.reason),
                exit_code: None,
            }),
        terminated: st
            .as_ref()
            .and_then(|x| x.terminated.as_ref())
            .map(|t| StateDetailView {
                reason: b(&t.reason),
                exit_code: Some(t.exit_code),
            }),
    }
}

fn status_view(s: &core::ContainerStatus) -> ContainerStatusView<'_> {
    let detail = state_view;
    ContainerStatusView {
        name: Cow::Borrowed(&s.name),
        restart_count: s.restart_count,
        ready: s.ready,
        state: Some(detail(&s.state)),
        last_state: Some(detail(&s.last_state)),
        allocated_resources: Pairs::from_quantities(s.allocated_resources.as_ref()),
        resources: s.resources.as_ref().map(resources_view),
    }
}

impl<'a> PodView<'a> {
    /// Decodes a pod from JSON text the way its `Deserialize` impl does, faster: a hand-written
    /// reader covers the usual shape and serde the rest (and reports errors).
    pub fn from_json(text: &'a str) -> serde_json::Result<Self> {
        match fast::pod_view(text) {
            Some(v) => Ok(v),
            None => serde_json::from_str(text),
        }
    }

    /// Fills this (empty, default) view from JSON text with the fast reader of
    /// [`Self::from_json`]. `false`: the text needs the serde decoder, and the view is partial.
    pub fn fill_from_json(&mut self, text: &'a str) -> bool {
        fast::pod_view_into(text, self).is_some()
    }

    /// Borrows the fields the engine reads from a Kubernetes Pod.
    pub fn from_pod(p: &'a core::Pod) -> Self {
        PodView {
            metadata: meta_view(&p.metadata),
            spec: p.spec.as_ref().map(spec_view).unwrap_or_default(),
            status: p.status.as_ref().map(pod_status_view).unwrap_or_default(),
        }
    }
}

fn meta_view(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> MetaView<'_> {
    MetaView {
        name: b(&m.name),
        namespace: b(&m.namespace),
        uid: b(&m.uid),
        labels: Pairs::from_map(m.labels.as_ref()),
        annotations: Pairs::from_map(m.annotations.as_ref()),
        owner_references: m.owner_references.as_ref().map(|os| {
            os.iter()
                .map(|o| OwnerView {
                    api_version: Cow::Borrowed(&o.api_version),
                    kind: Cow::Borrowed(&o.kind),
                    name: Cow::Borrowed(&o.name),
                    uid: Cow::Borrowed(&o.uid),
                    controller: o.controller,
                })
                .collect()
        }),
        creation_timestamp: time(&m.creation_timestamp),
        deletion_timestamp: time(&m.deletion_timestamp),
    }
}

fn volume_view(v: &core::Volume) -> VolumeView<'_> {
    VolumeView {
        name: Cow::Borrowed(&v.name),
        host_path: v.host_path.is_some(),
        empty_dir: v.empty_dir.is_some(),
        ephemeral: v.ephemeral.is_some(),
        persistent_volume_claim: v.persistent_volume_claim.as_ref().map(|c| ClaimView {
            claim_name: Cow::Borrowed(&c.claim_name),
        }),
    }
}

fn spec_view(s: &core::PodSpec) -> SpecView<'_> {
    SpecView {
        node_name: b(&s.node_name),
        priority: s.priority,
        priority_class_name: b(&s.priority_class_name),
        scheduler_name: b(&s.scheduler_name),
        node_selector: Pairs::from_map(s.node_selector.as_ref()),
        affinity: s.affinity.as_ref().map(Cow::Borrowed),
        tolerations: s.tolerations.as_deref().map(Cow::Borrowed),
        topology_spread_constraints: s.topology_spread_constraints.as_deref().map(Cow::Borrowed),
        containers: s.containers.iter().map(container_view).collect(),
        init_containers: s
            .init_containers
            .iter()
            .flatten()
            .map(container_view)
            .collect(),
        overhead: Pairs::from_quantities(s.overhead.as_ref()),
        resources: s.resources.as_ref().map(resources_view),
        volumes: s.volumes.iter().flatten().map(volume_view).collect(),
        resource_claims: s.resource_claims.as_ref().is_some_and(|c| !c.is_empty()),
        sets_grace_period: s.termination_grace_period_seconds.is_some(),
    }
}

fn pod_status_view(s: &core::PodStatus) -> StatusView<'_> {
    StatusView {
        phase: b(&s.phase),
        reason: b(&s.reason),
        start_time: time(&s.start_time),
        qos_class: b(&s.qos_class),
        conditions: s
            .conditions
            .iter()
            .flatten()
            .map(|c| ConditionView {
                type_: Cow::Borrowed(&c.type_),
                status: Cow::Borrowed(&c.status),
                reason: b(&c.reason),
                last_transition_time: time(&c.last_transition_time),
            })
            .collect(),
        container_statuses: statuses_view(&s.container_statuses),
        init_container_statuses: statuses_view(&s.init_container_statuses),
        ephemeral_container_statuses: statuses_view(&s.ephemeral_container_statuses),
        allocated_resources: Pairs::from_quantities(s.allocated_resources.as_ref()),
        resources: s.resources.as_ref().map(resources_view),
    }
}

fn statuses_view(list: &Option<Vec<core::ContainerStatus>>) -> Vec<ContainerStatusView<'_>> {
    list.iter().flatten().map(status_view).collect()
}
