//! `kube-descheduler run`: the descheduler against a cluster — once, on an interval, or on demand —
//! with upstream's flag names and defaults.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::ArgAction;

use tokio_util::sync::CancellationToken;

use super::logging::{self, LogFormat};
use super::run_upstream::{ResolvedUpstream, TracingFlags, UpstreamFlags};
use super::serve_limits::ServeLimitFlags;
use crate::leader::LeaderConfig;
use crate::live::run::{LiveOptions, cancel_on_signals};
use crate::live::server::TlsSource;
use crate::serving::limits::ServeLimits;
use kube_descheduler_engine::duration::parse_go_duration;
use kube_descheduler_engine::error::ConfigError;

/// client-go's defaults when `--client-connection-qps/-burst` are 0 (as upstream leaves them).
pub const DEFAULT_QPS: f32 = 5.0;
/// See [`DEFAULT_QPS`].
pub const DEFAULT_BURST: i32 = 10;

/// Flags of `run` (bool flags also accept `--flag=true|false`, as pflag does).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// File with descheduler policy configuration.
    #[arg(long)]
    pub policy_config_file: Option<PathBuf>,
    /// The cluster's kube-scheduler configuration (`KubeSchedulerConfiguration`,
    /// kubescheduler.config.k8s.io/v1) for DefaultEvictor `placement` predictions. Default:
    /// kube-scheduler's default profile.
    #[arg(long, value_name = "FILE")]
    pub scheduler_config: Option<PathBuf>,
    /// The cluster's kube-scheduler version (`MAJOR.MINOR`, e.g. `1.35`) for `placement`
    /// predictions: before 1.36 NodeResourcesBalancedAllocation scored the balance with the pod
    /// alone, since then the change the pod makes to it. Default: the API server's version
    /// (`/version`; one that cannot be read keeps the pre-1.36 scoring, with a warning).
    #[arg(long, value_name = "VERSION", value_parser = super::scheduler_version::parse)]
    pub scheduler_version: Option<(u32, u32)>,
    /// Time interval between two consecutive descheduler executions (Go duration, e.g. 5m). 0 runs
    /// one cycle and exits (unless --enable-trigger-api).
    #[arg(long, default_value = "0s")]
    pub descheduling_interval: String,
    /// Execute descheduler in dry run mode (no evictions; PDBs are evaluated locally).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub dry_run: bool,
    /// How an eviction decision is carried out: `Eviction` POSTs the pod's eviction subresource
    /// (upstream's behaviour); `EvictionRequest` creates an EvictionRequest
    /// (lifecycle.k8s.io/v1alpha1, alpha in Kubernetes 1.37, feature gate EvictionRequestAPI)
    /// for the pod's eviction responders to carry out.
    #[arg(long, value_enum, value_name = "API", default_value = "Eviction")]
    pub eviction_api: crate::live::evreq::EvictionApi,
    /// File with kube configuration (default: in-cluster, then $KUBECONFIG / ~/.kube/config).
    /// Upstream's two names; the last one given wins.
    #[arg(
        long,
        visible_alias = "client-connection-kubeconfig",
        overrides_with = "kubeconfig"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// QPS to use for interacting with kubernetes apiserver (0: client-go's default, 5).
    #[arg(long, default_value_t = 0.0)]
    pub client_connection_qps: f32,
    /// Burst to use for interacting with kubernetes apiserver (0: client-go's default, 10).
    #[arg(long, default_value_t = 0)]
    pub client_connection_burst: i32,
    /// Start a leader election client and gain leadership before executing the main loop.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub leader_elect: bool,
    /// How long non-leaders wait after observing a renewal before trying to acquire.
    #[arg(long, default_value = "137s")]
    pub leader_elect_lease_duration: String,
    /// How long the leader tries to renew before it stops leading.
    #[arg(long, default_value = "107s")]
    pub leader_elect_renew_deadline: String,
    /// How long clients wait between attempts to acquire and renew.
    #[arg(long, default_value = "26s")]
    pub leader_elect_retry_period: String,
    /// The lock object type; only `leases` is supported.
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,
    /// The name of the Lease.
    #[arg(long, default_value = "descheduler")]
    pub leader_elect_resource_name: String,
    /// The namespace of the Lease.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    /// The IP address on which to listen for the --secure-port port.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// The port on which to serve HTTPS (0: do not serve).
    #[arg(long, default_value_t = 10258)]
    pub secure_port: u16,
    /// PEM certificate for the secure port (self-signed when absent).
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key matching --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// How often the --tls-cert-file / --tls-private-key-file pair is checked for changes (a
    /// changed pair is served to new connections without a restart).
    #[arg(long, default_value = "10s")]
    pub cert_reload_interval: String,
    /// Bounds on the secure port's clients (body size, header and TLS handshake timeouts,
    /// connection cap).
    #[command(flatten)]
    pub serve_limits: ServeLimitFlags,
    /// Disables metrics.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub disable_metrics: bool,
    /// Serve /metrics without TokenReview/SubjectAccessReview.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub metrics_unauthenticated: bool,
    /// Serve `POST /api/v1/descheduler/run` (authenticated) to run a cycle on demand.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub enable_trigger_api: bool,
    /// How long a one-shot run (`--descheduling-interval 0`) waits for the first full list of the
    /// cluster before it fails naming the API server (Go duration). Interval mode keeps retrying.
    #[arg(long, default_value = "2m")]
    pub cache_sync_timeout: String,
    /// Also run a cycle (debounced) when a node joins Ready, becomes Ready, is uncordoned or
    /// loses a NoSchedule/NoExecute taint (metric source `event`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = ArgAction::Set)]
    pub cycle_on_events: bool,
    /// How long node changes are collected before the cycle they start (Go duration).
    #[arg(long, default_value = "2s")]
    pub cycle_on_events_debounce: String,
    /// Age limit of measured usage (metricsUtilization with source KubernetesMetrics): a cycle
    /// never runs LowNodeUtilization on metrics.k8s.io data collected longer ago than this (Go
    /// duration, at least the 5s collection period).
    #[arg(long, default_value = "30s")]
    pub metrics_max_age: String,
    /// How long an eviction is remembered to see whether its replacement is scheduled back
    /// onto the node it was evicted from; after such a return the owner's pods are not evicted
    /// from that node for as long again (Go duration, e.g. `30m`; `0`, the default, turns the
    /// return detector off, so a policy decides exactly as upstream does).
    #[arg(long, default_value = "0")]
    pub placement_return_window: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub logging_format: LogFormat,
    /// Log verbosity (klog-style: 0-1 info, 2-3 debug, 4+ trace).
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub v: u8,
    /// OpenTelemetry tracing (`--otel-*`).
    #[command(flatten)]
    pub tracing: TracingFlags,
    /// Upstream's other flags (`--enable-http2`, `--feature-gates`, secure serving, logging).
    #[command(flatten)]
    pub upstream: UpstreamFlags,
}

fn duration_flag(name: &str, value: &str) -> Result<Duration, ConfigError> {
    parse_go_duration(value).map_err(|e| ConfigError::new(format!("--{name}: {e}")))
}

/// Flags checked and resolved, before anything touches the cluster.
#[derive(Debug)]
pub struct Resolved {
    /// Interval.
    pub interval: Duration,
    /// Leader election.
    pub leader: Option<LeaderConfig>,
    /// Effective QPS.
    pub qps: f32,
    /// Effective burst.
    pub burst: i32,
    /// Policy path.
    pub policy: PathBuf,
    /// Certificate reload interval.
    pub cert_reload_interval: Duration,
    /// `--cache-sync-timeout`.
    pub cache_sync_timeout: Duration,
    /// `--cycle-on-events` with its debounce.
    pub cycle_on_events: Option<Duration>,
    /// `--metrics-max-age`.
    pub metrics_max_age: Duration,
    /// Bounds on the secure port's clients.
    pub serve_limits: ServeLimits,
    /// `--placement-return-window` (zero: off).
    pub placement_return_window: Duration,
    /// `--feature-gates`, `--enable-http2` and the other upstream flags.
    pub upstream: ResolvedUpstream,
}

/// A duration flag that must be greater than zero.
fn positive_duration_flag(name: &str, value: &str) -> Result<Duration, ConfigError> {
    let d = duration_flag(name, value)?;
    if d.is_zero() {
        return Err(ConfigError::new(format!("--{name} must be greater than 0")));
    }
    Ok(d)
}

/// Validates the flags (configuration errors exit with code 2).
pub fn resolve(a: &RunArgs) -> Result<Resolved, ConfigError> {
    let interval = duration_flag("descheduling-interval", &a.descheduling_interval)?;
    let leader = if a.leader_elect {
        Some(leader_config(a, interval)?)
    } else {
        None
    };
    if a.enable_trigger_api && a.secure_port == 0 {
        return Err(ConfigError::new(
            "--enable-trigger-api needs the secure port (--secure-port > 0)",
        ));
    }
    let (qps, burst) = client_rate(a)?;
    let cert_reload_interval =
        positive_duration_flag("cert-reload-interval", &a.cert_reload_interval)?;
    let cache_sync_timeout = positive_duration_flag("cache-sync-timeout", &a.cache_sync_timeout)?;
    let debounce = duration_flag("cycle-on-events-debounce", &a.cycle_on_events_debounce)?;
    let cycle_on_events = a.cycle_on_events.then_some(debounce);
    let metrics_max_age = duration_flag("metrics-max-age", &a.metrics_max_age)?;
    if metrics_max_age < crate::usage::collector::INTERVAL {
        return Err(ConfigError::new(format!(
            "--metrics-max-age must be at least the {}s metrics collection period, got {:?}",
            crate::usage::collector::INTERVAL.as_secs(),
            a.metrics_max_age
        )));
    }
    let placement_return_window =
        duration_flag("placement-return-window", &a.placement_return_window)?;
    let upstream = a.upstream.resolve()?;
    a.tracing.validate()?;
    let policy = a
        .policy_config_file
        .clone()
        .ok_or_else(|| ConfigError::new("--policy-config-file is required"))?;
    Ok(Resolved {
        interval,
        leader,
        qps,
        burst,
        policy,
        cert_reload_interval,
        cache_sync_timeout,
        cycle_on_events,
        metrics_max_age,
        serve_limits: a.serve_limits.resolve()?,
        placement_return_window,
        upstream,
    })
}

/// The `--leader-elect*` flags checked against each other and the `interval`.
fn leader_config(a: &RunArgs, interval: Duration) -> Result<LeaderConfig, ConfigError> {
    if interval.is_zero() {
        return Err(ConfigError::new(
            "leaderElection must be used with deschedulingInterval: --leader-elect needs --descheduling-interval > 0",
        ));
    }
    if a.leader_elect_resource_lock != "leases" {
        return Err(ConfigError::new(format!(
            "--leader-elect-resource-lock: only \"leases\" is supported, got {:?}",
            a.leader_elect_resource_lock
        )));
    }
    let lease_duration = duration_flag(
        "leader-elect-lease-duration",
        &a.leader_elect_lease_duration,
    )?;
    let renew_deadline = duration_flag(
        "leader-elect-renew-deadline",
        &a.leader_elect_renew_deadline,
    )?;
    let retry_period = duration_flag("leader-elect-retry-period", &a.leader_elect_retry_period)?;
    if lease_duration <= renew_deadline {
        return Err(ConfigError::new(
            "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline",
        ));
    }
    if renew_deadline.as_secs_f64() <= retry_period.as_secs_f64() * 1.2 {
        return Err(ConfigError::new(
            "--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period",
        ));
    }
    if retry_period.is_zero() {
        return Err(ConfigError::new("--leader-elect-retry-period must be > 0"));
    }
    Ok(LeaderConfig {
        identity: identity(),
        lease_duration,
        renew_deadline,
        retry_period,
        name: a.leader_elect_resource_name.clone(),
        namespace: a.leader_elect_resource_namespace.clone(),
    })
}

/// The API client's rate limit: `--client-connection-qps` and `--client-connection-burst`, each
/// with its default when zero.
fn client_rate(a: &RunArgs) -> Result<(f32, i32), ConfigError> {
    if !a.client_connection_qps.is_finite() || a.client_connection_qps < 0.0 {
        return Err(ConfigError::new("--client-connection-qps must be >= 0"));
    }
    if a.client_connection_burst < 0 {
        return Err(ConfigError::new("--client-connection-burst must be >= 0"));
    }
    let qps = if a.client_connection_qps == 0.0 {
        DEFAULT_QPS
    } else {
        a.client_connection_qps
    };
    let burst = if a.client_connection_burst == 0 {
        DEFAULT_BURST
    } else {
        a.client_connection_burst
    };
    Ok((qps, burst))
}

/// client-go style identity: `<hostname>_<random>`.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kube-descheduler".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{host}_{:x}",
        nanos ^ (u128::from(std::process::id()) << 64)
    )
}

/// Runs the descheduler against a cluster with the plugins of `registry`.
pub fn run_with(
    args: RunArgs,
    registry: &kube_descheduler_engine::framework::Registry,
) -> anyhow::Result<()> {
    let resolved = resolve(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let traced = {
        let _in_runtime = rt.enter();
        args.tracing.start()?
    };
    logging::init_with(args.logging_format, args.v, traced.layer);
    if let Some(e) = &traced.fallback_error {
        tracing::error!(error = %e, "ran into an error trying to setup a trace provider. Falling back to NoOp provider");
    }
    let result = run_in(args, registry, resolved, &rt);
    if let Some(t) = traced.exporter {
        t.shutdown();
    }
    result
}

fn run_in(
    args: RunArgs,
    registry: &kube_descheduler_engine::framework::Registry,
    resolved: Resolved,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let mut policy = kube_descheduler_engine::policy::load_file_with(&resolved.policy, registry)?;
    crate::live::otel::trace_plugins(&mut policy);
    if let Some(path) = &args.scheduler_config {
        policy.cycle.scheduler =
            std::sync::Arc::new(kube_descheduler_engine::placement::config::load_file(path)?);
    }
    if let Some(v) = args.scheduler_version {
        super::scheduler_version::apply(&mut policy, v);
    }
    for w in &policy.warnings {
        tracing::warn!("policy: {w}");
    }
    let serve = (args.secure_port != 0).then(|| {
        let tls = match (&args.tls_cert_file, &args.tls_private_key_file) {
            (Some(cert), Some(key)) => TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
                reload_interval: resolved.cert_reload_interval,
            },
            _ => TlsSource::SelfSigned(vec!["localhost".into(), "kube-descheduler".into()]),
        };
        (SocketAddr::new(args.bind_address, args.secure_port), tls)
    });
    let opts = LiveOptions {
        policy,
        interval: resolved.interval,
        dry_run: args.dry_run,
        eviction_api: args.eviction_api,
        qps: f64::from(resolved.qps),
        burst: resolved.burst.max(1) as u32,
        leader: resolved.leader,
        serve,
        serve_limits: resolved.serve_limits,
        protocols: crate::serving::tls::Protocols {
            http2: resolved.upstream.http2,
            tls13_only: resolved.upstream.tls_min_version
                == super::run_upstream::TlsMinVersion::Tls13,
        },
        feature_gates: resolved.upstream.feature_gates.clone(),
        disable_metrics: args.disable_metrics,
        metrics_unauthenticated: args.metrics_unauthenticated,
        trigger: args.enable_trigger_api,
        one_shot_sync_timeout: resolved.cache_sync_timeout,
        api_server: String::new(),
        cycle_on_events: resolved.cycle_on_events,
        metrics_max_age: resolved.metrics_max_age,
        watch: Default::default(),
        placement_return_window: resolved.placement_return_window,
    };
    rt.block_on(async move {
        let config = crate::cluster::client::load(args.kubeconfig.as_ref()).await?;
        let mut opts = opts;
        opts.api_server = config.cluster_url.to_string();
        let client = crate::cluster::client::client(config)?;
        if args.scheduler_version.is_none() {
            super::scheduler_version::default_from_server(&client, &mut opts.policy).await;
        }
        let shutdown = CancellationToken::new();
        cancel_on_signals(shutdown.clone());
        crate::live::run::run(opts, client, shutdown).await
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn resolve_args(extra: &[&str]) -> Result<Resolved, ConfigError> {
        let argv = ["kube-descheduler", "run", "--policy-config-file=/p"]
            .into_iter()
            .chain(extra.iter().copied());
        match crate::cli::Cli::try_parse_from(argv) {
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Run(a),
                ..
            }) => resolve(&a),
            other => panic!("not a run command: {other:?}"),
        }
    }

    #[test]
    fn metrics_max_age_defaults_to_the_collector_default_and_is_settable() {
        let r = resolve_args(&[]).expect("defaults resolve");
        assert_eq!(r.metrics_max_age, crate::usage::collector::DEFAULT_MAX_AGE);
        let r = resolve_args(&["--metrics-max-age=2m"]).expect("2m");
        assert_eq!(r.metrics_max_age, Duration::from_secs(120));
        let r = resolve_args(&["--metrics-max-age=5s"]).expect("the collection period");
        assert_eq!(r.metrics_max_age, Duration::from_secs(5));
        for bad in ["4s", "0s", "thirty seconds", "-30s"] {
            let e = resolve_args(&[&format!("--metrics-max-age={bad}")])
                .expect_err(bad)
                .to_string();
            assert!(e.contains("--metrics-max-age"), "{bad}: {e}");
        }
    }
}
