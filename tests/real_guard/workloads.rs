//! Workloads on the shared cluster: Deployments placed on chosen nodes, readiness sampling, and
//! serialized `kubectl drain` runs.

use super::*;

/// Drains one at a time on the shared cluster (every node is cordoned and uncordoned in turn).
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn nodes(c: &Cluster) -> Vec<String> {
    let out = kubectl_ok(c, &["get", "nodes", "-o", "name"]);
    out.stdout
        .lines()
        .map(|l| l.trim_start_matches("node/").to_owned())
        .collect()
}

pub(crate) fn deployment(ns: &str, name: &str, replicas: u32, annotations: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name},
                     "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    })
}

pub(crate) fn pods(c: &Cluster, ns: &str, app: &str) -> Vec<Value> {
    let v = kubectl_json(c, &["get", "pods", "-n", ns, "-l", &format!("app={app}")]);
    v["items"].as_array().cloned().unwrap_or_default()
}

pub(crate) fn is_ready(p: &Value) -> bool {
    p["metadata"]["deletionTimestamp"].is_null()
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

pub(crate) fn node_of(p: &Value) -> &str {
    p["spec"]["nodeName"].as_str().unwrap_or("")
}

/// Creates `objects` (a Deployment of `replicas` and more) with every pod on `node`: the other
/// nodes are cordoned until the pods are Ready there.
pub(crate) fn place_on(
    c: &Cluster,
    node: &str,
    ns: &str,
    app: &str,
    replicas: usize,
    objects: &[Value],
) {
    place_on_nodes(c, &[node], ns, app, replicas, objects)
}

/// [`place_on`] with every pod on one of `on`.
pub(crate) fn place_on_nodes(
    c: &Cluster,
    on: &[&str],
    ns: &str,
    app: &str,
    replicas: usize,
    objects: &[Value],
) {
    let _ = c.kubectl(&["create", "namespace", ns]);
    let others: Vec<String> = nodes(c)
        .into_iter()
        .filter(|n| !on.contains(&n.as_str()))
        .collect();
    for n in &others {
        kubectl_ok(c, &["cordon", n]);
    }
    for n in on {
        kubectl_ok(c, &["uncordon", n]);
    }
    for o in objects {
        c.apply(&o.to_string());
    }
    wait_until(
        &format!("{replicas} Ready pods of {app} on {on:?}"),
        Duration::from_secs(90),
        || {
            let p = pods(c, ns, app);
            p.len() == replicas && p.iter().all(|p| is_ready(p) && on.contains(&node_of(p)))
        },
    );
    wait_until(
        &format!("{app}'s status: {replicas} Ready"),
        Duration::from_secs(60),
        || {
            let d = kubectl_json(c, &["get", "deployment", app, "-n", ns]);
            d["status"]["readyReplicas"].as_u64() == Some(replicas as u64)
                && d["status"]["updatedReplicas"].as_u64() == Some(replicas as u64)
        },
    );
    for n in &others {
        kubectl_ok(c, &["uncordon", n]);
    }
}

/// What the sampler saw.
#[derive(Debug, Default, Clone)]
pub(crate) struct Series {
    pub(crate) samples: usize,
    pub(crate) min_ready_pods: usize,
    pub(crate) min_ready_replicas: i64,
    /// Longest stretch with no Ready (not terminating) pod.
    pub(crate) longest_zero: Duration,
}

/// Samples the Ready pods and `status.readyReplicas` of a Deployment as fast as kubectl answers.
pub(crate) struct Sampler {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) task: std::thread::JoinHandle<Series>,
}

impl Sampler {
    pub(crate) fn start(c: &'static Cluster, ns: &str, app: &str) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, app, flag) = (ns.to_owned(), app.to_owned(), stop.clone());
        let task = std::thread::spawn(move || {
            let mut s = Series {
                min_ready_pods: usize::MAX,
                min_ready_replicas: i64::MAX,
                ..Default::default()
            };
            let mut zero_since: Option<Instant> = None;
            while !flag.load(Ordering::Relaxed) {
                let out = c.kubectl(&[
                    "get",
                    "deployment,pods",
                    "-n",
                    &ns,
                    "-l",
                    &format!("app={app}"),
                    "-o",
                    "json",
                ]);
                let Ok(v) = serde_json::from_str::<Value>(&out.stdout) else {
                    continue;
                };
                let items = v["items"].as_array().cloned().unwrap_or_default();
                let now = Instant::now();
                let ready = items
                    .iter()
                    .filter(|o| o["kind"] == "Pod" && is_ready(o))
                    .count();
                let replicas = items
                    .iter()
                    .find(|o| o["kind"] == "Deployment")
                    .map(|d| d["status"]["readyReplicas"].as_i64().unwrap_or(0))
                    .unwrap_or(0);
                s.samples += 1;
                s.min_ready_pods = s.min_ready_pods.min(ready);
                s.min_ready_replicas = s.min_ready_replicas.min(replicas);
                if ready == 0 {
                    let since = *zero_since.get_or_insert(now);
                    s.longest_zero = s.longest_zero.max(now - since);
                } else {
                    zero_since = None;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            s
        });
        Sampler { stop, task }
    }

    pub(crate) fn finish(self) -> Series {
        self.stop.store(true, Ordering::Relaxed);
        self.task.join().expect("sampler")
    }
}

pub(crate) struct Drain {
    pub(crate) out: Out,
    pub(crate) elapsed: Duration,
}

impl Drain {
    pub(crate) fn all(&self) -> String {
        format!("{}\n{}", self.out.stdout, self.out.stderr)
    }
}

pub(crate) fn drain(c: &Cluster, bin: &Path, node: &str, selector: &str, timeout: &str) -> Drain {
    let start = Instant::now();
    let out = c.kubectl_with(
        bin,
        &[
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            &format!("--pod-selector={selector}"),
            &format!("--timeout={timeout}"),
        ],
    );
    Drain {
        out,
        elapsed: start.elapsed(),
    }
}

pub(crate) fn slug(label: &str) -> String {
    label.replace('.', "-")
}
