//! A deterministic synthetic cluster generator for benchmarks and scale tests.
//!
//! Realistic shapes: three zones, some tainted and cordoned nodes, Deployments with 1–20 replicas
//! (with their ReplicaSets), two DaemonSets, skewed requests, topology spread constraints,
//! anti-affinity, node affinity, PDBs, failed and restarting pods. The same seed always produces the
//! same cluster.

use std::io::Write;

use serde_json::{Value, json};

/// A small deterministic PRNG (SplitMix64).
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Number of nodes.
    pub nodes: usize,
    /// Approximate number of pods (DaemonSet pods included).
    pub pods: usize,
    /// Seed.
    pub seed: u64,
}

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// Writes the cluster as one Kubernetes `List` in JSON to `out`, item by item.
pub fn write_cluster(shape: Shape, out: &mut impl Write) -> std::io::Result<()> {
    let mut rng = Rng::new(shape.seed);
    out.write_all(b"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{},\"items\":[")?;
    let mut items = Items { out, first: true };
    write_cluster_scoped(&mut items)?;
    write_nodes(shape, &mut rng, &mut items)?;
    let mut pods_left = shape.pods as i64 - write_daemon_set_pods(shape, &mut rng, &mut items)?;
    // Deployments with 1–20 replicas until the pod budget is spent.
    let mut d = 0usize;
    while pods_left > 0 {
        pods_left -= write_deployment(shape, d, pods_left as u64, &mut rng, &mut items)? as i64;
        d += 1;
    }
    items.out.write_all(b"]}\n")?;
    Ok(())
}

/// The `items` array being written: objects separated by `,` and a newline.
struct Items<'w, W: Write> {
    out: &'w mut W,
    first: bool,
}

impl<W: Write> Items<'_, W> {
    fn emit(&mut self, v: Value) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut *self.out, &v).map_err(std::io::Error::other)
    }
}

/// The namespaces and the priority class.
fn write_cluster_scoped<W: Write>(items: &mut Items<'_, W>) -> std::io::Result<()> {
    for ns in [
        "default",
        "kube-system",
        "team-a",
        "team-b",
        "team-c",
        "batch",
    ] {
        items.emit(
            json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns,"labels":{"kubernetes.io/metadata.name":ns}}}),
        )?;
    }
    items.emit(
        json!({"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"high"},"value":100000}),
    )
}

/// Nodes: capacity varies; 3% tainted for a dedicated pool, 1% cordoned, 1% NotReady.
fn write_nodes<W: Write>(
    shape: Shape,
    rng: &mut Rng,
    items: &mut Items<'_, W>,
) -> std::io::Result<()> {
    for i in 0..shape.nodes {
        let cpu = [16u64, 32, 64][rng.below(3) as usize];
        let mut spec = json!({});
        if rng.chance(3) {
            spec["taints"] = json!([{"key":"dedicated","value":"batch","effect":"NoSchedule"}]);
        }
        if rng.chance(1) {
            spec["unschedulable"] = json!(true);
        }
        let ready = if rng.chance(1) { "False" } else { "True" };
        let disk = if rng.chance(50) { "ssd" } else { "hdd" };
        items.emit(
            json!({"apiVersion":"v1","kind":"Node","metadata":{"name":format!("node-{i}"),"labels":{
                "kubernetes.io/hostname":format!("node-{i}"),"topology.kubernetes.io/zone":ZONES[i % 3],"disktype":disk}},
              "spec":spec,
              "status":{"allocatable":{"cpu":cpu.to_string(),"memory":format!("{}Gi",cpu*4),"pods":"110"},
                        "conditions":[{"type":"Ready","status":ready}]}}),
        )?;
    }
    Ok(())
}

/// DaemonSets: two pods per node. Returns the number of pods written.
fn write_daemon_set_pods<W: Write>(
    shape: Shape,
    rng: &mut Rng,
    items: &mut Items<'_, W>,
) -> std::io::Result<i64> {
    let mut written = 0;
    for (ds, cpu) in [("kube-proxy", "100m"), ("node-exporter", "50m")] {
        for i in 0..shape.nodes {
            let name = format!("{ds}-{i}");
            items.emit(pod_json(
                &name,
                "kube-system",
                &format!("node-{i}"),
                ("DaemonSet", ds, &format!("ds-{ds}")),
                json!({"app": ds}),
                cpu,
                "64Mi",
                rng,
                json!({"tolerations":[{"operator":"Exists"}]}),
            ))?;
            written += 1;
        }
    }
    Ok(written)
}

/// Deployment number `d` with its ReplicaSet, maybe a PDB, and at most `pods_left` pods. Returns
/// the number of pods written.
fn write_deployment<W: Write>(
    shape: Shape,
    d: usize,
    pods_left: u64,
    rng: &mut Rng,
    items: &mut Items<'_, W>,
) -> std::io::Result<usize> {
    let ns = ["default", "team-a", "team-b", "team-c", "batch"][d % 5];
    let app = format!("app-{d}");
    let replicas = (1 + rng.below(20)).min(pods_left) as usize;
    let hash = format!("{:08x}", rng.next_u64() as u32);
    let rs_name = format!("{app}-{hash}");
    let labels = json!({"app": app, "pod-template-hash": hash});
    items.emit(
        json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":app,"namespace":ns,"uid":format!("dep-{d}"),
        "annotations":{"deployment.kubernetes.io/revision":"1"}},
        "spec":{"replicas":replicas,"selector":{"matchLabels":{"app":app}},"template":{"metadata":{"labels":{"app":app}},"spec":{"containers":[{"name":"c","image":"img"}]}}},
        "status":{"replicas":replicas,"readyReplicas":replicas,"availableReplicas":replicas,"updatedReplicas":replicas}}),
    )?;
    items.emit(
        json!({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":rs_name,"namespace":ns,"uid":format!("rs-{d}"),"labels":labels,
        "annotations":{"deployment.kubernetes.io/revision":"1"},
        "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":app,"uid":format!("dep-{d}"),"controller":true}]},
        "spec":{"replicas":replicas,"selector":{"matchLabels":labels}},"status":{"replicas":replicas,"readyReplicas":replicas}}),
    )?;
    if replicas > 2 && rng.chance(20) {
        items.emit(
            json!({"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":app,"namespace":ns},
            "spec":{"maxUnavailable":1,"selector":{"matchLabels":{"app":app}}},
            "status":{"currentHealthy":replicas,"desiredHealthy":replicas-1,"expectedPods":replicas,"disruptionsAllowed":1}}),
        )?;
    }
    let extra = scheduling_features(&app, rng);
    // Requests skew: most pods small, some large.
    let (cpu, mem) = match rng.below(10) {
        0..=5 => ("100m", "128Mi"),
        6..=7 => ("500m", "1Gi"),
        8 => ("1", "2Gi"),
        _ => ("2", "8Gi"),
    };
    // Placement: clustered on a few "hot" nodes for a third of the Deployments.
    let hot = rng.chance(33);
    let base = rng.below(shape.nodes as u64) as usize;
    for r in 0..replicas {
        let node = if hot {
            (base + r % 3) % shape.nodes
        } else {
            rng.below(shape.nodes as u64) as usize
        };
        let name = format!("{rs_name}-{r}");
        let mut p = pod_json(
            &name,
            ns,
            &format!("node-{node}"),
            ("ReplicaSet", &rs_name, &format!("rs-{d}")),
            labels.clone(),
            cpu,
            mem,
            rng,
            extra.clone(),
        );
        if let Some(obj) = p.as_object_mut()
            && rng.chance(1)
        {
            obj["status"] = json!({"phase":"Failed","reason":"Error","startTime":"2025-12-01T00:00:00Z",
                "containerStatuses":[{"name":"c","image":"img","imageID":"","ready":false,"restartCount":0,
                "state":{"terminated":{"reason":"Error","exitCode":1}}}]});
        }
        items.emit(p)?;
    }
    Ok(replicas)
}

/// A Deployment's scheduling features in its pods' spec: a zone spread constraint (20 %),
/// hostname anti-affinity (10 %), required and preferred node affinity (8 %) or none.
fn scheduling_features(app: &str, rng: &mut Rng) -> Value {
    let mut extra = json!({});
    let roll = rng.below(100);
    if roll < 20 {
        extra["topologySpreadConstraints"] = json!([{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone",
            "whenUnsatisfiable": if rng.chance(70) {"DoNotSchedule"} else {"ScheduleAnyway"},"labelSelector":{"matchLabels":{"app":app}}}]);
    } else if roll < 30 {
        extra["affinity"] = json!({"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
            {"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app":app}}}]}});
    } else if roll < 38 {
        extra["affinity"] = json!({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
            {"matchExpressions":[{"key":"disktype","operator":"In","values":["ssd"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution":[{"weight":50,"preference":{"matchExpressions":[{"key":"topology.kubernetes.io/zone","operator":"In","values":["zone-a"]}]}}]}});
    }
    extra
}

/// Bumped whenever [`write_cluster`] writes something else for the same [`Shape`], so that files
/// cached by [`cached_cluster_file`] under an older generator are written again.
pub const GENERATOR_VERSION: u32 = 1;

/// The cluster of `shape` as a file in `dir`, named by its parameters
/// (`cluster-NODES-PODS-sSEED-gVERSION.json`) and written only when no such file exists. The
/// cluster is streamed to the file item by item (never held in memory) and written under a
/// temporary name first, so an interrupted write leaves no file that looks complete.
pub fn cached_cluster_file(
    dir: &std::path::Path,
    shape: Shape,
) -> std::io::Result<std::path::PathBuf> {
    let name = format!(
        "cluster-{}-{}-s{}-g{GENERATOR_VERSION}.json",
        shape.nodes, shape.pods, shape.seed
    );
    let file = dir.join(name);
    if file.exists() {
        return Ok(file);
    }
    std::fs::create_dir_all(dir)?;
    let tmp = file.with_extension(format!("partial-{}", std::process::id()));
    let written = (|| {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        write_cluster(shape, &mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    match written.and_then(|()| std::fs::rename(&tmp, &file)) {
        Ok(()) => Ok(file),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(std::io::Error::new(
                e.kind(),
                format!("writing {}: {e}", file.display()),
            ))
        }
    }
}

/// A Node as kube-apiserver serves it from a real cluster, with `images` images (two names
/// each), managed fields, annotations, addresses and node info: most of its text is what the
/// engine never reads. Tainted `NoSchedule` and cordoned.
pub fn served_node(name: &str, images: usize) -> Value {
    let images: Vec<_> = (0..images)
        .map(|i| {
            json!({"names": [format!("registry.example.com/team/app-{i}@sha256:{i:064}"),
                                  format!("registry.example.com/team/app-{i}:v{i}")],
                         "sizeBytes": 123_456_789 + i})
        })
        .collect();
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {
            "name": name, "uid": format!("uid-{name}"), "resourceVersion": "42",
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "a",
                       "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.2xlarge"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-27T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}}}}]
        },
        "spec": {"podCIDR": "10.0.1.0/24", "providerID": "aws:///eu-west-1a/i-0123",
                 "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
                 "unschedulable": true},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "7800m", "memory": "30Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "lastHeartbeatTime": "2026-11-27T00:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.1.5"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1",
                         "osImage": "Linux", "containerRuntimeVersion": "containerd://1.7",
                         "kubeletVersion": "v1.32.0", "kubeProxyVersion": "v1.32.0",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "images": images
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn pod_json(
    name: &str,
    ns: &str,
    node: &str,
    owner: (&str, &str, &str),
    labels: Value,
    cpu: &str,
    mem: &str,
    rng: &mut Rng,
    extra: Value,
) -> Value {
    let restarts = if rng.chance(2) { 5 + rng.below(200) } else { 0 };
    let age_days = 1 + rng.below(30);
    let start = format!("2026-01-{:02}T00:00:00Z", 31 - age_days.min(30));
    let mut spec = json!({"nodeName": node, "containers":[{"name":"c","image":format!("registry.example.com/{}:1", owner.1),
        "resources":{"requests":{"cpu":cpu,"memory":mem}}}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":ns,"uid":format!("uid-{ns}-{name}"),"labels":labels,
        "ownerReferences":[{"apiVersion":"apps/v1","kind":owner.0,"name":owner.1,"uid":owner.2,"controller":true}]},
      "spec":spec,
      "status":{"phase":"Running","startTime":start,"conditions":[{"type":"Ready","status":"True"}],
        "containerStatuses":[{"name":"c","image":"img","imageID":"","ready":true,"restartCount":restarts,
          "state": if restarts > 100 { json!({"waiting":{"reason":"CrashLoopBackOff"}}) } else { json!({"running":{}}) }}]}})
}

/// `json`, a cluster from [`write_cluster`] (which writes no creation times), with a
/// `"creationTimestamp"` on every pod: pod i is `(i * 7919) % 40 days + i % 97` seconds old at
/// `now`, so ages spread over hours and days and some are equal.
pub fn with_creation_times(json: &[u8], now: jiff::Timestamp) -> Vec<u8> {
    let needle = b"\"uid\":\"uid-";
    let now = now.as_second();
    let mut out = Vec::with_capacity(json.len() + json.len() / 10);
    let mut i: i64 = 0;
    let mut rest = json;
    while let Some(at) = rest.windows(needle.len()).position(|w| w == needle) {
        out.extend_from_slice(&rest[..at]);
        let age = (i * 7919) % (40 * 86400) + i % 97;
        let t = jiff::Timestamp::from_second(now - age).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let field = format!(
            "\"creationTimestamp\":\"{}\",",
            t.strftime("%Y-%m-%dT%H:%M:%SZ")
        );
        out.extend_from_slice(field.as_bytes());
        out.extend_from_slice(needle);
        rest = &rest[at + needle.len()..];
        i += 1;
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_loadable() {
        let shape = Shape {
            nodes: 20,
            pods: 600,
            seed: 7,
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        write_cluster(shape, &mut a).unwrap();
        write_cluster(shape, &mut b).unwrap();
        assert_eq!(a, b, "same seed, same cluster");
        let snap = crate::snapshot::load::load_bytes(&a).unwrap();
        assert_eq!(snap.nodes.len(), 20);
        assert!(
            (595..=600).contains(&snap.pods.len()),
            "{}",
            snap.pods.len()
        );
        assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);
        assert!(
            snap.pods
                .iter()
                .any(|p| !p.topology_spread_constraints.is_empty())
        );
        assert!(snap.pods.iter().any(|p| p.affinity.is_some()));
        assert!(!snap.deployments.is_empty() && !snap.replica_sets.is_empty());
    }

    #[test]
    fn cached_file_is_written_once_by_its_parameters() {
        let dir = tempfile::tempdir().unwrap();
        let shape = Shape {
            nodes: 6,
            pods: 50,
            seed: 3,
        };
        let file = cached_cluster_file(dir.path(), shape).unwrap();
        assert_eq!(
            file.file_name().and_then(|n| n.to_str()),
            Some(format!("cluster-6-50-s3-g{GENERATOR_VERSION}.json").as_str())
        );
        let mut expected = Vec::new();
        write_cluster(shape, &mut expected).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), expected);
        // A cached file is reused as it is, not written again.
        std::fs::write(&file, b"kept").unwrap();
        assert_eq!(cached_cluster_file(dir.path(), shape).unwrap(), file);
        assert_eq!(std::fs::read(&file).unwrap(), b"kept");
        let other = cached_cluster_file(dir.path(), Shape { seed: 4, ..shape }).unwrap();
        assert_ne!(other, file);
        let names = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 2, "no temporary file is left");
    }
}
