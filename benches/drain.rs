//! Drain benchmark: `kubectl drain` of a node holding N single-replica Deployments (default 20)
//! in kube-sim, with our real webhook binary registered, then (unless `--no-baseline`) the same
//! drain without it. A second shape (unless `--no-multi`): a node holding 10 three-replica
//! Deployments, every replica on it (the guard's rule A).
//!
//! `cargo bench --bench drain [-- --deployments 20 --no-baseline --no-multi]`
//!
//! Reports the drain's wall time, the longest time any Deployment had 0 serving pods (Ready and
//! not terminating; sampled every 100 ms), and the slowest replacement pod start (pod created →
//! Ready, sampled every 50 ms). Goal with the guard: 0 s without serving pods, and a drain no
//! longer than the slowest pod start + 2 × kubectl's 5 s eviction retry.

#[path = "../tests/e2e_common/mod.rs"]
mod e2e_common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e_common::*;
use kube_sim::SimHandle;

struct Args {
    deployments: usize,
    baseline: bool,
    multi: bool,
}

fn args() -> Args {
    let mut a = Args {
        deployments: 20,
        baseline: true,
        multi: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--deployments" => {
                a.deployments = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .unwrap_or_else(|| {
                        eprintln!("--deployments needs a positive number");
                        std::process::exit(2)
                    })
            }
            "--no-baseline" => a.baseline = false,
            "--no-multi" => a.multi = false,
            // cargo passes --bench; ignore what we do not know.
            _ => {}
        }
    }
    a
}

/// First-seen and first-Ready instants of every pod uid, sampled every 50 ms.
struct PodStarts {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<HashMap<String, (Instant, Option<Instant>)>>,
}

impl PodStarts {
    fn start(sim: &SimHandle) -> PodStarts {
        let sim = sim.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let task = tokio::spawn(async move {
            let mut seen: HashMap<String, (Instant, Option<Instant>)> = HashMap::new();
            let initial: Vec<String> = sim
                .list("v1", "Pod", Some(NS))
                .iter()
                .filter_map(|p| p["metadata"]["uid"].as_str().map(String::from))
                .collect();
            while !stop2.load(Ordering::Acquire) {
                let now = Instant::now();
                for p in sim.list("v1", "Pod", Some(NS)) {
                    let Some(uid) = p["metadata"]["uid"].as_str() else {
                        continue;
                    };
                    if initial.iter().any(|u| u == uid) {
                        continue;
                    }
                    let e = seen.entry(uid.to_string()).or_insert((now, None));
                    if e.1.is_none() && is_ready(&p) {
                        e.1 = Some(now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            seen
        });
        PodStarts { stop, task }
    }

    /// (replacement pods, slowest start, pods never Ready).
    async fn finish(self) -> (usize, Duration, usize) {
        self.stop.store(true, Ordering::Release);
        let seen = self.task.await.unwrap_or_default();
        let slowest = seen
            .values()
            .filter_map(|(a, b)| b.map(|b| b - *a))
            .max()
            .unwrap_or_default();
        let never = seen.values().filter(|(_, b)| b.is_none()).count();
        (seen.len(), slowest, never)
    }
}

struct Measured {
    drain: Duration,
    ok: bool,
    longest_zero: Duration,
    min_ready: usize,
    new_pods: usize,
    slowest_start: Duration,
}

async fn measure(n: usize, replicas: usize, guard: bool) -> Measured {
    let mut objects = vec![
        node("drain-me", true),
        node("spare-1", false),
        node("spare-2", false),
        node("spare-3", false),
    ];
    let apps: Vec<String> = (0..n).map(|i| format!("app-{i:02}")).collect();
    for a in &apps {
        objects.push(deployment(a, replicas as i64, Strategy::Default));
    }
    let cluster = Cluster::start(objects).await;
    let want: Vec<(&str, usize)> = apps.iter().map(|a| (a.as_str(), replicas)).collect();
    cluster.wait_ready_on(&want, "drain-me").await;
    for s in ["spare-1", "spare-2", "spare-3"] {
        cluster.set_schedulable(s, true);
    }
    let webhook = if guard {
        Some(guarded(&cluster, &[]).await)
    } else {
        None
    };
    let app_refs: Vec<&str> = apps.iter().map(String::as_str).collect();
    let sampler = Sampler::start(&cluster.sim, &app_refs);
    let starts = PodStarts::start(&cluster.sim);
    let out = drain(&kubectl(), &cluster, "drain-me", "300s", &[]).await;
    // Let every replacement become Ready before stopping the samplers.
    let settled = tokio::time::timeout(Duration::from_secs(120), async {
        while apps
            .iter()
            .any(|a| ready_pods(&cluster.sim, a).len() != replicas)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    if settled.is_err() {
        eprintln!("warning: not every Deployment had a Ready pod 120 s after the drain");
    }
    let series = sampler.finish().await;
    let (new_pods, slowest_start, never) = starts.finish().await;
    if !out.ok {
        eprintln!("drain failed: {out:?}");
        if let Some((wh, _)) = &webhook {
            eprintln!("webhook logs:\n{}", wh.logs());
        }
    }
    if never > 0 {
        eprintln!("warning: {never} replacement pod(s) never became Ready");
    }
    Measured {
        drain: out.elapsed,
        ok: out.ok,
        longest_zero: series
            .iter()
            .map(|(_, s)| s.longest_zero)
            .max()
            .unwrap_or_default(),
        min_ready: series
            .iter()
            .map(|(_, s)| s.min_ready_pods)
            .min()
            .unwrap_or_default(),
        new_pods,
        slowest_start,
    }
}

fn main() {
    let a = args();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1)
        }
    };
    let mut shapes = vec![(a.deployments, 1)];
    if a.multi {
        shapes.push((10, 3));
    }
    for (deployments, replicas) in shapes {
        println!(
            "drain of a node holding {deployments} Deployment(s) of {replicas} replica(s), every replica on it (kube-sim, pod start {POD_START_SECONDS} s, grace period 1 s)"
        );
        println!(
            "| webhook | drain ok | drain wall s | longest 0-Ready s | min serving pods | replacement pods | slowest pod start s | goal: drain ≤ start + 10 s |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---|");
        let mut runs = vec![true];
        if a.baseline {
            runs.push(false);
        }
        for guard in runs {
            let m = rt.block_on(measure(deployments, replicas, guard));
            row(guard, &m);
        }
        println!();
    }
}

fn row(guard: bool, m: &Measured) {
    let goal = m.drain <= m.slowest_start + Duration::from_secs(10);
    println!(
        "| {} | {} | {:.2} | {:.2} | {} | {} | {:.2} | {} |",
        if guard { "kube-descheduler" } else { "none" },
        if m.ok { "yes" } else { "NO" },
        m.drain.as_secs_f64(),
        m.longest_zero.as_secs_f64(),
        m.min_ready,
        m.new_pods,
        m.slowest_start.as_secs_f64(),
        if !guard {
            "n/a"
        } else if goal && m.longest_zero.is_zero() {
            "met"
        } else {
            "NOT met"
        },
    );
}
