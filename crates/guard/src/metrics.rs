//! The guard's Prometheus metrics (own registry, served on `/metrics` of the webhook).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A `reason` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// Machine-readable reason.
    pub reason: String,
}

/// A `source` label (where a pod was read from).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    /// `cache`, `api` or `recheck`.
    pub source: String,
}

/// A `resource` label (a watch cache).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
}

/// The `path` and `outcome` labels of an answer.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnswerLabels {
    /// `webhook` (an AdmissionReview of `pods/eviction`) or `evictionRequest` (an `Eviction`
    /// the guard responds to).
    pub path: String,
    /// `allow`, `restarting`, `surging`, `retry` or `refused`.
    pub outcome: String,
}

/// Counters and histograms of the guard.
#[derive(Debug)]
pub struct GuardMetrics {
    allows: Family<ReasonLabel, Counter>,
    denials: Family<ReasonLabel, Counter>,
    deflections: Counter,
    rule_actions: Family<ReasonLabel, Counter>,
    errors: Family<ReasonLabel, Counter>,
    restart_errors: Counter,
    restart_seconds: Histogram,
    review_seconds: Histogram,
    pod_reads: Family<SourceLabel, Counter>,
    cache_objects: Family<ResourceLabel, Gauge>,
    cache_synced: Family<ResourceLabel, Gauge>,
    client_auth_enabled: Gauge,
    answers: Family<AnswerLabels, Counter>,
    responder_events: Family<ReasonLabel, Counter>,
}

impl Default for GuardMetrics {
    fn default() -> Self {
        GuardMetrics {
            allows: Family::default(),
            denials: Family::default(),
            deflections: Counter::default(),
            rule_actions: Family::default(),
            errors: Family::default(),
            restart_errors: Counter::default(),
            restart_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 12)),
            review_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            pod_reads: Family::default(),
            cache_objects: Family::default(),
            cache_synced: Family::default(),
            client_auth_enabled: Gauge::default(),
            answers: Family::default(),
            responder_events: Family::default(),
        }
    }
}

impl GuardMetrics {
    /// Creates the metrics and registers them under `kube_descheduler_guard_*`.
    pub fn register(registry: &mut Registry) -> std::sync::Arc<Self> {
        let m = std::sync::Arc::new(GuardMetrics::default());
        let r = registry.sub_registry_with_prefix("kube_descheduler_guard");
        r.register("allows", "Evictions allowed, by reason", m.allows.clone());
        r.register(
            "denials",
            "Evictions refused with 429, by reason",
            m.denials.clone(),
        );
        r.register(
            "deflections",
            "Evictions deflected into a rolling restart",
            m.deflections.clone(),
        );
        r.register(
            "rule_actions",
            "Actions of the drain rules, by reason (last_ready_replica, ready_replicas_leaving: rule A deflections; pdb_surge, pdb_surge_restored, pdb_surge_restore_failed: rule B)",
            m.rule_actions.clone(),
        );
        r.register(
            "errors",
            "Admission requests that failed (bad request, lookup error), by reason",
            m.errors.clone(),
        );
        r.register(
            "restart_errors",
            "Rolling restarts that could not be made",
            m.restart_errors.clone(),
        );
        r.register(
            "restart_duration_seconds",
            "Time to restart a Deployment (read + patch)",
            m.restart_seconds.clone(),
        );
        r.register(
            "review_duration_seconds",
            "Time to answer an eviction AdmissionReview",
            m.review_seconds.clone(),
        );
        r.register(
            "pod_reads",
            "Pods looked up for an eviction, by source (cache; api: cache miss or not synced; recheck: fresh read before refusing or restarting)",
            m.pod_reads.clone(),
        );
        r.register(
            "cache_objects",
            "Objects held by a watch cache",
            m.cache_objects.clone(),
        );
        r.register(
            "cache_synced",
            "1 once a watch cache has completed its initial list",
            m.cache_synced.clone(),
        );
        r.register(
            "client_auth_enabled",
            "1 when every review connection must present a client certificate from --client-ca-file; 0 when reviews are not authenticated (anyone who can reach the port can send one)",
            m.client_auth_enabled.clone(),
        );
        r.register(
            "answers",
            "Evictions answered, by the path they came (webhook, evictionRequest) and outcome (allow, restarting, surging, retry, refused)",
            m.answers.clone(),
        );
        r.register(
            "responder_events",
            "What the EvictionRequest responder did with Evictions, by reason (started, completed, passed_on, canceled, withdrawn_too_late, status_error)",
            m.responder_events.clone(),
        );
        m
    }

    /// Counts an answer to an eviction, by the path it came and its outcome.
    pub fn answer(&self, path: &str, outcome: &str) {
        self.answers
            .get_or_create(&AnswerLabels {
                path: path.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts a step of the EvictionRequest responder.
    pub fn responder_event(&self, reason: &str) {
        self.responder_events
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts a pod lookup (`cache`, `api`, `recheck`).
    pub fn pod_read(&self, source: &str) {
        self.pod_reads
            .get_or_create(&SourceLabel {
                source: source.into(),
            })
            .inc();
    }

    /// Records the state of one watch cache.
    pub fn set_cache(&self, resource: &str, objects: usize, synced: bool) {
        let label = ResourceLabel {
            resource: resource.into(),
        };
        self.cache_objects
            .get_or_create(&label)
            .set(i64::try_from(objects).unwrap_or(i64::MAX));
        self.cache_synced
            .get_or_create(&label)
            .set(i64::from(synced));
    }

    /// Counts an allowed eviction.
    pub fn allow(&self, reason: &str) {
        self.allows
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// Sets the `client_auth_enabled` gauge (1: reviews need a client certificate).
    pub fn set_client_auth(&self, enabled: bool) {
        self.client_auth_enabled.set(i64::from(enabled));
    }

    /// Counts a refused eviction (`in_flight`, `pdb`, `unhealthy`, `restart_failed`, `deflected`,
    /// `restart_rate_limited`, `surge_rate_limited`).
    pub fn deny(&self, reason: &str) {
        self.denials
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts a deflection (restart started or found in flight by the actor).
    pub fn deflect(&self) {
        self.deflections.inc();
    }

    /// Counts an action of a drain rule (see the `rule_actions` help text for the reasons).
    pub fn rule_action(&self, reason: &str) {
        self.rule_actions
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts a request-level error.
    pub fn error(&self, reason: &str) {
        self.errors
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts a failed restart.
    pub fn restart_error(&self) {
        self.restart_errors.inc();
    }

    /// Records the duration of a successful restart.
    pub fn observe_restart(&self, d: Duration) {
        self.restart_seconds.observe(d.as_secs_f64());
    }

    /// Records the time spent answering one eviction review.
    pub fn observe_review(&self, d: Duration) {
        self.review_seconds.observe(d.as_secs_f64());
    }
}

impl crate::restart::RestartMetrics for GuardMetrics {
    fn restart_error(&self) {
        GuardMetrics::restart_error(self);
    }

    fn observe_restart(&self, d: Duration) {
        GuardMetrics::observe_restart(self, d);
    }

    fn rule_action(&self, reason: &str) {
        GuardMetrics::rule_action(self, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_exposed_with_labels() {
        let mut registry = Registry::default();
        let m = GuardMetrics::register(&mut registry);
        m.allow("not_guarded");
        m.deny("pdb");
        m.deflect();
        m.rule_action("pdb_surge");
        m.observe_restart(Duration::from_millis(20));
        m.pod_read("cache");
        m.set_cache("pods", 150_000, true);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(
            out.contains("kube_descheduler_guard_allows_total{reason=\"not_guarded\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("kube_descheduler_guard_denials_total{reason=\"pdb\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("kube_descheduler_guard_deflections_total 1"),
            "{out}"
        );
        assert!(
            out.contains("kube_descheduler_guard_rule_actions_total{reason=\"pdb_surge\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("kube_descheduler_guard_restart_duration_seconds_count 1"),
            "{out}"
        );
        assert!(
            out.contains("kube_descheduler_guard_pod_reads_total{source=\"cache\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("kube_descheduler_guard_cache_objects{resource=\"pods\"} 150000"),
            "{out}"
        );
        assert!(
            out.contains("kube_descheduler_guard_cache_synced{resource=\"pods\"} 1"),
            "{out}"
        );
    }
}
