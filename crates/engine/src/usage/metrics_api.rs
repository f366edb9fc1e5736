//! Decoding `metrics.k8s.io/v1beta1` lists — what `kubectl get --raw
//! /apis/metrics.k8s.io/v1beta1/nodes` (NodeMetricsList) and `.../pods` (PodMetricsList) print,
//! and what the API returns. Errors name the item and field.

use std::collections::HashMap;

use serde_json::Value;

use super::CpuMemory;
use crate::quantity::Quantity;

/// Node and pod samples read from one or more lists (not smoothed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawSamples {
    /// Node name → usage.
    pub nodes: HashMap<String, CpuMemory>,
    /// `namespace/name` → summed container usage, or why it is unusable.
    pub pods: HashMap<String, Result<CpuMemory, String>>,
}

fn quantity(v: Option<&Value>, field: &str) -> Result<Option<Quantity>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Quantity::parse(s)
            .map(Some)
            .map_err(|e| format!("{field}: {e}")),
        Some(Value::Number(n)) => Quantity::parse(&n.to_string())
            .map(Some)
            .map_err(|e| format!("{field}: {e}")),
        Some(other) => Err(format!("{field}: expected a quantity string, got {other}")),
    }
}

fn name_of(item: &Value, at: &str) -> Result<(String, String), String> {
    let meta = item
        .get("metadata")
        .ok_or_else(|| format!("{at}.metadata: missing"))?;
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{at}.metadata.name: missing"))?;
    let ns = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok((ns.to_string(), name.to_string()))
}

/// Which kind of metrics an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    Node,
    Pod,
}

fn item_kind(list_kind: &str, item: &Value, at: &str) -> Result<ItemKind, String> {
    match item
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(list_kind)
    {
        "NodeMetrics" | "NodeMetricsList" => Ok(ItemKind::Node),
        "PodMetrics" | "PodMetricsList" => Ok(ItemKind::Pod),
        // `kind: List` items printed without a kind: recognise them by shape.
        _ if item.get("containers").is_some() => Ok(ItemKind::Pod),
        _ if item.get("usage").is_some() => Ok(ItemKind::Node),
        other => Err(format!(
            "{at}.kind: expected NodeMetrics or PodMetrics, got {other:?}"
        )),
    }
}

impl RawSamples {
    /// Adds the items of one list (`NodeMetricsList`, `PodMetricsList`, or a `List` of
    /// NodeMetrics / PodMetrics). Errors name the item and field.
    pub fn add_list(&mut self, list: &Value) -> Result<(), String> {
        let kind = list.get("kind").and_then(Value::as_str).unwrap_or_default();
        let items = match list.get("items") {
            Some(Value::Array(items)) => items,
            Some(Value::Null) | None => {
                return Err(format!(
                    "items: expected a list of NodeMetrics or PodMetrics (kind {kind:?})"
                ));
            }
            Some(_) => return Err("items: expected an array".into()),
        };
        for (i, item) in items.iter().enumerate() {
            let at = format!("items[{i}]");
            let (ns, name) = name_of(item, &at)?;
            match item_kind(kind, item, &at)? {
                ItemKind::Node => {
                    let usage = item
                        .get("usage")
                        .ok_or_else(|| format!("{at}.usage: missing"))?;
                    let cpu = quantity(usage.get("cpu"), &format!("{at}.usage.cpu"))?
                        .ok_or_else(|| format!("{at}.usage.cpu: missing (node {name})"))?;
                    let memory = quantity(usage.get("memory"), &format!("{at}.usage.memory"))?
                        .ok_or_else(|| format!("{at}.usage.memory: missing (node {name})"))?;
                    self.nodes.insert(
                        name,
                        CpuMemory {
                            cpu_milli: cpu.milli_value(),
                            memory: memory.value(),
                        },
                    );
                }
                ItemKind::Pod => {
                    if ns.is_empty() {
                        return Err(format!("{at}.metadata.namespace: missing (pod {name})"));
                    }
                    let containers = match item.get("containers") {
                        Some(Value::Array(c)) => c.as_slice(),
                        Some(Value::Null) | None => &[],
                        Some(_) => return Err(format!("{at}.containers: expected an array")),
                    };
                    let mut sum = Ok(CpuMemory::default());
                    for (j, c) in containers.iter().enumerate() {
                        let cat = format!("{at}.containers[{j}]");
                        let cname = c.get("name").and_then(Value::as_str).unwrap_or("?");
                        let usage = c.get("usage");
                        let cpu = quantity(
                            usage.and_then(|u| u.get("cpu")),
                            &format!("{cat}.usage.cpu"),
                        )?;
                        let memory = quantity(
                            usage.and_then(|u| u.get("memory")),
                            &format!("{cat}.usage.memory"),
                        )?;
                        // Upstream: a container without a sample of a needed resource makes
                        // the pod's usage unknown (the pod is then skipped).
                        sum = match (sum, cpu, memory) {
                            (Err(e), _, _) => Err(e),
                            (Ok(s), Some(cpu), Some(memory)) => Ok(CpuMemory {
                                cpu_milli: s.cpu_milli.saturating_add(cpu.milli_value()),
                                memory: s.memory.saturating_add(memory.value()),
                            }),
                            (Ok(_), cpu, _) => Err(format!(
                                "pod {ns}/{name}: container {cname:?} is missing {:?} resource",
                                if cpu.is_none() { "cpu" } else { "memory" }
                            )),
                        };
                    }
                    self.pods.insert(format!("{ns}/{name}"), sum);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_kubectl_get_raw_prints() {
        let mut s = RawSamples::default();
        s.add_list(&json!({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {}, "items": [{"metadata": {"name": "n1"}, "timestamp": "2026-01-01T00:00:00Z",
            "window": "10s", "usage": {"cpu": "1500000000n", "memory": "1Gi"}}]}))
            .unwrap();
        s.add_list(&json!({"kind": "PodMetricsList", "items": [
            {"metadata": {"name": "p", "namespace": "a"}, "containers": [
                {"name": "c1", "usage": {"cpu": "250m", "memory": "100Mi"}},
                {"name": "c2", "usage": {"cpu": "250m", "memory": "100Mi"}}]},
            {"metadata": {"name": "q", "namespace": "a"}, "containers": [
                {"name": "c1", "usage": {"cpu": "250m"}}]}]}))
            .unwrap();
        assert_eq!(
            s.nodes["n1"],
            CpuMemory {
                cpu_milli: 1500,
                memory: 1 << 30
            }
        );
        assert_eq!(
            s.pods["a/p"],
            Ok(CpuMemory {
                cpu_milli: 500,
                memory: 200 << 20
            })
        );
        let q = s.pods["a/q"].clone().unwrap_err();
        assert!(q.contains("container \"c1\" is missing \"memory\""), "{q}");
    }

    #[test]
    fn errors_name_the_item_and_field() {
        let err = |v: Value| RawSamples::default().add_list(&v).unwrap_err();
        let e = err(json!({"kind": "NodeMetricsList", "items": [
            {"metadata": {"name": "n1"}, "usage": {"cpu": "lots", "memory": "1"}}]}));
        assert!(e.starts_with("items[0].usage.cpu:"), "{e}");
        let e = err(
            json!({"kind": "NodeMetricsList", "items": [{"metadata": {"name": "n1"}, "usage": {"cpu": "1"}}]}),
        );
        assert!(e.starts_with("items[0].usage.memory: missing"), "{e}");
        let e = err(
            json!({"kind": "PodMetricsList", "items": [{"metadata": {"name": "p"}, "containers": []}]}),
        );
        assert!(e.starts_with("items[0].metadata.namespace"), "{e}");
        let e = err(json!({"kind": "NodeList", "items": [{"metadata": {"name": "n"}}]}));
        assert!(e.starts_with("items[0].kind"), "{e}");
        assert!(err(json!({"kind": "NodeMetricsList"})).starts_with("items:"));
    }
}
