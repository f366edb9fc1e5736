//! Every plugin's eviction reason on the bundled example, with the numbers that decided it: the
//! sentence (`reason`), the code (`reasonCode`) and the numbers as fields (`reasonDetail`).

mod cli_common;

use serde_json::{Value, json};

fn plan(extra: &[&str]) -> Value {
    cli_common::plan_json(extra)
}

/// The `detail` of `plugin` in the `i`th `--explain` answer of a plan (empty when absent).
fn explained(plan: &Value, i: usize, plugin: &str) -> String {
    plan["explanations"][i]["profiles"][0]["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .find(|v| v["plugin"] == plugin)
        .and_then(|v| v["detail"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The first eviction of `pod` (a name prefix) by `plugin`.
fn eviction<'a>(plan: &'a Value, plugin: &str, pod: &str) -> &'a Value {
    plan["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .find(|e| {
            e["plugin"] == plugin
                && format!(
                    "{}/{}",
                    e["namespace"].as_str().unwrap_or(""),
                    e["name"].as_str().unwrap_or("")
                )
                .starts_with(pod)
        })
        .unwrap_or_else(|| panic!("no {plugin} eviction of {pod}"))
}

fn check(plan: &Value, plugin: &str, pod: &str, code: &str, text: &str, detail: Value) {
    let e = eviction(plan, plugin, pod);
    assert_eq!(e["reasonCode"], code, "{e}");
    assert_eq!(e["reason"], text, "{e}");
    assert_eq!(e["reasonDetail"], detail, "{e}");
}

#[test]
fn every_deschedule_plugin_gives_its_numbers() {
    let p = plan(&[]);
    check(
        &p,
        "RemoveFailedPods",
        "batch/nightly-import",
        "PodFailed",
        "Failed (reason Error, exit code 1), age 5h >= minPodLifetimeSeconds 3600",
        json!({"failedReason": "Error", "ageSeconds": 18000, "minPodLifetimeSeconds": 3600, "exitCode": 1}),
    );
    check(
        &p,
        "RemovePodsHavingTooManyRestarts",
        "shop/cart-worker-59d8f7c6b4-m2x8d",
        "TooManyRestarts",
        "restarts 23 >= podRestartThreshold 10 (init containers counted)",
        json!({"restarts": 23, "podRestartThreshold": 10, "includingInitContainers": true}),
    );
    check(
        &p,
        "PodLifeTime",
        "batch/report-runner",
        "PodLifeTimeExceeded",
        "age 12d > maxPodLifeTimeSeconds 604800 (7d)",
        json!({"ageSeconds": 1036800, "maxPodLifeTimeSeconds": 604800}),
    );
    check(
        &p,
        "RemovePodsViolatingNodeTaints",
        "monitoring/exporter",
        "TaintNotTolerated",
        "node-6 taint dedicated=gpu:NoSchedule not tolerated",
        json!({"node": "node-6", "taint": "dedicated=gpu:NoSchedule"}),
    );
    check(
        &p,
        "RemovePodsViolatingNodeAffinity",
        "shop/search-8b7d6c5f4-h5j6k",
        "NodeAffinityRequired",
        "node-2 does not match the pod's required node affinity / nodeSelector; another node does",
        json!({"node": "node-2"}),
    );
    check(
        &p,
        "RemovePodsViolatingInterPodAntiAffinity",
        "monitoring/db-proxy",
        "AntiAffinityViolated",
        "required anti-affinity (topologyKey kubernetes.io/hostname) selects monitoring/db-proxy-66d5f4c3b-u6i7o on node-3",
        json!({"conflictingPod": "monitoring/db-proxy-66d5f4c3b-u6i7o", "conflictingNode": "node-3", "topologyKey": "kubernetes.io/hostname"}),
    );
}

#[test]
fn every_balance_plugin_gives_its_numbers() {
    let p = plan(&[]);
    check(
        &p,
        "RemoveDuplicates",
        "shop/web-7c9f8d6b5-k3p7w",
        "DuplicatePods",
        "3 pods of ReplicaSet shop/web-7c9f8d6b5 on node-4, 0.6 per feasible node (3 pods, 5 feasible nodes: at most 1 each)",
        json!({"owner": "ReplicaSet shop/web-7c9f8d6b5", "node": "node-4", "podsOnNode": 3, "pods": 3,
               "feasibleNodes": 5, "perNode": 0.6, "upperBound": 1}),
    );
    check(
        &p,
        "RemovePodsViolatingTopologySpreadConstraint",
        "shop/cache-74c6d8b9f-g5h6i",
        "TopologySpreadSkew",
        "topology.kubernetes.io/zone zone-a has 2 matching pods, zone-c has 0: skew 2 > maxSkew 1; moving 1 leaves skew 0",
        json!({"topologyKey": "topology.kubernetes.io/zone", "fromDomain": "zone-a", "toDomain": "zone-c",
               "skew": 2, "maxSkew": 1, "moves": 1, "skewAfter": 0}),
    );
    // Usage as LowNodeUtilization saw it when it decided (after the Deschedule plugins and
    // RemoveDuplicates moved pods off node-4).
    check(
        &p,
        "LowNodeUtilization",
        "shop/ledger-",
        "NodeOverTarget",
        "node-4 over target: cpu 78% > 35%, memory 38% <= 50%, pods 5.5% <= 50% (requests); moving to 5 underutilized nodes",
        json!({"node": "node-4", "underutilizedNodes": 5, "cpuPercent": 77.5, "cpuLevel": 35.0,
               "memoryPercent": 38.28, "memoryLevel": 50.0, "podsPercent": 5.45, "podsLevel": 50.0,
               "usageSource": "requests"}),
    );
    // The before/after table: node-4 was at 90 % cpu before the whole plan.
    let lnu = &p["nodeUsage"][0];
    assert_eq!(lnu["plugin"], "LowNodeUtilization");
    assert_eq!(lnu["high"]["cpu"], 35.0);
    let node4 = cli_common::node_row(lnu, "node-4");
    assert_eq!(node4["before"]["class"], "over");
    assert_eq!(node4["before"]["percent"]["cpu"], 90.0);
    assert_eq!(node4["after"]["percent"]["cpu"], 40.0);
    assert_eq!(node4["movedPods"], 3);
    // The interesting nodes come first: a class that changed, then overutilized ones.
    assert_ne!(
        lnu["nodes"][0]["before"]["class"],
        lnu["nodes"][0]["after"]["class"]
    );
}

#[test]
fn high_node_utilization_gives_its_numbers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = cli_common::write(
        dir.path(),
        "pack.yaml",
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: pack\n  pluginConfig:\n  - name: DefaultEvictor\n    args: {}\n  - name: HighNodeUtilization\n    args:\n      thresholds: {cpu: 20, memory: 20}\n  plugins:\n    balance:\n      enabled: [HighNodeUtilization]\n",
    );
    let p = plan(&["--policy", policy.to_str().expect("utf-8 path")]);
    check(
        &p,
        "HighNodeUtilization",
        "monitoring/db-proxy-66d5f4c3b-r4t5y",
        "NodeUnderutilized",
        "node-3 underutilized: cpu 10% <= 20%, memory 3.1% <= 20% (requests); moving its pods to 3 other nodes",
        json!({"node": "node-3", "destinationNodes": 3, "cpuPercent": 10.0, "cpuLevel": 20.0,
               "memoryPercent": 3.13, "memoryLevel": 20.0, "podsPercent": 3.64}),
    );
    let hnu = &p["nodeUsage"][0];
    assert_eq!(hnu["plugin"], "HighNodeUtilization");
    assert_eq!(hnu["high"], json!({}));
}

/// `--explain` of a pod no plugin selected gives each plugin's own reason with numbers.
#[test]
fn explain_gives_each_plugins_reason_for_not_selecting_the_pod() {
    let p = plan(&["--explain", "shop/cart-worker-59d8f7c6b4-t6v1c"]);
    let plugins = p["explanations"][0]["profiles"][0]["plugins"]
        .as_array()
        .expect("plugins")
        .clone();
    let detail = |name: &str| explained(&p, 0, name);
    assert_eq!(
        detail("RemoveFailedPods"),
        "not selected: phase Running, not Failed"
    );
    assert_eq!(
        detail("RemovePodsHavingTooManyRestarts"),
        "not selected: restarts 1 < podRestartThreshold 10 (init containers counted)"
    );
    assert_eq!(
        detail("PodLifeTime"),
        "not selected: age 3d <= maxPodLifeTimeSeconds 604800 (7d)"
    );
    assert_eq!(
        detail("LowNodeUtilization"),
        "not selected: node-3 is not over any target: cpu 10% <= 35%, memory 3.1% <= 50%, pods 3.6% <= 50% (requests)"
    );
    assert!(
        plugins.iter().all(|v| v["verdict"] == "not-selected"),
        "{plugins:?}"
    );
}

/// `--explain` gives the numbers of RemoveDuplicates, RemovePodsViolatingInterPodAntiAffinity and
/// RemovePodsViolatingTopologySpreadConstraint for pods they left alone (counted as the plan starts).
#[test]
fn explain_gives_the_numbers_of_the_spreading_plugins() {
    let p = plan(&[
        "--explain",
        "monitoring/db-proxy-66d5f4c3b-u6i7o",
        "--explain",
        "shop/cache-74c6d8b9f-j7k8l",
    ]);
    let detail = |i: usize, name: &str| explained(&p, i, name);
    assert_eq!(
        detail(0, "RemovePodsViolatingInterPodAntiAffinity"),
        "not selected: term 1 (topologyKey kubernetes.io/hostname) selects monitoring/db-proxy-66d5f4c3b-r4t5y on node-3 in kubernetes.io/hostname=node-3, yet it was not evicted (the DefaultEvictor or a limit stopped it, or that pod was evicted first)"
    );
    assert_eq!(
        detail(0, "RemoveDuplicates"),
        "not selected: 2 pods of ReplicaSet monitoring/db-proxy-66d5f4c3b on node-3 > at most 1 per node (2 pods of ReplicaSet monitoring/db-proxy-66d5f4c3b (same images) over 5 feasible nodes: 0.4 per node, at most 1 each), but this one is kept: the first 1 on the node stay, and only pods passing the DefaultEvictor count"
    );
    assert_eq!(
        detail(1, "RemovePodsViolatingTopologySpreadConstraint"),
        "not selected: topology.kubernetes.io/zone zone-b has 1 matching pods, the smallest domain zone-c has 0: skew 1 <= maxSkew 1"
    );
}
