//! Effective pod requests and QoS class, as the scheduler and the kubelet compute them.

use std::sync::Arc;

use super::ConvertError;
use crate::snapshot::model::QosClass;
use crate::snapshot::resources::{self, Resources};
use crate::snapshot::view::{ContainerView, Pairs, ResourcesView, SpecView};

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

/// Effective pod requests as the scheduler computes them: the larger of the containers' sum and the
/// init phase peak (restartable "sidecar" init containers keep running and add up), plus overhead.
pub fn pod_requests(spec: &SpecView<'_>) -> Result<Resources, ConvertError> {
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        sum.add(&container_requests(c, "containers", i)?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().enumerate() {
        let req = container_requests(c, "initContainers", i)?;
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
    sum.add(&resources_of(&spec.overhead, &|n| {
        format!("spec.overhead.{n}")
    })?);
    sum.pods = 1;
    Ok(sum)
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

/// Every field [`pod_requests`] and [`compute_qos`] read, in one unambiguous sequence (counts
/// before what they count): two specs with the same sequence have the same requests and class.
fn visit_inputs<'s>(spec: &'s SpecView<'_>, f: &mut impl FnMut(Input<'s>)) {
    let pairs = |p: &'s Pairs<'_>, f: &mut dyn FnMut(Input<'s>)| {
        f(Input::Count(p.0.len()));
        for (k, v) in &p.0 {
            f(Input::Text(k));
            f(Input::Text(v));
        }
    };
    let empty = const { &Pairs(Vec::new()) };
    for (containers, init) in [(&spec.containers, false), (&spec.init_containers, true)] {
        f(Input::Count(containers.len()));
        for c in containers {
            if init {
                f(Input::Sidecar(
                    c.restart_policy.as_deref() == Some("Always"),
                ));
            }
            let (requests, limits) = c
                .resources
                .as_ref()
                .map_or((empty, empty), |r| (&r.requests, &r.limits));
            pairs(requests, f);
            pairs(limits, f);
        }
    }
    pairs(&spec.overhead, f);
}

/// The requests and computed QoS class of the last pod seen (of one owner), with the fields they
/// were computed from: the next pod with the same fields shares them instead of parsing its
/// quantities again (the pods of one owner almost always have the same).
#[derive(Default, Clone)]
pub(super) struct RequestsMemo {
    inputs: Vec<OwnedInput>,
    requests: Option<Arc<Resources>>,
    qos: Option<QosClass>,
}

impl RequestsMemo {
    /// Whether `spec` has the fields the memo was computed from; else it forgets them.
    fn holds(&mut self, spec: &SpecView<'_>) -> bool {
        let mut at = 0;
        let mut same = true;
        visit_inputs(spec, &mut |input| {
            same = same && self.inputs.get(at).is_some_and(|o| o.is(input));
            at += 1;
        });
        if same && at == self.inputs.len() {
            return true;
        }
        self.inputs.clear();
        visit_inputs(spec, &mut |input| self.inputs.push(OwnedInput::of(input)));
        self.requests = None;
        self.qos = None;
        false
    }

    /// [`pod_requests`] of `spec`, shared with the last pod that had the same fields, and its QoS
    /// class: `stated` (`status.qosClass`) when given, else [`compute_qos`] (also remembered).
    pub(super) fn requests_and_qos(
        &mut self,
        spec: &SpecView<'_>,
        stated: Option<QosClass>,
    ) -> Result<(Arc<Resources>, QosClass), ConvertError> {
        let held = self.holds(spec);
        let requests = match &self.requests {
            Some(r) if held => r.clone(),
            _ => {
                let r = Arc::new(pod_requests(spec)?);
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
