//! `run --dry-run` against the API stand-in (controllers off) decides exactly what `plan` decides
//! on a snapshot file of the same cluster: the same eviction attempts, in the same order, with the
//! same outcomes (all ten plugins, the guard's verdicts, per-node and total limits).

mod cli_common;
mod run_sim_common;

use kube_descheduler::synth::{Shape, write_cluster};
use kube_sim::Sim;
use serde_json::Value;

/// (pod, node, profile, plugin, outcome) of each attempt, in order.
type Attempt = (String, String, String, String, String);

/// kube-sim serving a synthetic cluster, and the same cluster as a snapshot file in `dir`.
async fn served_cluster(dir: &std::path::Path) -> (kube_sim::SimHandle, std::path::PathBuf) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut bytes = Vec::new();
    write_cluster(
        Shape {
            nodes: 60,
            pods: 2_000,
            seed: 11,
        },
        &mut bytes,
    )
    .unwrap();
    let list: Value = serde_json::from_slice(&bytes).unwrap();
    let objects = list["items"].as_array().unwrap().clone();
    let sim = Sim::start_static(objects).await.expect("kube-sim starts");

    // The snapshot file: the cluster as the API serves it (`kubectl get … -o json`).
    let snapshot = dir.join("cluster.json");
    let items = cli_common::export_list(&sim, cli_common::SNAPSHOT_KINDS, &snapshot);
    let pods = items.iter().filter(|o| o["kind"] == "Pod").count();
    assert!(pods > 1_500, "the cluster is served ({pods} pods)");
    (sim, snapshot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watched_state_equals_the_snapshot_file_of_the_same_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, file) = served_cluster(dir.path()).await;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube_descheduler::cluster::client::client(config).unwrap();
    let state = std::sync::Arc::new(kube_descheduler::cluster::state::ClusterState::new(None));
    let _tasks =
        kube_descheduler::cluster::watch::start(&client, state.clone(), Default::default());
    tokio::time::timeout(run_sim_common::WAIT, state.wait_synced())
        .await
        .expect("the state syncs");
    let live = state.snapshot();
    let loaded = kube_descheduler::snapshot::load::load_file(&file).unwrap();
    let dbg = |v: &dyn std::fmt::Debug| format!("{v:#?}");
    assert_eq!(live.nodes.len(), loaded.nodes.len());
    for (a, b) in live.nodes.iter().zip(&loaded.nodes) {
        assert_eq!(dbg(a), dbg(b));
    }
    assert_eq!(live.pods.len(), loaded.pods.len());
    for (a, b) in live.pods.iter().zip(&loaded.pods) {
        assert_eq!(dbg(a), dbg(b));
    }
    assert_eq!(dbg(&live.pdbs), dbg(&loaded.pdbs));
    assert_eq!(dbg(&live.replica_sets), dbg(&loaded.replica_sets));
    assert_eq!(dbg(&live.deployments), dbg(&loaded.deployments));
    assert_eq!(dbg(&live.stateful_sets), dbg(&loaded.stateful_sets));
    assert_eq!(dbg(&live.jobs), dbg(&loaded.jobs));
    let sorted = |m: &dyn Fn() -> Vec<String>| {
        let mut v = m();
        v.sort();
        v
    };
    assert_eq!(
        sorted(&|| live.namespaces.iter().map(|x| format!("{x:?}")).collect()),
        sorted(&|| loaded.namespaces.iter().map(|x| format!("{x:?}")).collect())
    );
    assert_eq!(
        sorted(&|| live.pvcs.iter().map(|x| format!("{x:?}")).collect()),
        sorted(&|| loaded.pvcs.iter().map(|x| format!("{x:?}")).collect())
    );
    assert_eq!(
        sorted(&|| live
            .priority_classes
            .iter()
            .map(|x| format!("{x:?}"))
            .collect()),
        sorted(&|| loaded
            .priority_classes
            .iter()
            .map(|x| format!("{x:?}"))
            .collect())
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_dry_run_on_the_served_cluster_equals_plan_on_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, snapshot) = served_cluster(dir.path()).await;
    let policy_text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/all-plugins-policy.yaml"),
    )
    .unwrap()
    .replace(
        "maxNoOfPodsToEvictPerNode: 10",
        "maxNoOfPodsToEvictPerNode: 5\nmaxNoOfPodsToEvictTotal: 60",
    );
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, &policy_text).unwrap();

    let plan = cli_common::json_of(&cli_common::succeeds(
        cli_common::bin()
            .args(["plan", "-o", "json", "--policy"])
            .arg(&policy)
            .arg("--snapshot")
            .arg(&snapshot),
    ));
    let planned: Vec<Attempt> = plan["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                format!("{}/{}", s("namespace"), s("name")),
                s("node"),
                s("profile"),
                s("plugin"),
                s("outcome"),
            )
        })
        .collect();
    assert!(planned.len() >= 10, "the policy finds work: {planned:?}");
    let outcomes: std::collections::BTreeSet<&str> = planned.iter().map(|a| a.4.as_str()).collect();

    let mut d = run_sim_common::start(
        &sim,
        "equivalence",
        &policy_text,
        &[
            "--dry-run",
            "--descheduling-interval=0",
            "--secure-port=0",
            "--logging-format=json",
            // Past the first 100 per cycle, dry-run attempts are logged at debug level.
            "--v=2",
        ],
    );
    assert_eq!(d.wait_exit().await, 0, "log:\n{}", d.log_text());
    let ran: Vec<Attempt> = d
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "Evicted pod in dry run mode")
        .map(|v| {
            let f = &v["fields"];
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            (
                s("pod"),
                s("node"),
                s("profile"),
                s("strategy"),
                s("outcome"),
            )
        })
        .collect();
    assert_eq!(
        ran, planned,
        "same attempts, order and outcomes (outcomes seen: {outcomes:?})"
    );
    sim.shutdown().await;
}
