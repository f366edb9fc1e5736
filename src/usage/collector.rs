//! The background collector `run` uses: lists metrics.k8s.io every [`INTERVAL`] and smooths node
//! samples as upstream does; at the start of each cycle [`Collector::measure`] hands out the data
//! — refusing data older than the age limit — and runs the Prometheus queries (fresh, as
//! upstream queries at the start of the plugin's run, with the token re-read so a rotated Secret
//! is picked up).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use super::ema::NodeSmoother;
use super::prometheus::PrometheusClient;
use super::{KubernetesUsage, Measured, MetricsNeeds, kube_source};

/// How often metrics.k8s.io is listed (upstream's collector period).
pub const INTERVAL: Duration = Duration::from_secs(5);

/// Data older than this is not used for a cycle (six missed collections); `run
/// --metrics-max-age` sets it.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30);

#[derive(Default)]
struct State {
    smoother: NodeSmoother,
    pods: std::collections::HashMap<String, Result<super::CpuMemory, String>>,
    last_ok: Option<(Instant, Timestamp)>,
    last_error: Option<String>,
}

/// Collects what a policy needs.
pub struct Collector {
    needs: MetricsNeeds,
    client: kube::Client,
    max_age: Duration,
    /// File with the Prometheus bearer token when the provider names no Secret (upstream: the
    /// service account's token), re-read for every cycle so rotation is picked up.
    token_file: Option<std::path::PathBuf>,
    ca_pem: Option<Vec<u8>>,
    state: Mutex<State>,
}

impl Collector {
    /// A collector for `needs`. `token_file` / `ca_pem`: the service account's token file and CA
    /// (upstream's defaults when the Prometheus provider has no `authToken`).
    pub fn new(
        needs: MetricsNeeds,
        client: kube::Client,
        max_age: Duration,
        token_file: Option<std::path::PathBuf>,
        ca_pem: Option<Vec<u8>>,
    ) -> Self {
        Collector {
            needs,
            client,
            max_age,
            token_file,
            ca_pem,
            state: Mutex::new(State::default()),
        }
    }

    /// What the policy needs.
    pub fn needs(&self) -> &MetricsNeeds {
        &self.needs
    }

    /// One collection from metrics.k8s.io (no-op when no plugin needs it).
    pub async fn collect_once(&self) {
        if !self.needs.kubernetes {
            return;
        }
        let result = kube_source::collect(&self.client).await;
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        match result {
            Ok(raw) => {
                st.smoother.add(&raw.nodes);
                st.pods = raw.pods;
                st.last_ok = Some((Instant::now(), Timestamp::now()));
                st.last_error = None;
            }
            Err(e) => {
                tracing::warn!(source = super::KUBERNETES_METRICS, error = %e, "metrics collection failed");
                st.last_error = Some(e);
            }
        }
    }

    /// Collects every [`INTERVAL`] until `stop`.
    pub async fn run(&self, stop: CancellationToken) {
        if !self.needs.kubernetes {
            return;
        }
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => self.collect_once().await,
            }
        }
    }

    /// The metrics.k8s.io data as of `now`: an error when none was collected yet or the last
    /// successful collection is older than the age limit.
    fn kubernetes_at(&self, now: Instant) -> Result<(KubernetesUsage, Timestamp), String> {
        let st = self
            .state
            .lock()
            .map_err(|_| "the metrics collector's state is poisoned".to_string())?;
        let last_error = st
            .last_error
            .as_deref()
            .map(|e| format!("; last error: {e}"))
            .unwrap_or_default();
        let Some((at, ts)) = st.last_ok else {
            return Err(format!("no metrics.k8s.io data collected yet{last_error}"));
        };
        let age = now.saturating_duration_since(at);
        if age > self.max_age {
            return Err(format!(
                "metrics.k8s.io data is stale: collected {}s ago, the limit is {}s{last_error}",
                age.as_secs(),
                self.max_age.as_secs()
            ));
        }
        Ok((
            KubernetesUsage {
                nodes: st.smoother.current().clone(),
                pods: st.pods.clone(),
            },
            ts,
        ))
    }

    async fn prometheus_client(&self) -> Result<PrometheusClient, String> {
        let Some(p) = &self.needs.prometheus else {
            return Err("no metricsProviders entry with source: Prometheus".into());
        };
        let token = match &p.token_secret {
            Some((ns, name)) => Some(kube_source::read_token(&self.client, ns, name).await?),
            None => match &self.token_file {
                Some(f) => Some(
                    std::fs::read_to_string(f)
                        .map_err(|e| format!("prometheus token file {}: {e}", f.display()))?,
                ),
                None => None,
            },
        };
        PrometheusClient::new(&p.url, token.as_deref(), self.ca_pem.as_deref())
    }

    /// The data for one cycle. Stale or missing metrics.k8s.io data is an error in the result
    /// (logged here), so the plugins that need it skip this cycle.
    pub async fn measure(&self) -> Measured {
        let mut m = Measured::default();
        if self.needs.kubernetes {
            m.kubernetes = Some(match self.kubernetes_at(Instant::now()) {
                Ok((k, ts)) => {
                    m.collected_at = Some(ts);
                    Ok(k)
                }
                Err(e) => {
                    tracing::error!(source = super::KUBERNETES_METRICS, error = %e, "not using metrics.k8s.io data for this cycle");
                    Err(e)
                }
            });
        }
        if !self.needs.prometheus_queries.is_empty() {
            match self.prometheus_client().await {
                Ok(client) => {
                    m.prometheus = query_all(&client, &self.needs.prometheus_queries).await
                }
                Err(e) => {
                    for q in &self.needs.prometheus_queries {
                        m.prometheus.insert(q.clone(), Err(e.clone()));
                    }
                }
            }
            if m.collected_at.is_none() {
                m.collected_at = Some(Timestamp::now());
            }
        }
        m
    }
}

/// Runs every query once; each keeps its own result or error.
pub async fn query_all(
    client: &PrometheusClient,
    queries: &[String],
) -> std::collections::BTreeMap<String, Result<super::PrometheusUsage, String>> {
    let mut out = std::collections::BTreeMap::new();
    for q in queries {
        let r = client.query(q).await;
        if let Err(e) = &r {
            tracing::error!(source = super::PROMETHEUS, error = %e, "prometheus query failed");
        }
        out.insert(q.clone(), r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::kube_source::{NODES_PATH, PODS_PATH};
    use serde_json::json;

    /// A client whose metrics.k8s.io answers one node (n1, 2 cpu) and one pod.
    fn metrics_client() -> kube::Client {
        let svc = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
            let body = match req.uri().path() {
                NODES_PATH => {
                    json!({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {}, "items": [{"metadata": {"name": "n1"},
                    "usage": {"cpu": "2", "memory": "1Gi"}}]})
                }
                PODS_PATH => {
                    json!({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {}, "items": [{"metadata": {"name": "p", "namespace": "a"},
                    "containers": [{"name": "c", "usage": {"cpu": "500m", "memory": "100Mi"}}]}]})
                }
                other => panic!("unexpected request {other}"),
            };
            http::Response::builder()
                .header("content-type", "application/json")
                .body(kube::client::Body::from(body.to_string().into_bytes()))
        });
        kube::Client::new(svc, "default")
    }

    fn collector(max_age: Duration) -> Collector {
        let needs = MetricsNeeds {
            kubernetes: true,
            ..Default::default()
        };
        Collector::new(needs, metrics_client(), max_age, None, None)
    }

    #[tokio::test]
    async fn data_older_than_the_age_limit_is_refused() {
        let c = collector(DEFAULT_MAX_AGE);
        let before = Instant::now();
        let none = c.kubernetes_at(before).unwrap_err();
        assert!(
            none.contains("no metrics.k8s.io data collected yet"),
            "{none}"
        );

        c.collect_once().await;
        let now = Instant::now();
        let (usage, _) = c.kubernetes_at(now).expect("fresh data");
        assert_eq!(usage.nodes["n1"].cpu_milli, 2000);
        assert_eq!(
            usage.pod("a", "p").cloned().map(|r| r.map(|u| u.cpu_milli)),
            Some(Ok(500))
        );
        assert!(
            c.kubernetes_at(before + DEFAULT_MAX_AGE).is_ok(),
            "collected after `before`: at most the limit old, still used"
        );
        let stale = c
            .kubernetes_at(now + DEFAULT_MAX_AGE + Duration::from_secs(2))
            .unwrap_err();
        assert!(
            stale.contains("stale") && stale.contains("the limit is 30s"),
            "{stale}"
        );
    }

    #[tokio::test]
    async fn the_age_limit_is_the_configured_one() {
        let c = collector(Duration::from_secs(120));
        c.collect_once().await;
        let now = Instant::now();
        assert!(c.kubernetes_at(now + Duration::from_secs(60)).is_ok());
        let stale = c.kubernetes_at(now + Duration::from_secs(125)).unwrap_err();
        assert!(stale.contains("the limit is 120s"), "{stale}");
    }
}
