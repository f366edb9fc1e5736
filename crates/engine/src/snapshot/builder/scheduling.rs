//! The pod facts kube-scheduler reads that most pods do not set — a `schedulerName` other than
//! `default-scheduler`, host ports — kept as [`SchedulingExtras`] only for the pods that have them.

use std::sync::Arc;

use crate::snapshot::model::{HostPort, SchedulingExtras};
use crate::snapshot::resources::Resources;
use crate::snapshot::view::SpecView;

/// The pod's rare scheduling facts (`None` for the usual pod: default scheduler, no host port, not
/// resized in place so that its requests differ: `resized_requests`),
/// shared through `cached` with the owner's other pods when equal. Host ports as kube-scheduler's
/// `GetHostPorts` lists them: restartable (`restartPolicy: Always`) init containers', then the
/// containers', each with `hostIP` defaulted to `0.0.0.0` and `protocol` to `TCP`.
pub(super) fn scheduling_extras(
    cached: &mut Option<Arc<SchedulingExtras>>,
    scheduler_name: Option<Arc<str>>,
    resized_requests: Option<Arc<Resources>>,
    spec: &SpecView<'_>,
) -> Option<Arc<SchedulingExtras>> {
    let sidecars = spec
        .init_containers
        .iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut ports = sidecars
        .chain(&spec.containers)
        .flat_map(|c| &c.host_ports)
        .peekable();
    if scheduler_name.is_none() && resized_requests.is_none() && ports.peek().is_none() {
        return None;
    }
    let or_default = |v: &Option<std::borrow::Cow<'_, str>>, default: &str| {
        v.as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or(default)
            .into()
    };
    let extras = SchedulingExtras {
        scheduler_name,
        host_ports: ports
            .map(|p| HostPort {
                host_ip: or_default(&p.host_ip, "0.0.0.0"),
                protocol: or_default(&p.protocol, "TCP"),
                port: p.host_port.unwrap_or(0),
            })
            .collect(),
        resized_requests,
    };
    match cached {
        Some(a) if **a == extras => Some(a.clone()),
        _ => {
            let a = Arc::new(extras);
            *cached = Some(a.clone());
            Some(a)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1 as core;

    use super::super::SnapshotBuilder;
    use crate::snapshot::model::{DEFAULT_SCHEDULER_NAME, Pod};
    use crate::snapshot::view::PodView;

    fn convert(v: &PodView<'_>) -> Vec<Arc<Pod>> {
        let mut b = SnapshotBuilder::new();
        b.add_pod_view(v).expect("a valid pod");
        b.build().pods.to_vec()
    }

    /// `schedulerName` and host ports come out the same whichever way the pod was decoded (the
    /// file loader's fast reader or serde, the live path's typed Pod); the default scheduler and
    /// no host port leave nothing on the pod.
    #[test]
    fn every_decode_path_keeps_the_scheduler_name_and_host_ports() {
        let texts = [
            (
                r#"{"metadata":{"name":"a"},"spec":{"schedulerName":"bin-packer","containers":[
                {"name":"c","ports":[{"containerPort":80},{"containerPort":53,"hostPort":53,"protocol":"UDP"}]}],
                "initContainers":[{"name":"once","ports":[{"hostPort":9}]},
                {"name":"side","restartPolicy":"Always","ports":[{"hostPort":7070,"hostIP":"10.0.0.2"}]}]}}"#,
                Some("bin-packer"),
                vec![("10.0.0.2", "TCP", 7070), ("0.0.0.0", "UDP", 53)],
            ),
            (
                r#"{"metadata":{"name":"a"},"spec":{"schedulerName":"default-scheduler","containers":[{"name":"c","ports":[{"containerPort":80}]}]}}"#,
                None,
                vec![],
            ),
            (
                r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","ports":[{"containerPort":80,"hostPort":80,"hostIP":"","protocol":""}]}]}}"#,
                None,
                vec![("0.0.0.0", "TCP", 80)],
            ),
        ];
        for (text, scheduler, ports) in texts {
            let typed: core::Pod = serde_json::from_str(text).expect("a pod");
            let serde_view: PodView<'_> = serde_json::from_str(text).expect("a view");
            let mut fast_view = PodView::default();
            assert!(fast_view.fill_from_json(text), "{text}");
            for (path, view) in [
                ("fast", fast_view.clone()),
                ("serde", serde_view.clone()),
                ("typed", PodView::from_pod(&typed)),
            ] {
                let pods = convert(&view);
                let p = &pods[0];
                assert_eq!(
                    p.scheduler_name(),
                    scheduler.unwrap_or(DEFAULT_SCHEDULER_NAME),
                    "{path}: {text}"
                );
                let got: Vec<(&str, &str, i32)> = p
                    .host_ports()
                    .iter()
                    .map(|h| (h.host_ip.as_str(), h.protocol.as_str(), h.port))
                    .collect();
                assert_eq!(got, ports, "{path}: {text}");
                assert_eq!(
                    p.scheduling.is_none(),
                    scheduler.is_none() && ports.is_empty(),
                    "{path}: {text}"
                );
            }
        }
    }

    /// Pods of one owner with the same scheduler and ports share one allocation.
    #[test]
    fn an_owners_pods_share_their_scheduling_extras() {
        let pod = |name: &str| {
            format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}","ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"rs-1","controller":true}}]}},
                "spec":{{"schedulerName":"s","containers":[{{"ports":[{{"hostPort":80}}]}}]}}}}"#
            )
        };
        let mut b = SnapshotBuilder::new();
        for name in ["p0", "p1"] {
            let text = pod(name);
            let mut view = PodView::default();
            assert!(view.fill_from_json(&text), "{text}");
            b.add_pod_view(&view).expect("a valid pod");
        }
        let pods = b.build().pods;
        let (Some(a), Some(b)) = (&pods[0].scheduling, &pods[1].scheduling) else {
            panic!("both keep their scheduler and port");
        };
        assert!(Arc::ptr_eq(a, b));
    }
}
