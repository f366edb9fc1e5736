//! `placement: Enforce` against the real kube-scheduler: the ping-pong scenario (six 4-cpu nodes;
//! four of them each run one 2.4-cpu pod of `big`, the two others one 200m pod of `small`;
//! HighNodeUtilization at cpu / memory 20 %) under `run` (not dry-run, a 2 s interval, at least
//! four cycles), the ReplicaSet controller and kube-scheduler placing any replacement.
//!
//! - kube-scheduler's default profile (LeastAllocated) would put each small pod straight back:
//!   Enforce refuses both in every cycle (PlacementReturn) and nothing is evicted; the small pods
//!   are the original ones.
//! - kube-scheduler with MostAllocated (and the same configuration as `--scheduler-config`): the
//!   first cycle evicts both small pods, kube-scheduler packs their replacements onto the `big`
//!   nodes, and no later cycle evicts or refuses anything.
//!
//! The pods have the default grace period; kwok finishes their deletion at once.

mod real_common;

use std::path::Path;
use std::time::Duration;

use real_common::{Cluster, Options, deployment, spawn_run};
use serde_json::Value;

const POLICY: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: pack
  pluginConfig:
  - name: DefaultEvictor
    args: {placement: Enforce}
  - name: HighNodeUtilization
    args:
      thresholds: {cpu: 20, memory: 20}
  plugins:
    balance: {enabled: [HighNodeUtilization]}
"#;

/// A kube-scheduler that packs, for the real kube-scheduler (`@KUBECONFIG@` is filled in by
/// `tests/control-plane/up`) and for `run --scheduler-config`.
const MOST_ALLOCATED: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "@KUBECONFIG@"}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated}
"#;

/// The live `pp` pods of `app`: `(name, node)`, sorted; `None` while one is Pending or
/// terminating.
fn pods(c: &Cluster, app: &str) -> Option<Vec<(String, String)>> {
    let out = c.kubectl(&[
        "get", "pods", "-n", "pp", "-l", &format!("app={app}"), "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
    ]);
    assert!(out.ok, "{}", out.stderr);
    let mut v = Vec::new();
    for l in out.stdout.lines() {
        match l.split_whitespace().collect::<Vec<_>>()[..] {
            [name, node, "Running"] => v.push((name.to_string(), node.to_string())),
            _ => return None,
        }
    }
    v.sort();
    Some(v)
}

/// Starts a cluster of six nodes (kube-scheduler configured by `config`, if any) with `big` on
/// four nodes and `small` on the two others; the nodes of `big` and of `small`.
fn ping_pong(config: Option<&Path>) -> (Cluster, Vec<String>, Vec<(String, String)>) {
    let c = Cluster::up(&Options {
        nodes: 6,
        scheduler_config: config.map(Path::to_path_buf),
        ..Options::default()
    });
    c.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: pp}\n");
    // One at a time: big first (one pod per node, spread), then small on the nodes it leaves.
    c.apply(&deployment("pp", "big", 4, ("2400m", "4800Mi"), &[]));
    let mut big = Vec::new();
    c.wait_for("4 Running big pods", Duration::from_secs(120), || {
        big = pods(&c, "big").unwrap_or_default();
        big.len() == 4
    });
    let mut big_nodes: Vec<String> = big.into_iter().map(|p| p.1).collect();
    big_nodes.sort();
    big_nodes.dedup();
    assert_eq!(big_nodes.len(), 4, "one big pod per node: {big_nodes:?}");
    // The big nodes cordoned meanwhile, so that a packing scheduler too puts the small pods on
    // the two others.
    let cordon = |verb: &str| {
        for n in &big_nodes {
            let out = c.kubectl(&[verb, n]);
            assert!(out.ok, "{verb} {n}: {}", out.stderr);
        }
    };
    cordon("cordon");
    c.apply(&deployment("pp", "small", 2, ("200m", "400Mi"), &[]));
    let mut small = Vec::new();
    c.wait_for("2 Running small pods", Duration::from_secs(120), || {
        small = pods(&c, "small").unwrap_or_default();
        small.len() == 2
    });
    cordon("uncordon");
    assert!(
        small.iter().all(|(_, n)| !big_nodes.contains(n)) && small[0].1 != small[1].1,
        "the small pods on the two other nodes: {small:?}"
    );
    (c, big_nodes, small)
}

/// The fields of the "descheduling cycle finished" lines of `log`.
fn cycles(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "descheduling cycle finished")
        .map(|v| v["fields"].clone())
        .collect()
}

/// Runs `run` until `n` cycles have completed (bounded), then stops it; their fields.
fn run_cycles(c: &Cluster, n: usize, extra: &[&str]) -> (Vec<Value>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("policy written");
    let log = dir.path().join("run.log");
    let mut child = spawn_run(&c.kubeconfig, &policy, &log, extra);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.wait_for(
            &format!("{n} descheduling cycles"),
            Duration::from_secs(180),
            || {
                let exited = matches!(child.try_wait(), Ok(Some(_)));
                assert!(!exited, "run exited");
                cycles(&log).len() >= n
            },
        );
    }));
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    if let Err(e) = outcome {
        panic!("{e:?}; run's log:\n{text}");
    }
    (cycles(&log), text)
}

fn count(cycle: &Value, field: &str) -> u64 {
    cycle[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {cycle}"))
}

#[test]
fn enforce_with_kube_schedulers_default_profile_evicts_nothing() {
    let (c, _, small) = ping_pong(None);
    let (cycles, log) = run_cycles(&c, 4, &[]);
    for (i, cycle) in cycles.iter().enumerate() {
        assert_eq!(cycle["status"], "completed", "cycle {i}: {cycle}");
        assert_eq!(count(cycle, "evicted"), 0, "cycle {i} evicted: {log}");
        assert_eq!(
            count(cycle, "placement_refusals"),
            2,
            "cycle {i} refuses both small pods: {log}"
        );
    }
    for (_, node) in &small {
        assert!(
            log.lines()
                .any(|l| l.contains("Eviction refused by placement")
                    && l.contains("PlacementReturn")
                    && l.contains(&format!("would be scheduled back onto {node}"))),
            "no PlacementReturn refusal for {node}: {log}"
        );
    }
    assert_eq!(
        pods(&c, "small"),
        Some(small),
        "the small pods are the original ones"
    );
}

#[test]
fn enforce_with_most_allocated_packs_the_small_pods_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("most-allocated.yaml");
    std::fs::write(&config, MOST_ALLOCATED).expect("config written");
    let (c, big_nodes, small) = ping_pong(Some(&config));
    let config_arg = config.to_str().expect("utf-8 path");
    let (cycles, log) = run_cycles(&c, 4, &["--scheduler-config", config_arg]);
    assert_eq!(count(&cycles[0], "evicted"), 2, "the first cycle: {log}");
    for (i, cycle) in cycles.iter().enumerate() {
        assert_eq!(cycle["status"], "completed", "cycle {i}: {cycle}");
        assert_eq!(count(cycle, "placement_refusals"), 0, "cycle {i}: {log}");
        if i > 0 {
            assert_eq!(count(cycle, "evicted"), 0, "cycle {i} evicted: {log}");
        }
    }
    // kube-scheduler packed the replacements onto the big nodes (kube-scheduler picks at random
    // among the tied big nodes, so the node itself is not compared with the prediction).
    let mut now = Vec::new();
    c.wait_for("2 Running small pods", Duration::from_secs(60), || {
        now = pods(&c, "small").unwrap_or_default();
        now.len() == 2
    });
    assert!(
        now.iter()
            .all(|(name, node)| big_nodes.contains(node) && !small.iter().any(|s| &s.0 == name)),
        "replacements on {big_nodes:?}: {now:?}"
    );
    let predicted: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Eviction placement"))
        .collect();
    assert_eq!(predicted.len(), 2, "{log}");
    assert!(
        predicted.iter().all(|l| big_nodes
            .iter()
            .any(|n| l.contains(&format!("\"predicted\":\"{n}\"")))),
        "both predicted onto a big node: {predicted:?}"
    );
}
