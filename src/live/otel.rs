//! OpenTelemetry tracing of `run` (`--otel-*`, as upstream v0.36's `pkg/tracing`): spans
//! exported over OTLP gRPC to `--otel-collector-endpoint` (plaintext, or TLS verified with
//! `--otel-transport-ca-cert`), resource `service.name` = `--otel-service-name` and
//! `service.namespace` = `--otel-trace-namespace`, sampled parent-based at `--otel-sample-rate`.
//! Without an endpoint nothing is set up: no exporter, no spans, no cost.
//!
//! Spans (tracer `sigs.k8s.io/descheduler`), one trace per cycle: `runDeschedulerLoop` (attribute
//! `source`), under it `runProfiles` (as upstream), under that one `profile` span per profile
//! (attribute `profile`; upstream has none), under that one span per plugin run named after the
//! plugin (attributes `plugin`, `profile`, `operation` `deschedule`/`balance`, as upstream), under
//! that `EvictPod` per eviction (attributes `podName`, `podNamespace`, `reason`, `operation`
//! `evict`, and `result`; an event `Eviction Failed` with `err` when it fails, as upstream).
//! Upstream also nests every cycle under process-long `Run` / `RunDeschedulerStrategies` /
//! `NonSlidingUntil` spans; here each cycle is its own trace, complete when the cycle ends.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use rustls_pki_types::pem::PemObject;
use tracing::Span;

use crate::serving::metrics::Metrics;
use kube_descheduler_engine::evictor::EvictOutcome;
use kube_descheduler_engine::framework::Handle;
use kube_descheduler_engine::framework::{BalancePlugin, DeschedulePlugin};
use kube_descheduler_engine::policy::Policy;
use kube_descheduler_engine::snapshot::{NodeId, PodId, Snapshot};

/// The `tracing` target of the spans exported (only these reach the OpenTelemetry layer, and the
/// log output leaves them out).
pub const TARGET: &str = "kube_descheduler::otel";
/// Upstream's default `--otel-service-name`.
pub const DEFAULT_OTEL_SERVICE_NAME: &str = "descheduler";
/// Upstream's tracer name.
pub const TRACER_NAME: &str = "sigs.k8s.io/descheduler";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (an endpoint is configured and the exporter is set up).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// `--otel-*`.
#[derive(Debug, Clone)]
pub struct TracingConfig {
    /// `host:port` of the collector's OTLP gRPC receiver (a URL with `http://`/`https://` is taken
    /// as is).
    pub endpoint: String,
    /// CA certificate (PEM) verifying the collector: TLS; `None`: plaintext.
    pub ca_cert: Option<PathBuf>,
    /// `service.name`.
    pub service_name: String,
    /// `service.namespace` (empty: none).
    pub service_namespace: String,
    /// Ratio of root spans sampled.
    pub sample_rate: f64,
}

/// The exporter, flushed and stopped by [`Tracing::shutdown`].
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Exports the spans still queued and stops the exporter.
    pub fn shutdown(self) {
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!(error = %e, "tracing: flushing spans failed");
        }
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "tracing: stopping the exporter failed");
        }
    }
}

/// A `tracing` layer exporting [`TARGET`] spans through the provider.
pub type OtelLayer =
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static>;

/// Sets up the exporter (call inside the tokio runtime: the gRPC channel lives there). Returns
/// the handle to shut it down and the layer to install in the subscriber.
pub fn init(cfg: &TracingConfig) -> Result<(Tracing, OtelLayer), String> {
    use tracing_subscriber::Layer as _;
    let tls = match &cfg.ca_cert {
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| format!("--otel-transport-ca-cert {}: {e}", path.display()))?;
            let certs: Vec<_> = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--otel-transport-ca-cert {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!(
                    "--otel-transport-ca-cert {}: no CERTIFICATE block",
                    path.display()
                ));
            }
            Some(
                opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().ca_certificate(
                    opentelemetry_otlp::tonic_types::transport::Certificate::from_pem(pem),
                ),
            )
        }
        None => None,
    };
    let endpoint = if cfg.endpoint.contains("://") {
        cfg.endpoint.clone()
    } else if tls.is_some() {
        format!("https://{}", cfg.endpoint)
    } else {
        format!("http://{}", cfg.endpoint)
    };
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint.clone());
    if let Some(tls) = tls {
        builder = builder.with_tls_config(tls);
    }
    let exporter = builder
        .build()
        .map_err(|e| format!("--otel-collector-endpoint {endpoint}: {e}"))?;
    let mut resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(if cfg.service_name.is_empty() {
            DEFAULT_OTEL_SERVICE_NAME.to_string()
        } else {
            cfg.service_name.clone()
        })
        .with_attribute(KeyValue::new("process.pid", i64::from(std::process::id())));
    if !cfg.service_namespace.is_empty() {
        resource = resource.with_attribute(KeyValue::new(
            "service.namespace",
            cfg.service_namespace.clone(),
        ));
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            cfg.sample_rate,
        ))))
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer(TRACER_NAME);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::filter_fn(|m| {
            m.target() == TARGET
        }))
        .boxed();
    ENABLED.store(true, Ordering::Relaxed);
    tracing::info!(endpoint = %endpoint, tls = cfg.ca_cert.is_some(), sample_rate = cfg.sample_rate, "tracing: exporting spans over OTLP gRPC");
    Ok((Tracing { provider }, layer))
}

thread_local! {
    /// The profile spans of the cycle running on this thread (plugins run on the cycle's thread).
    static PROFILES: RefCell<HashMap<String, Span>> = RefCell::new(HashMap::new());
}

/// The span of one cycle (`runDeschedulerLoop`); `None` when tracing is off. Enter it on the
/// thread that runs the plugins; [`end_cycle`] closes its profile spans.
pub fn cycle_span(source: &str) -> Option<Span> {
    if !enabled() {
        return None;
    }
    PROFILES.with(|p| p.borrow_mut().clear());
    Some(tracing::info_span!(target: TARGET, "runDeschedulerLoop", source = source))
}

/// The span around a cycle's plugin runs (`runProfiles`), child of the current cycle span;
/// `None` when tracing is off.
pub fn profiles_span() -> Option<Span> {
    enabled().then(|| tracing::info_span!(target: TARGET, "runProfiles"))
}

/// Ends the profile spans of the cycle on this thread.
pub fn end_cycle() {
    PROFILES.with(|p| p.borrow_mut().clear());
}

fn profile_span(profile: &str) -> Span {
    PROFILES.with(|p| {
        p.borrow_mut()
            .entry(profile.to_string())
            .or_insert_with(|| tracing::info_span!(target: TARGET, "profile", profile = profile))
            .clone()
    })
}

fn plugin_span(plugin: &str, profile: &str, operation: &'static str) -> Span {
    let parent = profile_span(profile);
    tracing::info_span!(target: TARGET, parent: &parent, "plugin", otel.name = plugin, plugin = plugin, profile = profile, operation = operation)
}

/// The span of one eviction (`EvictPod`), child of the current plugin span; `None` when off.
pub fn evict_span(namespace: &str, name: &str, reason: &dyn std::fmt::Display) -> Option<Span> {
    if !enabled() {
        return None;
    }
    Some(
        tracing::info_span!(target: TARGET, "EvictPod", podName = name, podNamespace = namespace, reason = %reason, operation = "evict", result = tracing::field::Empty),
    )
}

/// Records how an eviction ended on its span: `result` (the `descheduler_pods_evicted_total`
/// label), and an `Eviction Failed` event with `node` and `err` when refused or failed.
pub fn record_outcome(span: &Span, node: &str, outcome: &EvictOutcome) {
    span.record("result", Metrics::result_label(outcome));
    let error = match outcome {
        EvictOutcome::Failed { error } => error,
        EvictOutcome::NotAttempted { reason } => reason,
        EvictOutcome::Denied { reason } | EvictOutcome::BackedOff { reason } => reason,
        EvictOutcome::Evicted
        | EvictOutcome::Deflected { .. }
        | EvictOutcome::Background { .. }
        | EvictOutcome::Requested { .. } => return,
    };
    tracing::info!(target: TARGET, parent: span, node = node, err = %error, "Eviction Failed");
}

/// A plugin of one extension point wrapped so that each call runs inside its plugin span.
macro_rules! traced_plugin {
    ($traced:ident, $trait:ident, $call:ident, $point:literal) => {
        struct $traced {
            inner: Box<dyn $trait>,
            profile: String,
        }

        impl $trait for $traced {
            fn name(&self) -> &str {
                self.inner.name()
            }
            fn $call(&self, handle: &mut Handle<'_>, nodes: &[NodeId]) {
                let span = plugin_span(self.inner.name(), &self.profile, $point);
                let _entered = span.enter();
                self.inner.$call(handle, nodes);
            }
            fn explain_pod(
                &self,
                snapshot: &Snapshot,
                pod: PodId,
                nodes: &[NodeId],
                now: jiff::Timestamp,
            ) -> Option<String> {
                self.inner.explain_pod(snapshot, pod, nodes, now)
            }
        }
    };
}

traced_plugin!(TracedDeschedule, DeschedulePlugin, deschedule, "deschedule");
traced_plugin!(TracedBalance, BalancePlugin, balance, "balance");

/// Wraps every plugin of `policy` so its runs are traced (only when tracing is on: otherwise
/// the policy is left as it is).
pub fn trace_plugins(policy: &mut Policy) {
    if !enabled() {
        return;
    }
    for profile in &mut policy.profiles {
        let name = profile.name.clone();
        profile.deschedule = std::mem::take(&mut profile.deschedule)
            .into_iter()
            .map(|inner| {
                Box::new(TracedDeschedule {
                    inner,
                    profile: name.clone(),
                }) as Box<dyn DeschedulePlugin>
            })
            .collect();
        profile.balance = std::mem::take(&mut profile.balance)
            .into_iter()
            .map(|inner| {
                Box::new(TracedBalance {
                    inner,
                    profile: name.clone(),
                }) as Box<dyn BalancePlugin>
            })
            .collect();
    }
}
