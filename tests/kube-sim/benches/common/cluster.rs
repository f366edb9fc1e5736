//! The synthetic cluster of the scale benches (shared by `benches/scale.rs` and the root
//! crate's `benches/run_live_scale.rs`): settled Deployments, ReplicaSets and Running/Ready pods
//! that kube-sim's controllers leave as they are.
#![allow(dead_code)]

use std::io::Write;

use serde_json::{Value, json};

/// splitmix64: a deterministic generator (the cluster is the same on every run).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const NAMESPACES: [&str; 5] = ["default", "team-a", "team-b", "team-c", "batch"];
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const T0: &str = "2026-01-01T00:00:00Z";

/// Writes the cluster: namespaces, Ready nodes, Deployments of 1–20 replicas with their
/// ReplicaSet and Running/Ready pods (10 % with required pod anti-affinity per host, 8 % with
/// node affinity), and a PDB for a fifth of the Deployments with more than two replicas.
pub fn write_cluster(nodes: usize, pods: usize, out: &mut impl Write) -> std::io::Result<usize> {
    let mut rng = Rng(20_261_125);
    let mut items = 0usize;
    out.write_all(b"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{},\"items\":[\n")?;
    let mut emit = |v: Value, out: &mut dyn Write| -> std::io::Result<()> {
        if items > 0 {
            out.write_all(b",\n")?;
        }
        items += 1;
        serde_json::to_writer(&mut *out, &v).map_err(std::io::Error::other)
    };
    for ns in NAMESPACES {
        emit(
            json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns}}),
            out,
        )?;
    }
    for i in 0..nodes {
        let cpu = [16u64, 32, 64][rng.below(3) as usize];
        let alloc =
            json!({"cpu": cpu.to_string(), "memory": format!("{}Gi", cpu * 4), "pods": "110"});
        emit(
            json!({"apiVersion":"v1","kind":"Node","metadata":{"name":format!("node-{i}"),
                "labels":{"kubernetes.io/hostname":format!("node-{i}"),
                    "topology.kubernetes.io/zone":ZONES[i % 3],
                    "disktype": if rng.below(2) == 0 {"ssd"} else {"hdd"}}},
              "spec":{},
              "status":{"capacity":alloc,"allocatable":alloc,
                "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady",
                    "message":"kubelet is posting ready status",
                    "lastHeartbeatTime":T0,"lastTransitionTime":T0}]}}),
            out,
        )?;
    }
    let mut left = pods;
    let mut d = 0usize;
    while left > 0 {
        let ns = NAMESPACES[d % NAMESPACES.len()];
        let app = format!("app-{d}");
        let replicas = (1 + rng.below(20) as usize).min(left);
        let hash = format!("{:08x}", rng.next() as u32);
        let rs = format!("{app}-{hash}");
        let labels = json!({"app": app, "pod-template-hash": hash});
        let mut pod_spec = json!({"containers":[{"name":"c","image":format!("registry.example.com/{app}:1"),
            "resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}]});
        match rng.below(100) {
            0..10 => {
                pod_spec["affinity"] = json!({"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
                    {"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app":app}}}]}});
            }
            10..18 => {
                pod_spec["affinity"] = json!({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{
                    "nodeSelectorTerms":[{"matchExpressions":[{"key":"disktype","operator":"In","values":["ssd","hdd"]}]}]}}});
            }
            _ => {}
        }
        let ready = json!({"replicas":replicas,"readyReplicas":replicas,"availableReplicas":replicas,
            "updatedReplicas":replicas,"observedGeneration":1});
        emit(
            json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":app,"namespace":ns,
                "uid":format!("dep-{d}"),"generation":1,"creationTimestamp":T0,
                "annotations":{"deployment.kubernetes.io/revision":"1"}},
              "spec":{"replicas":replicas,"selector":{"matchLabels":{"app":app}},
                "template":{"metadata":{"labels":{"app":app}},"spec":pod_spec}},
              "status":ready}),
            out,
        )?;
        emit(
            json!({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":rs,"namespace":ns,
                "uid":format!("rs-{d}"),"generation":1,"creationTimestamp":T0,"labels":labels,
                "annotations":{"deployment.kubernetes.io/revision":"1"},
                "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":app,
                    "uid":format!("dep-{d}"),"controller":true,"blockOwnerDeletion":true}]},
              "spec":{"replicas":replicas,"selector":{"matchLabels":labels},
                "template":{"metadata":{"labels":labels},"spec":pod_spec}},
              "status":ready}),
            out,
        )?;
        if replicas > 2 && rng.below(5) == 0 {
            emit(
                json!({"apiVersion":"policy/v1","kind":"PodDisruptionBudget",
                    "metadata":{"name":app,"namespace":ns,"generation":1},
                    "spec":{"maxUnavailable":1,"selector":{"matchLabels":{"app":app}}}}),
                out,
            )?;
        }
        let base = rng.below(nodes as u64) as usize;
        for r in 0..replicas {
            let node = (base + r * 7 + rng.below(3) as usize) % nodes;
            let mut spec = pod_spec.clone();
            spec["nodeName"] = json!(format!("node-{node}"));
            emit(
                json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":format!("{rs}-{r:05}"),
                    "namespace":ns,"uid":format!("pod-{d}-{r}"),"creationTimestamp":T0,"labels":labels,
                    "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":rs,
                        "uid":format!("rs-{d}"),"controller":true,"blockOwnerDeletion":true}]},
                  "spec":spec,
                  "status":{"phase":"Running","startTime":T0,"podIP":format!("10.{}.{}.{}", node / 250, node % 250, r + 2),
                    "conditions":[{"type":"Ready","status":"True","lastTransitionTime":T0}],
                    "containerStatuses":[{"name":"c","image":format!("registry.example.com/{app}:1"),
                        "imageID":"","ready":true,"restartCount":0,"started":true,
                        "state":{"running":{"startedAt":T0}}}]}}),
                out,
            )?;
        }
        left -= replicas;
        d += 1;
    }
    out.write_all(b"\n]}\n")?;
    Ok(items)
}
