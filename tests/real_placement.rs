//! The placement simulator against the real kube-scheduler (default profile): six nodes over three
//! zones with different loads, ReplicaSet pods of different sizes; one eviction at a time,
//! `plan --kubeconfig` with `placement: Report` predicts where the replacement lands, the pod is
//! evicted through policy/v1 Eviction, and the node kube-scheduler binds the replacement to is
//! compared with the prediction and its ties. Prints one line per eviction (each miss with both
//! nodes' scores) and the figure; fails below 95 % (docs/placement.md has the figures).
//!
//! The pods have the default grace period (30 s), so an eviction leaves the pod terminating on its
//! node while the ReplicaSet controller creates the replacement and kube-scheduler places it. kwok
//! finishes a graceful deletion at once, where a kubelet first stops the containers; a finalizer
//! on the pods stands for that: the evicted pod stays terminating until its replacement is bound,
//! then the test removes the finalizer and the pod is gone.

mod real_common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use real_common::{Cluster, Options, deployment, evict, run_bounded};
use serde_json::Value;

const EVICTIONS: usize = 24;

/// Holds an evicted pod terminating on its node (the containers being stopped).
const FINALIZER: &str = "kube-descheduler.test/terminating";

/// Bare pods bound to a node (no scheduler, no owner: never evicted), the node's base load.
fn load_pod(node: &str, i: usize, cpu: &str, memory: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Pod
metadata: {{name: load-{node}-{i}, namespace: pl-load}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {{requests: {{cpu: "{cpu}", memory: "{memory}"}}}}
"#
    )
}

const POLICY: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictTotal: 1
profiles:
- name: placement
  pluginConfig:
  - name: DefaultEvictor
    args: {placement: Report}
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 1, namespaces: {include: [pl]}}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
"#;

/// `pl` pods: name → (node, terminating).
fn pods(c: &Cluster) -> Vec<(String, String, bool, String)> {
    let out = c.kubectl(&[
        "get", "pods", "-n", "pl", "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}/{.status.phase}/{.metadata.deletionTimestamp}{\"\\n\"}{end}",
    ]);
    assert!(out.ok, "{}", out.stderr);
    out.stdout
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(' ')?;
            let f: Vec<&str> = rest.split('/').collect();
            Some((
                name.to_string(),
                f[0].to_string(),
                !f.get(2).unwrap_or(&"").is_empty(),
                f.get(1).unwrap_or(&"").to_string(),
            ))
        })
        .collect()
}

fn score(v: &Value) -> String {
    if v.is_null() {
        return "-".into();
    }
    format!(
        "{} {} {}",
        v["node"].as_str().unwrap_or("?"),
        v["score"],
        v["plugins"]
    )
}

#[test]
fn predictions_match_where_kube_scheduler_binds_replacements() {
    let c = Cluster::up(&Options {
        nodes: 6,
        ..Options::default()
    });
    // Base loads (cpu, memory) per node: node-1 empty … node-6 nearly half full.
    let loads: [&[(&str, &str)]; 6] = [
        &[],
        &[("1", "1Gi")],
        &[("2", "2Gi")],
        &[("500m", "3Gi")],
        &[("1500m", "512Mi"), ("250m", "256Mi")],
        &[("1", "1Gi"), ("1", "2Gi")],
    ];
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: pl-load}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: pl}\n",
    );
    for (n, pods) in loads.iter().enumerate() {
        for (i, (cpu, mem)) in pods.iter().enumerate() {
            yaml.push_str(&load_pod(&format!("node-{}", n + 1), i, cpu, mem));
        }
    }
    for (name, replicas, requests) in [
        ("small", 4, ("100m", "128Mi")),
        ("cpu", 3, ("600m", "256Mi")),
        ("mem", 3, ("200m", "1536Mi")),
    ] {
        yaml.push_str(&deployment("pl", name, replicas, requests, &[FINALIZER]));
    }
    c.apply(&yaml);
    let total = 10;
    let settled = || {
        let p = pods(&c);
        p.len() == total
            && p.iter()
                .all(|(_, node, term, phase)| !node.is_empty() && !term && phase == "Running")
    };
    c.wait_for("10 Running pl pods", Duration::from_secs(120), settled);

    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("policy written");

    let mut hits = 0;
    let mut lines = Vec::new();
    for i in 0..EVICTIONS {
        c.wait_for("pl settled", Duration::from_secs(120), settled);
        std::thread::sleep(Duration::from_millis(1500)); // older than maxPodLifeTimeSeconds
        let out = run_bounded(
            Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
                .args(["plan", "-o", "json", "--policy"])
                .arg(&policy)
                .arg("--kubeconfig")
                .arg(&c.kubeconfig)
                .args(["--scheduler-version", &c.version]),
            Duration::from_secs(60),
        );
        assert!(out.ok, "plan: {}", out.stderr);
        let plan: Value = serde_json::from_str(&out.stdout).expect("json");
        let ev = &plan["evictions"][0];
        let name = ev["name"]
            .as_str()
            .unwrap_or_else(|| panic!("one eviction: {plan}"))
            .to_string();
        let from = ev["node"].as_str().unwrap_or_default().to_string();
        let predicted = ev["predictedNode"].as_str().unwrap_or("none").to_string();
        let ties: Vec<String> = ev["predictedTies"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let before: BTreeSet<String> = pods(&c).into_iter().map(|p| p.0).collect();
        let e = evict(&c, "pl", &name);
        assert!(e.ok, "evicting {name}: {}", e.stderr);
        let mut landed = String::new();
        c.wait_for("the replacement is bound", Duration::from_secs(60), || {
            if let Some(p) = pods(&c)
                .into_iter()
                .find(|p| !before.contains(&p.0) && !p.1.is_empty())
            {
                landed = p.1;
                true
            } else {
                false
            }
        });
        // The containers have stopped: the evicted pod goes.
        let released = c.kubectl(&[
            "patch",
            "pod",
            &name,
            "-n",
            "pl",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ]);
        assert!(released.ok, "releasing {name}: {}", released.stderr);
        let hit = ties.contains(&landed) || landed == predicted;
        hits += usize::from(hit);
        let line = format!(
            "{i:>2} {name} from {from}: predicted {predicted} (ties {ties:?}) → bound to {landed} {} | predicted {} | current {}",
            if hit { "HIT" } else { "MISS" },
            score(&ev["predictedScore"]),
            score(&ev["currentNodeScore"]),
        );
        println!("{line}");
        lines.push(line);
    }
    let pct = hits * 100 / EVICTIONS;
    println!(
        "placement vs kube-scheduler v{}: {hits}/{EVICTIONS} ({pct} %) bound to the predicted node or a tie",
        c.version
    );
    if let Ok(p) = std::env::var("REAL_PLACEMENT_OUT") {
        let _ = std::fs::write(
            p,
            format!("v{} {hits}/{EVICTIONS}\n{}\n", c.version, lines.join("\n")),
        );
    }
    assert!(
        hits * 100 >= EVICTIONS * 95,
        "{hits}/{EVICTIONS} predictions held:\n{}",
        lines.join("\n")
    );
}
