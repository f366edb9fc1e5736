//! What kube-apiserver adds to a pod it creates (a new pod from a client or a controller, not one
//! loaded from a snapshot): `SetDefaults_Pod` (`enableServiceLinks`), the default admission
//! plugins ServiceAccount (`serviceAccountName: default`), Priority (`priority` and
//! `preemptionPolicy` from the pod's PriorityClass, or the global default class, or 0) and
//! DefaultTolerationSeconds (300 s NoExecute tolerations of `not-ready` and `unreachable`), and
//! the pod strategy's `status.qosClass`. The service-account token volume is not added.
use serde_json::{Map, Value, json};

use crate::controllers::quantity::parse_milli;
use crate::error::{ApiError, ApiResult};
use crate::resources::by_gvr;
use crate::store::Store;

/// The PriorityClasses kube-apiserver creates at start-up (`scheduling.SystemPriorityClasses`).
const SYSTEM_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// Applies the defaults above to `pod`; a PriorityClass that does not exist is 403, as the
/// Priority plugin answers.
pub fn on_create(store: &Store, pod: &mut Value) -> ApiResult<()> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    spec.entry("enableServiceLinks").or_insert(json!(true));
    let sa = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(sa));
    spec.insert("serviceAccount".into(), json!(sa));
    default_tolerations(spec);
    let name = pod
        .pointer("/metadata/name")
        .or_else(|| pod.pointer("/metadata/generateName"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    priority(store, pod, &name)?;
    let qos = qos_class(pod);
    if let Some(o) = pod.as_object_mut() {
        let status = o.entry("status").or_insert_with(|| json!({}));
        if let Some(s) = status.as_object_mut() {
            s.insert("qosClass".into(), json!(qos));
        }
    }
    Ok(())
}

/// DefaultTolerationSeconds: tolerate `not-ready` and `unreachable` NoExecute taints for 300 s
/// unless a toleration already covers them (same key or any key, NoExecute or any effect).
fn default_tolerations(spec: &mut Map<String, Value>) {
    let list = spec.entry("tolerations").or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let covered = list.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
        });
        if !covered {
            list.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}),
            );
        }
    }
}

/// The Priority plugin: the named class's value and preemption policy, else the global default
/// class's (its name written into the pod), else 0 and `PreemptLowerPriority`.
fn priority(store: &Store, pod: &mut Value, name: &str) -> ApiResult<()> {
    let classes = by_gvr("scheduling.k8s.io", "v1", "priorityclasses");
    let wanted = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let class: Option<Value> = match &wanted {
        Some(c) => {
            let found = classes.and_then(|d| store.get(d, "", c)).or_else(|| {
                SYSTEM_CLASSES
                    .iter()
                    .find(|(n, _)| n == c)
                    .map(|(_, v)| json!({"metadata": {"name": c}, "value": v}))
            });
            Some(found.ok_or_else(|| {
                ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "pods \"{name}\" is forbidden: no PriorityClass with name {c} was found"
                    ),
                )
                .with_details(json!({"name": name, "kind": "pods"}))
            })?)
        }
        None => classes.and_then(|d| {
            store
                .list(d, None)
                .0
                .into_iter()
                .find(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
        }),
    };
    let value = class
        .as_ref()
        .and_then(|c| c.get("value"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let policy = class
        .as_ref()
        .and_then(|c| c.get("preemptionPolicy"))
        .and_then(Value::as_str)
        .unwrap_or("PreemptLowerPriority")
        .to_string();
    let class_name = class
        .as_ref()
        .and_then(|c| c.pointer("/metadata/name"))
        .and_then(Value::as_str)
        .map(String::from);
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("priority".into(), json!(value));
        spec.entry("preemptionPolicy").or_insert(json!(policy));
        if let Some(n) = class_name {
            spec.insert("priorityClassName".into(), json!(n));
        }
    }
    Ok(())
}

/// `qos.GetPodQOS`: BestEffort without any cpu/memory request or limit; Guaranteed when every
/// container limits cpu and memory and requests (defaulting to the limits) equal them;
/// Burstable otherwise.
fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .collect();
    let amount = |c: &Value, kind: &str, res: &str| {
        c.pointer(&format!("/resources/{kind}/{res}"))
            .and_then(Value::as_str)
            .and_then(parse_milli)
            .filter(|v| *v != 0)
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        for res in ["cpu", "memory"] {
            let (req, lim) = (amount(c, "requests", res), amount(c, "limits", res));
            any |= req.is_some() || lim.is_some();
            guaranteed &= lim.is_some() && req.is_none_or(|r| Some(r) == lim);
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}
