//! Lean decoding of Nodes: only the fields the engine reads are decoded (name, labels, taints,
//! `unschedulable`, allocatable and capacity, conditions); the rest is skipped. Then the node is
//! converted by the same constructor as a full API object ([`SnapshotBuilder::add_node`]).
//!
//! A Node as kube-apiserver serves it is mostly what the engine never reads: its image list
//! (often a hundred images, each with several names), managed fields, annotations, addresses and
//! node info. Decoding all of it into a k8s-openapi `Node` allocates every one of those strings,
//! for each of thousands of nodes on every list, and again for each status update a watch brings.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::json::{LeanCondition, decode_json as decode};

#[derive(Deserialize)]
struct LeanNode {
    metadata: Option<Meta>,
    spec: Option<SpecFields>,
    status: Option<StatusFields>,
}

#[derive(Deserialize)]
struct Meta {
    name: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct SpecFields {
    taints: Option<Vec<Taint>>,
    unschedulable: Option<bool>,
}

#[derive(Deserialize)]
struct StatusFields {
    allocatable: Option<BTreeMap<String, Quantity>>,
    capacity: Option<BTreeMap<String, Quantity>>,
    conditions: Option<Vec<LeanCondition>>,
}

/// Decodes a Node from its JSON, keeping only the fields the engine reads (see the module docs).
/// An error names the field.
pub fn lean_node(raw: &str) -> Result<Node, String> {
    let lean: LeanNode = decode(raw)?;
    let meta = lean
        .metadata
        .map_or_else(ObjectMeta::default, |m| ObjectMeta {
            name: m.name,
            labels: m.labels,
            ..ObjectMeta::default()
        });
    Ok(Node {
        metadata: meta,
        spec: lean.spec.map(|s| NodeSpec {
            taints: s.taints,
            unschedulable: s.unschedulable,
            ..NodeSpec::default()
        }),
        status: lean.status.map(|s| NodeStatus {
            allocatable: s.allocatable,
            capacity: s.capacity,
            conditions: s.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| NodeCondition {
                        type_: c.type_.unwrap_or_default(),
                        status: c.status.unwrap_or_default(),
                        ..NodeCondition::default()
                    })
                    .collect()
            }),
            ..NodeStatus::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::SnapshotBuilder;
    use serde_json::json;

    fn served_node(name: &str) -> serde_json::Value {
        crate::synth::served_node(name, 40)
    }

    /// What the builder makes of a node decoded one way or the other.
    fn converted(node: &Node) -> Result<crate::snapshot::Node, String> {
        let mut b = SnapshotBuilder::new();
        b.add_node(node).map_err(|e| e.to_string())?;
        b.take_parts()
            .nodes
            .pop()
            .ok_or_else(|| "no node".to_string())
    }

    #[test]
    fn a_served_node_converts_as_the_full_object_does() {
        let mut variants = vec![served_node("n1")];
        let mut no_allocatable = served_node("n2");
        no_allocatable["status"]
            .as_object_mut()
            .unwrap()
            .remove("allocatable");
        variants.push(no_allocatable);
        variants.push(json!({"metadata": {"name": "bare"}}));
        variants.push(json!({"metadata": {"name": "nulls", "labels": null},
                             "spec": null, "status": {"conditions": null}}));
        variants.push(
            json!({"metadata": {"name": "odd"}, "status": {"conditions": [{"type": "Ready"}]}}),
        );
        for v in variants {
            let raw = v.to_string();
            let full: Node = serde_json::from_str(&raw).unwrap();
            let lean = lean_node(&raw).unwrap();
            assert_eq!(converted(&lean), converted(&full), "{raw}");
        }
        let n = converted(&lean_node(&served_node("n1").to_string()).unwrap()).unwrap();
        assert!(n.unschedulable && n.ready);
        assert_eq!(n.taints.len(), 1);
        assert_eq!(n.labels["topology.kubernetes.io/zone"], "a");
    }

    #[test]
    fn malformed_fields_the_engine_reads_are_errors_naming_the_field() {
        let mut bad_taints = served_node("n1");
        bad_taints["spec"]["taints"] = json!("NoSchedule");
        let e = lean_node(&bad_taints.to_string()).unwrap_err();
        assert!(e.contains("spec.taints"), "{e}");
        let mut bad_flag = served_node("n1");
        bad_flag["spec"]["unschedulable"] = json!("yes");
        let e = lean_node(&bad_flag.to_string()).unwrap_err();
        assert!(e.contains("spec.unschedulable"), "{e}");
        let mut bad_cpu = served_node("n1");
        bad_cpu["status"]["allocatable"]["cpu"] = json!("lots");
        let e = converted(&lean_node(&bad_cpu.to_string()).unwrap()).unwrap_err();
        assert!(e.contains("status.allocatable.cpu"), "{e}");
        assert!(lean_node("{\"metadata\":").is_err());
        let e = converted(&lean_node(r#"{"metadata":{}}"#).unwrap()).unwrap_err();
        assert!(e.contains("metadata.name"), "{e}");
    }
}
