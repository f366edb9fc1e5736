//! `--scheduler-version` on the real control plane: without the flag, `plan --kubeconfig` and
//! `run` score placement as the API server's version (`/version`) — kube-scheduler 1.36 changed
//! NodeResourcesBalancedAllocation, so 1.34 and 1.37 predict different scores for the same pods —,
//! an explicit flag wins, and `plan --snapshot` keeps the pre-1.36 scoring unless given the flag.

mod real_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use real_common::{Cluster, deployment, run_bounded};
use serde_json::Value;

const NOW: &str = "2030-01-01T00:00:00Z";

const POLICY: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
    args: {placement: Report}
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 1, namespaces: {include: [sv]}}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
"#;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
}

/// `plan -o json` of `source` (`--kubeconfig FILE` or `--snapshot FILE`) with `extra`.
fn plan(policy: &Path, source: (&str, &Path), extra: &[&str]) -> Value {
    let out = run_bounded(
        bin()
            .args(["plan", "-o", "json", "--now", NOW, "--policy"])
            .arg(policy)
            .arg(source.0)
            .arg(source.1)
            .args(extra),
        Duration::from_secs(120),
    );
    assert!(out.ok, "plan {extra:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("plan JSON")
}

/// Per eviction: the pod and the predicted and current node's scores.
fn scores(plan: &Value) -> Vec<String> {
    let evictions = plan["evictions"].as_array().expect("evictions");
    assert_eq!(evictions.len(), 3, "every heavy pod: {plan}");
    evictions
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["name"], e["predictedScore"], e["currentNodeScore"]
            )
        })
        .collect()
}

/// `run --dry-run` once with `extra`; its JSON log lines.
fn run_once(c: &Cluster, policy: &Path, extra: &[&str]) -> Vec<Value> {
    let out = run_bounded(
        real_common::run_command(&c.kubeconfig, policy)
            .args(["--dry-run", "--descheduling-interval=0"])
            .args(extra),
        Duration::from_secs(120),
    );
    assert!(out.ok, "run {extra:?}: {}{}", out.stdout, out.stderr);
    format!("{}\n{}", out.stdout, out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// The `fields` of the log lines whose message is `msg`.
fn with_message<'a>(log: &'a [Value], msg: &str) -> Vec<&'a Value> {
    log.iter()
        .filter(|v| v["fields"]["message"] == msg)
        .map(|v| &v["fields"])
        .collect()
}

/// The `placement` summaries of the run's "Eviction placement" lines, sorted.
fn placements(log: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = with_message(log, "Eviction placement")
        .iter()
        .map(|f| format!("{} {}", f["pod"], f["placement"]))
        .collect();
    assert_eq!(v.len(), 3, "one line per heavy pod: {log:?}");
    v.sort();
    v
}

#[test]
fn the_default_scheduler_version_is_the_api_servers() {
    let c = real_common::shared();
    // cpu-heavy pods: their nodes' cpu and memory shares differ, which the two BalancedAllocation
    // formulas score differently.
    c.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: sv}\n");
    c.apply(&deployment("sv", "heavy", 3, ("1", "256Mi"), &[]));
    c.wait_for("3 Running heavy pods", Duration::from_secs(120), || {
        let out = c.kubectl(&[
            "get",
            "pods",
            "-n",
            "sv",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ]);
        out.stdout
            .split_whitespace()
            .filter(|p| *p == "Running")
            .count()
            == 3
    });
    let minor: u32 = c
        .version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("server version {:?}", c.version));
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("policy written");
    let live = ("--kubeconfig", c.kubeconfig.as_path());

    // plan --kubeconfig: the default is the server's version; 1.34 and 1.37 score differently.
    let default = plan(&policy, live, &[]);
    let warnings = default["summary"]["warnings"].to_string();
    assert!(!warnings.contains("--scheduler-version"), "{warnings}");
    let as_server = plan(&policy, live, &["--scheduler-version", &c.version]);
    let as_135 = plan(&policy, live, &["--scheduler-version", "1.35"]);
    let as_137 = plan(&policy, live, &["--scheduler-version", "1.37"]);
    assert_eq!(scores(&default), scores(&as_server));
    assert_ne!(
        scores(&as_135),
        scores(&as_137),
        "BalancedAllocation changed in 1.36"
    );
    let other = if minor >= 36 { &as_135 } else { &as_137 };
    assert_ne!(
        scores(&default),
        scores(other),
        "an explicit flag wins over the server's version"
    );

    // plan --snapshot of the same cluster: the pre-1.36 scoring unless given the flag.
    let kinds = "nodes,namespaces,pods,persistentvolumeclaims,poddisruptionbudgets.policy,\
                 priorityclasses.scheduling.k8s.io,replicasets.apps,deployments.apps,\
                 statefulsets.apps,jobs.batch,horizontalpodautoscalers.v2.autoscaling";
    let export = c.kubectl(&["get", kinds, "-A", "-o", "json"]);
    assert!(export.ok, "{}", export.stderr);
    let snap = dir.path().join("cluster.json");
    std::fs::write(&snap, &export.stdout).expect("written");
    let file = ("--snapshot", snap.as_path());
    assert_eq!(scores(&plan(&policy, file, &[])), scores(&as_135));
    assert_eq!(
        scores(&plan(&policy, file, &["--scheduler-version", &c.version])),
        scores(&default)
    );

    // run: the same default, logged with the version it uses; an explicit flag wins. `run` reads
    // the real clock, so the pods must first outlive PodLifeTime's 1 s (whole seconds, `>`).
    std::thread::sleep(Duration::from_secs(3));
    let log = run_once(c, &policy, &[]);
    let used = with_message(
        &log,
        "placement predictions score as the API server's kube-scheduler version",
    );
    assert_eq!(used.len(), 1, "{log:?}");
    assert_eq!(used[0]["version"], format!("1.{minor}"));
    let explicit = run_once(c, &policy, &["--scheduler-version", &c.version]);
    assert_eq!(placements(&log), placements(&explicit));
    let flagged_other = if minor >= 36 { "1.35" } else { "1.37" };
    let other_run = run_once(c, &policy, &["--scheduler-version", flagged_other]);
    assert!(
        with_message(
            &other_run,
            "placement predictions score as the API server's kube-scheduler version"
        )
        .is_empty(),
        "with the flag the server is not asked"
    );
    assert_ne!(placements(&log), placements(&other_run));
}
