//! Helpers of the EvictionRequest requester tests: a control plane with the alpha
//! EvictionRequestAPI gate (one per test binary, beside [`crate::real_common::shared`]), the
//! Deployment and policy the tests use, and reading the EvictionRequests the API server stored.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::real_common::{Cluster, Options};

/// Whether `K8S_VERSION` names a version before 1.37 (no EvictionRequest API).
fn before_1_37() -> Option<String> {
    let v = std::env::var("K8S_VERSION").ok()?;
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next()?, parts.next()?);
    ((major, minor) < (1, 37)).then_some(v)
}

/// The cluster with the EvictionRequestAPI gate, or None (with the reason printed) on a version
/// without it, holding no EvictionRequest. The guard keeps its tests one at a time: `run` counts
/// all of its requests against its limits and withdraws those its policy no longer wants, in any
/// namespace.
pub fn gated() -> Option<(&'static Cluster, MutexGuard<'static, ()>)> {
    if let Some(v) = before_1_37() {
        eprintln!(
            "skipped: K8S_VERSION={v} has no EvictionRequest API (alpha since Kubernetes 1.37)"
        );
        return None;
    }
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = CLUSTER.get_or_init(|| {
        Cluster::up(&Options {
            eviction_request: true,
            ..Options::default()
        })
    });
    // Each test starts with no request: outstanding ones count against every later run's limits.
    let out = cluster.kubectl(&["delete", "evictionrequests", "--all", "-A", "--wait=true"]);
    assert!(out.ok, "{}", out.stderr);
    Some((cluster, guard))
}

/// One test's cluster (held for the test), namespace and policy.
pub struct Case {
    pub c: &'static Cluster,
    pub ns: &'static str,
    pub policy: PathBuf,
    pub dir: tempfile::TempDir,
    _one_at_a_time: MutexGuard<'static, ()>,
}

/// [`gated`], then [`setup`] of `app` × `replicas` in `ns` and [`policy`] with `total`.
pub fn case(ns: &'static str, app: &str, replicas: u32, total: Option<u32>) -> Option<Case> {
    let (c, guard) = gated()?;
    setup(c, ns, app, replicas);
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = policy(dir.path(), ns, total);
    Some(Case {
        c,
        ns,
        policy,
        dir,
        _one_at_a_time: guard,
    })
}

/// A pod of a test Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub name: String,
    pub uid: String,
    pub phase: String,
}

/// The pods of `app` in `ns` not being deleted, sorted by name.
pub fn pods(c: &Cluster, ns: &str, app: &str) -> Vec<Pod> {
    let out = c.kubectl(&[
        "get", "pods", "-n", ns, "-l", &format!("app={app}"), "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
    ]);
    assert!(out.ok, "{}", out.stderr);
    let mut pods: Vec<Pod> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 3)
        .map(|f| Pod {
            name: f[0].to_string(),
            uid: f[1].to_string(),
            phase: f[2].to_string(),
        })
        .collect();
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    pods
}

/// Namespace `ns` with a Deployment `app` of `replicas` pods, waited for until all run and are
/// older than the policy's lifetime.
pub fn setup(c: &Cluster, ns: &str, app: &str, replicas: u32) {
    c.apply(&format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {app}, namespace: {ns}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {app}}}}}
  template:
    metadata: {{labels: {{app: {app}}}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"#
    ));
    c.wait_for(
        &format!("{replicas} Running pods of {ns}/{app}"),
        Duration::from_secs(120),
        || {
            let p = pods(c, ns, app);
            p.len() == replicas as usize && p.iter().all(|p| p.phase == "Running")
        },
    );
    // Older than the policy's maxPodLifeTimeSeconds (1 s, counted in whole seconds).
    std::thread::sleep(Duration::from_secs(3));
}

/// A policy in `dir`: PodLifeTime (1 s) over `ns`'s pods not labelled `evict=no`, with
/// `maxNoOfPodsToEvictTotal` when given.
pub fn policy(dir: &Path, ns: &str, total: Option<u32>) -> PathBuf {
    let path = dir.join("policy.yaml");
    let limit = total
        .map(|n| format!("maxNoOfPodsToEvictTotal: {n}\n"))
        .unwrap_or_default();
    std::fs::write(
        &path,
        format!(
            r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
{limit}profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
    args: {{}}
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: 1
      namespaces: {{include: [{ns}]}}
      labelSelector:
        matchExpressions: [{{key: evict, operator: NotIn, values: ["no"]}}]
  plugins:
    deschedule: {{enabled: [PodLifeTime]}}
"#
        ),
    )
    .expect("policy written");
    path
}

/// An EvictionRequest as the API server stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub name: String,
    /// `metadata.uid`: a new object has a new one.
    pub object_uid: String,
    pub pod: String,
    pub uid: String,
    pub requester: String,
    pub intent: String,
    pub managed_by: String,
}

/// The EvictionRequests in `ns`, read back from the API server.
pub fn requests(c: &Cluster, ns: &str) -> Vec<Request> {
    let out = c.kubectl(&[
        "get",
        "evictionrequests.lifecycle.k8s.io",
        "-n",
        ns,
        "-o",
        "json",
    ]);
    assert!(out.ok, "{}", out.stderr);
    let list: serde_json::Value = serde_json::from_str(&out.stdout).expect("a JSON list");
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| Request {
            name: text(&r["metadata"]["name"]),
            object_uid: text(&r["metadata"]["uid"]),
            pod: text(&r["spec"]["target"]["pod"]["name"]),
            uid: text(&r["spec"]["target"]["pod"]["uid"]),
            requester: text(&r["spec"]["requester"]),
            intent: text(&r["spec"]["intent"]),
            managed_by: text(&r["metadata"]["labels"]["app.kubernetes.io/managed-by"]),
        })
        .collect()
}
