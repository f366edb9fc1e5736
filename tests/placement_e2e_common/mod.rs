//! The ping-pong scenario (HighNodeUtilization empties nodes that LeastAllocated scoring refills)
//! against kube-sim, shared by the placement end-to-end tests
//! (`placement_returns_e2e`, `placement_enforce_e2e`): six 4-CPU nodes; n1–n4 each run one
//! 2.4-CPU pod of ReplicaSet `big` (60 %), n5 and n6 one 200m pod of ReplicaSet `small` (5 %); the
//! policy is HighNodeUtilization with `thresholds: {cpu: 20, memory: 20}`, and `run` is started
//! with a 2 s interval. kube-sim's scheduler is least-allocated (kube-scheduler's default) unless
//! given a `KubeSchedulerConfiguration`.
#![allow(dead_code)]

use std::sync::Arc;

use kube_sim::controllers::scheduler::config;
use kube_sim::{Sim, SimHandle, SimOptions};
use serde_json::{Value, json};

use super::run_sim_common::{self, Descheduler, NS, metric, pod_ready, start, wait_for};

/// The ping-pong policy with the DefaultEvictor's `placement` set to `mode` (`None`: the argument
/// is absent, as in an upstream policy).
pub fn policy(mode: Option<&str>) -> String {
    let args = match mode {
        Some(m) => format!("{{placement: {m}}}"),
        None => "{}".to_string(),
    };
    format!(
        "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: pack
    pluginConfig:
      - name: DefaultEvictor
        args: {args}
      - name: HighNodeUtilization
        args:
          thresholds: {{cpu: 20, memory: 20}}
    plugins:
      balance:
        enabled: [HighNodeUtilization]
"
    )
}

/// A kube-scheduler that packs (`NodeResourcesFit` MostAllocated over cpu and memory), for
/// kube-sim's scheduler and, as a file, for `run --scheduler-config`.
pub const MOST_ALLOCATED_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/placement/most-allocated.yaml"
);

/// The text of [`MOST_ALLOCATED_FILE`].
pub const MOST_ALLOCATED: &str = include_str!("../placement/most-allocated.yaml");

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        }
    })
}

fn spec(app: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": format!("{app}:1"),
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    })
}

/// ReplicaSet `app` with one pod of `cpu`/`memory` bound to each of `nodes`.
fn workload(app: &str, cpu: &str, memory: &str, nodes: &[&str]) -> Vec<Value> {
    let mut out = vec![json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": app, "namespace": NS, "uid": format!("rs-{app}")},
        "spec": {
            "replicas": nodes.len(),
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": spec(app, cpu, memory)}
        }
    })];
    for (i, n) in nodes.iter().enumerate() {
        let mut s = spec(app, cpu, memory);
        s["nodeName"] = json!(n);
        out.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("{app}-{}", i + 1), "namespace": NS,
                "uid": format!("pod-{app}-{}", i + 1), "labels": {"app": app},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app,
                                     "uid": format!("rs-{app}"), "controller": true,
                                     "blockOwnerDeletion": true}]
            },
            "spec": s
        }));
    }
    out
}

/// Starts kube-sim with the ping-pong cluster (its scheduler configured by `scheduler_config`, a
/// `KubeSchedulerConfiguration`) and waits for the six pods to be Running and Ready.
pub async fn start_cluster(scheduler_config: Option<&str>) -> SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut objects =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    objects.extend(["n1", "n2", "n3", "n4", "n5", "n6"].map(node));
    objects.extend(workload(
        "big",
        "2400m",
        "4800Mi",
        &["n1", "n2", "n3", "n4"],
    ));
    objects.extend(workload("small", "200m", "400Mi", &["n5", "n6"]));
    let mut opts = SimOptions {
        objects,
        ..Default::default()
    };
    opts.config.scheduler = scheduler_config.map(|text| {
        Arc::new(config::parse(text).unwrap_or_else(|e| panic!("scheduler config: {e}")))
    });
    let sim = Sim::start(opts).await.expect("kube-sim starts");
    let s = sim.clone();
    wait_for("the six workload pods Running and Ready", || {
        let pods = s.list("v1", "Pod", Some(NS));
        pods.len() == 6 && pods.iter().all(pod_ready)
    })
    .await;
    sim
}

/// The live (not terminating) `small` pods as `(node, uid)`, sorted.
pub fn small_pods(sim: &SimHandle) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = sim
        .list("v1", "Pod", Some(NS))
        .iter()
        .filter(|p| p.pointer("/metadata/labels/app") == Some(&json!("small")))
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
        })
        .filter_map(|p| {
            let node = p.pointer("/spec/nodeName").and_then(Value::as_str)?;
            let uid = p.pointer("/metadata/uid").and_then(Value::as_str)?;
            Some((node.to_string(), uid.to_string()))
        })
        .collect();
    v.sort();
    v
}

/// Nodes of the live (not terminating) `small` pods, sorted.
pub fn small_nodes(sim: &SimHandle) -> Vec<String> {
    small_pods(sim).into_iter().map(|(n, _)| n).collect()
}

/// Waits until both small pods' replacements run on n1–n4 (packed by MostAllocated scoring).
pub async fn wait_packed(sim: &SimHandle) {
    let s = sim.clone();
    wait_for("the replacements packed onto n1–n4", || {
        let nodes = small_nodes(&s);
        nodes.len() == 2
            && nodes
                .iter()
                .all(|n| ["n1", "n2", "n3", "n4"].contains(&n.as_str()))
    })
    .await;
}

/// `run` against the cluster, with its metrics.
pub struct Run {
    /// The process.
    pub d: Descheduler,
}

impl Run {
    /// Starts `run` (not dry-run, `--descheduling-interval 2s`, metrics without authentication)
    /// with `policy_text` and `extra` flags, and waits until it serves.
    pub async fn start(sim: &SimHandle, name: &str, policy_text: &str, extra: &[&str]) -> Run {
        let mut args = vec!["--descheduling-interval", "2s", "--metrics-unauthenticated"];
        args.extend_from_slice(extra);
        let mut d = start(sim, name, policy_text, &args);
        d.wait_ready().await;
        Run { d }
    }

    /// The sum of metric `name`'s samples matching `labels`.
    pub async fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric(&self.d.metrics().await, name, labels)
    }

    /// Successful evictions so far.
    pub async fn evicted(&self) -> f64 {
        self.value("descheduler_pods_evicted_total", &[("result", "success")])
            .await
    }

    /// Completed cycles so far.
    pub async fn cycles(&self) -> f64 {
        self.value("kube_descheduler_cycles_total", &[("status", "completed")])
            .await
    }

    /// Polls (async) until `cond` holds on the metrics text.
    pub async fn wait(&self, what: &str, cond: impl Fn(&str) -> bool) {
        let start = std::time::Instant::now();
        loop {
            if cond(&self.d.metrics().await) {
                return;
            }
            assert!(
                start.elapsed() < run_sim_common::WAIT,
                "timed out waiting for: {what}; log:\n{}",
                self.d.log_text()
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Waits until at least `n` evictions have succeeded.
    pub async fn wait_evicted(&self, what: &str, n: f64) {
        self.wait(what, |m| {
            metric(
                m,
                "descheduler_pods_evicted_total",
                &[("result", "success")],
            ) >= n
        })
        .await;
    }

    /// Waits until `n` more cycles completed after now.
    pub async fn wait_cycles(&self, n: f64) {
        let from = self.cycles().await;
        self.wait(&format!("{n} more completed cycles"), |m| {
            metric(
                m,
                "kube_descheduler_cycles_total",
                &[("status", "completed")],
            ) >= from + n
        })
        .await;
    }
}
