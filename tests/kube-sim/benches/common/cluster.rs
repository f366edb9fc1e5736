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
    out.write_all(b"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{},\"items\":[\n")?;
    let mut list = ListWriter { out, items: 0 };
    for ns in NAMESPACES {
        list.emit(&json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns}}))?;
    }
    write_nodes(&mut list, &mut rng, nodes)?;
    let mut left = pods;
    let mut d = 0usize;
    while left > 0 {
        let app = next_app(&mut rng, d, left);
        write_app_controllers(&mut list, &mut rng, &app)?;
        write_app_pods(&mut list, &mut rng, &app, nodes)?;
        left -= app.replicas;
        d += 1;
    }
    list.out.write_all(b"\n]}\n")?;
    Ok(list.items)
}

/// Writes the items of a JSON `List` one after the other, counting them.
struct ListWriter<'a, W: Write> {
    out: &'a mut W,
    items: usize,
}

impl<W: Write> ListWriter<'_, W> {
    fn emit(&mut self, item: &Value) -> std::io::Result<()> {
        if self.items > 0 {
            self.out.write_all(b",\n")?;
        }
        self.items += 1;
        serde_json::to_writer(&mut *self.out, item).map_err(std::io::Error::other)
    }
}

/// Ready nodes `node-0`… with 16, 32 or 64 cpus (4 GiB of memory per cpu), a zone and a
/// `disktype` label.
fn write_nodes<W: Write>(
    list: &mut ListWriter<W>,
    rng: &mut Rng,
    nodes: usize,
) -> std::io::Result<()> {
    for i in 0..nodes {
        let cpu = [16u64, 32, 64][rng.below(3) as usize];
        let alloc =
            json!({"cpu": cpu.to_string(), "memory": format!("{}Gi", cpu * 4), "pods": "110"});
        list.emit(
            &json!({"apiVersion":"v1","kind":"Node","metadata":{"name":format!("node-{i}"),
                "labels":{"kubernetes.io/hostname":format!("node-{i}"),
                    "topology.kubernetes.io/zone":ZONES[i % 3],
                    "disktype": if rng.below(2) == 0 {"ssd"} else {"hdd"}}},
              "spec":{},
              "status":{"capacity":alloc,"allocatable":alloc,
                "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady",
                    "message":"kubelet is posting ready status",
                    "lastHeartbeatTime":T0,"lastTransitionTime":T0}]}}),
        )?;
    }
    Ok(())
}

/// One Deployment of the cluster: its number, namespace, name, size and pod template.
struct App {
    d: usize,
    ns: &'static str,
    name: String,
    replicas: usize,
    /// The ReplicaSet's name (`<app>-<pod-template-hash>`).
    rs: String,
    /// The pods' labels (`app` and `pod-template-hash`).
    labels: Value,
    pod_spec: Value,
}

/// The `d`-th Deployment: 1–20 replicas (at most `left`), and a pod spec with required pod
/// anti-affinity per host (10 %), required node affinity (8 %) or neither.
fn next_app(rng: &mut Rng, d: usize, left: usize) -> App {
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
    App {
        d,
        ns,
        name: app,
        replicas,
        rs,
        labels,
        pod_spec,
    }
}

/// The settled Deployment and ReplicaSet of `app`, and for a fifth of those with more than two
/// replicas a PDB allowing one unavailable pod.
fn write_app_controllers<W: Write>(
    list: &mut ListWriter<W>,
    rng: &mut Rng,
    app: &App,
) -> std::io::Result<()> {
    let App {
        d,
        ns,
        name,
        replicas,
        rs,
        labels,
        pod_spec,
    } = app;
    let ready = json!({"replicas":replicas,"readyReplicas":replicas,"availableReplicas":replicas,
        "updatedReplicas":replicas,"observedGeneration":1});
    list.emit(
        &json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":name,"namespace":ns,
            "uid":format!("dep-{d}"),"generation":1,"creationTimestamp":T0,
            "annotations":{"deployment.kubernetes.io/revision":"1"}},
          "spec":{"replicas":replicas,"selector":{"matchLabels":{"app":name}},
            "template":{"metadata":{"labels":{"app":name}},"spec":pod_spec}},
          "status":ready}),
    )?;
    list.emit(
        &json!({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":rs,"namespace":ns,
            "uid":format!("rs-{d}"),"generation":1,"creationTimestamp":T0,"labels":labels,
            "annotations":{"deployment.kubernetes.io/revision":"1"},
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":name,
                "uid":format!("dep-{d}"),"controller":true,"blockOwnerDeletion":true}]},
          "spec":{"replicas":replicas,"selector":{"matchLabels":labels},
            "template":{"metadata":{"labels":labels},"spec":pod_spec}},
          "status":ready}),
    )?;
    if *replicas > 2 && rng.below(5) == 0 {
        list.emit(
            &json!({"apiVersion":"policy/v1","kind":"PodDisruptionBudget",
            "metadata":{"name":name,"namespace":ns,"generation":1},
            "spec":{"maxUnavailable":1,"selector":{"matchLabels":{"app":name}}}}),
        )?;
    }
    Ok(())
}

/// The Running/Ready pods of `app`, spread from a random node in steps of about 7 nodes.
fn write_app_pods<W: Write>(
    list: &mut ListWriter<W>,
    rng: &mut Rng,
    app: &App,
    nodes: usize,
) -> std::io::Result<()> {
    let base = rng.below(nodes as u64) as usize;
    for r in 0..app.replicas {
        let node = (base + r * 7 + rng.below(3) as usize) % nodes;
        let mut spec = app.pod_spec.clone();
        spec["nodeName"] = json!(format!("node-{node}"));
        list.emit(
            &json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":format!("{}-{r:05}", app.rs),
                "namespace":app.ns,"uid":format!("pod-{}-{r}", app.d),"creationTimestamp":T0,"labels":app.labels,
                "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":app.rs,
                    "uid":format!("rs-{}", app.d),"controller":true,"blockOwnerDeletion":true}]},
              "spec":spec,
              "status":{"phase":"Running","startTime":T0,"podIP":format!("10.{}.{}.{}", node / 250, node % 250, r + 2),
                "conditions":[{"type":"Ready","status":"True","lastTransitionTime":T0}],
                "containerStatuses":[{"name":"c","image":format!("registry.example.com/{}:1", app.name),
                    "imageID":"","ready":true,"restartCount":0,"started":true,
                    "state":{"running":{"startedAt":T0}}}]}}),
        )?;
    }
    Ok(())
}
