//! `plan` and `run` against the real control plane (`tests/control-plane/up`): the live plan equals
//! the plan of the same cluster exported with `kubectl get -o json`; `run` under the chart's
//! ServiceAccount and RBAC (decided by the real authorizer) evicts through policy/v1 Eviction, the
//! ReplicaSet controller replaces the pods and kube-scheduler binds them elsewhere; two `run`
//! replicas elect one leader on a real Lease and the other takes over when the leader is killed.

mod real_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use real_common::{Cluster, Options, run_bounded, spawn_run};
use serde_json::Value;

const NOW: &str = "2030-01-01T00:00:00Z";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
}

/// `plan` with `args`; its stdout (panics on a non-zero exit).
fn plan(args: &[&str], extra: &[&Path]) -> String {
    let mut cmd = bin();
    cmd.args(["plan", "--now", NOW, "-o", "json"]).args(args);
    for p in extra {
        cmd.arg(p);
    }
    let out = run_bounded(&mut cmd, Duration::from_secs(120));
    assert!(out.ok, "plan {args:?} failed: {}", out.stderr);
    out.stdout
}

const DEPLOYMENT: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: NS}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 100m, memory: 64Mi}}
"#;

fn deployment(ns: &str, name: &str, replicas: u32) -> String {
    DEPLOYMENT
        .replace("NS", ns)
        .replace("NAME", name)
        .replace("REPLICAS", &replicas.to_string())
}

/// The pods of `app` in `ns` (`name node phase`), those not being deleted.
fn pods(c: &Cluster, ns: &str, app: &str) -> Vec<(String, String, String)> {
    let out = c.kubectl(&[
        "get", "pods", "-n", ns, "-l", &format!("app={app}"), "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
    ]);
    assert!(out.ok, "{}", out.stderr);
    out.stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 3)
        .map(|f| (f[0].to_string(), f[1].to_string(), f[2].to_string()))
        .collect()
}

fn wait_running(c: &Cluster, ns: &str, app: &str, n: usize) {
    c.wait_for(
        &format!("{n} Running pods of {ns}/{app}"),
        Duration::from_secs(120),
        || {
            let p = pods(c, ns, app);
            p.len() == n && p.iter().all(|(_, _, phase)| phase == "Running")
        },
    );
}

#[test]
fn plan_kubeconfig_equals_plan_of_the_kubectl_export() {
    let c = real_common::shared();
    c.apply(&deployment("rr-plan", "web", 6));
    c.apply(&deployment("rr-plan", "api", 3));
    wait_running(c, "rr-plan", "web", 6);
    wait_running(c, "rr-plan", "api", 3);
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
    args: {placement: Report}
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 3600, namespaces: {include: [rr-plan]}}
  - name: RemoveDuplicates
    args: {}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
    balance: {enabled: [RemoveDuplicates]}
"#,
    )
    .expect("policy written");
    let kinds = "nodes,namespaces,pods,persistentvolumeclaims,poddisruptionbudgets.policy,\
                 priorityclasses.scheduling.k8s.io,replicasets.apps,deployments.apps,\
                 statefulsets.apps,jobs.batch,horizontalpodautoscalers.v2.autoscaling";
    // The cluster may still move (kwok's status updates): retry until two reads agree.
    let mut last = (String::new(), String::new());
    for _ in 0..5 {
        let export = c.kubectl(&["get", kinds, "-A", "-o", "json"]);
        assert!(export.ok, "{}", export.stderr);
        let snap = dir.path().join("cluster.json");
        std::fs::write(&snap, &export.stdout).expect("written");
        let live = plan(
            &["--policy", policy.to_str().expect("utf-8"), "--kubeconfig"],
            &[&c.kubeconfig],
        );
        // A snapshot file does not say its server's version: the live plan's default is given.
        let file = plan(
            &[
                "--policy",
                policy.to_str().expect("utf-8"),
                "--scheduler-version",
                &c.version,
                "--snapshot",
            ],
            &[&snap],
        );
        if live == file {
            let v: Value = serde_json::from_str(&live).expect("json");
            assert!(
                v["summary"]["evicted"].as_u64().expect("count") >= 9,
                "every rr-plan pod is older than an hour at --now: {live}"
            );
            return;
        }
        last = (live, file);
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!(
        "plan --kubeconfig differs from plan --snapshot of the export:\nlive: {}\nfile: {}",
        last.0, last.1
    );
}

/// The chart's RBAC (ServiceAccount, ClusterRole and binding, the leader-election Role and
/// binding), rendered with the real Helm engine and applied; a kubeconfig with a token of that
/// ServiceAccount.
fn chart_service_account(c: &Cluster, dir: &Path) -> PathBuf {
    let values =
        r#"{"kind":"Deployment","leaderElection":{"enabled":true},"trigger":{"enabled":true}}"#;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let out = run_bounded(
        Command::new(python)
            .arg(real_common::root().join("tests/chart/render.py"))
            .args(["render"])
            .arg(real_common::root().join("charts/kube-descheduler"))
            .args([
                "--values-json",
                values,
                "--name",
                "kube-descheduler",
                "--namespace",
                "kube-descheduler",
            ]),
        Duration::from_secs(120),
    );
    assert!(
        out.ok,
        "render.py: {} (pip install helm-python-sdk==0.2.2)",
        out.stderr
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&out.stdout).expect("rendered YAML");
    let mut rbac =
        String::from("apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-descheduler}\n");
    let mut applied = Vec::new();
    for d in docs.iter().filter(|d| !d.is_null()) {
        let kind = d["kind"].as_str().unwrap_or_default();
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        // The descheduler's own identity (not the webhook's or the certificate job's).
        if matches!(
            kind,
            "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding"
        ) && matches!(
            name,
            "kube-descheduler" | "kube-descheduler-leader-election" | "kube-descheduler-trigger"
        ) {
            applied.push(kind.to_string());
            rbac.push_str("---\n");
            rbac.push_str(&serde_json::to_string(d).expect("json"));
            rbac.push('\n');
        }
    }
    applied.sort();
    assert_eq!(
        applied,
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ],
        "the chart's RBAC objects"
    );
    c.apply(&rbac);
    let token = sa_token(c, "kube-descheduler", "kube-descheduler");
    let server = real_common::api_server(c);
    assert!(!server.is_empty(), "API_SERVER in the cluster's env");
    let kubeconfig = dir.join("sa.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\ncontexts:\n- name: c\n  context: {{cluster: c, user: sa}}\ncurrent-context: c\nusers:\n- name: sa\n  user:\n    token: {token}\n",
            ca = c.dir.join("ca.crt").display(),
            token = token
        ),
    )
    .expect("kubeconfig written");
    kubeconfig
}

/// The JSON log lines of `log` whose message is `msg`.
fn log_lines(log: &Path, msg: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["message"] == msg || v["message"] == msg || v["msg"] == msg)
        .collect()
}

fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
    if v["fields"].get(name).is_some() {
        &v["fields"][name]
    } else {
        &v[name]
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

const TAINT_POLICY: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: taints
  pluginConfig:
  - name: DefaultEvictor
    args: {}
  - name: RemovePodsViolatingNodeTaints
    args: {namespaces: {include: [NS]}}
  plugins:
    deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
"#;

#[test]
fn run_under_the_charts_rbac_evicts_and_leader_election_hands_over() {
    // A cluster of its own: the test taints nodes.
    let c = Cluster::up(&Options::default());
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = chart_service_account(&c, dir.path());
    let policy = run_evicts_off_a_tainted_node(&c, &kubeconfig, dir.path());
    leader_election_hands_over_on_a_real_lease(&c, &kubeconfig, &policy, dir.path());
}

/// Deploys 6 `web` pods in `ns`, then taints node-1; returns the pods that were on it.
fn web_pods_on_a_tainted_node_1(c: &Cluster, ns: &str) -> Vec<String> {
    c.apply(&deployment(ns, "web", 6));
    wait_running(c, ns, "web", 6);
    let before = pods(c, ns, "web");
    let on_node1: Vec<String> = before
        .iter()
        .filter(|(_, n, _)| n == "node-1")
        .map(|(p, _, _)| p.clone())
        .collect();
    assert!(
        !on_node1.is_empty(),
        "the scheduler spreads web over the nodes: {before:?}"
    );
    let t = c.kubectl(&["taint", "node", "node-1", "dedicated=infra:NoSchedule"]);
    assert!(t.ok, "{}", t.stderr);
    on_node1
}

/// `run` under the chart's ServiceAccount (`kubeconfig`) evicts each pod off the tainted node
/// once, without errors or anything forbidden, and records an event per eviction; the pods come
/// back elsewhere. Returns the policy file it wrote in `dir`.
fn run_evicts_off_a_tainted_node(c: &Cluster, kubeconfig: &Path, dir: &Path) -> PathBuf {
    let ns = "rr-run";
    let on_node1 = web_pods_on_a_tainted_node_1(c, ns);
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, TAINT_POLICY.replace("NS", ns)).expect("policy");
    let log = dir.join("run.log");
    let mut child = spawn_run(kubeconfig, &policy, &log, &[]);
    c.wait_for("three descheduling cycles", Duration::from_secs(90), || {
        log_lines(&log, "descheduling cycle finished").len() >= 3
            || child.try_wait().ok().flatten().is_some()
    });
    stop(&mut child);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let cycles = log_lines(&log, "descheduling cycle finished");
    assert!(cycles.len() >= 3, "run exited early: {text}");
    let evicted: u64 = cycles
        .iter()
        .map(|v| field(v, "evicted").as_u64().unwrap_or(0))
        .sum();
    let errors: u64 = cycles
        .iter()
        .map(|v| field(v, "errors").as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        evicted as usize,
        on_node1.len(),
        "each pod on node-1 evicted once: {text}"
    );
    assert_eq!(
        errors, 0,
        "no eviction failed (RBAC allows every call): {text}"
    );
    assert!(
        !text.to_lowercase().contains("forbidden"),
        "nothing forbidden by the chart's ClusterRole: {text}"
    );
    // The ReplicaSet controller replaces them; kube-scheduler keeps them off the tainted node.
    wait_running(c, ns, "web", 6);
    let after = pods(c, ns, "web");
    for p in &on_node1 {
        assert!(
            after.iter().all(|(n, _, _)| n != p),
            "{p} evicted: {after:?}"
        );
    }
    assert!(after.iter().all(|(_, n, _)| n != "node-1"), "{after:?}");
    assert_an_event_per_eviction(c, ns, on_node1.len());
    policy
}

/// run's events, written under the chart's events rule: one per eviction.
fn assert_an_event_per_eviction(c: &Cluster, ns: &str, evictions: usize) {
    let ev = c.kubectl(&[
        "get",
        "events",
        "-n",
        ns,
        "-o",
        "jsonpath={range .items[*]}{.reason} {.reportingComponent}{\"\\n\"}{end}",
    ]);
    assert_eq!(
        ev.stdout
            .lines()
            .filter(|l| *l == "RemovePodsViolatingNodeTaints kube-descheduler")
            .count(),
        evictions,
        "an event per eviction: {}",
        ev.stdout
    );
}

/// The `holderIdentity` of the `kube-descheduler/descheduler` Lease (empty when none).
fn lease_holder(c: &Cluster) -> String {
    c.kubectl(&[
        "get",
        "lease",
        "descheduler",
        "-n",
        "kube-descheduler",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
    .stdout
}

/// The identities a replica logged "acquired leadership" with.
fn acquired_leadership(log: &Path) -> Vec<String> {
    log_lines(log, "acquired leadership")
        .iter()
        .map(|v| {
            field(v, "identity")
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Leader election on a real Lease: of two replicas of `run`, exactly one leads and runs
/// cycles; SIGKILLed (no release), the follower takes over once the Lease has expired, and
/// nothing is forbidden.
fn leader_election_hands_over_on_a_real_lease(
    c: &Cluster,
    kubeconfig: &Path,
    policy: &Path,
    dir: &Path,
) {
    let lease_flags = [
        "--leader-elect",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-name=descheduler",
        "--leader-elect-resource-namespace=kube-descheduler",
    ];
    let logs = [dir.join("a.log"), dir.join("b.log")];
    let mut replicas: Vec<Child> = logs
        .iter()
        .map(|l| spawn_run(kubeconfig, policy, l, &lease_flags))
        .collect();
    c.wait_for(
        "one replica acquires the Lease",
        Duration::from_secs(60),
        || !lease_holder(c).is_empty() && logs.iter().any(|l| !acquired_leadership(l).is_empty()),
    );
    std::thread::sleep(Duration::from_secs(3));
    let leaders: Vec<usize> = (0..2)
        .filter(|&i| !acquired_leadership(&logs[i]).is_empty())
        .collect();
    assert_eq!(leaders.len(), 1, "exactly one leads: {leaders:?}");
    let leader = leaders[0];
    let follower = 1 - leader;
    assert_eq!(
        lease_holder(c),
        acquired_leadership(&logs[leader])[0],
        "the Lease names the leader"
    );
    assert!(
        !log_lines(&logs[leader], "descheduling cycle finished").is_empty(),
        "the leader runs cycles"
    );
    assert!(
        log_lines(&logs[follower], "descheduling cycle finished").is_empty(),
        "the follower runs none"
    );
    // SIGKILL the leader (no release): the follower takes over after the lease expires.
    stop(&mut replicas[leader]);
    c.wait_for(
        "the follower takes the Lease",
        Duration::from_secs(60),
        || !acquired_leadership(&logs[follower]).is_empty(),
    );
    let new_holder = acquired_leadership(&logs[follower])[0].clone();
    c.wait_for(
        "the Lease names the new leader",
        Duration::from_secs(20),
        || lease_holder(c) == new_holder,
    );
    c.wait_for(
        "the new leader runs a cycle",
        Duration::from_secs(30),
        || !log_lines(&logs[follower], "descheduling cycle finished").is_empty(),
    );
    stop(&mut replicas[follower]);
    let lease_log = std::fs::read_to_string(&logs[follower]).unwrap_or_default();
    assert!(
        !lease_log.to_lowercase().contains("forbidden"),
        "{lease_log}"
    );
}

/// A token of ServiceAccount `namespace/name`.
fn sa_token(c: &Cluster, namespace: &str, name: &str) -> String {
    let token = c.kubectl(&["create", "token", name, "-n", namespace, "--duration", "1h"]);
    assert!(token.ok, "{}", token.stderr);
    token.stdout.trim().to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `curl -k` of `url` (POST when `post`) with an optional bearer token: (status, body).
fn curl(url: &str, post: bool, token: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "-o", "-", "-w", "\n%{http_code}", "--max-time", "60"]);
    if post {
        cmd.args(["-X", "POST"]);
    }
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = run_bounded(cmd.arg(url), Duration::from_secs(70));
    let (body, code) = out.stdout.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn the_trigger_api_is_authorized_by_the_real_api_server() {
    let c = real_common::shared();
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = chart_service_account(c, dir.path());
    // A caller bound to the chart's trigger ClusterRole, and one without any binding.
    c.apply(
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: rr-trigger}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: caller, namespace: rr-trigger}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nobody, namespace: rr-trigger}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: rr-trigger-caller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kube-descheduler-trigger}
subjects: [{kind: ServiceAccount, name: caller, namespace: rr-trigger}]
"#,
    );
    let caller = sa_token(c, "rr-trigger", "caller");
    let nobody = sa_token(c, "rr-trigger", "nobody");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, TAINT_POLICY.replace("NS", "rr-trigger")).expect("policy");
    let log = dir.path().join("trigger.log");
    let port = free_port();
    let f = std::fs::File::create(&log).expect("log");
    let mut child = bin()
        .arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--policy-config-file")
        .arg(&policy)
        .args([
            "--descheduling-interval=0",
            "--enable-trigger-api",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--logging-format=json",
        ])
        .stdin(Stdio::null())
        .stdout(f.try_clone().expect("dup"))
        .stderr(f)
        .spawn()
        .expect("run starts");
    let url = format!("https://127.0.0.1:{port}/api/v1/descheduler/run");
    c.wait_for("the first cycle", Duration::from_secs(60), || {
        !log_lines(&log, "descheduling cycle finished").is_empty()
            || child.try_wait().ok().flatten().is_some()
    });
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        child.try_wait().ok().flatten().is_none(),
        "run stays up: {}",
        text()
    );
    // No token, a token the API server does not know: 401 (TokenReview).
    assert_eq!(curl(&url, true, None).0, 401, "{}", text());
    assert_eq!(curl(&url, true, Some("not-a-token")).0, 401, "{}", text());
    // An authenticated ServiceAccount without the binding: 403 (SubjectAccessReview).
    let (code, body) = curl(&url, true, Some(&nobody));
    assert_eq!(code, 403, "{body}\n{}", text());
    // The bound caller may start a cycle, but may not read metrics.
    let (code, body) = curl(&url, true, Some(&caller));
    assert_eq!(code, 200, "{body}\n{}", text());
    let v: Value = serde_json::from_str(&body).expect("json summary");
    assert_eq!(v["status"], "completed", "{body}");
    let (code, body) = curl(
        &format!("https://127.0.0.1:{port}/metrics"),
        false,
        Some(&caller),
    );
    assert_eq!(code, 403, "{body}");
    stop(&mut child);
}
