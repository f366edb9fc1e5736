//! The fuzz targets: each decoder or parser that reads outside data, with valid seeds and a
//! structured generator that mutates Kubernetes- or policy-shaped documents at the tree level.

use std::sync::OnceLock;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use kube_descheduler::guard::decision::{EvictionRequest, Facts, GuardConfig, decide};
use kube_descheduler::guard::facts::{
    DeploymentFacts, PdbFacts, PodFacts, PvcFacts, ReplicaSetFacts,
};
use kube_descheduler::guard::review::{ParsedReview, allow, deny_429, parse_review};
use kube_descheduler::policy::{Policy, load_str};
use kube_descheduler::quantity::Quantity;
use serde_json::{Value, json};

use super::engine::{Rng, Target, as_json, mutate_tree, print};
use super::review_common::eviction_review;

const EXAMPLE_POLICY: &str = include_str!("../../examples/policy.yaml");
const EXAMPLE_CLUSTER: &str = include_str!("../../examples/cluster.yaml");
const ALL_PLUGINS_POLICY: &str = include_str!("../../benches/all-plugins-policy.yaml");

/// Every target, in the order they are reported.
pub fn all() -> Vec<Target> {
    vec![
        Target {
            name: "policy_v1alpha2",
            seeds: || policy_seeds(false),
            generate: generate_tree,
            run: run_policy,
        },
        Target {
            name: "policy_v1alpha1",
            seeds: || policy_seeds(true),
            generate: generate_tree,
            run: run_policy,
        },
        Target {
            name: "snapshot",
            seeds: snapshot_seeds,
            generate: generate_tree,
            run: run_snapshot,
        },
        Target {
            name: "admission_review",
            seeds: review_seeds,
            generate: generate_tree,
            run: run_review,
        },
        Target {
            name: "trigger_query",
            seeds: trigger_query_seeds,
            generate: generate_query,
            run: run_trigger_query,
        },
        Target {
            name: "quantity",
            seeds: quantity_seeds,
            generate: generate_scalar,
            run: run_quantity,
        },
        Target {
            name: "go_duration",
            seeds: go_duration_seeds,
            generate: generate_scalar,
            run: run_go_duration,
        },
        Target {
            name: "kubeconfig",
            seeds: kubeconfig_seeds,
            generate: generate_tree,
            run: run_kubeconfig,
        },
    ]
}

/// The given strings as seeds.
fn byte_seeds(seeds: &[&str]) -> Vec<Vec<u8>> {
    seeds.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Query strings of `/api/v1/descheduler/run`.
fn trigger_query_seeds() -> Vec<Vec<u8>> {
    byte_seeds(&[
        "timeoutSeconds=30",
        "",
        "timeoutSeconds=",
        "a=b&timeoutSeconds=0",
    ])
}

/// Kubernetes quantities: suffixes, decimals, exponents, signs.
fn quantity_seeds() -> Vec<Vec<u8>> {
    byte_seeds(&[
        "100m",
        "1.5Gi",
        "2e3",
        "128974848",
        "-0.001",
        "1E",
        "12Ki",
        "0.1n",
    ])
}

/// Go durations: units, fractions, signs, the edge of the range.
fn go_duration_seeds() -> Vec<Vec<u8>> {
    byte_seeds(&[
        "5m",
        "1h30m",
        "-1.5h",
        "300ms",
        "2h45m0.5s",
        "0",
        "1µs",
        "9223372036s",
    ])
}

/// A corpus entry as a JSON tree, mutated, printed as JSON or YAML.
fn generate_tree(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = as_json(rng, corpus);
    mutate_tree(rng, &mut v);
    print(rng, &v)
}

fn generate_query(rng: &mut Rng, _corpus: &[Vec<u8>]) -> Vec<u8> {
    let keys = [
        "timeoutSeconds",
        "timeoutseconds",
        "x",
        "",
        "timeoutSeconds[]",
    ];
    let values = [
        "1",
        "0",
        "-1",
        "300",
        "18446744073709551616",
        "1e3",
        "%31",
        "+5",
        " 5",
        "",
    ];
    let mut out = String::new();
    for i in 0..1 + rng.below(3) {
        if i > 0 {
            out.push('&');
        }
        let key = *rng.pick::<&str>(&keys);
        out.push_str(key);
        if !rng.one_in(5) {
            out.push('=');
        }
        let value = *rng.pick::<&str>(&values);
        out.push_str(value);
    }
    out.into_bytes()
}

fn generate_scalar(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let parts = [
        "0",
        "1",
        "9",
        ".",
        "-",
        "+",
        "e",
        "E",
        "m",
        "Ki",
        "Gi",
        "Ei",
        "k",
        "M",
        "h",
        "s",
        "ms",
        "us",
        "µs",
        "ns",
        "99999999999999999999",
        "1e308",
        " ",
    ];
    let mut out: Vec<u8> = if rng.one_in(2) {
        rng.pick(corpus).clone()
    } else {
        Vec::new()
    };
    for _ in 0..1 + rng.below(6) {
        out.extend_from_slice(rng.pick(&parts).as_bytes());
    }
    out
}

// ---- policy ---------------------------------------------------------------------------------

fn yaml_to_json(text: &str) -> Vec<u8> {
    let v: Value = serde_saphyr::from_str(text).unwrap_or(Value::Null);
    serde_json::to_vec(&v).unwrap_or_default()
}

fn policy_seeds(v1alpha1: bool) -> Vec<Vec<u8>> {
    if v1alpha1 {
        let text = r#"
apiVersion: "descheduler/v1alpha1"
kind: "DeschedulerPolicy"
nodeSelector: "pool=a"
evictLocalStoragePods: true
evictSystemCriticalPods: false
maxNoOfPodsToEvictPerNode: 3
strategies:
  RemovePodsHavingTooManyRestarts:
    enabled: true
    params:
      podsHavingTooManyRestarts: {podRestartThreshold: 100, includingInitContainers: true}
      thresholdPriority: 100
      nodeFit: true
  LowNodeUtilization:
    enabled: true
    params:
      nodeResourceUtilizationThresholds:
        thresholds: {cpu: 20, memory: 20, pods: 20}
        targetThresholds: {cpu: 50, memory: 50, pods: 50}
  RemoveDuplicates:
    enabled: true
    params: {removeDuplicates: {excludeOwnerKinds: ["ReplicaSet"]}, namespaces: {exclude: ["kube-system"]}}
  PodLifeTime:
    enabled: true
    params: {podLifeTime: {maxPodLifeTimeSeconds: 86400, states: ["Running"]}, labelSelector: {matchLabels: {a: b}}}
  RemovePodsViolatingTopologySpreadConstraint:
    enabled: true
    params: {includeSoftConstraints: true}
  RemovePodsViolatingNodeAffinity:
    enabled: true
    params: {nodeAffinityType: ["requiredDuringSchedulingIgnoredDuringExecution"]}
  RemovePodsViolatingNodeTaints: {enabled: true}
  RemovePodsViolatingInterPodAntiAffinity: {enabled: true}
  RemoveFailedPods:
    enabled: true
    params: {failedPods: {reasons: ["OOMKilled"], minPodLifetimeSeconds: 3600}}
"#;
        vec![text.as_bytes().to_vec(), yaml_to_json(text)]
    } else {
        vec![
            EXAMPLE_POLICY.as_bytes().to_vec(),
            yaml_to_json(EXAMPLE_POLICY),
            ALL_PLUGINS_POLICY.as_bytes().to_vec(),
            yaml_to_json(ALL_PLUGINS_POLICY),
        ]
    }
}

fn run_policy(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input);
    load_str(&text).is_ok()
}

// ---- snapshot -------------------------------------------------------------------------------

fn example_items() -> &'static Vec<Value> {
    static ITEMS: OnceLock<Vec<Value>> = OnceLock::new();
    ITEMS.get_or_init(|| {
        let mut items = Vec::new();
        for doc in serde_saphyr::from_multiple::<Value>(EXAMPLE_CLUSTER).unwrap_or_default() {
            if let Some(list) = doc.get("items").and_then(Value::as_array) {
                items.extend(list.iter().cloned());
            }
        }
        items
    })
}

fn plan_policy() -> &'static Option<Policy> {
    static POLICY: OnceLock<Option<Policy>> = OnceLock::new();
    POLICY.get_or_init(|| load_str(ALL_PLUGINS_POLICY).ok())
}

fn snapshot_seeds() -> Vec<Vec<u8>> {
    let items = example_items();
    let of_kind = |kinds: &[&str], max: usize| -> Vec<Value> {
        items
            .iter()
            .filter(|i| kinds.contains(&i["kind"].as_str().unwrap_or("")))
            .take(max)
            .cloned()
            .collect()
    };
    let mut small = of_kind(&["Node"], 3);
    small.extend(of_kind(
        &["Pod", "ReplicaSet", "Deployment", "PodDisruptionBudget"],
        12,
    ));
    let mut others = of_kind(&["Node"], 2);
    others.extend(of_kind(
        &[
            "Namespace",
            "PriorityClass",
            "StatefulSet",
            "Job",
            "PersistentVolumeClaim",
        ],
        8,
    ));
    others.extend(of_kind(&["Pod"], 4));
    [small, others]
        .into_iter()
        .flat_map(|items| {
            let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
            [
                serde_json::to_vec(&list).unwrap_or_default(),
                serde_saphyr::to_string(&list)
                    .map(String::into_bytes)
                    .unwrap_or_default(),
            ]
        })
        .collect()
}

fn run_snapshot(input: &[u8]) -> bool {
    let Ok(mut snapshot) = kube_descheduler::snapshot::load::load_bytes(input) else {
        return false;
    };
    if let Some(policy) = plan_policy() {
        let now = Timestamp::from_second(1_790_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let verdict =
            kube_descheduler::guard::answer::guard_verdict(&snapshot, now, GuardConfig::default());
        let plan = kube_descheduler::plan::make_plan(policy, &mut snapshot, now, Some(verdict));
        let mut out = Vec::new();
        let _ = kube_descheduler::plan::render::write_json(&plan, &mut out);
        let _ = kube_descheduler::plan::render::table(&plan, true);
    }
    true
}

// ---- admission review -----------------------------------------------------------------------

fn review_seeds() -> Vec<Vec<u8>> {
    let items = example_items();
    let first = |kind: &str| {
        items
            .iter()
            .find(|i| i["kind"] == kind)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let pod = first("Pod");
    let meta = &pod["metadata"];
    let options = json!({"preconditions": {"uid": meta["uid"]}, "dryRun": []});
    let review = eviction_review(&meta["namespace"], &meta["name"], Some(options));
    let world = json!({
        "review": review,
        "pod": pod,
        "replicaSet": first("ReplicaSet"),
        "deployment": first("Deployment"),
        "pdbs": [first("PodDisruptionBudget")],
        "pvcs": [first("PersistentVolumeClaim")],
        "firstDeniedSecondsAgo": 30,
    });
    vec![
        serde_json::to_vec(&review).unwrap_or_default(),
        serde_json::to_vec(&world).unwrap_or_default(),
    ]
}

fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

/// The input is either an AdmissionReview, or a "world" object holding a review and the
/// Kubernetes objects the guard would read for it (decoded with the real types, turned into
/// facts, decided on).
fn run_review(input: &[u8]) -> bool {
    let world: Option<Value> = serde_json::from_slice::<Value>(input)
        .ok()
        .filter(|v| v.get("review").is_some());
    let body = match &world {
        Some(w) => serde_json::to_vec(&w["review"]).unwrap_or_default(),
        None => input.to_vec(),
    };
    let Ok(parsed) = parse_review(&body) else {
        return false;
    };
    let (request, eviction) = match parsed {
        ParsedReview::Other(request) => {
            let _ = allow(&request, Vec::new());
            return true;
        }
        ParsedReview::Eviction { request, eviction } => (request, eviction),
    };
    let world = world.unwrap_or(Value::Null);
    let objects = WorldObjects::decode(&world);
    let now = Timestamp::from_second(1_790_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let first_denied_at = world["firstDeniedSecondsAgo"]
        .as_i64()
        .and_then(|s| now.checked_sub(jiff::SignedDuration::from_secs(s)).ok());
    let pdb_refs: Vec<&PdbFacts> = objects.pdbs.iter().collect();
    let facts = Facts {
        pod: objects.pod.as_ref(),
        replica_set: objects.rs.as_ref(),
        deployment: objects.dep.as_ref(),
        pdbs: &pdb_refs,
        pvcs: &objects.pvcs,
        first_denied_at,
        census: census(&world),
        namespace_pdb_surge: world["namespacePdbSurge"].as_bool(),
        hpa: world["hpa"].as_str(),
    };
    answer_under_each_config(&request, &eviction, &facts, now);
    true
}

/// The facts of the objects a review's "world" holds, each decoded with its real type.
struct WorldObjects {
    pod: Option<PodFacts>,
    rs: Option<ReplicaSetFacts>,
    dep: Option<DeploymentFacts>,
    pdbs: Vec<PdbFacts>,
    pvcs: Vec<PvcFacts>,
}

impl WorldObjects {
    fn decode(world: &Value) -> Self {
        WorldObjects {
            pod: typed::<Pod>(&world["pod"]).map(|p| PodFacts::from_pod(&p)),
            rs: typed::<ReplicaSet>(&world["replicaSet"])
                .map(|r| ReplicaSetFacts::from_replica_set(&r)),
            dep: typed::<Deployment>(&world["deployment"])
                .map(|d| DeploymentFacts::from_deployment(&d)),
            pdbs: world["pdbs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(typed::<PodDisruptionBudget>)
                .map(|p| PdbFacts::from_pdb(&p))
                .collect(),
            pvcs: world["pvcs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(typed::<PersistentVolumeClaim>)
                .map(|p| PvcFacts::from_pvc(&p))
                .collect(),
        }
    }
}

/// The world's `census` array (other ready, other ready staying, on unschedulable nodes).
fn census(world: &Value) -> Option<kube_descheduler::guard::replicas::ReplicaCensus> {
    world["census"].as_array().map(|c| {
        let n = |i: usize| c.get(i).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        kube_descheduler::guard::replicas::ReplicaCensus {
            other_ready: n(0),
            other_ready_staying: n(1),
            on_unschedulable: n(2),
        }
    })
}

/// Decides the eviction under the default guard configuration, without the health guard and
/// with PDB surge, and builds the answer to `request` each time.
fn answer_under_each_config(
    request: &AdmissionRequest<DynamicObject>,
    eviction: &EvictionRequest,
    facts: &Facts,
    now: Timestamp,
) {
    for config in [
        GuardConfig::default(),
        GuardConfig {
            health_guard: false,
            ..GuardConfig::default()
        },
        GuardConfig {
            pdb_surge: true,
            ..GuardConfig::default()
        },
    ] {
        let verdict = decide(eviction, facts, now, &config);
        match verdict.message() {
            Some(m) => {
                let _ = deny_429(request, m);
            }
            None => {
                let _ = allow(request, Vec::new());
            }
        }
    }
}

// ---- small parsers --------------------------------------------------------------------------

fn run_trigger_query(input: &[u8]) -> bool {
    use axum::extract::Query;
    use std::collections::HashMap;
    let Ok(query) = std::str::from_utf8(input) else {
        return false;
    };
    let Ok(uri) = format!("/api/v1/descheduler/run?{query}").parse::<axum::http::Uri>() else {
        return false;
    };
    let Ok(Query(q)) = Query::<HashMap<String, String>>::try_from_uri(&uri) else {
        return false;
    };
    kube_descheduler::serving::trigger::parse_timeout(q.get("timeoutSeconds").map(String::as_str))
        .is_ok()
}

fn run_quantity(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input);
    let Ok(q) = Quantity::parse(&text) else {
        return false;
    };
    // Property: what Display prints parses back to the same quantity (when it fits the
    // parser's digit limit).
    let printed = q.to_string();
    if printed.trim_start_matches('-').trim_end_matches('m').len() <= 30 {
        let again = Quantity::parse(&printed)
            .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?} does not parse: {e}"));
        assert_eq!(again, q, "{text:?} printed as {printed:?}");
    }
    true
}

fn run_go_duration(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input);
    kube_descheduler::duration::parse_go_duration(&text).is_ok()
}

// ---- kubeconfig -----------------------------------------------------------------------------

fn kubeconfig_seeds() -> Vec<Vec<u8>> {
    let text = r#"apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=
    tls-server-name: kubernetes
contexts:
- name: sim
  context: {cluster: sim, user: admin, namespace: default}
current-context: sim
users:
- name: admin
  user:
    token: abc
preferences: {}
"#;
    vec![text.as_bytes().to_vec(), yaml_to_json(text)]
}

/// Inputs that could name a program to run or files outside the test are not loaded.
fn kubeconfig_is_safe(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input).to_ascii_lowercase();
    !["exec", "command", "auth-provider", "file", "path", "proxy"]
        .iter()
        .any(|w| text.contains(w))
}

fn run_kubeconfig(input: &[u8]) -> bool {
    if !kubeconfig_is_safe(input) {
        return false;
    }
    thread_local! {
        static STATE: (tempfile::NamedTempFile, tokio::runtime::Runtime) = (
            tempfile::NamedTempFile::new().expect("temp file"),
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime"),
        );
    }
    STATE.with(|(file, rt)| {
        if std::fs::write(file.path(), input).is_err() {
            return false;
        }
        let path = file.path().to_path_buf();
        rt.block_on(kube_descheduler::cluster::client::load(Some(&path)))
            .is_ok()
    })
}
