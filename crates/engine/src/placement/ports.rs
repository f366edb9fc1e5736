//! kube-scheduler's NodePorts Filter plugin (`pkg/scheduler/framework/plugins/nodeports`): a node
//! fits the replacement when none of the host ports it wants is already bound there. Host ports
//! are those of the containers and of the restartable (`restartPolicy: Always`) init containers
//! with `hostPort` > 0 (`GetHostPorts`); a pod wanting none skips the filter (its PreFilter
//! returns Skip). Two bindings conflict as `HostPortInfo.CheckConflict` decides: same protocol and
//! port, and the same `hostIP` or either one `0.0.0.0` (empty `hostIP` and `protocol` were
//! defaulted to `0.0.0.0` and `TCP` when the pod was read).
//!
//! Most pods bind no host port, so the list of pods that do is built only when a pod wanting one
//! is first predicted in a cycle, then extended by the replacements predicted this cycle.

use super::state::ClusterState;
use crate::snapshot::{HostPort, NodeId, PodId, Snapshot};

/// kube-scheduler's `DefaultBindAllHostIP`.
pub const ANY_HOST_IP: &str = "0.0.0.0";

/// Whether binding `want` on a node conflicts with `used`, already bound there.
pub fn conflicts(used: &HostPort, want: &HostPort) -> bool {
    want.port > 0
        && used.port == want.port
        && used.protocol == want.protocol
        && (want.host_ip == ANY_HOST_IP
            || used.host_ip == ANY_HOST_IP
            || used.host_ip == want.host_ip)
}

/// Whether all of `want` can be bound next to `used`.
pub fn fits<'a>(used: impl IntoIterator<Item = &'a HostPort>, want: &[HostPort]) -> bool {
    used.into_iter()
        .all(|u| !want.iter().any(|w| conflicts(u, w)))
}

/// A replacement placed this cycle is listed as `PodId::MAX - pod` (the pod stands for it).
fn placed_id(pod: PodId) -> PodId {
    PodId::MAX - pod
}

/// The pods binding host ports, with their node, for one cycle.
#[derive(Default)]
pub struct UsedPorts {
    list: Option<Vec<(PodId, NodeId)>>,
}

impl UsedPorts {
    fn list(&mut self, snapshot: &Snapshot, state: &ClusterState) -> &[(PodId, NodeId)] {
        self.list.get_or_insert_with(|| {
            let mut list = Vec::new();
            for pod in 0..snapshot.pods.len() as PodId {
                let p = snapshot.pod(pod);
                if let Some(n) = p.node
                    && !p.host_ports().is_empty()
                {
                    list.push((pod, n));
                }
            }
            for (n, placed) in state.placed.iter().enumerate() {
                for &pod in placed {
                    if !snapshot.pod(pod).host_ports().is_empty() {
                        list.push((placed_id(pod), n as NodeId));
                    }
                }
            }
            list
        })
    }

    /// Records a replacement placed on `node`.
    pub fn placed(&mut self, snapshot: &Snapshot, pod: PodId, node: NodeId) {
        if let Some(list) = &mut self.list
            && !snapshot.pod(pod).host_ports().is_empty()
        {
            list.push((placed_id(pod), node));
        }
    }

    /// Per node, whether a host port `pod` wants is bound there (`None`: the pod wants none, the
    /// filter is skipped). Pods evicted this cycle (the pod itself included) still bind theirs
    /// while they terminate, as kube-scheduler's `NodeInfo.UsedPorts` keeps them.
    pub fn taken(
        &mut self,
        snapshot: &Snapshot,
        state: &ClusterState,
        pod: PodId,
    ) -> Option<Vec<bool>> {
        let want = snapshot.pod(pod).host_ports();
        if want.is_empty() {
            return None;
        }
        let mut taken = vec![false; snapshot.nodes.len()];
        for &(id, node) in self.list(snapshot, state) {
            let (other, present) = if id > PodId::MAX / 2 {
                (placed_id(id), true)
            } else {
                (id, state.holds_node(snapshot, id))
            };
            if present
                && let Some(t) = taken.get_mut(node as usize)
                && !*t
            {
                *t = !fits(snapshot.pod(other).host_ports(), want);
            }
        }
        Some(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PROTOCOL/hostIP/port`, as kube-scheduler's node_ports_test.go writes ports.
    fn ports(spec: &[&str]) -> Vec<HostPort> {
        spec.iter()
            .map(|s| {
                let mut parts = s.split('/');
                let protocol = parts.next().unwrap_or_default();
                let ip = parts.next().unwrap_or_default();
                let port = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
                HostPort {
                    host_ip: if ip.is_empty() { ANY_HOST_IP } else { ip }.into(),
                    protocol: if protocol.is_empty() { "TCP" } else { protocol }.into(),
                    port,
                }
            })
            .collect()
    }

    #[test]
    fn node_ports_decides_as_kube_schedulers_test_table() {
        // kube-scheduler's TestNodePorts cases (pkg/scheduler/framework/plugins/nodeports):
        // (name, wanted, on the node, fits).
        let cases: &[(&str, &[&str], &[&str], bool)] = &[
            (
                "other port",
                &["UDP/127.0.0.1/8080"],
                &["UDP/127.0.0.1/9090"],
                true,
            ),
            (
                "same udp port",
                &["UDP/127.0.0.1/8080"],
                &["UDP/127.0.0.1/8080"],
                false,
            ),
            (
                "same tcp port",
                &["TCP/127.0.0.1/8080"],
                &["TCP/127.0.0.1/8080"],
                false,
            ),
            (
                "different host ip",
                &["TCP/127.0.0.1/8080"],
                &["TCP/127.0.0.2/8080"],
                true,
            ),
            (
                "different protocol",
                &["UDP/127.0.0.1/8080"],
                &["TCP/127.0.0.1/8080"],
                true,
            ),
            (
                "second udp port conflict",
                &["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
                &["UDP/127.0.0.1/8080"],
                false,
            ),
            (
                "first tcp port conflict",
                &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
                &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
                false,
            ),
            (
                "first tcp port conflict due to 0.0.0.0 hostIP",
                &["TCP/0.0.0.0/8001"],
                &["TCP/127.0.0.1/8001"],
                false,
            ),
            (
                "TCP hostPort conflict due to 0.0.0.0 hostIP",
                &["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
                &["TCP/127.0.0.1/8001"],
                false,
            ),
            (
                "second tcp port conflict to 0.0.0.0 hostIP",
                &["TCP/127.0.0.1/8001"],
                &["TCP/0.0.0.0/8001"],
                false,
            ),
            (
                "second different protocol",
                &["UDP/127.0.0.1/8001"],
                &["TCP/0.0.0.0/8001"],
                true,
            ),
            (
                "UDP hostPort conflict due to 0.0.0.0 hostIP",
                &["UDP/127.0.0.1/8001"],
                &["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
                false,
            ),
            // Defaults: an empty hostIP binds every address, an empty protocol is TCP.
            (
                "empty hostIP and protocol",
                &["//8001"],
                &["TCP/10.0.0.1/8001"],
                false,
            ),
            ("nothing bound", &["TCP//80"], &[], true),
        ];
        for (name, want, used, fit) in cases {
            let (want, used) = (ports(want), ports(used));
            assert_eq!(fits(&used, &want), *fit, "{name}");
        }
    }
}
