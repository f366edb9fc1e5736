//! Effective pod requests and QoS class, as the scheduler and the kubelet compute them.

use std::sync::Arc;

use super::ConvertError;
use crate::snapshot::model::QosClass;
use crate::snapshot::resources::{self, Resources};
use crate::snapshot::view::{
    ContainerStatusView, ContainerView, Pairs, ResourcesView, SpecView, StatusView,
};

fn resources_of(
    pairs: &Pairs<'_>,
    field: &dyn Fn(&str) -> String,
) -> Result<Resources, ConvertError> {
    let mut r = Resources::default();
    for (name, q) in &pairs.0 {
        let parsed = crate::quantity::Quantity::parse(q).map_err(|e| ConvertError {
            field: field(name),
            message: e.to_string(),
        })?;
        r.set(
            name,
            if name == resources::CPU {
                parsed.milli_value()
            } else {
                parsed.value()
            },
        );
    }
    Ok(r)
}

/// Requests of one container; a resource with a limit but no request defaults to the limit, as the
/// API server's defaulting does.
fn container_requests(
    c: &ContainerView<'_>,
    list: &str,
    index: usize,
) -> Result<Resources, ConvertError> {
    let Some(res) = c.resources.as_ref() else {
        return Ok(Resources::default());
    };
    let field = |kind: &str, n: &str| format!("spec.{list}[{index}].resources.{kind}.{n}");
    let mut r = resources_of(&res.limits, &|n| field("limits", n))?;
    let req = resources_of(&res.requests, &|n| field("requests", n))?;
    for (name, _) in &res.requests.0 {
        r.set(name, req.get(name));
    }
    Ok(r)
}

/// What one container contributes: its spec requests, or what its status says (see
/// [`pod_requests_of`]). `None`: nothing (a resize the kubelet found infeasible, without status).
type PerContainer<'f> =
    dyn FnMut(&ContainerView<'_>, &str, usize) -> Result<Option<Resources>, ConvertError> + 'f;

/// The containers' requests summed as the scheduler does (`aggregateContainerResourcesByFn`): the
/// larger of the containers' sum and the init phase peak (restartable "sidecar" init containers
/// keep running and add up).
fn aggregate(spec: &SpecView<'_>, each: &mut PerContainer<'_>) -> Result<Resources, ConvertError> {
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        if let Some(r) = each(c, "containers", i)? {
            sum.add(&r);
        }
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().enumerate() {
        let req = each(c, "initContainers", i)?.unwrap_or_default();
        let phase = if c.restart_policy.as_deref() == Some("Always") {
            sum.add(&req);
            sidecars.add(&req);
            sidecars.clone()
        } else {
            let mut r = req;
            r.add(&sidecars);
            r
        };
        init_peak.max_with(&phase);
    }
    sum.max_with(&init_peak);
    Ok(sum)
}

/// Whether kube-scheduler manages `name` at pod level (`IsSupportedPodLevelResource`: cpu, memory
/// and hugepages).
fn pod_level_resource(name: &str) -> bool {
    name == resources::CPU || name == resources::MEMORY || name.starts_with("hugepages-")
}

/// `spec.resources.requests` when it names a resource managed at pod level
/// (`IsPodLevelRequestsSet`).
fn pod_level_requests<'s>(spec: &'s SpecView<'_>) -> Option<&'s Pairs<'s>> {
    let requests = &spec.resources.as_ref()?.requests;
    requests
        .0
        .iter()
        .any(|(name, _)| pod_level_resource(name))
        .then_some(requests)
}

/// Whether the pod's `PodResizePending` condition (the first one) says `Infeasible`
/// (`IsPodResizeInfeasible`).
fn resize_infeasible(status: &StatusView<'_>) -> bool {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "PodResizePending")
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// The status of the container named `name` (`findContainerStatus`: containers first, then init
/// containers), with the field path of its list entry.
fn container_status<'s, 'a>(
    status: &'s StatusView<'a>,
    name: &str,
) -> Option<(String, &'s ContainerStatusView<'a>)> {
    fn find<'s, 'a>(
        list: &'s [ContainerStatusView<'a>],
        name: &str,
        field: &str,
    ) -> Option<(String, &'s ContainerStatusView<'a>)> {
        let i = list.iter().position(|cs| cs.name == name)?;
        Some((format!("status.{field}[{i}]"), &list[i]))
    }
    find(&status.container_statuses, name, "containerStatuses").or_else(|| {
        find(
            &status.init_container_statuses,
            name,
            "initContainerStatuses",
        )
    })
}

/// The largest of `to` and `others`, resource by resource (`max`; an absent resource is zero).
fn max_of(mut to: Resources, others: &[&Resources]) -> Resources {
    for o in others {
        to.max_with(o);
    }
    to
}

/// `list` less `overhead` for the resources `list` names, never below zero
/// (`subtractResourceList`).
fn less_overhead(mut list: Resources, named: &Pairs<'_>, overhead: &Resources) -> Resources {
    for (name, _) in &named.0 {
        list.set(name, (list.get(name) - overhead.get(name)).max(0));
    }
    list
}

/// Whether the pod's status carries anything [`pod_requests_of`] reads with `with_status`: without
/// it, the resize-aware requests are the spec's.
fn status_has_resources(status: &StatusView<'_>) -> bool {
    let any = |list: &[ContainerStatusView<'_>]| {
        list.iter()
            .any(|cs| !cs.allocated_resources.0.is_empty() || cs.resources.is_some())
    };
    !status.allocated_resources.0.is_empty()
        || status.resources.is_some()
        || any(&status.container_statuses)
        || any(&status.init_container_statuses)
        || resize_infeasible(status)
}

/// Effective pod requests as component-helpers' `PodRequests` computes them, with pod-level
/// resources (PodLevelResources, on by default since Kubernetes 1.34) and overhead.
///
/// `with_status: None` is the spec alone (`UseStatusResources: false`), as the descheduler's
/// utilization plugins count. `Some(status)` is kube-scheduler's view (`UseStatusResources` and
/// `InPlacePodLevelResourcesVerticalScalingEnabled`, both on by default in 1.37): per resource the
/// largest of the spec, what the kubelet allocated and what it actuates — the containers' statuses
/// summed, or the pod-level status when it has both — and without the spec when the pod's resize
/// is `Infeasible` (the spec then asks for what the node cannot give). Requests from DRA
/// node-allocatable resource claims are not counted (the snapshot does not read them).
pub fn pod_requests_of(
    spec: &SpecView<'_>,
    with_status: Option<&StatusView<'_>>,
) -> Result<Resources, ConvertError> {
    let mut spec_each =
        |c: &ContainerView<'_>, list: &str, i: usize| container_requests(c, list, i).map(Some);
    let spec_sum = aggregate(spec, &mut spec_each)?;
    let overhead = resources_of(&spec.overhead, &|n| format!("spec.overhead.{n}"))?;
    let infeasible = with_status.is_some_and(resize_infeasible);
    let mut sum = match with_status {
        None => spec_sum,
        Some(status) => {
            let pod_status = status
                .resources
                .as_ref()
                .filter(|r| !status.allocated_resources.0.is_empty() && !r.requests.0.is_empty());
            let (allocated, actuated) = match pod_status {
                Some(actuated) => (
                    resources_of(&status.allocated_resources, &|n| {
                        format!("status.allocatedResources.{n}")
                    })?,
                    resources_of(&actuated.requests, &|n| {
                        format!("status.resources.requests.{n}")
                    })?,
                ),
                None => container_statuses_sum(spec, status, infeasible)?,
            };
            if infeasible {
                max_of(actuated, &[&allocated])
            } else {
                max_of(spec_sum, &[&actuated, &allocated])
            }
        }
    };
    let empty = Pairs::default();
    if let Some(pod_level) = pod_level_requests(spec) {
        let mut effective = resources_of(pod_level, &|n| format!("spec.resources.requests.{n}"))?;
        let mut names: Vec<&str> = pod_level.0.iter().map(|(n, _)| n.as_ref()).collect();
        if let Some(status) = with_status
            && (status.resources.is_some() || !status.allocated_resources.0.is_empty())
        {
            let actuated_pairs = status.resources.as_ref().map_or(&empty, |r| &r.requests);
            let actuated = resources_of(actuated_pairs, &|n| {
                format!("status.resources.requests.{n}")
            })?;
            let allocated = resources_of(&status.allocated_resources, &|n| {
                format!("status.allocatedResources.{n}")
            })?;
            let actuated = less_overhead(actuated, actuated_pairs, &overhead);
            let allocated = less_overhead(allocated, &status.allocated_resources, &overhead);
            if infeasible {
                effective = Resources::default();
                names.clear();
            }
            effective = max_of(effective, &[&actuated, &allocated]);
            names.extend(actuated_pairs.0.iter().map(|(n, _)| n.as_ref()));
            names.extend(status.allocated_resources.0.iter().map(|(n, _)| n.as_ref()));
        }
        // `applyPodLevelResources`: the pod-level amounts replace the containers' total for the
        // resources managed at pod level.
        for name in names {
            if pod_level_resource(name) {
                sum.set(name, effective.get(name));
            }
        }
    }
    sum.add(&overhead);
    sum.pods = 1;
    Ok(sum)
}

/// The containers' allocated and actuated requests summed (`containerAllocatedRequests`,
/// `containerActuatedRequests`): a container's status when it has them, else its spec (nothing
/// when the pod's resize is infeasible).
fn container_statuses_sum(
    spec: &SpecView<'_>,
    status: &StatusView<'_>,
    infeasible: bool,
) -> Result<(Resources, Resources), ConvertError> {
    let fallback = |c: &ContainerView<'_>, list: &str, i: usize| {
        if infeasible {
            Ok(None)
        } else {
            container_requests(c, list, i).map(Some)
        }
    };
    let allocated = |cs: &ContainerStatusView<'_>, field: &str| {
        (!cs.allocated_resources.0.is_empty())
            .then(|| {
                resources_of(&cs.allocated_resources, &|n| {
                    format!("{field}.allocatedResources.{n}")
                })
            })
            .transpose()
    };
    let mut allocated_each =
        |c: &ContainerView<'_>, list: &str, i: usize| -> Result<Option<Resources>, ConvertError> {
            if let Some((field, cs)) = container_status(status, &c.name)
                && let Some(r) = allocated(cs, &field)?
            {
                return Ok(Some(r));
            }
            fallback(c, list, i)
        };
    let allocated_sum = aggregate(spec, &mut allocated_each)?;
    let mut actuated_each = |c: &ContainerView<'_>,
                             list: &str,
                             i: usize|
     -> Result<Option<Resources>, ConvertError> {
        if let Some((field, cs)) = container_status(status, &c.name) {
            if let Some(r) = cs.resources.as_ref().filter(|r| !r.requests.0.is_empty()) {
                return resources_of(&r.requests, &|n| format!("{field}.resources.requests.{n}"))
                    .map(Some);
            }
            if let Some(r) = allocated(cs, &field)? {
                return Ok(Some(r));
            }
        }
        fallback(c, list, i)
    };
    let actuated_sum = aggregate(spec, &mut actuated_each)?;
    Ok((allocated_sum, actuated_sum))
}

/// Effective pod requests from the spec alone (with pod-level resources and overhead), as the
/// descheduler's utilization plugins count them; see [`pod_requests_of`].
pub fn pod_requests(spec: &SpecView<'_>) -> Result<Resources, ConvertError> {
    pod_requests_of(spec, None)
}

/// QoS class from the containers' requests and limits (Kubernetes `GetPodQOS`).
pub(super) fn compute_qos(spec: &SpecView<'_>) -> QosClass {
    let mut any = false;
    let mut guaranteed = true;
    let get = |p: &Pairs<'_>, name: &str| {
        p.0.iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| crate::quantity::Quantity::parse(v).ok())
    };
    for c in spec.containers.iter().chain(spec.init_containers.iter()) {
        let empty = ResourcesView::default();
        let res = c.resources.as_ref().unwrap_or(&empty);
        for name in [resources::CPU, resources::MEMORY] {
            // As `GetPodQOS`: zero quantities do not count.
            let nonzero = |q: Option<crate::quantity::Quantity>| q.filter(|q| q.milli_value() > 0);
            let (r, l) = (
                nonzero(get(&res.requests, name)),
                nonzero(get(&res.limits, name)),
            );
            if r.is_some() || l.is_some() {
                any = true;
            }
            match (r.or(l), l) {
                (Some(a), Some(b)) if a == b => {}
                _ => guaranteed = false,
            }
        }
    }
    if !any {
        QosClass::BestEffort
    } else if guaranteed {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// One field a pod's requests and QoS class are computed from, as [`visit_inputs`] lists them.
#[derive(Clone, Copy)]
enum Input<'a> {
    /// How many pairs (or containers) follow.
    Count(usize),
    /// A resource name or quantity as written.
    Text(&'a str),
    /// Whether an init container is a sidecar (`restartPolicy: Always`).
    Sidecar(bool),
}

/// [`Input`], owned.
#[derive(Debug, Clone, PartialEq)]
enum OwnedInput {
    Count(usize),
    Text(Box<str>),
    Sidecar(bool),
}

impl OwnedInput {
    fn of(input: Input<'_>) -> Self {
        match input {
            Input::Count(n) => OwnedInput::Count(n),
            Input::Text(t) => OwnedInput::Text(t.into()),
            Input::Sidecar(s) => OwnedInput::Sidecar(s),
        }
    }

    fn is(&self, input: Input<'_>) -> bool {
        match (self, input) {
            (OwnedInput::Count(a), Input::Count(b)) => *a == b,
            (OwnedInput::Text(a), Input::Text(b)) => **a == *b,
            (OwnedInput::Sidecar(a), Input::Sidecar(b)) => *a == b,
            _ => false,
        }
    }
}

/// The requests and limits of `r` (empty when absent).
fn requests_and_limits<'s, 'a>(r: Option<&'s ResourcesView<'a>>) -> (&'s Pairs<'a>, &'s Pairs<'a>) {
    const EMPTY: &Pairs<'static> = &Pairs(Vec::new());
    r.map_or((EMPTY, EMPTY), |r| (&r.requests, &r.limits))
}

/// Every field [`pod_requests_of`] (with and without status) and [`compute_qos`] read, in one
/// unambiguous sequence (counts and flags before what they qualify): two pods with the same
/// sequence have the same requests and class.
fn visit_inputs<'s>(
    spec: &'s SpecView<'_>,
    status: &'s StatusView<'_>,
    f: &mut impl FnMut(Input<'s>),
) {
    let pairs = |p: &'s Pairs<'_>, f: &mut dyn FnMut(Input<'s>)| {
        f(Input::Count(p.0.len()));
        for (k, v) in &p.0 {
            f(Input::Text(k));
            f(Input::Text(v));
        }
    };

    for (containers, init) in [(&spec.containers, false), (&spec.init_containers, true)] {
        f(Input::Count(containers.len()));
        for c in containers {
            if init {
                f(Input::Sidecar(
                    c.restart_policy.as_deref() == Some("Always"),
                ));
            }
            f(Input::Text(&c.name));
            let (requests, limits) = requests_and_limits(c.resources.as_ref());
            pairs(requests, f);
            pairs(limits, f);
        }
    }
    pairs(&spec.overhead, f);
    f(Input::Sidecar(spec.resources.is_some()));
    let (requests, limits) = requests_and_limits(spec.resources.as_ref());
    pairs(requests, f);
    pairs(limits, f);
    let with_status = status_has_resources(status);
    f(Input::Sidecar(with_status));
    if with_status {
        f(Input::Sidecar(resize_infeasible(status)));
        for list in [&status.container_statuses, &status.init_container_statuses] {
            f(Input::Count(list.len()));
            for cs in list {
                f(Input::Text(&cs.name));
                pairs(&cs.allocated_resources, f);
                f(Input::Sidecar(cs.resources.is_some()));
                pairs(requests_and_limits(cs.resources.as_ref()).0, f);
            }
        }
        pairs(&status.allocated_resources, f);
        f(Input::Sidecar(status.resources.is_some()));
        pairs(requests_and_limits(status.resources.as_ref()).0, f);
    }
}

/// A pod's requests: from the spec (the utilization plugins' view) and, when the pod's status says
/// otherwise, kube-scheduler's resize-aware view (see [`pod_requests_of`]).
#[derive(Clone)]
pub(super) struct PodRequests {
    /// From the spec.
    pub spec: Arc<Resources>,
    /// Resize-aware, when not the same as `spec`.
    pub scheduler: Option<Arc<Resources>>,
}

/// The requests and computed QoS class of the last pod seen (of one owner), with the fields they
/// were computed from: the next pod with the same fields shares them instead of parsing its
/// quantities again (the pods of one owner almost always have the same).
#[derive(Default, Clone)]
pub(super) struct RequestsMemo {
    inputs: Vec<OwnedInput>,
    requests: Option<PodRequests>,
    qos: Option<QosClass>,
}

impl RequestsMemo {
    /// Whether the pod has the fields the memo was computed from; else it forgets them.
    fn holds(&mut self, spec: &SpecView<'_>, status: &StatusView<'_>) -> bool {
        let mut at = 0;
        let mut same = true;
        visit_inputs(spec, status, &mut |input| {
            same = same && self.inputs.get(at).is_some_and(|o| o.is(input));
            at += 1;
        });
        if same && at == self.inputs.len() {
            return true;
        }
        self.inputs.clear();
        visit_inputs(spec, status, &mut |input| {
            self.inputs.push(OwnedInput::of(input))
        });
        self.requests = None;
        self.qos = None;
        false
    }

    /// The pod's requests, shared with the last pod that had the same fields, and its QoS class:
    /// `stated` (`status.qosClass`) when given, else [`compute_qos`] (also remembered).
    pub(super) fn requests_and_qos(
        &mut self,
        spec: &SpecView<'_>,
        status: &StatusView<'_>,
        stated: Option<QosClass>,
    ) -> Result<(PodRequests, QosClass), ConvertError> {
        let held = self.holds(spec, status);
        let requests = match &self.requests {
            Some(r) if held => r.clone(),
            _ => {
                let from_spec = pod_requests_of(spec, None)?;
                let scheduler = if status_has_resources(status) {
                    Some(pod_requests_of(spec, Some(status))?).filter(|r| *r != from_spec)
                } else {
                    None
                };
                let r = PodRequests {
                    spec: Arc::new(from_spec),
                    scheduler: scheduler.map(Arc::new),
                };
                self.requests = Some(r.clone());
                r
            }
        };
        let qos = match (stated, self.qos) {
            (Some(q), _) => q,
            (None, Some(q)) => q,
            (None, None) => {
                let q = compute_qos(spec);
                self.qos = Some(q);
                q
            }
        };
        Ok((requests, qos))
    }
}

#[cfg(test)]
mod upstream_cases;

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1 as core;

    use super::*;
    use crate::snapshot::SnapshotBuilder;
    use crate::snapshot::view::PodView;
    use crate::testing::pod;

    /// One owner for every pod, so that each pod meets the memo of the pod before it.
    fn owned(p: crate::testing::PodBuilder) -> core::Pod {
        p.owner("ReplicaSet", "web").build()
    }

    /// The pods converted by one builder, in order.
    fn convert(pods: Vec<core::Pod>) -> Vec<Arc<crate::snapshot::Pod>> {
        let mut b = SnapshotBuilder::new();
        for p in &pods {
            b.add_pod(p).unwrap();
        }
        b.take_parts().pods
    }

    /// A sidecar init container (`restartPolicy: Always`) with `cpu` requested.
    fn init_container(cpu: &str, sidecar: bool) -> core::Container {
        core::Container {
            name: "init".into(),
            restart_policy: sidecar.then(|| "Always".into()),
            resources: Some(core::ResourceRequirements {
                requests: Some(
                    [(
                        "cpu".to_string(),
                        k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu.into()),
                    )]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pods_of_one_owner_with_the_same_resources_share_their_requests() {
        let pods = convert(vec![
            owned(pod("a", "p1", "n")),
            owned(pod("a", "p2", "n")),
            owned(pod("a", "p3", "n").requests("200m", "128Mi")),
            owned(pod("a", "p4", "n").requests("200m", "128Mi")),
        ]);
        assert_eq!(pods[0].requests.cpu_milli, 100);
        assert!(Arc::ptr_eq(&pods[0].requests, &pods[1].requests));
        // A different quantity is parsed, not taken from the pod before.
        assert_eq!(pods[2].requests.cpu_milli, 200);
        assert_eq!(pods[2].requests.memory, 128 << 20);
        assert!(Arc::ptr_eq(&pods[2].requests, &pods[3].requests));
    }

    #[test]
    fn where_a_container_is_and_whether_it_is_a_sidecar_change_the_requests() {
        // The same fields in other places: each pod's requests are its own, as computed alone.
        let plain = owned(pod("a", "plain", "n").requests("100m", "0"));
        let with_init = |name: &str, cpu: &str, sidecar: bool| {
            owned(pod("a", name, "n").requests("100m", "0").with(|p| {
                p.spec.get_or_insert_with(Default::default).init_containers =
                    Some(vec![init_container(cpu, sidecar)]);
            }))
        };
        let pods = vec![
            plain,
            with_init("init", "500m", false),
            with_init("sidecar", "500m", true),
            with_init("small-sidecar", "50m", true),
            with_init("init-again", "500m", false),
        ];
        let alone: Vec<i64> = pods
            .iter()
            .map(|p| convert(vec![p.clone()])[0].requests.cpu_milli)
            .collect();
        assert_eq!(alone, [100, 500, 600, 150, 500]);
        let together: Vec<i64> = convert(pods).iter().map(|p| p.requests.cpu_milli).collect();
        assert_eq!(together, alone);
    }

    #[test]
    fn the_computed_qos_class_follows_the_fields_and_a_stated_class_wins() {
        let stated = |b: crate::testing::PodBuilder, class: &str| {
            b.with(|p| {
                p.status.get_or_insert_with(Default::default).qos_class = Some(class.into());
            })
        };
        let pods = convert(vec![
            owned(pod("a", "burstable", "n")),
            owned(stated(pod("a", "stated", "n"), "Guaranteed")),
            owned(pod("a", "burstable-again", "n")),
            owned(pod("a", "best-effort", "n").best_effort()),
            owned(stated(
                pod("a", "stated-best-effort", "n").best_effort(),
                "Burstable",
            )),
            owned(pod("a", "best-effort-again", "n").best_effort()),
        ]);
        let classes: Vec<QosClass> = pods.iter().map(|p| p.qos).collect();
        assert_eq!(
            classes,
            [
                QosClass::Burstable,
                QosClass::Guaranteed,
                QosClass::Burstable,
                QosClass::BestEffort,
                QosClass::Burstable,
                QosClass::BestEffort
            ]
        );
    }

    #[test]
    fn an_invalid_quantity_is_an_error_for_every_pod_that_has_it() {
        let mut b = SnapshotBuilder::new();
        b.add_pod(&owned(pod("a", "ok", "n"))).unwrap();
        for name in ["bad", "bad-again"] {
            let err = b
                .add_pod(&owned(pod("a", name, "n").requests("lots", "1Mi")))
                .unwrap_err();
            assert_eq!(err.field, "spec.containers[0].resources.requests.cpu");
        }
    }

    #[test]
    fn qos_ignores_zero_quantities() {
        let qos = |p: core::Pod| compute_qos(&PodView::from_pod(&p).spec);
        assert_eq!(
            qos(pod("a", "zero", "n").requests("0", "0").build()),
            QosClass::BestEffort
        );
        assert_eq!(
            qos(pod("a", "cpu", "n").requests("100m", "0").build()),
            QosClass::Burstable
        );
        assert_eq!(
            qos(pod("a", "none", "n").best_effort().build()),
            QosClass::BestEffort
        );
    }
}
