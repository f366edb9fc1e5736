//! Effective requests of pods and allocatable resources of nodes, in milli-units.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::Resources;
use crate::controllers::quantity::parse_milli;
use k8s_openapi::api::core::v1::Pod;

/// Largest quantity considered (milli-units); keeps all sums far from overflow.
const MAX_QUANTITY: i128 = 1_000_000_000_000_000_000_000_000;

fn to_resources(map: Option<&BTreeMap<String, Quantity>>) -> Resources {
    map.into_iter()
        .flatten()
        .filter_map(|(k, q)| parse_milli(&q.0).map(|v| (k.clone(), v.clamp(0, MAX_QUANTITY))))
        .collect()
}

pub(super) fn allocatable(node: &Node) -> Resources {
    let status = node.status.as_ref();
    let alloc = status
        .and_then(|s| s.allocatable.as_ref())
        .filter(|a| !a.is_empty());
    let alloc = alloc.or_else(|| status.and_then(|s| s.capacity.as_ref()));
    to_resources(alloc)
}

pub(super) fn add_resources(into: &mut Resources, add: &Resources) {
    for (k, v) in add {
        let e = into.entry(k.clone()).or_default();
        *e = e.saturating_add(*v);
    }
}

fn max_resources(into: &mut Resources, other: &Resources) {
    for (k, v) in other {
        let e = into.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

fn container_requests(c: &k8s_openapi::api::core::v1::Container) -> Resources {
    let res = c.resources.as_ref();
    let mut r = to_resources(res.and_then(|r| r.limits.as_ref()));
    // Explicit requests win over limits (limits only stand in for missing requests).
    r.extend(to_resources(res.and_then(|r| r.requests.as_ref())));
    r
}

/// Effective pod requests in milli-units (upstream `resourcehelper.PodRequests` semantics).
pub fn pod_requests(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::new();
    };
    let mut sum = Resources::new();
    for c in &spec.containers {
        add_resources(&mut sum, &container_requests(c));
    }
    let mut sidecars = Resources::new();
    let mut init_max = Resources::new();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            add_resources(&mut sidecars, &r);
            max_resources(&mut init_max, &sidecars);
        } else {
            let mut step = sidecars.clone();
            add_resources(&mut step, &r);
            max_resources(&mut init_max, &step);
        }
    }
    add_resources(&mut sum, &sidecars);
    max_resources(&mut sum, &init_max);
    add_resources(&mut sum, &to_resources(spec.overhead.as_ref()));
    sum
}
