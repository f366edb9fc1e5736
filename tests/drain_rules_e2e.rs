//! End to end: the guard's drain rules with real `kubectl drain` against kube-sim and
//! our real `kube-descheduler webhook` binary (registered from `webhook-config/` as shipped).
//!
//! Rule A: every Ready replica of a surge-able Deployment on the drained (cordoned) node → one
//! rolling restart, no downtime. Rule B (`--pdb-surge`, opted in by annotation): a budget that
//! allows no disruption is met with a surge of the replica count instead of a hung drain, and the
//! count is restored afterwards (also by a restarted webhook).

mod e2e_common;

use std::time::Duration;

use e2e_common::*;
use serde_json::{Value, json};

const TAINT: &str = "e2e.kube-descheduler.io/rules";
const SURGE_FLAGS: &[&str] = &["--pdb-surge", "--surge-reconcile-interval", "300ms"];
const SURGE_ANNOTATION: &str = "kube-descheduler.io/surge-original-replicas";

/// A 3-replica Deployment whose pods each request a quarter of a node's CPU, so the scheduler's
/// least-allocated scoring spreads them over the nodes they tolerate; opted in to rule B.
fn spread_deployment(name: &str, taint_value: &str) -> Value {
    let mut d = tolerating(deployment(name, 3, Strategy::Default), TAINT, taint_value);
    d["metadata"]["annotations"] = json!({"kube-descheduler.io/pdb-surge": "enabled"});
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("4");
    d
}

fn tainted(name: &str, value: &str) -> Value {
    tainted_node(name, TAINT, value)
}

fn cordoned(mut n: Value) -> Value {
    n["spec"]["unschedulable"] = json!(true);
    n
}

/// A cluster with tainted nodes a, b and c, Deployment `api` spread over them (waited for) under
/// a budget of minAvailable 3, and `extra` objects.
async fn api_on_a_b_c(extra: Vec<Value>) -> Cluster {
    let mut objects = vec![tainted("a", "x"), tainted("b", "x"), tainted("c", "x")];
    objects.extend(extra);
    objects.extend([spread_deployment("api", "x"), pdb_min_available("api", 3)]);
    let cluster = Cluster::start(objects).await;
    wait_spread(&cluster, "api", &["a".into(), "b".into(), "c".into()]).await;
    cluster
}

/// Guard `guard-1` on `cluster` with `flags`, its certificates in the cluster's `certs` folder.
async fn guard_1(cluster: &Cluster, ca_pem: &str, flags: &[&str]) -> Webhook {
    let certs_dir = cluster.dir.path().join("certs");
    Webhook::start(cluster, &certs_dir, ca_pem, "guard-1", flags).await
}

fn spec_replicas(cluster: &Cluster, app: &str) -> i64 {
    cluster.deployment(app)["spec"]["replicas"]
        .as_i64()
        .unwrap_or(-1)
}

fn surge_recorded(cluster: &Cluster, app: &str) -> bool {
    cluster.deployment(app)["metadata"]["annotations"]
        .get(SURGE_ANNOTATION)
        .is_some()
}

fn generation(cluster: &Cluster, app: &str) -> i64 {
    cluster.deployment(app)["metadata"]["generation"]
        .as_i64()
        .unwrap_or(0)
}

/// Nodes the pods of `app` (not terminating) run on.
fn nodes_of(cluster: &Cluster, app: &str) -> Vec<String> {
    let mut n: Vec<String> = cluster
        .pods(app)
        .iter()
        .filter(|p| !is_terminating(p))
        .map(|p| node_of(p).to_string())
        .collect();
    n.sort();
    n
}

/// Waits until `app` has 3 Ready pods, one on each of `nodes`, and its status reports them.
async fn wait_spread(cluster: &Cluster, app: &str, nodes: &[String]) {
    let what = format!("{app}: one Ready pod on each of {nodes:?}");
    wait_until(&what, Duration::from_secs(90), || {
        let ready = ready_pods(&cluster.sim, app);
        let mut on: Vec<String> = ready.iter().map(|p| node_of(p).to_string()).collect();
        on.sort();
        on == nodes && deployment_settled(&cluster.deployment(app), nodes.len())
    })
    .await;
}

/// Waits until the surge of `app` is restored: 3 replicas, no record, 3 Ready pods off `node`.
async fn wait_restored(cluster: &Cluster, app: &str, node: &str) {
    wait_until(
        &format!("{app}: surge restored to 3 replicas, pods off {node}"),
        Duration::from_secs(60),
        || {
            spec_replicas(cluster, app) == 3
                && !surge_recorded(cluster, app)
                && deployment_settled(&cluster.deployment(app), 3)
                && ready_pods(&cluster.sim, app)
                    .iter()
                    .all(|p| node_of(p) != node)
        },
    )
    .await;
}

/// Rule A, scenario 1: for every kubectl, a node holding all 3 replicas of a Deployment (no
/// budget) drains; Ready replicas never drop to 0 and the Deployment is restarted exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_drains_a_node_holding_every_replica_without_downtime() {
    let k = PerKubectl::start("all", TAINT, 3).await;
    let (outputs, series) = k.drain_all().await;

    for (label, out) in &outputs {
        let app = k.app_of(label);
        let ctx = drain_context(label, out, &k.webhook);
        assert!(out.ok, "drain failed: {ctx}");
        assert!(out.all().contains(DEFLECTION), "not deflected: {ctx}");
        assert_eq!(k.restarts(&app), 1, "exactly one restart of {app}: {ctx}");
        k.cluster.wait_moved(&app, 3, &k.node_of(label)).await;
    }
    assert_never_zero(&series, "kubectl drain of every replica");
    let webhook = &k.webhook;
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_restart_duration_seconds_count")
            .await,
        k.bins.len() as f64,
        "one restart per drained Deployment, however many evictions kubectl sent"
    );
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_rule_actions_total{reason=\"ready_replicas_leaving\"}")
            .await
            + webhook
                .metric("kube_descheduler_guard_rule_actions_total{reason=\"last_ready_replica\"}")
                .await,
        webhook
            .metric("kube_descheduler_guard_deflections_total")
            .await,
        "every deflection is counted under a rule reason"
    );
    assert!(
        webhook
            .metric("kube_descheduler_guard_rule_actions_total{reason=\"ready_replicas_leaving\"}")
            .await
            >= k.bins.len() as f64
    );
}

/// Rule B, scenario 2: for every kubectl, 3 replicas spread over A, B, C with a budget
/// `minAvailable: 3`. Without rule B the drain of A times out; with it the drain completes,
/// Ready replicas never drop below 3 and `spec.replicas` is back at 3 afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_drains_through_a_min_available_budget_with_rule_b_and_not_without() {
    let bins = installed_kubectls();
    let mut objects = Vec::new();
    for (label, _) in &bins {
        let s = kubectl_slug(label);
        for n in ["a", "b", "c"] {
            objects.push(tainted(&format!("{n}-{s}"), &s));
        }
        objects.push(spread_deployment(&format!("api-{s}"), &s));
        objects.push(pdb_min_available(&format!("api-{s}"), 3));
    }
    let cluster = Cluster::start(objects).await;
    for (label, _) in &bins {
        let s = kubectl_slug(label);
        let nodes: Vec<String> = ["a", "b", "c"].iter().map(|n| format!("{n}-{s}")).collect();
        wait_spread(&cluster, &format!("api-{s}"), &nodes).await;
    }
    let apps: Vec<String> = bins
        .iter()
        .map(|(l, _)| format!("api-{}", kubectl_slug(l)))
        .collect();

    // Without rule B: the budget refuses every attempt until kubectl's --timeout.
    let (mut plain, certs) = guarded(&cluster, &[]).await;
    let drains = bins.iter().map(|(label, bin)| {
        let cluster = &cluster;
        async move {
            let node = format!("a-{}", kubectl_slug(label));
            (label.clone(), drain(bin, cluster, &node, "8s", &[]).await)
        }
    });
    for (label, out) in futures::future::join_all(drains).await {
        let app = format!("api-{}", kubectl_slug(&label));
        assert!(
            !out.ok,
            "kubectl {label}: must time out without rule B: {out:?}"
        );
        assert!(
            out.all().to_lowercase().contains("disruption"),
            "kubectl {label}: refused by the budget: {out:?}"
        );
        assert!(out.elapsed >= Duration::from_secs(8), "{out:?}");
        assert_eq!(spec_replicas(&cluster, &app), 3);
        assert!(!surge_recorded(&cluster, &app));
        assert!(nodes_of(&cluster, &app).contains(&format!("a-{}", kubectl_slug(&label))));
    }
    plain.stop().await;

    // With rule B: the same drains complete.
    let webhook = guard_1(&cluster, &certs.ca_cert_pem, SURGE_FLAGS).await;
    register_guard(&cluster, &certs.ca_bundle, webhook.addr);
    let app_refs: Vec<&str> = apps.iter().map(String::as_str).collect();
    let sampler = Sampler::start(&cluster.sim, &app_refs);
    let drains = bins.iter().map(|(label, bin)| {
        let cluster = &cluster;
        async move {
            let node = format!("a-{}", kubectl_slug(label));
            (label.clone(), drain(bin, cluster, &node, "120s", &[]).await)
        }
    });
    let outputs = futures::future::join_all(drains).await;
    for (label, out) in &outputs {
        let s = kubectl_slug(label);
        let app = format!("api-{s}");
        let ctx = drain_context(label, out, &webhook);
        assert!(out.ok, "drain failed: {ctx}");
        assert!(
            out.all()
                .contains(&format!("PodDisruptionBudget shop/{app}"))
                && out.all().contains("replicas"),
            "the refusal names the budget and the surge: {ctx}"
        );
        wait_restored(&cluster, &app, &format!("a-{s}")).await;
        assert!(cluster.restarted_at(&app).is_none(), "no restart: {ctx}");
    }
    let series = sampler.finish().await;
    for (app, s) in &series {
        assert!(
            s.min_ready_pods >= 3,
            "{app} dropped below 3 Ready replicas: {s:?}"
        );
    }
    assert!(
        webhook
            .metric("kube_descheduler_guard_rule_actions_total{reason=\"pdb_surge\"}")
            .await
            >= bins.len() as f64
    );
    assert!(
        webhook
            .metric("kube_descheduler_guard_rule_actions_total{reason=\"pdb_surge_restored\"}")
            .await
            >= bins.len() as f64
    );
}

/// Scenario 3: the same Deployment under a HorizontalPodAutoscaler. As documented, the guard
/// does not fight the autoscaler: it refuses with a message naming it and what to raise, writes
/// nothing, and the drain times out as without rule B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_under_an_hpa_is_not_surged_and_the_refusal_says_what_to_do() {
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api", "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "minReplicas": 3, "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]}});
    let cluster = api_on_a_b_c(vec![hpa]).await;
    let before = cluster.deployment("api");
    let (webhook, _certs) = guarded(&cluster, SURGE_FLAGS).await;

    let out = drain(&kubectl(), &cluster, "a", "8s", &[]).await;
    let ctx = format!("{out:?}\nwebhook logs:\n{}", webhook.logs());
    assert!(!out.ok, "{ctx}");
    assert!(
        out.all().contains("HorizontalPodAutoscaler shop/api")
            && out.all().contains("minReplicas by 1"),
        "the refusal tells the user what to do: {ctx}"
    );
    let after = cluster.deployment("api");
    assert_eq!(after["spec"], before["spec"], "the Deployment was written");
    assert!(!surge_recorded(&cluster, "api"));
    let hpa = cluster
        .sim
        .get("autoscaling/v2", "HorizontalPodAutoscaler", NS, "api")
        .unwrap_or(Value::Null);
    assert_eq!(hpa["spec"]["minReplicas"], 3, "the autoscaler was written");
    webhook
        .assert_counted("kube_descheduler_guard_denials_total{reason=\"pdb_surge_hpa\"}")
        .await;
}

/// Scenario 4: the webhook that surged is gone before it could restore (its successor has no
/// memory of it); the record in the Deployment's annotations lets the new process restore it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_webhook_restores_the_surge_it_finds_in_the_annotations() {
    let cluster = api_on_a_b_c(vec![]).await;
    let (mut first, certs) = guarded(&cluster, SURGE_FLAGS).await;
    let bin = kubectl();
    let drain_task = {
        let cluster = &cluster;
        let bin = bin.clone();
        async move { drain(&bin, cluster, "a", "120s", &[]).await }
    };
    let watcher = async {
        wait_until("the surge", Duration::from_secs(60), || {
            surge_recorded(&cluster, "api")
        })
        .await;
        // Gone before the pod left the cordoned node, so before any restore was due.
        first.stop().await;
        assert_eq!(spec_replicas(&cluster, "api"), 4);
    };
    let (out, ()) = futures::join!(drain_task, watcher);
    // With the webhook down (failurePolicy Ignore), the budget alone decides: it allows the
    // eviction once the surged pod is Ready.
    assert!(out.ok, "{out:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        spec_replicas(&cluster, "api"),
        4,
        "nobody restored it while no webhook ran"
    );
    assert!(surge_recorded(&cluster, "api"));

    // A new process, without --pdb-surge even: the reconciler always restores.
    let flags = ["--surge-reconcile-interval", "300ms"];
    let second = guard_1(&cluster, &certs.ca_cert_pem, &flags).await;
    register_guard(&cluster, &certs.ca_bundle, second.addr);
    wait_restored(&cluster, "api", "a").await;
    assert_eq!(
        second
            .metric("kube_descheduler_guard_rule_actions_total{reason=\"pdb_surge_restored\"}")
            .await,
        1.0,
        "{}",
        second.logs()
    );
}

/// Scenario 5 (rule B): two nodes drained one after the other: each drain surges once and is
/// restored before the next; nothing is left over and nothing is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_drained_in_turn_leave_no_surge_behind() {
    // Pods on a, b, c (d and e are cordoned until then).
    let cluster = api_on_a_b_c(vec![
        cordoned(tainted("d", "x")),
        cordoned(tainted("e", "x")),
    ])
    .await;
    cluster.set_schedulable("d", true);
    cluster.set_schedulable("e", true);
    let (webhook, _certs) = guarded(&cluster, SURGE_FLAGS).await;
    let bin = kubectl();
    let sampler = Sampler::start(&cluster.sim, &["api"]);
    for node in ["a", "b"] {
        let out = drain(&bin, &cluster, node, "120s", &[]).await;
        assert!(
            out.ok,
            "drain {node}: {out:?}\nwebhook logs:\n{}",
            webhook.logs()
        );
        wait_restored(&cluster, "api", node).await;
    }
    let series = sampler.finish().await;
    assert!(series[0].1.min_ready_pods >= 3, "{series:?}");
    assert!(cluster.restarted_at("api").is_none(), "no restart");
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_rule_actions_total{reason=\"pdb_surge\"}")
            .await,
        2.0,
        "one surge per drain"
    );
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_rule_actions_total{reason=\"pdb_surge_restored\"}")
            .await,
        2.0
    );
    let nodes = nodes_of(&cluster, "api");
    assert!(!nodes.iter().any(|n| n == "a" || n == "b"), "{nodes:?}");
}

/// Scenario 5 (rule A): all replicas on one node, drained; then all of them (now on the next
/// node) drained again: each drain restarts the Deployment exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_drained_in_turn_restart_once_each() {
    let cluster = Cluster::start(vec![
        node("a", true),
        node("b", false),
        node("c", false),
        deployment("web", 3, Strategy::Default),
    ])
    .await;
    cluster.wait_ready_on(&[("web", 3)], "a").await;
    cluster.set_schedulable("b", true);
    let (webhook, _certs) = guarded(&cluster, &[]).await;
    let bin = kubectl();
    let g0 = generation(&cluster, "web");
    let sampler = Sampler::start(&cluster.sim, &["web"]);
    let out = drain(&bin, &cluster, "a", "120s", &[]).await;
    assert!(out.ok, "{out:?}\nwebhook logs:\n{}", webhook.logs());
    cluster.wait_moved("web", 3, "a").await;
    assert_eq!(nodes_of(&cluster, "web"), ["b", "b", "b"]);
    assert_eq!(
        generation(&cluster, "web"),
        g0 + 1,
        "one restart for drain a"
    );
    cluster.wait_settled("web", 3).await;
    cluster.set_schedulable("c", true);
    let out = drain(&bin, &cluster, "b", "120s", &[]).await;
    assert!(out.ok, "{out:?}\nwebhook logs:\n{}", webhook.logs());
    cluster.wait_moved("web", 3, "b").await;
    let series = sampler.finish().await;
    assert_eq!(
        generation(&cluster, "web"),
        g0 + 2,
        "one restart for drain b"
    );
    assert!(series[0].1.min_ready_pods >= 1, "{series:?}");
    assert_eq!(
        webhook
            .metric("kube_descheduler_guard_restart_duration_seconds_count")
            .await,
        2.0
    );
}
