//! `run` flags that upstream's descheduler v0.36 takes besides its own options: tracing
//! (`--otel-*`), `--enable-http2`, `--feature-gates`, the rest of apiserver's secure-serving
//! options and component-base's logging options. Every one is accepted so upstream's manifests
//! and chart arguments work unchanged; the ones without an equivalent here are documented in
//! docs/run.md as accepted without effect.

use clap::ArgAction;

use crate::live::features::FeatureGates;
use kube_descheduler_engine::duration::parse_go_duration;
use kube_descheduler_engine::error::ConfigError;

use crate::live::otel::DEFAULT_OTEL_SERVICE_NAME;

/// `--otel-*`: OpenTelemetry tracing, with upstream's names, defaults and meaning.
#[derive(Debug, Clone, clap::Args)]
pub struct TracingFlags {
    /// Set this flag to the OpenTelemetry Collector Service Address (host:port of its OTLP gRPC
    /// receiver; empty: no tracing).
    #[arg(long, default_value = "")]
    pub otel_collector_endpoint: String,
    /// Path of the CA Cert that can be used to generate the client Certificate for establishing
    /// secure connection to the OTEL in gRPC mode (empty: plaintext gRPC).
    #[arg(long, default_value = "")]
    pub otel_transport_ca_cert: String,
    /// OTEL Trace name to be used with the resources (`service.name`).
    #[arg(long, default_value = DEFAULT_OTEL_SERVICE_NAME)]
    pub otel_service_name: String,
    /// OTEL Trace namespace to be used with the resources (`service.namespace`).
    #[arg(long, default_value = "")]
    pub otel_trace_namespace: String,
    /// Sample rate to collect the Traces (ratio of cycles traced, parent-based).
    #[arg(long, default_value_t = 1.0)]
    pub otel_sample_rate: f64,
    /// Fallback to NoOp Tracer in case of error (otherwise a tracing set-up error stops `run`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub otel_fallback_no_op_on_error: bool,
}

/// The rest of upstream's `run` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct UpstreamFlags {
    /// If http/2 should be enabled for the metrics and health check (off: HTTP/1.1 only).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub enable_http2: bool,
    /// A set of key=value pairs that describe feature gates for alpha/experimental features.
    /// Options are: AllAlpha=true|false (ALPHA - default=false), AllBeta=true|false (BETA -
    /// default=false), EvictionsInBackground=true|false (ALPHA - default=false).
    #[arg(long, value_name = "NAME=BOOL,…", action = ArgAction::Append)]
    pub feature_gates: Vec<String>,
    /// The limit that the server gives to clients for the maximum number of streams in an HTTP/2
    /// connection (with --enable-http2; 0: the default, 250).
    #[arg(long, default_value_t = 0)]
    pub http2_max_streams_per_connection: i32,
    /// Upstream: disables HTTP/2 serving. As in upstream v0.36, --enable-http2 decides (accepted).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub disable_http2_serving: bool,
    /// Upstream: the directory its self-signed certificate is written to. Accepted; the
    /// self-signed certificate here is kept in memory.
    #[arg(long, default_value = "apiserver.local.config/certificates")]
    pub cert_dir: String,
    /// Minimum TLS version supported by the secure port: VersionTLS12 or VersionTLS13 (rustls
    /// has no TLS 1.0/1.1; VersionTLS10/11 are accepted and mean TLS 1.2).
    #[arg(long, default_value = "")]
    pub tls_min_version: String,
    /// Comma-separated cipher suites for the secure port (Go names). Accepted; the server uses
    /// rustls's safe defaults.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append)]
    pub tls_cipher_suites: Vec<String>,
    /// Comma-separated elliptic curve IDs (Go numbers). Accepted; rustls's defaults are used.
    #[arg(long, value_delimiter = ',', action = ArgAction::Append)]
    pub tls_curve_preferences: Vec<String>,
    /// A pair of x509 certificate and private key file paths, optionally with domain patterns
    /// (SNI). Accepted; --tls-cert-file / --tls-private-key-file serve every name.
    #[arg(long, action = ArgAction::Append)]
    pub tls_sni_cert_key: Vec<String>,
    /// Allow several processes to bind the secure port (SO_REUSEPORT). Accepted.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub permit_port_sharing: bool,
    /// Allow binding an address in TIME_WAIT (SO_REUSEADDR, on by default here). Accepted.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub permit_address_sharing: bool,
    /// Maximum time between log flushes (Go duration). Accepted; logs are written unbuffered.
    #[arg(long, default_value = "5s")]
    pub log_flush_frequency: String,
    /// Comma-separated list of pattern=N settings for file-filtered logging. Accepted; use
    /// RUST_LOG for per-module levels.
    #[arg(long, default_value = "")]
    pub vmodule: String,
    /// [Alpha] In text format, write error messages to stderr and info messages to stdout.
    /// Accepted; logs go to stderr.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub log_text_split_stream: bool,
    /// [Alpha] Info buffer size with split text streams. Accepted.
    #[arg(long, default_value = "0")]
    pub log_text_info_buffer_size: String,
    /// [Alpha] In JSON format, write error messages to stderr and info messages to stdout.
    /// Accepted; logs go to stderr.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub log_json_split_stream: bool,
    /// [Alpha] Info buffer size with split JSON streams. Accepted.
    #[arg(long, default_value = "0")]
    pub log_json_info_buffer_size: String,
}

/// The minimum TLS version of the secure port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMinVersion {
    /// TLS 1.2 and 1.3 (the default).
    #[default]
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

/// [`UpstreamFlags`] checked.
#[derive(Debug, Clone)]
pub struct ResolvedUpstream {
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// HTTP/2 on the secure port: `None` (HTTP/1.1 only) or its streams per connection.
    pub http2: Option<u32>,
    /// `--tls-min-version`.
    pub tls_min_version: TlsMinVersion,
}

impl UpstreamFlags {
    /// Validates the flags (errors name the flag; configuration errors exit with code 2).
    pub fn resolve(&self) -> Result<ResolvedUpstream, ConfigError> {
        let feature_gates = FeatureGates::parse(&self.feature_gates)
            .map_err(|e| ConfigError::new(format!("--feature-gates: {e}")))?;
        if self.http2_max_streams_per_connection < 0 {
            return Err(ConfigError::new(
                "--http2-max-streams-per-connection must be >= 0",
            ));
        }
        let streams = match self.http2_max_streams_per_connection {
            0 => crate::serving::limits::MAX_CONCURRENT_STREAMS,
            n => n.unsigned_abs(),
        };
        let tls_min_version = match self.tls_min_version.as_str() {
            "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" => TlsMinVersion::Tls12,
            "VersionTLS13" => TlsMinVersion::Tls13,
            other => {
                return Err(ConfigError::new(format!(
                    "--tls-min-version: unknown TLS version {other:?} (VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13)"
                )));
            }
        };
        parse_go_duration(&self.log_flush_frequency)
            .map_err(|e| ConfigError::new(format!("--log-flush-frequency: {e}")))?;
        Ok(ResolvedUpstream {
            feature_gates,
            http2: self.enable_http2.then_some(streams),
            tls_min_version,
        })
    }
}

/// What [`TracingFlags::start`] set up.
pub struct StartedTracing {
    /// The exporter to shut down at exit (`None`: tracing off).
    pub exporter: Option<crate::live::otel::Tracing>,
    /// The layer to install in the log subscriber (`None`: tracing off).
    pub layer: Option<crate::live::otel::OtelLayer>,
    /// The set-up error `--otel-fallback-no-op-on-error` turned into "tracing off", to log.
    pub fallback_error: Option<String>,
}

impl TracingFlags {
    /// Sets up the exporter (inside the tokio runtime) when an endpoint is given; a set-up error
    /// is a configuration error, or with `--otel-fallback-no-op-on-error` reported and tracing
    /// left off.
    pub fn start(&self) -> Result<StartedTracing, ConfigError> {
        let off = |fallback_error| StartedTracing {
            exporter: None,
            layer: None,
            fallback_error,
        };
        if self.otel_collector_endpoint.is_empty() {
            return Ok(off(None));
        }
        let cfg = crate::live::otel::TracingConfig {
            endpoint: self.otel_collector_endpoint.clone(),
            ca_cert: (!self.otel_transport_ca_cert.is_empty())
                .then(|| std::path::PathBuf::from(&self.otel_transport_ca_cert)),
            service_name: self.otel_service_name.clone(),
            service_namespace: self.otel_trace_namespace.clone(),
            sample_rate: self.otel_sample_rate,
        };
        match crate::live::otel::init(&cfg) {
            Ok((exporter, layer)) => Ok(StartedTracing {
                exporter: Some(exporter),
                layer: Some(layer),
                fallback_error: None,
            }),
            Err(e) if self.otel_fallback_no_op_on_error => Ok(off(Some(e))),
            Err(e) => Err(ConfigError::new(e)),
        }
    }

    /// Validates the flags.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.otel_sample_rate.is_finite() {
            return Err(ConfigError::new("--otel-sample-rate must be a number"));
        }
        Ok(())
    }
}
