//! Simulated kubelets (one per node not listed in `SimConfig::stopped_nodes`) plus the pod
//! garbage collection of terminating pods that never reached a node.
//!
//! Behaviour followed (kubernetes.io "Pod Lifecycle" and "Nodes" docs, pkg/kubelet status
//! manager): a bound Pending pod starts Running at once (`startTime`, `podIP`, running container
//! statuses), becomes Ready `pod_start_delay_seconds` after `startTime` (we have no probes), and a
//! pod whose container image is in `crashing_images`, or that runs on a node in `crashing_nodes`,
//! crashes `pod_start_delay_seconds` after each start and is restarted with the documented
//! back-off (10 s doubling, capped at 5 min), so it stays `Running` with `Ready=False`, a growing
//! `restartCount` and a `CrashLoopBackOff` waiting state (with `restartPolicy: Never` it ends
//! `Failed`). A terminating pod is removed once its `deletionTimestamp` (set by the API server to
//! now + grace period) has passed. Nodes report `Ready=True` (`KubeletReady`); stopped nodes
//! report `Ready=Unknown` (`NodeStatusUnknown`, as the node lifecycle controller does when a
//! kubelet stops posting) and their pods are left alone.

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Node, NodeCondition, Pod, PodCondition, PodIP,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::util::{
    add_secs, delete_action, fnv1a32, name, pod_is_terminal, pod_phase, same_json, secs_between,
    update_action,
};
use super::{Action, ClusterState};

/// Kubelet and pod-GC actions for one tick.
pub fn reconcile(state: &ClusterState) -> Vec<Action> {
    let mut out = Vec::new();
    for node in &state.nodes {
        if let Some(a) = node_status(state, node) {
            out.push(a);
        }
    }
    for pod in &state.pods {
        if let Some(a) = pod_action(state, pod) {
            out.push(a);
        }
    }
    out
}

fn is_stopped(state: &ClusterState, node: &str) -> bool {
    state.config.stopped_nodes.iter().any(|n| n == node)
}

/// Node status the kubelet (or, for stopped nodes, the node lifecycle controller) reports.
fn node_status(state: &ClusterState, node: &Node) -> Option<Action> {
    let stopped = is_stopped(state, name(&node.metadata));
    let (status, reason, message) = if stopped {
        (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    } else {
        ("True", "KubeletReady", "kubelet is posting ready status")
    };
    let mut want = node.clone();
    let st = want.status.get_or_insert_with(Default::default);
    let conds = st.conditions.get_or_insert_with(Vec::new);
    let now = Some(Time(state.now));
    match conds.iter_mut().find(|c| c.type_ == "Ready") {
        Some(c) if c.status == status => {}
        Some(c) => {
            c.status = status.to_string();
            c.reason = Some(reason.to_string());
            c.message = Some(message.to_string());
            c.last_transition_time = now.clone();
            c.last_heartbeat_time = now;
        }
        None => conds.push(NodeCondition {
            type_: "Ready".to_string(),
            status: status.to_string(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            last_transition_time: now.clone(),
            last_heartbeat_time: now,
        }),
    }
    if st.allocatable.as_ref().is_none_or(|a| a.is_empty())
        && let Some(cap) = &st.capacity
    {
        st.allocatable = Some(cap.clone());
    }
    (!same_json(node, &want))
        .then(|| update_action(&want))
        .flatten()
}

fn pod_action(state: &ClusterState, pod: &Pod) -> Option<Action> {
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    let Some(node_name) = node_name.filter(|n| !n.is_empty()) else {
        // Pod GC: a terminating pod that never reached a node has nothing to wait for.
        return pod
            .metadata
            .deletion_timestamp
            .is_some()
            .then(|| delete_action("v1", "Pod", &pod.metadata, true));
    };
    let node = state
        .nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node_name))?;
    if is_stopped(state, node_name) {
        return None;
    }
    if let Some(ts) = &pod.metadata.deletion_timestamp {
        return (ts.0 <= state.now).then(|| delete_action("v1", "Pod", &pod.metadata, true));
    }
    if pod_is_terminal(pod) {
        return None;
    }
    let want = desired_status(state, pod, node);
    let current = pod.status.clone().unwrap_or_default();
    if same_json(&current, &want) {
        return None;
    }
    let mut updated = pod.clone();
    updated.status = Some(want);
    update_action(&updated)
}

/// Back-off before restart number `n` (1-based): 10 s doubling, capped at 300 s.
fn backoff(n: u32) -> f64 {
    (10.0 * 2f64.powi(n.saturating_sub(1).min(10) as i32)).min(300.0)
}

/// State of a crashing container `elapsed` seconds after the pod started.
enum Crash {
    /// Running since `started` (seconds after pod start) after `restarts` restarts.
    Running { started: f64, restarts: i32 },
    /// Waiting in back-off after `crashes` crashes; last one finished at `finished`.
    BackOff { crashes: i32, finished: f64 },
}

fn crash_state(elapsed: f64, run_for: f64) -> Crash {
    let run_for = run_for.max(0.001);
    let mut t = 0.0;
    let mut crashes: i32 = 0;
    for _ in 0..100_000 {
        let crash_at = t + run_for;
        if elapsed < crash_at {
            return Crash::Running {
                started: t,
                restarts: crashes,
            };
        }
        crashes += 1;
        let restart_at = crash_at + backoff(crashes as u32);
        if elapsed < restart_at {
            return Crash::BackOff {
                crashes,
                finished: crash_at,
            };
        }
        t = restart_at;
    }
    Crash::BackOff {
        crashes,
        finished: t,
    }
}

/// When the pod's containers started, how long ago, and how they are to behave.
struct Timing {
    start: jiff::Timestamp,
    elapsed: f64,
    /// Seconds from a start to ready (or, for a crashing container, to its crash).
    delay: f64,
    never_restart: bool,
}

fn desired_status(state: &ClusterState, pod: &Pod, node: &Node) -> PodStatus {
    let now = state.now;
    let mut st = pod.status.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let start = match (&st.start_time, pod_phase(pod)) {
        (Some(t), "Running") => t.0,
        _ => now,
    };
    let timing = Timing {
        start,
        elapsed: secs_between(start, now).max(0.0),
        delay: state.config.pod_start_delay_seconds.max(0.0),
        never_restart: spec.restart_policy.as_deref() == Some("Never"),
    };

    st.start_time = Some(Time(start));
    assign_addresses(&mut st, pod, node);

    let mut all_ready = true;
    let mut failed = false;
    let mut statuses = Vec::new();
    for c in &spec.containers {
        let (cs, c_failed) = container_status(state, pod, node, c, &timing);
        all_ready &= cs.ready;
        failed |= c_failed;
        statuses.push(cs);
    }
    st.container_statuses = Some(statuses);
    if let Some(inits) = &spec.init_containers {
        st.init_container_statuses = Some(inits.iter().map(completed_init_status).collect());
    }
    st.phase = Some(if failed { "Failed" } else { "Running" }.to_string());
    let ready = all_ready && !failed;
    let conds = st.conditions.get_or_insert_with(Vec::new);
    set_pod_condition(conds, "PodScheduled", true, now, false);
    set_pod_condition(conds, "Initialized", true, now, false);
    set_pod_condition(conds, "ContainersReady", ready, now, true);
    set_pod_condition(conds, "Ready", ready, now, true);
    st
}

/// Gives a pod without one a stable pod IP (hashed from the pod, in a /24 per node) and the
/// node's InternalIP as host IP.
fn assign_addresses(st: &mut PodStatus, pod: &Pod, node: &Node) {
    if st.pod_ip.is_none() {
        let h = fnv1a32(
            format!(
                "{}/{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                name(&pod.metadata),
                pod.metadata.uid.as_deref().unwrap_or("")
            )
            .as_bytes(),
        );
        let third = fnv1a32(name(&node.metadata).as_bytes()) % 256;
        let ip = format!("10.244.{third}.{}", h % 253 + 2);
        st.pod_ip = Some(ip.clone());
        st.pod_ips = Some(vec![PodIP { ip }]);
    }
    if st.host_ip.is_none() {
        st.host_ip = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone());
    }
}

/// One container's status, and whether it failed the pod (crashed under `restartPolicy: Never`).
fn container_status(
    state: &ClusterState,
    pod: &Pod,
    node: &Node,
    c: &Container,
    timing: &Timing,
) -> (ContainerStatus, bool) {
    let image = c.image.clone().unwrap_or_default();
    let crashing = state.config.crashing_images.contains(&image)
        || state
            .config
            .crashing_nodes
            .iter()
            .any(|n| n == name(&node.metadata));
    let id_seed = format!("{}/{}", pod.metadata.uid.as_deref().unwrap_or(""), c.name);
    let mut cs = ContainerStatus {
        name: c.name.clone(),
        image: image.clone(),
        image_id: format!("sim://{image}"),
        container_id: Some(format!("sim://{:08x}", fnv1a32(id_seed.as_bytes()))),
        ..Default::default()
    };
    if crashing {
        let failed = set_crash_state(&mut cs, pod, timing);
        return (cs, failed);
    }
    cs.ready = timing.elapsed >= timing.delay;
    cs.started = Some(true);
    cs.state = Some(ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(Time(timing.start)),
        }),
        ..Default::default()
    });
    (cs, false)
}

/// Fills in a crashing container's state (running again, or in back-off, or terminated for
/// good under `restartPolicy: Never`); true in that last case.
fn set_crash_state(cs: &mut ContainerStatus, pod: &Pod, timing: &Timing) -> bool {
    let start = timing.start;
    let terminated = |at: f64| ContainerStateTerminated {
        exit_code: 1,
        reason: Some("Error".to_string()),
        started_at: None,
        finished_at: Some(Time(add_secs(start, at))),
        ..Default::default()
    };
    match crash_state(timing.elapsed, timing.delay) {
        Crash::Running { started, restarts } => {
            cs.restart_count = restarts;
            cs.started = Some(true);
            cs.state = Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(add_secs(start, started))),
                }),
                ..Default::default()
            });
            if restarts > 0 {
                cs.last_state = Some(ContainerState {
                    terminated: Some(terminated(started)),
                    ..Default::default()
                });
            }
            false
        }
        Crash::BackOff { finished, .. } if timing.never_restart => {
            cs.started = Some(false);
            cs.state = Some(ContainerState {
                terminated: Some(terminated(finished)),
                ..Default::default()
            });
            true
        }
        Crash::BackOff { crashes, finished } => {
            cs.restart_count = crashes;
            cs.started = Some(false);
            cs.state = Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("CrashLoopBackOff".to_string()),
                    message: Some(format!(
                        "back-off restarting failed container {} in pod {}",
                        cs.name,
                        name(&pod.metadata)
                    )),
                }),
                ..Default::default()
            });
            cs.last_state = Some(ContainerState {
                terminated: Some(terminated(finished)),
                ..Default::default()
            });
            false
        }
    }
}

/// An init container's status: ran to completion.
fn completed_init_status(c: &Container) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: format!("sim://{}", c.image.as_deref().unwrap_or("")),
        ready: true,
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 0,
                reason: Some("Completed".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Sets a pod condition, keeping `lastTransitionTime` when the status does not change. With
/// `overwrite == false` an existing condition is left untouched.
fn set_pod_condition(
    conds: &mut Vec<PodCondition>,
    type_: &str,
    value: bool,
    now: jiff::Timestamp,
    overwrite: bool,
) {
    let status = if value { "True" } else { "False" };
    let reason = match (type_, value) {
        ("Ready" | "ContainersReady", false) => Some("ContainersNotReady".to_string()),
        _ => None,
    };
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(_) if !overwrite => {}
        Some(c) if c.status == status => c.reason = reason,
        Some(c) => {
            c.status = status.to_string();
            c.reason = reason;
            c.message = None;
            c.last_transition_time = Some(Time(now));
        }
        None => conds.push(PodCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason,
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testing::{Sim, node, pending_pod};
    use crate::controllers::util::{pod_is_ready, pod_is_terminating};

    fn bound_pod(name: &str, node: &str, image: &str) -> Pod {
        let mut p = pending_pod(name, "web", image, None);
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p
    }

    fn sim(pods: Vec<Pod>) -> Sim {
        let mut s = Sim::with_nodes(vec![node("n1", "4", "8Gi"), node("n2", "4", "8Gi")]);
        s.state.pods = pods;
        s.state.config.pod_start_delay_seconds = 3.0;
        s.state.config.crashing_images = vec!["broken".into()];
        Sim::new(s.state)
    }

    fn get<'a>(s: &'a Sim, name: &str) -> Option<&'a Pod> {
        s.state
            .pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    fn container(p: &Pod) -> ContainerStatus {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first().cloned())
            .unwrap_or_default()
    }

    #[test]
    fn pod_runs_at_once_and_becomes_ready_after_the_delay() {
        let mut s = sim(vec![bound_pod("p", "n1", "nginx")]);
        s.step(0.5);
        let p = get(&s, "p").cloned().unwrap_or_default();
        let st = p.status.clone().unwrap_or_default();
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert!(st.start_time.is_some());
        assert!(
            st.pod_ip
                .as_deref()
                .is_some_and(|ip| ip.starts_with("10.244."))
        );
        assert!(!pod_is_ready(&p));
        assert!(container(&p).state.and_then(|s| s.running).is_some());
        // Not Ready before 3 s, Ready from 3 s on.
        let start = st.start_time.map(|t| t.0).unwrap_or(s.state.now);
        while crate::controllers::util::secs_between(start, s.state.now) < 2.9 {
            s.step(0.1);
            assert!(!get(&s, "p").is_some_and(pod_is_ready), "ready too early");
        }
        assert!(s.run_until(0.1, 10, |st| st.pods.iter().all(pod_is_ready)));
        let p = get(&s, "p").cloned().unwrap_or_default();
        assert!(container(&p).ready);
        let conds = p.status.and_then(|s| s.conditions).unwrap_or_default();
        for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            assert!(
                conds.iter().any(|c| c.type_ == t && c.status == "True"),
                "{t}"
            );
        }
        // Stable afterwards.
        assert!(reconcile(&s.state).is_empty());
    }

    #[test]
    fn pods_on_a_crashing_node_never_become_ready_and_others_are_unaffected() {
        let mut s = sim(vec![
            bound_pod("on-bad", "n2", "nginx"),
            bound_pod("on-good", "n1", "nginx"),
        ]);
        s.state.config.crashing_nodes = vec!["n2".into()];
        for _ in 0..100 {
            s.step(0.1);
        }
        let bad = get(&s, "on-bad").cloned().unwrap_or_default();
        assert!(!pod_is_ready(&bad));
        assert!(container(&bad).restart_count >= 1);
        assert!(get(&s, "on-good").is_some_and(pod_is_ready));
    }

    #[test]
    fn crashing_image_never_becomes_ready_and_restarts_with_backoff() {
        let mut s = sim(vec![bound_pod("p", "n1", "broken")]);
        let mut restarts = Vec::new();
        for _ in 0..1200 {
            s.step(0.1);
            let p = get(&s, "p").cloned().unwrap_or_default();
            assert!(!pod_is_ready(&p));
            assert_eq!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Running")
            );
            restarts.push(container(&p).restart_count);
        }
        // 120 s: crashes at 3, 16 (3+10+3), 39 (16+20+3), 82 (39+40+3) s.
        assert_eq!(restarts.last().copied(), Some(4));
        assert!(restarts.windows(2).all(|w| w[0] <= w[1]));
        let c = container(get(&s, "p").unwrap_or(&Pod::default()));
        let waiting = c.state.and_then(|s| s.waiting).and_then(|w| w.reason);
        let running = get(&s, "p").map(|p| container(p).state.and_then(|s| s.running).is_some());
        assert!(waiting.as_deref() == Some("CrashLoopBackOff") || running == Some(true));
        assert_eq!(
            c.last_state.and_then(|s| s.terminated).map(|t| t.exit_code),
            Some(1)
        );
    }

    #[test]
    fn crash_schedule() {
        let cases = [
            (0.0, "run", 0),
            (2.9, "run", 0),
            (3.0, "backoff", 1),
            (12.9, "backoff", 1),
            (13.0, "run", 1),
            (16.0, "backoff", 2),
            (36.0, "run", 2),
        ];
        for (elapsed, want, n) in cases {
            let got = match crash_state(elapsed, 3.0) {
                Crash::Running { restarts, .. } => ("run", restarts),
                Crash::BackOff { crashes, .. } => ("backoff", crashes),
            };
            assert_eq!(got, (want, n), "elapsed {elapsed}");
        }
    }

    #[test]
    fn restart_policy_never_fails_the_pod() {
        let mut p = bound_pod("p", "n1", "broken");
        if let Some(s) = p.spec.as_mut() {
            s.restart_policy = Some("Never".into());
        }
        let mut s = sim(vec![p]);
        assert!(s.run_until(0.1, 100, |st| st.pods.iter().all(|p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
        })));
    }

    #[test]
    fn terminating_pod_is_removed_when_its_grace_period_ends() {
        let mut s = sim(vec![bound_pod("p", "n1", "nginx")]);
        assert!(s.run_until(0.1, 100, |st| st.pods.iter().all(pod_is_ready)));
        assert!(s.delete_pod("default", "p", Some(5)));
        let deleted_at = s.state.now;
        while get(&s, "p").is_some() {
            assert!(get(&s, "p").is_some_and(pod_is_terminating));
            s.step(0.1);
            assert!(
                crate::controllers::util::secs_between(deleted_at, s.state.now) < 7.0,
                "removed after ~5 s"
            );
        }
        let waited = crate::controllers::util::secs_between(deleted_at, s.state.now);
        assert!(waited >= 4.0, "not before the grace period: {waited}");
    }

    #[test]
    fn unbound_terminating_pods_are_collected() {
        let mut p = bound_pod("p", "n1", "nginx");
        if let Some(s) = p.spec.as_mut() {
            s.node_name = None;
        }
        p.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let mut s = sim(vec![p]);
        s.step(0.1);
        assert!(s.state.pods.is_empty());
    }

    #[test]
    fn stopped_node_reports_unknown_and_its_pods_are_frozen() {
        let mut s = sim(vec![
            bound_pod("p", "n1", "nginx"),
            bound_pod("q", "n2", "nginx"),
        ]);
        assert!(s.run_until(0.1, 100, |st| st.pods.iter().all(pod_is_ready)));
        s.state.config.stopped_nodes = vec!["n1".into()];
        assert!(s.delete_pod("default", "p", Some(1)));
        for _ in 0..50 {
            s.step(0.1);
        }
        let ready = |s: &Sim, n: &str| {
            s.state
                .nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == Some(n))
                .and_then(|x| {
                    x.status
                        .as_ref()?
                        .conditions
                        .as_ref()?
                        .iter()
                        .find(|c| c.type_ == "Ready")
                        .cloned()
                })
                .map(|c| (c.status, c.reason.unwrap_or_default()))
        };
        assert_eq!(
            ready(&s, "n1"),
            Some(("Unknown".into(), "NodeStatusUnknown".into()))
        );
        assert_eq!(ready(&s, "n2").map(|r| r.0), Some("True".into()));
        assert!(
            get(&s, "p").is_some_and(|p| pod_is_terminating(p) && pod_is_ready(p)),
            "left as it was"
        );
        // Restarting the kubelet finishes the deletion.
        s.state.config.stopped_nodes.clear();
        assert!(s.run_until(0.1, 10, |st| st.pods.len() == 1));
        assert_eq!(ready(&s, "n1").map(|r| r.0), Some("True".into()));
    }

    #[test]
    fn node_status_defaults_allocatable_and_sets_ready() {
        let mut n = node("n1", "2", "1Gi");
        if let Some(st) = n.status.as_mut() {
            st.allocatable = None;
            st.conditions = None;
        }
        let mut s = Sim::with_nodes(vec![n]);
        s.step(0.1);
        let st = s.state.nodes[0].status.clone().unwrap_or_default();
        assert_eq!(st.allocatable, st.capacity);
        let c = st.conditions.unwrap_or_default();
        assert_eq!(
            (c[0].type_.as_str(), c[0].status.as_str()),
            ("Ready", "True")
        );
        assert!(reconcile(&s.state).is_empty());
    }
}
