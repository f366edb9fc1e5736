//! The synthetic cluster with what the ABI v1.1 ports read made varied, deterministically: node
//! taints of several keys, values and effects (numeric values for `Lt`/`Gt`), pod tolerations of
//! every operator, pod conditions with transition times, terminated app and init containers with
//! exit codes, and second (non-controller) owner references.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{NOW, synthetic};

/// Node taint sets, picked by node index (most nodes keep the synthetic cluster's own).
fn taints(i: u64) -> Option<Value> {
    Some(match i % 11 {
        0 => json!([{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]),
        1 => json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        2 => json!([{"key": "soft", "effect": "PreferNoSchedule"}]),
        3 => json!([{"key": "gpu", "effect": "NoSchedule"}]),
        4 => json!([{"key": "maint", "value": "yes", "effect": "NoExecute"}]),
        5 => json!([{"key": "level", "value": "5", "effect": "NoSchedule"}]),
        6 => json!([{"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
                     {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]),
        _ => return None,
    })
}

/// Pod toleration sets, picked by pod index.
fn tolerations(j: u64) -> Option<Value> {
    Some(match j % 9 {
        0 => json!([{"key": "dedicated", "operator": "Exists"}]),
        1 => json!([{"key": "dedicated", "value": "batch"}]),
        2 => {
            json!([{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}])
        }
        3 => json!([{"operator": "Exists", "effect": "PreferNoSchedule"}]),
        4 => json!([{"key": "level", "operator": "Gt", "value": "3"}]),
        5 => {
            json!([{"key": "level", "operator": "Lt", "value": "3"}, {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}])
        }
        _ => return None,
    })
}

fn at(now: i64, ago: i64) -> String {
    jiff::Timestamp::from_second(now - ago)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Pod conditions, picked by pod index.
fn conditions(j: u64, now: i64) -> Value {
    let ago = ((j * 7907) % 7200) as i64;
    match j % 5 {
        0 => {
            json!([{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": at(now, ago)}])
        }
        1 => json!([{"type": "Ready", "status": "True", "lastTransitionTime": at(now, ago)},
                     {"type": "PodScheduled", "status": "True"}]),
        2 => json!([{"type": "Ready", "status": "False"}]),
        _ => json!([{"type": "Ready", "status": "True"}]),
    }
}

/// Makes pod `j` varied (tolerations, conditions, container states, owners).
fn vary_pod(pod: &mut Value, j: u64, now: i64) {
    if let Some(t) = tolerations(j)
        && pod["metadata"]["namespace"] != "kube-system"
    {
        pod["spec"]["tolerations"] = t;
    }
    pod["status"]["conditions"] = conditions(j, now);
    let code = [0, 1, 2, 137][(j % 4) as usize];
    if j.is_multiple_of(6) {
        pod["status"]["containerStatuses"][0]["state"] =
            json!({"terminated": {"reason": "Error", "exitCode": code}});
    }
    if j.is_multiple_of(7) {
        pod["status"]["initContainerStatuses"] = json!([{"name": "init", "image": "img",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"reason": "Completed", "exitCode": (code + 1) % 3}}}]);
    }
    if j.is_multiple_of(8)
        && let Some(owners) = pod["metadata"]["ownerReferences"].as_array_mut()
    {
        owners.push(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "name": "wf", "uid": format!("wf-{j}")}),
        );
    }
}

/// The synthetic cluster of [`synthetic`] made varied (see the module), written to `dir`.
pub fn varied(dir: &Path, nodes: usize, pods: usize, seed: u64) -> PathBuf {
    let plain = synthetic(dir, nodes, pods, seed);
    let text = std::fs::read(&plain).expect("read the synthetic cluster");
    let mut list: Value = serde_json::from_slice(&text).expect("the synthetic cluster is JSON");
    let now = NOW.parse::<jiff::Timestamp>().expect("NOW").as_second();
    let (mut i, mut j) = (0u64, 0u64);
    for item in list["items"].as_array_mut().into_iter().flatten() {
        match item["kind"].as_str() {
            Some("Node") => {
                if let Some(t) = taints(i) {
                    item["spec"]["taints"] = t;
                }
                i += 1;
            }
            Some("Pod") => {
                vary_pod(item, j, now);
                j += 1;
            }
            _ => {}
        }
    }
    let path = dir.join(format!("varied-{nodes}-{pods}-{seed}.json"));
    std::fs::write(&path, serde_json::to_vec(&list).expect("encode")).expect("write");
    path
}
