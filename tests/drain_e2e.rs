//! End to end: real `kubectl drain` (every installed version) against kube-sim, with our real
//! `kube-descheduler webhook` binary registered from `webhook-config/` as shipped. Each test is
//! one scenario of the zero-downtime drain (docs/zero-downtime-drain.md); none sleeps longer than kubectl's own 5 s eviction retry.

mod e2e_common;

use std::time::Duration;

use e2e_common::*;
use serde_json::{Value, json};

const TAINT: &str = "e2e.kube-descheduler.io/kubectl";

/// Scenario 1: for every kubectl, the drain of a node running a single-replica Deployment
/// completes through a deflection, Ready replicas never drop to 0, and the pod now runs on
/// another node. All versions drain their own node of one cluster at the same time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_drains_a_single_replica_deployment_without_downtime() {
    let k = PerKubectl::start("drain", TAINT, 1).await;
    let (outputs, series) = k.drain_all().await;

    for (label, out) in &outputs {
        let app = k.app_of(label);
        let ctx = drain_context(label, out, &k.webhook);
        assert!(out.ok, "drain failed: {ctx}");
        assert!(
            out.all().contains(DEFLECTION),
            "the eviction was not deflected: {ctx}"
        );
        assert!(k.cluster.restarted_at(&app).is_some(), "no restart: {ctx}");
        let pods = k.cluster.pods(&app);
        assert_eq!(pods.len(), 1, "{ctx}");
        assert!(node_of(&pods[0]).starts_with("spare-"), "{pods:?}");
        assert!(is_ready(&pods[0]) && !is_terminating(&pods[0]), "{pods:?}");
    }
    assert_never_zero(&series, "kubectl drain with the guard");
    for app in &k.apps {
        assert_eq!(k.restarts(app), 1, "exactly one restart of {app}");
    }
    assert_eq!(
        k.webhook
            .metric("kube_descheduler_guard_restart_duration_seconds_count")
            .await,
        k.bins.len() as f64,
        "one restart per drained Deployment"
    );
}

/// Scenario 2: a single-replica Deployment with a PodDisruptionBudget `minAvailable: 1`. Without
/// our webhook the drain cannot finish within its --timeout (the budget never allows the
/// eviction); with it, the same drain completes with no downtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_min_available_one_blocks_the_drain_without_the_guard_and_not_with_it() {
    let cluster = Cluster::start_single_replica_behind_budget("api").await;
    cluster.set_schedulable("n2", true);
    let bin = kubectl();

    // Without the webhook: every attempt is refused by the budget until the timeout.
    let out = drain(&bin, &cluster, "n1", "8s", &[]).await;
    assert!(
        !out.ok,
        "the drain must not complete without the guard: {out:?}"
    );
    assert!(
        out.all().contains("disruption budget"),
        "refused by the PodDisruptionBudget: {out:?}"
    );
    assert!(out.elapsed >= Duration::from_secs(8), "{out:?}");
    let pods = cluster.pods("api");
    assert_eq!(pods.len(), 1);
    assert_eq!(node_of(&pods[0]), "n1");
    assert!(is_ready(&pods[0]) && !is_terminating(&pods[0]));
    assert!(cluster.restarted_at("api").is_none());

    // With the webhook: the same drain completes.
    let (webhook, _certs) = guarded(&cluster, &[]).await;
    let sampler = Sampler::start(&cluster.sim, &["api"]);
    let out = drain(&bin, &cluster, "n1", "120s", &[]).await;
    let series = sampler.finish().await;
    assert!(out.ok, "{out:?}\nwebhook logs:\n{}", webhook.logs());
    assert!(out.all().contains(DEFLECTION), "{out:?}");
    cluster.wait_moved("api", 1, "n1").await;
    assert_never_zero(&series, "drain with a PDB and the guard");
    let status = run_kubectl(
        &bin,
        &cluster,
        &[
            "rollout",
            "status",
            "deployment/api",
            "-n",
            NS,
            "--timeout=60s",
        ],
    )
    .await;
    assert!(
        status.ok && status.stdout.contains("successfully rolled out"),
        "{status:?}"
    );
}

/// Scenario 3: Deployments the guard cannot restart without downtime (maxSurge 0 /
/// maxUnavailable 1, and Recreate) are evicted at once; nothing is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_surge_and_recreate_deployments_are_evicted_without_a_restart() {
    let cluster = Cluster::start_on_n1(
        vec![
            deployment("nosurge", 1, Strategy::NoSurge),
            deployment("recreate", 1, Strategy::Recreate),
        ],
        &[("nosurge", 1), ("recreate", 1)],
    )
    .await;
    cluster.set_schedulable("n2", true);
    let generations: Vec<Value> = ["nosurge", "recreate"]
        .iter()
        .map(|d| cluster.deployment(d)["metadata"]["generation"].clone())
        .collect();
    let (webhook, _certs) = guarded(&cluster, &[]).await;

    let out = drain(&kubectl(), &cluster, "n1", "120s", &[]).await;
    assert!(out.ok, "{out:?}\nwebhook logs:\n{}", webhook.logs());
    assert!(!out.all().contains(DEFLECTION), "{out:?}");
    assert!(!out.all().contains("will retry"), "no refusal: {out:?}");
    for (d, generation) in ["nosurge", "recreate"].iter().zip(generations) {
        assert!(cluster.restarted_at(d).is_none(), "{d} was restarted");
        assert_eq!(cluster.deployment(d)["metadata"]["generation"], generation);
        cluster.wait_moved(d, 1, "n1").await;
    }
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_allows_total{reason=\"not_guarded\"}")
            .await,
        2.0,
        "both evictions reached the guard and were allowed as not guarded"
    );
}

/// Scenario 4: a multi-replica Deployment with a PodDisruptionBudget that rule A does not cover
/// (4 replicas: 25 % / 25 % resolves to maxUnavailable 1, so a restart could take one down
/// first): ordinary budget behaviour (evictions refused until replacements are Ready), no
/// restart. (Two replicas would resolve to surge 1 / unavailable 0, and all of them on the
/// drained node is rule A's case: see `tests/drain_rules_e2e.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_replica_deployment_with_a_pdb_follows_the_budget_without_a_restart() {
    let cluster = Cluster::start_on_n1(
        vec![
            deployment("shop", 4, Strategy::Default),
            pdb_min_available("shop", 3),
        ],
        &[("shop", 4)],
    )
    .await;
    cluster.set_schedulable("n2", true);
    let generation = cluster.deployment("shop")["metadata"]["generation"].clone();
    let (webhook, _certs) = guarded(&cluster, &[]).await;

    let sampler = Sampler::start(&cluster.sim, &["shop"]);
    let out = drain(&kubectl(), &cluster, "n1", "120s", &[]).await;
    let series = sampler.finish().await;
    assert!(out.ok, "{out:?}\nwebhook logs:\n{}", webhook.logs());
    let text = out.all().to_lowercase();
    assert!(
        text.contains("disruption budget") || text.contains("poddisruptionbudget"),
        "the second eviction waits for the budget: {out:?}"
    );
    assert!(!out.all().contains(DEFLECTION), "{out:?}");
    assert!(cluster.restarted_at("shop").is_none());
    assert_eq!(
        cluster.deployment("shop")["metadata"]["generation"],
        generation
    );
    cluster.wait_moved("shop", 4, "n1").await;
    assert_never_zero(&series, "multi-replica drain");
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_deflections_total")
            .await,
        0.0
    );
}

/// Scenario 5: `kubectl drain --dry-run=server` patches no Deployment, evicts nothing and
/// cordons nothing; the guard answers with a warning saying what it would have done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dry_run_drain_patches_nothing() {
    let cluster = Cluster::start(vec![
        node("n1", true),
        node("n2", true),
        deployment("web", 1, Strategy::Default),
    ])
    .await;
    // Settled first, or the Deployment controller's catch-up write lands after `before`.
    cluster.wait_settled("web", 1).await;
    let node_name = node_of(&cluster.pods("web")[0]).to_string();
    let (webhook, _certs) = guarded(&cluster, &[]).await;
    let before = cluster.deployment("web");
    let pod_before = cluster.pods("web");

    let out = drain(
        &kubectl(),
        &cluster,
        &node_name,
        "60s",
        &["--dry-run=server"],
    )
    .await;
    assert!(out.ok, "{out:?}\nwebhook logs:\n{}", webhook.logs());
    assert!(out.all().contains("server dry run"), "{out:?}");
    assert!(
        out.all()
            .contains("dry run: the eviction guard would refuse the eviction"),
        "the guard's dry-run warning reaches kubectl: {out:?}"
    );
    // "Not patched" is about what a client writes: spec, generation and annotations. The
    // resourceVersion alone also moves when the Deployment controller writes status, as it may
    // still do right after the pod turned Ready, so it is not compared.
    let after = cluster.deployment("web");
    for field in ["spec", "metadata.generation", "metadata.annotations"] {
        let pick = |v: &Value| {
            field
                .split('.')
                .fold(v.clone(), |v, k| v.get(k).cloned().unwrap_or(Value::Null))
        };
        assert_eq!(
            pick(&after),
            pick(&before),
            "the Deployment's {field} was written"
        );
    }
    assert!(cluster.restarted_at("web").is_none());
    // Likewise the pod: same pod, same node, not terminating (kubelet status writes may happen).
    let identity = |pods: &[Value]| {
        pods.iter()
            .map(|p| {
                (
                    p["metadata"]["uid"].clone(),
                    p["spec"]["nodeName"].clone(),
                    p["metadata"]["deletionTimestamp"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        identity(&cluster.pods("web")),
        identity(&pod_before),
        "the pod was evicted or moved"
    );
    let n = cluster
        .sim
        .get("v1", "Node", "", &node_name)
        .unwrap_or(Value::Null);
    assert_ne!(
        n["spec"]["unschedulable"],
        json!(true),
        "the node was cordoned"
    );
    webhook
        .assert_counted("kube_descheduler_guard_allows_total{reason=\"dry_run\"}")
        .await;
}

/// Scenario 6: the webhook is down; with `failurePolicy: Ignore` the drain proceeds with plain
/// evictions (and the single replica is briefly unavailable, as without the guard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_down_with_failure_policy_ignore_lets_plain_evictions_through() {
    let cluster =
        Cluster::start_on_n1(vec![deployment("web", 1, Strategy::Default)], &[("web", 1)]).await;
    cluster.set_schedulable("n2", true);
    let (mut webhook, _certs) = guarded(&cluster, &[]).await;
    webhook.stop().await;

    let out = drain(&kubectl(), &cluster, "n1", "60s", &[]).await;
    assert!(out.ok, "{out:?}");
    assert!(out.all().contains("evicted"), "{out:?}");
    assert!(!out.all().contains("will retry"), "no refusal: {out:?}");
    assert!(cluster.restarted_at("web").is_none());
    cluster.wait_moved("web", 1, "n1").await;
}

/// Scenario 7: the replacement never becomes Ready (its node crashes every container); the
/// guard restarts once, refuses while the rollout is young, and allows the eviction once the
/// (short) deflect deadline has passed — the drain does not hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_is_allowed_once_the_deflect_deadline_passes_when_the_new_pod_never_gets_ready() {
    let cluster = Cluster::start(vec![
        node("n1", true),
        node("broken", false),
        deployment("web", 1, Strategy::Default),
    ])
    .await;
    cluster.wait_ready_on(&[("web", 1)], "n1").await;
    cluster
        .sim
        .update_config(|c| c.crashing_nodes.push("broken".into()));
    cluster.set_schedulable("broken", true);
    let generation = cluster.deployment("web")["metadata"]["generation"]
        .as_i64()
        .unwrap_or(0);
    let (webhook, _certs) = guarded(&cluster, &["--deflect-deadline", "2s"]).await;

    let out = drain(&kubectl(), &cluster, "n1", "120s", &[]).await;
    assert!(out.ok, "{out:?}\nwebhook logs:\n{}", webhook.logs());
    assert!(out.all().contains(DEFLECTION), "deflected first: {out:?}");
    assert_eq!(
        cluster.deployment("web")["metadata"]["generation"].as_i64(),
        Some(generation + 1),
        "exactly one restart"
    );
    assert!(
        webhook
            .metric("kube_descheduler_guard_allows_total{reason=\"deadline_expired\"}")
            .await
            >= 1.0,
        "allowed because of the deadline\n{}",
        webhook.logs()
    );
    // The old pod is gone; the replacement runs on the broken node and is not Ready.
    wait_until("the old pod to be gone", Duration::from_secs(60), || {
        cluster.pods("web").iter().all(|p| node_of(p) == "broken")
    })
    .await;
    assert!(cluster.pods("web").iter().all(|p| !is_ready(p)));
}

/// Scenario 8: two webhook replicas (real processes behind a round-robin proxy, as a Service
/// spreads connections) receive concurrent evictions of the same pod: exactly one restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_webhook_replicas_restart_the_deployment_exactly_once() {
    let cluster =
        Cluster::start_on_n1(vec![deployment("web", 1, Strategy::Default)], &[("web", 1)]).await;
    cluster.set_schedulable("n1", false);
    cluster.set_schedulable("n2", true);
    let generation = cluster.deployment("web")["metadata"]["generation"]
        .as_i64()
        .unwrap_or(0);
    let certs_dir = cluster.dir.path().join("certs");
    std::fs::create_dir_all(&certs_dir).expect("certs dir");
    let c = certs(&certs_dir);
    let a = Webhook::start(&cluster, &certs_dir, &c.ca_cert_pem, "guard-a", &[]).await;
    let b = Webhook::start(&cluster, &certs_dir, &c.ca_cert_pem, "guard-b", &[]).await;
    let proxy = RoundRobin::start(vec![a.addr, b.addr]).await;
    register_guard(&cluster, &c.ca_bundle, proxy.addr);

    let pod = cluster.pods("web")[0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let http = sim_client(&cluster);
    let url = format!(
        "{}/api/v1/namespaces/{NS}/pods/{pod}/eviction",
        cluster.sim.url()
    );
    let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": NS}});
    let token = cluster.sim.token().to_string();
    let calls = (0..8).map(|_| {
        let (http, url, body, token) = (http.clone(), url.clone(), body.clone(), token.clone());
        async move {
            let r = http
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("eviction request");
            let code = r.status().as_u16();
            (code, r.text().await.unwrap_or_default())
        }
    });
    let answers = futures::future::join_all(calls).await;
    for (code, text) in &answers {
        assert_eq!(*code, 429, "{text}");
        assert!(text.contains(DEFLECTION), "{text}");
    }
    let (ma, mb) = (a.metrics().await, b.metrics().await);
    let reviews = |m: &str| metric_value(m, "kube_descheduler_guard_review_duration_seconds_count");
    assert!(
        reviews(&ma) >= 1.0 && reviews(&mb) >= 1.0 && reviews(&ma) + reviews(&mb) == 8.0,
        "both replicas answered evictions:\nA:\n{ma}\nB:\n{mb}"
    );
    let restarts = metric_value(&ma, "kube_descheduler_guard_restart_duration_seconds_count")
        + metric_value(&mb, "kube_descheduler_guard_restart_duration_seconds_count");
    assert_eq!(restarts, 1.0, "A:\n{}\nB:\n{}", a.logs(), b.logs());
    assert_eq!(
        cluster.deployment("web")["metadata"]["generation"].as_i64(),
        Some(generation + 1)
    );
    cluster.wait_moved("web", 1, "n1").await;
    assert_eq!(cluster.replica_sets("web").len(), 2, "one new ReplicaSet");
    wait_until("the restart Event", Duration::from_secs(30), || {
        cluster.deflection_events("web") >= 1
    })
    .await;
    assert_eq!(cluster.deflection_events("web"), 1);
}

/// Scenario 9: `kube-descheduler run` once against kube-sim, with a policy that evicts the pod of
/// a single-replica Deployment (its node got a NoSchedule taint): the eviction is deflected, the
/// run counts it as deflected, and the Deployment is restarted onto another node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descheduler_run_once_counts_a_deflected_eviction() {
    let cluster =
        Cluster::start_on_n1(vec![deployment("web", 1, Strategy::Default)], &[("web", 1)]).await;
    cluster.set_schedulable("n2", true);
    let mut n1 = cluster.sim.get("v1", "Node", "", "n1").expect("n1");
    n1["spec"]["taints"] = json!([{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]);
    cluster.sim.apply(n1).expect("taint n1");
    let (webhook, _certs) = guarded(&cluster, &[]).await;
    let policy = cluster.dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: taints
    pluginConfig:
      - name: DefaultEvictor
        args: {}
      - name: RemovePodsViolatingNodeTaints
        args: {}
    plugins:
      filter:
        enabled: [DefaultEvictor]
      deschedule:
        enabled: [RemovePodsViolatingNodeTaints]
",
    )
    .expect("write policy");

    let sampler = Sampler::start(&cluster.sim, &["web"]);
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .arg("run")
        .arg("--policy-config-file")
        .arg(&policy)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args([
            "--descheduling-interval=0",
            "--secure-port=0",
            "--logging-format=json",
        ])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("run exits within 120 s")
        .expect("run starts");
    let logs = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "run failed: {logs}");
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let finished = lines
        .iter()
        .find(|l| l["fields"]["message"] == "descheduling cycle finished")
        .unwrap_or_else(|| panic!("no cycle summary in the log:\n{logs}"));
    assert_eq!(finished["fields"]["deflected"], 1, "{logs}");
    assert_eq!(finished["fields"]["evicted"], 0, "{logs}");
    assert_eq!(finished["fields"]["errors"], 0, "{logs}");
    assert!(
        lines.iter().any(|l| {
            l["fields"]["message"] == "Eviction deflected into a rolling restart"
                && l["fields"]["pod"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("shop/web-"))
        }),
        "{logs}"
    );
    assert!(cluster.restarted_at("web").is_some());
    cluster.wait_moved("web", 1, "n1").await;
    let series = sampler.finish().await;
    assert_never_zero(&series, "descheduler run");
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_deflections_total")
            .await,
        1.0
    );
}

/// Harness: `wait_ready_on` returns only once the Deployment's status reports the Ready pods.
/// That status follows the pods two controller ticks later (kubelet → ReplicaSet status →
/// Deployment status); a sampler or resourceVersion taken in between saw the stale
/// `readyReplicas: 0` (the flaky "had 0 Ready replicas" with `min_ready_pods: 1`, and "the
/// Deployment was written" in scenario 5). A slow tick makes that window ~1.6 s here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_ready_on_returns_once_the_deployment_status_reports_ready() {
    let cluster = Cluster::start_with_tick(
        vec![node("n1", true), deployment("web", 1, Strategy::Default)],
        Duration::from_millis(800),
    )
    .await;
    cluster.wait_ready_on(&[("web", 1)], "n1").await;
    let d = cluster.deployment("web");
    assert_eq!(d["status"]["readyReplicas"], 1, "{}", d["status"]);
    let before = d["metadata"]["resourceVersion"].clone();
    let series = Sampler::start(&cluster.sim, &["web"]).finish().await;
    assert_never_zero(&series, "right after wait_ready_on");
    // Settled: the next ticks do not write the Deployment again.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        cluster.deployment("web")["metadata"]["resourceVersion"],
        before
    );
}

/// An HTTPS client trusting kube-sim's CA.
fn sim_client(cluster: &Cluster) -> reqwest::Client {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(cluster.sim.ca_pem().as_bytes()).expect("sim CA"),
        )
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// A TCP proxy handing each new connection to the next backend in turn (what a Service with
/// two endpoints does, connection by connection).
struct RoundRobin {
    addr: std::net::SocketAddr,
}

impl RoundRobin {
    async fn start(backends: Vec<std::net::SocketAddr>) -> RoundRobin {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let backend = backends[next % backends.len()];
                next += 1;
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        RoundRobin { addr }
    }
}
