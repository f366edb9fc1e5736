//! `RUN_SCALE_STATE=1`: the cluster state alone, in this process (no API server, no engine).
//!
//! Fills a [`ClusterState`] with the synthetic cluster as list pages would, then repeats: change
//! 1 % of the pods as the steady-state driver does (a third flip their Ready condition, a third
//! are deleted, a third are new copies under new names), take a snapshot, drop it. Prints the
//! snapshot time and the allocator's bytes in use after each round. Both are the state's own
//! costs; under `valgrind --tool=callgrind --toggle-collect='*ClusterState*snapshot*'` the
//! instruction count of the snapshots is a load-independent measure.

use std::time::Instant;

use kube_descheduler::cluster::kinds::Kind;
use kube_descheduler::cluster::state::ClusterState;
use serde_json::Value;

fn kind_of(v: &Value) -> Option<Kind> {
    Some(match v["kind"].as_str()? {
        "Node" => Kind::Node,
        "Pod" => Kind::Pod,
        "Namespace" => Kind::Namespace,
        "PodDisruptionBudget" => Kind::PodDisruptionBudget,
        "PriorityClass" => Kind::PriorityClass,
        "PersistentVolumeClaim" => Kind::PersistentVolumeClaim,
        "ReplicaSet" => Kind::ReplicaSet,
        "Deployment" => Kind::Deployment,
        "StatefulSet" => Kind::StatefulSet,
        "Job" => Kind::Job,
        "HorizontalPodAutoscaler" => Kind::HorizontalPodAutoscaler,
        _ => return None,
    })
}

/// Bytes the allocator has handed out and not got back (glibc), in MiB.
fn heap_mib() -> f64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's own statistics.
        let m = unsafe { libc::mallinfo2() };
        (m.uordblks + m.hblkhd) as f64 / (1024.0 * 1024.0)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        0.0
    }
}

fn key_of(p: &Value) -> String {
    format!(
        "{}/{}",
        p.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(""),
        p.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    )
}

/// Runs the state-only measurement on `objects` for `rounds` rounds.
pub fn run(objects: Vec<Value>, rounds: usize) {
    let state = ClusterState::new(None);
    let started = Instant::now();
    let mut pods: Vec<Value> = Vec::new();
    for kind in Kind::ALL {
        state.begin_list(kind);
        let raws: Vec<String> = objects
            .iter()
            .filter(|o| kind_of(o) == Some(kind))
            .map(|o| o.to_string())
            .collect();
        for page in raws.chunks(500) {
            state.upsert(kind, page.iter().map(String::as_str));
        }
        state.end_list(kind);
        if kind == Kind::Pod {
            pods = objects
                .iter()
                .filter(|o| kind_of(o) == Some(Kind::Pod))
                .cloned()
                .collect();
        }
    }
    drop(objects);
    let (nodes, pod_count) = state.counts();
    println!(
        "cluster state: {nodes} nodes / {pod_count} pods listed in {:.2} s; heap in use {:.1} MiB",
        started.elapsed().as_secs_f64(),
        heap_mib()
    );
    let per_round = (pod_count / 100).max(3);
    let mut counter = 0usize;
    println!("\n| round | snapshot ms | heap in use MiB |");
    println!("|---:|---:|---:|");
    for r in 0..=rounds {
        if r > 0 {
            for i in 0..per_round {
                counter += 1;
                let idx = (counter * 7919) % pods.len().max(1);
                match i % 3 {
                    0 => {
                        let p = &mut pods[idx];
                        flip_ready(p);
                        state.upsert(Kind::Pod, [p.to_string().as_str()]);
                    }
                    1 => {
                        let p = pods.swap_remove(idx);
                        state.remove(Kind::Pod, &key_of(&p));
                    }
                    _ => {
                        let mut p = pods[idx].clone();
                        if let Some(m) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                            let name = format!("bench-{counter}");
                            m.insert("uid".into(), Value::from(format!("uid-{name}")));
                            m.insert("name".into(), Value::from(name));
                        }
                        state.upsert(Kind::Pod, [p.to_string().as_str()]);
                        pods.push(p);
                    }
                }
            }
        }
        let t = Instant::now();
        let snap = state.snapshot();
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        std::hint::black_box(&snap);
        drop(snap);
        kube_descheduler::memory::release_free_memory();
        println!("| {r} | {ms:.1} | {:.1} |", heap_mib());
    }
}

/// Flips the pod's Ready condition (True ↔ False), as a kubelet's probe would.
pub fn flip_ready(pod: &mut Value) {
    if let Some(conds) = pod
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conds.iter_mut() {
            if c["type"] == "Ready" {
                let flipped = if c["status"] == "True" {
                    "False"
                } else {
                    "True"
                };
                c["status"] = Value::from(flipped);
            }
        }
    }
}
