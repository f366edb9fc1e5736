//! Loading cluster snapshots: formats, indexes, and every kind of bad input.

use kube_descheduler::snapshot::load::load_bytes;
use kube_descheduler::snapshot::model::{Pod, PodPhase, QosClass};
use kube_descheduler::snapshot::resources::{CPU, MEMORY};

fn err(input: &str) -> String {
    match load_bytes(input.as_bytes()) {
        Ok(_) => panic!("expected an error for {input:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn loads_the_bundled_example_with_indexes() {
    let snap = load_bytes(include_bytes!("../examples/cluster.yaml")).unwrap();
    assert_eq!(snap.nodes.len(), 7);
    assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
    let node4 = snap.node_id("node-4").unwrap();
    let on4: Vec<String> = snap
        .pods_on_node(node4)
        .map(|p| snap.pod(p).name.clone())
        .collect();
    assert!(
        on4.iter().filter(|n| n.starts_with("web-")).count() == 3,
        "{on4:?}"
    );
    assert!(on4.iter().any(|n| n.starts_with("api-")));
    assert_eq!(
        snap.namespace_labels("shop").unwrap()["kubernetes.io/metadata.name"],
        "shop"
    );
    assert_eq!(
        snap.priority_classes["system-cluster-critical"],
        2_000_000_000
    );
    assert_eq!(snap.pdbs.len(), 2);
    // ReplicaSets and Deployments are kept as the facts the guard reads.
    let coredns = snap
        .deployments
        .iter()
        .find(|d| d.namespace == "kube-system" && d.name == "coredns")
        .unwrap();
    assert_eq!(
        (coredns.uid.as_str(), coredns.replicas, coredns.revision),
        ("dep-kube-system-coredns", 2, Some(3))
    );
    assert_eq!((coredns.generation, coredns.observed_generation), (4, 4));
    assert!(!coredns.rollout_in_progress());
    let rs = snap
        .replica_sets
        .iter()
        .find(|r| r.name == "coredns-5d78c9869d")
        .unwrap();
    let owner = rs.owner.as_ref().unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "coredns")
    );
    assert_eq!(rs.pod_template_hash.as_deref(), Some("5d78c9869d"));
    let failed = snap
        .pods
        .iter()
        .find(|p| p.name.starts_with("nightly-import"))
        .unwrap();
    assert_eq!(failed.phase, PodPhase::Failed);
    assert_eq!(failed.container_states[0].terminated_exit_code, Some(1));
    // Requests as the scheduler computes them.
    let api = snap
        .pods
        .iter()
        .find(|p| p.name.starts_with("api-"))
        .unwrap();
    assert_eq!(api.requests.get(CPU), 1000);
    assert_eq!(api.requests.get(MEMORY), 2 << 30);
}

#[test]
fn json_and_yaml_and_typed_lists_agree() {
    let json = r#"{"apiVersion":"v1","kind":"NodeList","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
    let snap = load_bytes(json.as_bytes()).unwrap();
    assert_eq!(snap.nodes.len(), 2, "items of a NodeList need no kind");
    let yaml = "---\nkind: Node\napiVersion: v1\nmetadata: {name: a}\n---\nkind: Node\napiVersion: v1\nmetadata: {name: b}\n";
    assert_eq!(load_bytes(yaml.as_bytes()).unwrap().nodes.len(), 2);
    let multi_json =
        r#"{"kind":"Node","metadata":{"name":"a"}} {"kind":"Node","metadata":{"name":"b"}}"#;
    assert_eq!(load_bytes(multi_json.as_bytes()).unwrap().nodes.len(), 2);
}

#[test]
fn init_containers_sidecars_and_overhead_follow_the_scheduler() {
    let json = r#"{"kind":"Pod","metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{
      "containers":[{"name":"a","resources":{"requests":{"cpu":"100m","memory":"100Mi"}}},
                    {"name":"b","resources":{"limits":{"cpu":"200m"}}}],
      "initContainers":[{"name":"i1","resources":{"requests":{"cpu":"1","memory":"10Mi"}}},
                        {"name":"side","restartPolicy":"Always","resources":{"requests":{"cpu":"50m","memory":"1Gi"}}}],
      "overhead":{"cpu":"10m"}}}"#;
    let snap = load_bytes(json.as_bytes()).unwrap();
    let p = &snap.pods[0];
    // cpu: max(100m + 200m(limit as request) + 50m sidecar, 1000m init) + 10m overhead
    assert_eq!(p.requests.get(CPU), 1010);
    // memory: max(100Mi + 1Gi sidecar, 10Mi) = 100Mi + 1Gi
    assert_eq!(p.requests.get(MEMORY), (100 << 20) + (1 << 30));
    assert_eq!(p.qos, QosClass::Burstable);
}

#[test]
fn unknown_kinds_are_skipped_with_a_warning_and_unknown_nodes_reported() {
    let json = r#"{"kind":"List","items":[
      {"kind":"ConfigMap","metadata":{"name":"c","namespace":"d"}},
      {"kind":"Pod","metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"nodeName":"ghost","containers":[]}}]}"#;
    let snap = load_bytes(json.as_bytes()).unwrap();
    assert_eq!(snap.pods.len(), 1);
    assert_eq!(snap.pods[0].node, None);
    let w = snap.warnings.join("\n");
    assert!(w.contains("ConfigMap d/c") && w.contains("items[0]"), "{w}");
    let i = &snap.inconsistencies;
    assert_eq!(i.len(), 1, "{i:?}");
    assert_eq!(i[0].count, 1);
    assert_eq!(i[0].examples, ["d/p on ghost"]);
}

#[test]
fn bad_inputs_name_the_place_and_what_was_expected() {
    assert!(err("").contains("empty"));
    assert!(err("   \n").contains("empty"));
    let e = err(
        "apiVersion: v1\nkind: List\nitems:\n  - kind: Pod\n    metadata: {name: a\n  bad: [\n",
    );
    assert!(e.contains("invalid YAML") && e.contains("line 6"), "{e}");
    let e = err(
        r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n"}},{"kind":"Pod","metadata":{"name":"p","namespace":"x"},"spec":{"priority":"high","containers":[]}}]}"#,
    );
    assert!(
        e.contains("items[1]") && e.contains("Pod x/p") && e.contains("spec.priority"),
        "{e}"
    );
    let e = err(
        r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"p","namespace":"x"},"status":{"startTime":"last week"}}]}"#,
    );
    assert!(
        e.contains("status.startTime") && e.contains("RFC 3339"),
        "{e}"
    );
    let e = err(
        r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"p","namespace":"x"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"lots"}}}]}}]}"#,
    );
    assert!(e.contains("requests.cpu") && e.contains("lots"), "{e}");
    let e = err(r#"{"kind":"List","items":[{"metadata":{"name":"p"}}]}"#);
    assert!(e.contains("missing field `kind`"), "{e}");
    let e = err(r#"{"kind":"List"}"#);
    assert!(e.contains("items"), "{e}");
    let e = err(r#"{"kind":"List","items":[{"kind":"Node","metadata":{}}]}"#);
    assert!(e.contains("metadata.name"), "{e}");
    let e = err(r#"{"kind":"List","items":[ {"kind":"Node" "#);
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn pods_of_one_owner_share_identical_parts_but_not_different_ones() {
    use kube_descheduler::testing::{node, pod, snapshot};
    use std::sync::Arc;
    let s = snapshot(
        vec![node("n1").build()],
        vec![
            pod("a", "p1", "n1")
                .owner("ReplicaSet", "rs")
                .label("app", "x")
                .toleration("k", "Exists", None, None)
                .build(),
            pod("a", "p2", "n1")
                .owner("ReplicaSet", "rs")
                .label("app", "x")
                .toleration("k", "Exists", None, None)
                .build(),
            pod("a", "p3", "n1")
                .owner("ReplicaSet", "rs")
                .label("app", "y")
                .build(),
        ],
    );
    let (p1, p2, p3) = (&s.pods[0], &s.pods[1], &s.pods[2]);
    assert!(Arc::ptr_eq(&p1.labels, &p2.labels));
    assert!(Arc::ptr_eq(&p1.tolerations, &p2.tolerations));
    assert!(Arc::ptr_eq(&p1.owners, &p2.owners));
    assert_eq!(
        p3.labels.get("app").map(String::as_str),
        Some("y"),
        "a different value is not shared"
    );
    assert!(p3.tolerations.is_empty());
}

#[test]
fn live_objects_and_file_objects_build_the_same_pods() {
    // The loader decodes pods straight from JSON; live mode converts typed k8s Pods. Same model.
    let from_file = load_bytes(include_bytes!("../examples/cluster.yaml")).unwrap();
    let text = include_str!("../examples/cluster.yaml");
    let list: serde_json::Value = serde_saphyr::from_str(text).unwrap();
    let mut b = kube_descheduler::snapshot::SnapshotBuilder::new();
    for item in list["items"].as_array().unwrap() {
        if item["kind"] == "Pod" {
            let pod: k8s_openapi::api::core::v1::Pod =
                serde_json::from_value(item.clone()).unwrap();
            b.add_pod(&pod).unwrap();
        }
    }
    let from_live = b.build();
    assert_eq!(from_file.pods.len(), from_live.pods.len());
    for (a, b) in from_file.pods.iter().zip(&from_live.pods) {
        let (mut a, mut b) = (Pod::clone(a), Pod::clone(b));
        a.node = None; // the live snapshot above has no nodes
        b.node = None;
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "pod {}", a.name);
    }
}

/// The guard's rule B facts: of a namespace's annotations only the pdb-surge opt-in is kept (on,
/// off, absent, unrecognised), and of an autoscaler (autoscaling/v2 and v1, also as a typed list
/// whose items omit `kind`) only a Deployment scale target; autoscalers of anything else are
/// dropped without a warning.
#[test]
fn namespace_surge_opt_ins_and_autoscaler_targets_are_kept() {
    let json = r#"{"kind":"List","items":[
      {"kind":"Namespace","metadata":{"name":"on","annotations":{"kube-descheduler.io/pdb-surge":"enabled","other":"x"}}},
      {"kind":"Namespace","metadata":{"name":"off","annotations":{"kube-descheduler.io/pdb-surge":"Disabled"}}},
      {"kind":"Namespace","metadata":{"name":"absent","annotations":{"other":"x"}}},
      {"kind":"Namespace","metadata":{"name":"bare"}},
      {"kind":"Namespace","metadata":{"name":"junk","annotations":{"kube-descheduler.io/pdb-surge":"maybe"}}},
      {"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web-hpa","namespace":"on"},
       "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":5,
               "metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}]}},
      {"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"db-hpa","namespace":"on"},
       "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db"},"maxReplicas":5}},
      {"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscalerList","items":[
        {"metadata":{"name":"api-hpa","namespace":"off"},
         "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"api"},"maxReplicas":3,"targetCPUUtilizationPercentage":70}}]}]}"#;
    let snap = load_bytes(json.as_bytes()).unwrap();
    assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
    assert_eq!(snap.namespace_pdb_surge("on"), Some(true));
    assert_eq!(snap.namespace_pdb_surge("off"), Some(false));
    for ns in ["absent", "bare", "junk", "not-in-the-file"] {
        assert_eq!(snap.namespace_pdb_surge(ns), None, "{ns}");
    }
    assert_eq!(snap.namespace_pdb_surge.len(), 2, "only the opt-in is kept");
    // The namespaces themselves are all there, labels only.
    assert_eq!(snap.namespaces.len(), 5);
    let targets: Vec<(&str, &str, &str)> = snap
        .hpas
        .iter()
        .map(|h| (&h.namespace[..], &h.name[..], &h.deployment[..]))
        .collect();
    // In the API's (namespace, name) order, whatever the file's order.
    assert_eq!(
        targets,
        [("off", "api-hpa", "api"), ("on", "web-hpa", "web")]
    );
}
