//! Sampling Ready replicas while a drain runs.

use super::*;

/// What the sampler saw for one Deployment.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Samples taken.
    pub samples: usize,
    /// Fewest serving pods (Ready, not terminating) in any sample.
    pub min_ready_pods: usize,
    /// Fewest `status.readyReplicas` of the Deployment in any sample.
    pub min_ready_replicas: i64,
    /// Longest stretch (wall time) with 0 serving pods.
    pub longest_zero: Duration,
}

/// Samples every 100 ms until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(String, Series)>>,
}

impl Sampler {
    /// Starts sampling the Deployments `apps` (in [`NS`]). Panics unless each one's status
    /// already reports its serving pods ([`deployment_settled`]; [`Cluster::wait_ready_on`] waits
    /// for that): a status still catching up would read as a drop to 0 Ready replicas.
    pub fn start(sim: &SimHandle, apps: &[&str]) -> Sampler {
        for app in apps {
            let serving = ready_pods(sim, app).len();
            let d = sim
                .get("apps/v1", "Deployment", NS, app)
                .unwrap_or(Value::Null);
            assert!(
                deployment_settled(&d, serving),
                "sampling {app} before its Deployment status reports its {serving} Ready pod(s): {}",
                d["status"]
            );
        }
        let sim = sim.clone();
        let apps: Vec<String> = apps.iter().map(|a| a.to_string()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let task = tokio::spawn(async move {
            let mut series: Vec<(String, Series, Option<Instant>)> = apps
                .into_iter()
                .map(|a| {
                    let s = Series {
                        min_ready_pods: usize::MAX,
                        min_ready_replicas: i64::MAX,
                        ..Default::default()
                    };
                    (a, s, None)
                })
                .collect();
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = Instant::now();
                let pods = sim.list("v1", "Pod", Some(NS));
                for (app, s, zero_since) in series.iter_mut() {
                    let ready = pods
                        .iter()
                        .filter(|p| {
                            p["metadata"]["labels"]["app"] == app.as_str()
                                && is_ready(p)
                                && !is_terminating(p)
                        })
                        .count();
                    let replicas = sim
                        .get("apps/v1", "Deployment", NS, app)
                        .and_then(|d| d.pointer("/status/readyReplicas").and_then(Value::as_i64))
                        .unwrap_or(0);
                    s.samples += 1;
                    s.min_ready_pods = s.min_ready_pods.min(ready);
                    s.min_ready_replicas = s.min_ready_replicas.min(replicas);
                    match (ready, *zero_since) {
                        (0, None) => *zero_since = Some(now),
                        (0, Some(t)) => s.longest_zero = s.longest_zero.max(now - t),
                        (_, Some(t)) => {
                            s.longest_zero = s.longest_zero.max(now - t);
                            *zero_since = None;
                        }
                        _ => {}
                    }
                }
                if stop2.load(Ordering::Acquire) {
                    break;
                }
            }
            series.into_iter().map(|(a, s, _)| (a, s)).collect()
        });
        Sampler { stop, task }
    }

    /// Stops sampling (after one last sample) and returns each Deployment's series.
    pub async fn finish(self) -> Vec<(String, Series)> {
        self.stop.store(true, Ordering::Release);
        self.task.await.expect("sampler task")
    }
}
