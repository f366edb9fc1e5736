//! The benches' knobs (a cluster size and numbers read from the environment) and what they share:
//! the synthetic cluster file, a child's outputs, a process's memory.
#![allow(dead_code)]

/// The cluster size in `var` as `NODESxPODS` (e.g. `1000x30000`); 5,000 nodes and 150,000 pods
/// when it is unset or not of that form.
pub fn size_from_env(var: &str) -> (usize, usize) {
    std::env::var(var)
        .ok()
        .and_then(|s| {
            let (n, p) = s.split_once('x')?;
            Some((n.trim().parse().ok()?, p.trim().parse().ok()?))
        })
        .unwrap_or((5000, 150_000))
}

/// The number in `var`, or `default` when it is unset or not a number.
pub fn env_number<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The middle value of `v` (sorted in place); zero when `v` is empty.
pub fn median(v: &mut [std::time::Duration]) -> std::time::Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// `target/bench-data/cluster-NODES-PODS.json`: the synthetic cluster (seed 42, as `plan_scale`
/// and `run_scale` use it), generated on first use through a temporary file and reused after.
pub fn cluster_file(nodes: usize, pods: usize) -> Result<std::path::PathBuf, String> {
    use std::io::Write;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("bench-data");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = dir.join(format!("cluster-{nodes}-{pods}.json"));
    if file.exists() {
        return Ok(file);
    }
    let tmp = file.with_extension("json.tmp");
    let f =
        std::fs::File::create(&tmp).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    let mut out = std::io::BufWriter::new(f);
    let shape = kube_descheduler::synth::Shape {
        nodes,
        pods,
        seed: 42,
    };
    kube_descheduler::synth::write_cluster(shape, &mut out)
        .and_then(|()| out.flush())
        .map_err(|e| format!("generating {}: {e}", tmp.display()))?;
    drop(out);
    std::fs::rename(&tmp, &file).map_err(|e| format!("renaming {}: {e}", tmp.display()))?;
    Ok(file)
}

/// The items of a List (`{"kind": "List", "items": […]}`) written as JSON, as the synthetic
/// cluster writes it; the JSON is dropped once parsed.
pub fn list_items(json: Vec<u8>) -> Result<Vec<serde_json::Value>, String> {
    let mut list: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| format!("cluster JSON: {e}"))?;
    drop(json);
    match list.get_mut("items").map(serde_json::Value::take) {
        Some(serde_json::Value::Array(items)) => Ok(items),
        _ => Err("the synthetic cluster has no items".into()),
    }
}

/// The child's piped stdout and stderr (those it has), each to be read on its own thread.
pub fn child_outputs(child: &mut std::process::Child) -> Vec<Box<dyn std::io::Read + Send>> {
    let out = child
        .stdout
        .take()
        .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>);
    let err = child
        .stderr
        .take()
        .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>);
    out.into_iter().chain(err).collect()
}

/// The objects of the synthetic cluster of `kube_descheduler::synth` (`nodes`, `pods`, `seed`).
pub fn synth_objects(
    nodes: usize,
    pods: usize,
    seed: u64,
) -> Result<Vec<serde_json::Value>, String> {
    let mut json = Vec::new();
    kube_descheduler::synth::write_cluster(
        kube_descheduler::synth::Shape { nodes, pods, seed },
        &mut json,
    )
    .map_err(|e| format!("synth: {e}"))?;
    list_items(json)
}

/// Field `field` (e.g. `"VmHWM:"`) of `/proc/<pid>/status`, in KiB; `None` when the process or
/// the field is gone.
pub fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// All ten plugins (`benches/all-plugins-policy.yaml`) with the eviction limits of a production
/// run: 5 per node and 2,000 in total (the scale benches' "limited" policy).
pub fn limited_policy_text(root: &std::path::Path) -> Result<String, String> {
    let path = root.join("benches/all-plugins-policy.yaml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    const PER_NODE: &str = "maxNoOfPodsToEvictPerNode: 10";
    if !text.contains(PER_NODE) {
        return Err(format!("{} has no `{PER_NODE}` line", path.display()));
    }
    Ok(text.replace(
        PER_NODE,
        "maxNoOfPodsToEvictPerNode: 5\nmaxNoOfPodsToEvictTotal: 2000",
    ))
}
