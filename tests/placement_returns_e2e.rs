//! Issue #35's scenario end to end: `run` (not dry-run, a 2 s interval, several cycles) against
//! kube-sim with its controllers on. Six 4-CPU nodes; n1–n4 each run one 2.4-CPU pod of
//! ReplicaSet `big` (60 %), n5 and n6 one 200m pod of ReplicaSet `small` (5 %); the policy is
//! HighNodeUtilization with `thresholds: {cpu: 20, memory: 20}`.
//!
//! - kube-sim's default (least-allocated) scheduler puts every replacement back onto n5 / n6:
//!   with the return detector off (`--placement-return-window 0`) the evictions repeat every
//!   cycle (the bug, upstream #424); with it on, the returns are counted, the Event is on the
//!   ReplicaSet, and the backoff stops the loop (later cycles evict nothing, each refusal counted
//!   as `result="placement backoff"`).
//! - kube-sim's scheduler configured with MostAllocated packs the replacements onto n1–n4: the
//!   small pods are evicted once and later cycles evict nothing.
//!
//! Every wait polls an observable condition with a deadline.

mod run_sim_common;

use std::sync::Arc;

use kube_sim::controllers::scheduler::config;
use kube_sim::{Sim, SimHandle, SimOptions};
use run_sim_common::{Descheduler, NS, metric, pod_ready, start, wait_for};
use serde_json::{Value, json};

const POLICY: &str = "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: pack
    pluginConfig:
      - name: DefaultEvictor
        args: {}
      - name: HighNodeUtilization
        args:
          thresholds: {cpu: 20, memory: 20}
    plugins:
      balance:
        enabled: [HighNodeUtilization]
";

const MOST_ALLOCATED: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
";

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

async fn start_cluster(scheduler_config: Option<&str>) -> SimHandle {
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

/// Nodes of the live (not terminating) `small` pods, sorted.
fn small_nodes(sim: &SimHandle) -> Vec<String> {
    let mut v: Vec<String> = sim
        .list("v1", "Pod", Some(NS))
        .iter()
        .filter(|p| p.pointer("/metadata/labels/app") == Some(&json!("small")))
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
        })
        .filter_map(|p| p.pointer("/spec/nodeName").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

struct Run {
    d: Descheduler,
}

impl Run {
    async fn start(sim: &SimHandle, name: &str, window: &str) -> Run {
        let mut d = start(
            sim,
            name,
            POLICY,
            &[
                "--descheduling-interval",
                "2s",
                "--metrics-unauthenticated",
                "--placement-return-window",
                window,
            ],
        );
        d.wait_ready().await;
        Run { d }
    }

    async fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric(&self.d.metrics().await, name, labels)
    }

    async fn evicted(&self) -> f64 {
        self.value("descheduler_pods_evicted_total", &[("result", "success")])
            .await
    }

    async fn cycles(&self) -> f64 {
        self.value("kube_descheduler_cycles_total", &[("status", "completed")])
            .await
    }

    /// Polls (async) until `cond` holds on the metrics text.
    async fn wait(&self, what: &str, cond: impl Fn(&str) -> bool) {
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

    /// Waits until `n` more cycles completed after now.
    async fn wait_cycles(&self, n: f64) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_detector_least_allocated_evicts_the_small_pods_every_cycle() {
    let sim = start_cluster(None).await;
    let run = Run::start(&sim, "loop", "0").await;
    // Three cycles' worth of evictions: 2 per cycle, forever (upstream #424).
    run.wait("six evictions", |m| {
        metric(
            m,
            "descheduler_pods_evicted_total",
            &[("result", "success")],
        ) >= 6.0
    })
    .await;
    let s = sim.clone();
    wait_for("the replacements placed", || small_nodes(&s).len() == 2).await;
    assert_eq!(small_nodes(&sim), ["n5", "n6"], "replacements land back");
    let text = run.d.metrics().await;
    assert_eq!(
        metric(&text, "kube_descheduler_placement_returns_total", &[]),
        0.0
    );
    assert_eq!(
        metric(
            &text,
            "descheduler_pods_evicted_total",
            &[("result", "placement backoff")]
        ),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_detector_counts_the_returns_and_its_backoff_stops_the_loop() {
    let sim = start_cluster(None).await;
    let run = Run::start(&sim, "detector", "30m").await;
    run.wait("both returns counted", |m| {
        metric(
            m,
            "kube_descheduler_placement_returns_total",
            &[
                ("profile", "pack"),
                ("strategy", "HighNodeUtilization"),
                ("namespace", NS),
            ],
        ) >= 2.0
    })
    .await;
    assert_eq!(
        run.evicted().await,
        2.0,
        "one cycle evicted the two small pods"
    );
    assert_eq!(small_nodes(&sim), ["n5", "n6"], "both came back");
    // The next cycles refuse to evict them again from n5 / n6.
    run.wait("the backoff refusals", |m| {
        metric(
            m,
            "descheduler_pods_evicted_total",
            &[("result", "placement backoff")],
        ) >= 2.0
    })
    .await;
    run.wait_cycles(2.0).await;
    assert_eq!(run.evicted().await, 2.0, "later cycles evict nothing");
    assert_eq!(small_nodes(&sim), ["n5", "n6"]);
    // The Event on the ReplicaSet names the node and the plugin.
    let events: Vec<Value> = sim
        .list("events.k8s.io/v1", "Event", Some(NS))
        .into_iter()
        .filter(|e| e["reason"] == "EvictedPodReturned")
        .collect();
    assert!(!events.is_empty(), "no EvictedPodReturned Event");
    for e in &events {
        assert_eq!(e.pointer("/regarding/kind"), Some(&json!("ReplicaSet")));
        assert_eq!(e.pointer("/regarding/name"), Some(&json!("small")));
        assert_eq!(e["type"], "Warning");
        let note = e["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("by HighNodeUtilization") && note.contains("scheduled back onto n"),
            "{note}"
        );
    }
    let log = run.d.log_text();
    assert!(
        log.contains(
            "placement backoff: ReplicaSet shop/small: its last replacement evicted from n"
        ),
        "the refusal is logged with its reason; log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_most_allocated_the_small_pods_are_packed_once() {
    let sim = start_cluster(Some(MOST_ALLOCATED)).await;
    let run = Run::start(&sim, "most", "30m").await;
    run.wait("the two small pods evicted", |m| {
        metric(
            m,
            "descheduler_pods_evicted_total",
            &[("result", "success")],
        ) >= 2.0
    })
    .await;
    let s = sim.clone();
    wait_for("the replacements packed onto n1–n4", || {
        let nodes = small_nodes(&s);
        nodes.len() == 2
            && nodes
                .iter()
                .all(|n| ["n1", "n2", "n3", "n4"].contains(&n.as_str()))
    })
    .await;
    run.wait_cycles(2.0).await;
    assert_eq!(run.evicted().await, 2.0, "later cycles evict nothing");
    assert_eq!(
        run.value("kube_descheduler_placement_returns_total", &[])
            .await,
        0.0
    );
}
