//! Effective pod requests and QoS class, as the scheduler and the kubelet compute them.

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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1 as core;

    use super::*;
    use crate::snapshot::view::PodView;
    use crate::testing::pod;

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
