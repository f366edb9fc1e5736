//! `metrics.k8s.io/v1beta1`, as metrics-server serves it through the API aggregation layer:
//! the group is listed in `/apis` discovery (an aggregated API group, registered by an
//! APIService in a real cluster), and `nodes` / `pods` support `get` and `list` only.
//!
//! Usage is set per pod — the annotations [`CPU_ANNOTATION`] / [`MEMORY_ANNOTATION`] in a
//! snapshot, or [`MetricsUsage::set_pod`] (through `SimHandle::set_pod_usage`), which wins. As
//! metrics-server does, only Running pods bound to a node are reported; a node's usage is the sum
//! of the usage of its Running pods (metrics-server reads the node cgroup, which is that sum plus
//! system overhead; the overhead is zero here), and nodes whose Ready condition is not True are
//! left out (metrics-server cannot scrape them). CPU is printed in nanocores and memory in Ki,
//! the units metrics-server uses. [`MetricsUsage::hide_node`] drops a node from the answers (a
//! node metrics-server has no sample for yet).

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use axum::http::Method;
use axum::response::Response;
use serde_json::{Value, json};

use crate::SimState;
use crate::controllers::quantity::parse_milli;
use crate::error::{ApiError, ApiResult};
use crate::resources::by_gvr;
use crate::rest::json_response;

/// The API group.
pub const GROUP: &str = "metrics.k8s.io";
/// The served version.
pub const VERSION: &str = "v1beta1";
/// Pod annotation with the pod's CPU usage (a quantity, e.g. `250m`).
pub const CPU_ANNOTATION: &str = "kube-sim.test/cpu-usage";
/// Pod annotation with the pod's memory usage (a quantity, e.g. `512Mi`).
pub const MEMORY_ANNOTATION: &str = "kube-sim.test/memory-usage";
/// metrics-server's default scrape window.
const WINDOW: &str = "10s";

/// Usage set through the handle (overrides annotations) and hidden nodes.
#[derive(Default)]
pub struct MetricsUsage {
    pods: RwLock<HashMap<(String, String), (i128, i128)>>,
    hidden: RwLock<HashSet<String>>,
}

impl MetricsUsage {
    /// Sets pod `namespace/name`'s usage: cpu in millicores, memory in bytes.
    pub fn set_pod(&self, namespace: &str, name: &str, cpu_milli: i64, memory: i64) {
        self.pods.write().unwrap_or_else(|e| e.into_inner()).insert(
            (namespace.to_string(), name.to_string()),
            (cpu_milli as i128, memory as i128),
        );
    }

    /// Leaves node `name` out of NodeMetrics answers (`hidden = false` brings it back).
    pub fn hide_node(&self, name: &str, hidden: bool) {
        let mut h = self.hidden.write().unwrap_or_else(|e| e.into_inner());
        if hidden {
            h.insert(name.to_string());
        } else {
            h.remove(name);
        }
    }

    /// (cpu milli, memory bytes) of a pod object: the handle's value, else its annotations.
    fn pod_usage(&self, pod: &Value) -> (i128, i128) {
        let ns = str_at(pod, "/metadata/namespace");
        let name = str_at(pod, "/metadata/name");
        if let Some(u) = self
            .pods
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(ns.to_string(), name.to_string()))
        {
            return *u;
        }
        let ann = |k: &str| {
            pod.pointer("/metadata/annotations")
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .and_then(parse_milli)
                .unwrap_or(0)
        };
        (ann(CPU_ANNOTATION), ann(MEMORY_ANNOTATION) / 1000)
    }
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn usage_json(cpu_milli: i128, memory: i128) -> Value {
    json!({"cpu": format!("{}n", cpu_milli.max(0) * 1_000_000),
           "memory": format!("{}Ki", memory.max(0) / 1024)})
}

fn reported(pod: &Value) -> bool {
    str_at(pod, "/status/phase") == "Running" && !str_at(pod, "/spec/nodeName").is_empty()
}

fn node_ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| str_at(c, "/type") == "Ready" && str_at(c, "/status") == "True")
        })
}

/// The entry for `/apis` discovery.
pub fn group_doc() -> Value {
    let gv = json!({"groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION});
    json!({"name": GROUP, "versions": [gv.clone()], "preferredVersion": gv})
}

fn resource_list() -> Value {
    let entry = |name: &str, singular: &str, namespaced: bool, kind: &str| {
        json!({"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind,
               "verbs": ["get", "list"]})
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{VERSION}"),
           "resources": [entry("nodes", "", false, "NodeMetrics"), entry("pods", "", true, "PodMetrics")]})
}

fn meta(name: &str, namespace: Option<&str>, now: &str, labels: Option<&Value>) -> Value {
    let mut m = json!({"name": name, "creationTimestamp": now});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    if let Some(l) = labels {
        m["labels"] = l.clone();
    }
    m
}

/// Answers `/apis` (adding the group), the group's discovery documents and its resources;
/// `None` for every other path.
pub fn route(st: &SimState, method: &Method, path: &str) -> Option<ApiResult<Response>> {
    if path == "/apis" {
        let custom = crate::crds::served(&st.store);
        let mut doc = crate::discovery::group_list_with(&custom);
        if let Some(groups) = doc.get_mut("groups").and_then(Value::as_array_mut) {
            groups.push(group_doc());
        }
        return Some(Ok(json_response(200, &doc, &[])));
    }
    let rest = path.strip_prefix("/apis/metrics.k8s.io")?;
    if method != Method::GET {
        return Some(Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )));
    }
    let segs: Vec<&str> = rest
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    Some(serve(st, &segs))
}

fn serve(st: &SimState, segs: &[&str]) -> ApiResult<Response> {
    let ok = |v: Value| Ok(json_response(200, &v, &[]));
    match segs {
        [] => {
            let mut g = group_doc();
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            ok(g)
        }
        [VERSION] => ok(resource_list()),
        [VERSION, "nodes"] => ok(list("NodeMetricsList", node_items(st, None))),
        [VERSION, "nodes", name] => one(node_items(st, Some(name)), "nodes", name),
        [VERSION, "pods"] => ok(list("PodMetricsList", pod_items(st, None, None))),
        [VERSION, "namespaces", ns, "pods"] => {
            ok(list("PodMetricsList", pod_items(st, Some(ns), None)))
        }
        [VERSION, "namespaces", ns, "pods", name] => {
            one(pod_items(st, Some(ns), Some(name)), "pods", name)
        }
        _ => Err(ApiError::no_route()),
    }
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"kind": kind, "apiVersion": format!("{GROUP}/{VERSION}"), "metadata": {}, "items": items})
}

fn one(mut items: Vec<Value>, resource: &str, name: &str) -> ApiResult<Response> {
    match items.pop() {
        Some(mut item) => {
            let kind = if resource == "nodes" {
                "NodeMetrics"
            } else {
                "PodMetrics"
            };
            item["kind"] = json!(kind);
            item["apiVersion"] = json!(format!("{GROUP}/{VERSION}"));
            Ok(json_response(200, &item, &[]))
        }
        None => Err(ApiError::not_found(GROUP, resource, name)),
    }
}

fn core(resource: &str) -> Option<&'static crate::resources::ResourceDef> {
    by_gvr("", "v1", resource)
}

fn node_items(st: &SimState, only: Option<&str>) -> Vec<Value> {
    let (Some(nodes_def), Some(pods_def)) = (core("nodes"), core("pods")) else {
        return Vec::new();
    };
    let now = st.store.clock().now().to_string();
    let hidden = st
        .metrics
        .hidden
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut per_node: HashMap<String, (i128, i128)> = HashMap::new();
    for pod in st
        .store
        .list(pods_def, None)
        .0
        .iter()
        .filter(|p| reported(p))
    {
        let (c, m) = st.metrics.pod_usage(pod);
        let e = per_node
            .entry(str_at(pod, "/spec/nodeName").to_string())
            .or_default();
        e.0 += c;
        e.1 += m;
    }
    st.store
        .list(nodes_def, None)
        .0
        .iter()
        .filter(|n| node_ready(n))
        .filter_map(|n| {
            let name = str_at(n, "/metadata/name");
            if hidden.contains(name) || only.is_some_and(|o| o != name) {
                return None;
            }
            let (c, m) = per_node.get(name).copied().unwrap_or_default();
            Some(
                json!({"metadata": meta(name, None, &now, n.pointer("/metadata/labels")),
                        "timestamp": now, "window": WINDOW, "usage": usage_json(c, m)}),
            )
        })
        .collect()
}

fn pod_items(st: &SimState, ns: Option<&str>, only: Option<&str>) -> Vec<Value> {
    let Some(pods_def) = core("pods") else {
        return Vec::new();
    };
    let now = st.store.clock().now().to_string();
    st.store
        .list(pods_def, ns)
        .0
        .iter()
        .filter(|p| reported(p))
        .filter(|p| only.is_none_or(|o| o == str_at(p, "/metadata/name")))
        .map(|p| {
            let (c, m) = st.metrics.pod_usage(p);
            // The pod's usage is reported on its first container; the others use nothing.
            let containers: Vec<Value> = p
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map(|cs| cs.as_slice())
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, container)| {
                    let (c_cpu, c_mem) = if i == 0 { (c, m) } else { (0, 0) };
                    json!({"name": str_at(container, "/name"), "usage": usage_json(c_cpu, c_mem)})
                })
                .collect();
            json!({"metadata": meta(str_at(p, "/metadata/name"), Some(str_at(p, "/metadata/namespace")), &now, p.pointer("/metadata/labels")),
                   "timestamp": now, "window": WINDOW, "containers": containers})
        })
        .collect()
}
