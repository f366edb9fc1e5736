//! LowNodeUtilization's usage from a metrics source (upstream `actualUsageClient` and
//! `prometheusUsageClient`), read from the [`Measured`] data attached to the snapshot.
//!
//! Nodes without a sample: upstream fails the plugin's whole run for the cycle ("unable to find
//! node … in the collected metrics" / "unable to find metric entry for …"); so do we — never a
//! plan on partial data. A pod without a usable PodMetrics sample is skipped (upstream logs
//! "unable to get pod usage" and goes on to the next pod).

use crate::plugins::node_utilization::{Tracked, Usage};
use crate::snapshot::{Pod, Snapshot};
use crate::usage::{KubernetesUsage, Measured, PrometheusUsage};

/// Where measured usage comes from for one plugin run.
#[derive(Debug, Clone, Copy)]
pub enum MeasuredSource<'a> {
    /// metrics.k8s.io node and pod usage.
    Kubernetes(&'a KubernetesUsage),
    /// A Prometheus query's per-node utilization.
    Prometheus(&'a str, &'a PrometheusUsage),
}

/// The data for `kubernetes` (KubernetesMetrics / metricsServer) or `query` (Prometheus), or
/// why there is none.
pub fn source<'a>(
    measured: Option<&'a Measured>,
    kubernetes: bool,
    query: Option<&'a str>,
) -> Result<MeasuredSource<'a>, String> {
    let m = measured.ok_or_else(|| "no measured usage was collected for this cycle".to_string())?;
    if kubernetes {
        return match &m.kubernetes {
            Some(Ok(k)) => Ok(MeasuredSource::Kubernetes(k)),
            Some(Err(e)) => Err(format!("error getting node usage: {e}")),
            None => Err("error getting node usage: metrics.k8s.io was not collected".into()),
        };
    }
    let q = query.unwrap_or_default();
    match m.prometheus.get(q) {
        Some(Ok(u)) => Ok(MeasuredSource::Prometheus(q, u)),
        Some(Err(e)) => Err(format!("error getting node usage: {e}")),
        None => Err(format!(
            "error getting node usage: prometheus query {q:?} was not run"
        )),
    }
}

/// Replaces the request-based rows of `usage` with measured node usage. Errors (a node without
/// a sample, a thresholded resource the source does not measure) name the node.
pub fn apply(
    snapshot: &Snapshot,
    usage: &mut Usage,
    src: MeasuredSource<'_>,
) -> Result<(), String> {
    for i in 0..usage.nodes.len() {
        let name = snapshot.node(usage.nodes[i]).name.as_str();
        match src {
            MeasuredSource::Kubernetes(k) => {
                let Some(sample) = k.nodes.get(name) else {
                    return Err(format!(
                        "unable to find node {name:?} in the collected metrics"
                    ));
                };
                for r in 0..usage.resources.len() {
                    match &usage.resources[r] {
                        Tracked::Cpu => usage.set_used(i, r, sample.cpu_milli),
                        Tracked::Memory => usage.set_used(i, r, sample.memory),
                        // Pods: the node's pod count, as upstream.
                        Tracked::Pods => {}
                        other => {
                            return Err(format!(
                                "unable to find {:?} resource for collected {name:?} node metric",
                                other.name()
                            ));
                        }
                    }
                }
            }
            MeasuredSource::Prometheus(query, u) => {
                let Some(v) = u.get(name) else {
                    return Err(format!(
                        "unable to find metric entry for {name} (prometheus query {query:?})"
                    ));
                };
                for r in 0..usage.resources.len() {
                    if usage.resources[r] == Tracked::Metric {
                        // Upstream: int64(value · 100), truncated.
                        usage.set_used(i, r, (v * 100.0) as i64);
                    }
                }
            }
        }
    }
    Ok(())
}

/// A pod's measured usage per tracked resource (one for `pods`), `None` when metrics.k8s.io has
/// no usable sample for it.
pub fn pod_amounts(k: &KubernetesUsage, resources: &[Tracked], pod: &Pod) -> Option<Vec<i64>> {
    let sample = match k.pod(&pod.namespace, &pod.name)? {
        Ok(s) => *s,
        Err(e) => {
            tracing::debug!(error = %e, "unable to get pod usage");
            return None;
        }
    };
    resources
        .iter()
        .map(|t| match t {
            Tracked::Cpu => Some(sample.cpu_milli),
            Tracked::Memory => Some(sample.memory),
            Tracked::Pods => Some(1),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use serde_json::{Value, json};

    use crate::evictor::planner::PlanBackend;
    use crate::framework::cycle::{CycleConfig, CycleReport, Profile, run_cycle};
    use crate::framework::registry::Plugin;
    use crate::plugins::default_evictor::DefaultEvictor;
    use crate::plugins::low_node_utilization::factory;
    use crate::testing::{evicted_names, node, now, pod, snapshot};
    use crate::usage::{CpuMemory, KubernetesUsage, Measured};

    /// Three 4-cpu nodes with four pods each; `requests[i]` / `used[i]`: per-pod cpu (millicores)
    /// requested / measured on node `n{i+1}`.
    fn cluster(requests: [i64; 3], used: [i64; 3]) -> (crate::snapshot::Snapshot, KubernetesUsage) {
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        let mut k = KubernetesUsage::default();
        for i in 0..3 {
            let n = format!("n{}", i + 1);
            nodes.push(node(&n).build());
            for j in 0..4 {
                let name = format!("{n}-p{j}");
                pods.push(
                    pod("default", &name, &n)
                        .requests(&format!("{}m", requests[i]), "0")
                        .build(),
                );
                k.pods.insert(
                    format!("default/{name}"),
                    Ok(CpuMemory {
                        cpu_milli: used[i],
                        memory: 1 << 20,
                    }),
                );
            }
            k.nodes.insert(
                n,
                CpuMemory {
                    cpu_milli: 4 * used[i],
                    memory: 4 << 20,
                },
            );
        }
        (snapshot(nodes, pods), k)
    }

    fn run(args: Value, snap: &mut crate::snapshot::Snapshot, m: Option<Measured>) -> CycleReport {
        snap.measured = m.map(Arc::new);
        let plugin = match (factory().build)(&args) {
            Ok(Plugin::Balance(p)) => p,
            Ok(_) => panic!("not a balance plugin"),
            Err(e) => panic!("{e}"),
        };
        let profile = Profile {
            name: "p".into(),
            evictor: Box::new(DefaultEvictor::default()),
            deschedule: vec![],
            balance: vec![plugin],
        };
        run_cycle(
            &[profile],
            &CycleConfig::default(),
            snap,
            now(),
            Box::new(PlanBackend::new()),
        )
        .0
    }

    fn kube(k: KubernetesUsage) -> Option<Measured> {
        Some(Measured {
            kubernetes: Some(Ok(k)),
            ..Default::default()
        })
    }

    const REQUESTS: &str = r#"{"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 60}}"#;
    const METRICS: &str = r#"{"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 60},
        "metricsUtilization": {"source": "KubernetesMetrics"}}"#;

    fn args(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn balanced_requests_but_hot_measured_usage_evicts_from_the_hot_node_only() {
        // Requests: every node at 50 %. Measured: n1 90 %, n2 10 %, n3 50 %.
        let (mut snap, k) = cluster([500, 500, 500], [900, 100, 500]);
        let r = run(args(REQUESTS), &mut snap, kube(k.clone()));
        assert!(r.records.is_empty(), "requests look balanced");
        let (mut snap, _) = cluster([500, 500, 500], [900, 100, 500]);
        let r = run(args(METRICS), &mut snap, kube(k));
        let names = evicted_names(&r.records);
        // 3600m → 2700m → 1800m (≤ 60 % of 4000m): two pods, both from n1, moved by their
        // measured 900m each (n2's spare 2400m − 400m = 2000m is not used up).
        assert_eq!(names, ["default/n1-p0", "default/n1-p1"]);
        assert!(r.plugin_failures.is_empty());
    }

    #[test]
    fn unbalanced_requests_but_even_measured_usage_evicts_nothing() {
        let (mut snap, k) = cluster([900, 100, 500], [500, 500, 500]);
        let r = run(args(REQUESTS), &mut snap, kube(k.clone()));
        assert!(
            evicted_names(&r.records)
                .iter()
                .all(|n| n.starts_with("default/n1-")),
            "requests-based: from n1"
        );
        assert!(!r.records.is_empty());
        let (mut snap, _) = cluster([900, 100, 500], [500, 500, 500]);
        let r = run(args(METRICS), &mut snap, kube(k));
        assert!(r.records.is_empty(), "{:?}", evicted_names(&r.records));
    }

    #[test]
    fn a_node_without_a_sample_fails_the_run_as_upstream() {
        let (mut snap, mut k) = cluster([500, 500, 500], [900, 100, 500]);
        k.nodes.remove("n3");
        let r = run(args(METRICS), &mut snap, kube(k));
        assert!(r.records.is_empty(), "never evict on partial data");
        assert_eq!(r.plugin_failures.len(), 1);
        assert!(
            r.plugin_failures[0]
                .error
                .contains("unable to find node \"n3\" in the collected metrics"),
            "{:?}",
            r.plugin_failures
        );
        // A source error, or no data at all, fails the run too.
        let (mut snap, _) = cluster([500, 500, 500], [900, 100, 500]);
        let m = Measured {
            kubernetes: Some(Err("GET /apis/metrics.k8s.io/v1beta1/nodes: 503".into())),
            ..Default::default()
        };
        let r = run(args(METRICS), &mut snap, Some(m));
        assert!(r.records.is_empty());
        assert!(r.plugin_failures[0].error.contains("503"));
        let (mut snap, _) = cluster([500, 500, 500], [900, 100, 500]);
        let r = run(args(METRICS), &mut snap, None);
        assert!(r.records.is_empty() && r.plugin_failures.len() == 1);
    }

    #[test]
    fn a_pod_without_pod_metrics_is_skipped() {
        let (mut snap, mut k) = cluster([500, 500, 500], [900, 100, 500]);
        k.pods.remove("default/n1-p0");
        k.pods.insert(
            "default/n1-p1".into(),
            Err("container \"c\" is missing \"memory\" resource".into()),
        );
        let r = run(args(METRICS), &mut snap, kube(k));
        assert_eq!(
            evicted_names(&r.records),
            ["default/n1-p2", "default/n1-p3"]
        );
    }

    #[test]
    fn thresholded_resources_metrics_server_does_not_measure_fail_the_run() {
        let (mut snap, k) = cluster([500, 500, 500], [900, 100, 500]);
        let a = json!({"thresholds": {"cpu": 30, "ephemeral-storage": 30},
            "targetThresholds": {"cpu": 60, "ephemeral-storage": 60},
            "metricsUtilization": {"source": "KubernetesMetrics"}});
        let r = run(a, &mut snap, kube(k));
        assert!(r.records.is_empty());
        assert!(r.plugin_failures[0].error.contains("ephemeral-storage"));
    }

    fn prometheus(query: &str, values: &[(&str, f64)]) -> Option<Measured> {
        let mut m = Measured::default();
        m.prometheus.insert(
            query.into(),
            Ok(values.iter().map(|(n, v)| (n.to_string(), *v)).collect()),
        );
        Some(m)
    }

    #[test]
    fn prometheus_evicts_at_most_one_pod_per_overutilized_node_without_a_node_limit() {
        let base = json!({"thresholds": {"MetricResource": 30}, "targetThresholds": {"MetricResource": 60},
            "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}}});
        let values = [("n1", 0.9), ("n2", 0.1), ("n3", 0.65)];
        let (mut snap, _) = cluster([500, 500, 500], [0, 0, 0]);
        let r = run(base.clone(), &mut snap, prometheus("q", &values));
        assert_eq!(
            evicted_names(&r.records),
            ["default/n1-p0", "default/n3-p0"],
            "one per overutilized node, hottest first"
        );
        // With evictionLimits.node, up to the limit (nothing is subtracted: usage is unknown).
        let mut limited = base.clone();
        limited["evictionLimits"] = json!({"node": 2});
        let (mut snap, _) = cluster([500, 500, 500], [0, 0, 0]);
        let r = run(limited, &mut snap, prometheus("q", &values));
        assert_eq!(evicted_names(&r.records).len(), 4);
        // A node without a sample: the run fails, as upstream ("unable to find metric entry").
        let (mut snap, _) = cluster([500, 500, 500], [0, 0, 0]);
        let r = run(base, &mut snap, prometheus("q", &values[..2]));
        assert!(r.records.is_empty());
        assert!(
            r.plugin_failures[0]
                .error
                .contains("unable to find metric entry for n3"),
            "{:?}",
            r.plugin_failures
        );
    }

    #[test]
    fn smoothing_applies_before_classification() {
        // Two collections through the smoother: 0.9 · 1000 + 0.1 · 3600 = 1260m on n1 (31.5 %):
        // a spike that lasts one sample does not make the node hot.
        let mut s = crate::usage::ema::NodeSmoother::default();
        let sample = |cpu: i64| -> HashMap<String, CpuMemory> {
            [(
                "n1".to_string(),
                CpuMemory {
                    cpu_milli: cpu,
                    memory: 0,
                },
            )]
            .into()
        };
        s.add(&sample(1000));
        s.add(&sample(3600));
        assert_eq!(s.current()["n1"].cpu_milli, 1260);
    }
}
