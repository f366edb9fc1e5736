//! `kube-descheduler webhook`: serves the eviction guard admission webhook.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;

use super::logging::{self, LogFormat};
use super::serve_limits::ServeLimitFlags;
use crate::serving::client_auth::ClientAuth;
use crate::serving::limits::ServeLimits;
use crate::serving::tls::{TlsFiles, load_files_with_reload, serve_https_with};
use axum_server::tls_rustls::RustlsConfig;
use kube_descheduler_engine::duration::parse_go_duration as parse_duration;
use kube_descheduler_engine::error::ConfigError;
use kube_descheduler_guard::cache::KubeSource;
use kube_descheduler_guard::decision::GuardConfig;
use kube_descheduler_guard::metrics::GuardMetrics;
use kube_descheduler_guard::mutate::{PodMutation, mutate_router};
use kube_descheduler_guard::rate::{Rate, RateLimits, parse_rate};
use kube_descheduler_guard::responder::{Responder, ResponderConfig};
use kube_descheduler_guard::restart::RestartActor;
use kube_descheduler_guard::server::{GuardState, probe_router, router_with_body_limit};
use tokio::task::JoinHandle;

/// Flags of `webhook`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
    /// PEM serving certificate (reloaded when it changes).
    #[arg(long)]
    pub tls_cert_file: PathBuf,
    /// PEM private key of the serving certificate (reloaded when it changes).
    #[arg(long)]
    pub tls_private_key_file: PathBuf,
    /// PEM CA certificate(s): every connection to the review port must present a client
    /// certificate signed by one of them (the TLS handshake is refused otherwise); reloaded when
    /// the file changes. kube-apiserver presents one when its AdmissionConfiguration gives the
    /// webhook a kubeconfig (docs/guard-authentication.md). Unset: reviews are not authenticated.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// With --client-ca-file: the client certificate must also carry one of these names (subject
    /// CN exactly, DNS SAN ignoring case, or URI SAN); comma-separated. Empty: any certificate
    /// from the CA.
    #[arg(long, value_delimiter = ',')]
    pub client_allowed_names: Vec<String>,
    /// With --client-ca-file: port serving /healthz, /readyz and /metrics over TLS without a
    /// client certificate (for kubelet probes and Prometheus); the review port requires one.
    #[arg(long, default_value_t = 8444)]
    pub probe_port: u16,
    /// Cluster-wide refill of the restart/surge token bucket (TOKENS/DURATION).
    #[arg(long, default_value = "50/1m", value_parser = parse_rate)]
    pub restart_rate: Rate,
    /// Cluster-wide restarts and surges at once (bucket capacity).
    #[arg(long, default_value_t = 100)]
    pub restart_burst: u32,
    /// Refill of each namespace's restart/surge token bucket (TOKENS/DURATION).
    #[arg(long, default_value = "10/1m", value_parser = parse_rate)]
    pub namespace_restart_rate: Rate,
    /// Restarts and surges at once in one namespace (bucket capacity).
    #[arg(long, default_value_t = 25)]
    pub namespace_restart_burst: u32,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// HTTPS port.
    #[arg(long, default_value_t = 8443)]
    pub port: u16,
    /// kubeconfig file (default: in-cluster config, then the usual kubeconfig lookup).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// How long to refuse an eviction (since our restart or the first refusal) before allowing it.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub deflect_deadline: Duration,
    /// Turn the health guard off (PDB / short-of-ready denials); deflection stays on.
    #[arg(long)]
    pub disable_health_guard: bool,
    /// Rule B: when a PodDisruptionBudget allows no disruption, raise the replicas of an opted-in
    /// Deployment (annotation `kube-descheduler.io/pdb-surge: enabled` on it or its namespace)
    /// instead of refusing until the drain times out; restored once it has no pod on an
    /// unschedulable node or after --deflect-deadline.
    #[arg(long)]
    pub pdb_surge: bool,
    /// How often the surge reconciler looks for surges to restore.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub surge_reconcile_interval: Duration,
    /// Also take part in the EvictionRequest API (lifecycle.k8s.io/v1alpha1, alpha in Kubernetes
    /// 1.37): respond to Evictions whose target responders include `kube-descheduler.io/guard`
    /// when it is their turn, with the same decision as the webhook (docs/eviction-request.md).
    #[arg(long)]
    pub eviction_responder: bool,
    /// With --eviction-responder: how often to report progress while a rollout runs (the API
    /// asks for no more than one heartbeat per 20 s and hands the Eviction on after 20 min
    /// without one).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub eviction_responder_heartbeat: Duration,
    /// With --eviction-responder: the requester names (`spec.requester` of EvictionRequests)
    /// whose Evictions may restart or surge Deployments; comma-separated. Empty: every requester
    /// the API server lets create EvictionRequests. Others are passed on to the next responder.
    #[arg(long, value_delimiter = ',')]
    pub eviction_responder_requesters: Vec<String>,
    /// Priority the pod mutation (`POST /mutate/pod`) gives the guard's responder in
    /// `spec.evictionResponders` (0-100000; 0-999 are reserved for *.k8s.io responders; 10000 is
    /// the pod's managing controller's).
    #[arg(long, default_value_t = kube_descheduler_guard::mutate::DEFAULT_PRIORITY)]
    pub eviction_responder_priority: i32,
    /// How often to check the certificate files for changes.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub cert_reload_interval: Duration,
    /// Name of this replica in restart records and Events.
    #[arg(long, env = "POD_NAME", default_value = "kube-descheduler-webhook")]
    pub instance_name: String,
    /// Bounds on clients (body size, header and TLS handshake timeouts, connection cap).
    #[command(flatten)]
    pub limits: ServeLimitFlags,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub logging_format: LogFormat,
    /// Log verbosity (klog style: -v=2 debug, -v=4 trace).
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,
}

/// Serves the eviction guard until SIGTERM / Ctrl-C.
pub fn run(args: WebhookArgs) -> anyhow::Result<()> {
    logging::init(args.logging_format, args.verbosity);
    if args.deflect_deadline.is_zero() {
        return Err(ConfigError::new("--deflect-deadline must be greater than 0").into());
    }
    let limits = args.limits.resolve()?;
    if args.client_ca_file.is_none() && !args.client_allowed_names.is_empty() {
        return Err(ConfigError::new("--client-allowed-names needs --client-ca-file").into());
    }
    if args
        .client_allowed_names
        .iter()
        .any(|n| n.trim().is_empty())
    {
        return Err(ConfigError::new("--client-allowed-names has an empty name").into());
    }
    if args.client_ca_file.is_some() && args.probe_port == args.port && args.port != 0 {
        return Err(ConfigError::new(
            "--probe-port must differ from --port (the review port requires client certificates)",
        )
        .into());
    }
    rate_limits(&args).validate().map_err(ConfigError::new)?;
    validate_responder(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(serve(args, limits))
}

fn validate_responder(args: &WebhookArgs) -> Result<(), ConfigError> {
    if args.eviction_responder_heartbeat < Duration::from_secs(20)
        || args.eviction_responder_heartbeat >= Duration::from_secs(20 * 60)
    {
        return Err(ConfigError::new(
            "--eviction-responder-heartbeat must be at least 20s (the API's lower bound) and under 20m (its deadline)",
        ));
    }
    if !(1000..=100_000).contains(&args.eviction_responder_priority) {
        return Err(ConfigError::new(
            "--eviction-responder-priority must be within 1000-100000 (0-999 are reserved for *.k8s.io responders)",
        ));
    }
    if args
        .eviction_responder_requesters
        .iter()
        .any(|n| n.trim().is_empty())
    {
        return Err(ConfigError::new(
            "--eviction-responder-requesters has an empty name",
        ));
    }
    Ok(())
}

fn rate_limits(args: &WebhookArgs) -> RateLimits {
    RateLimits {
        rate: args.restart_rate,
        burst: args.restart_burst,
        namespace_rate: args.namespace_restart_rate,
        namespace_burst: args.namespace_restart_burst,
    }
}

type Reloading = (RustlsConfig, JoinHandle<()>);

async fn serve(args: WebhookArgs, limits: ServeLimits) -> anyhow::Result<()> {
    let client_auth = args.client_ca_file.clone().map(|ca_file| ClientAuth {
        ca_file,
        allowed_names: args
            .client_allowed_names
            .iter()
            .map(|n| n.trim().to_owned())
            .collect(),
    });
    let (tls, probe_tls) = load_tls(&args, &client_auth).await?;
    let client = crate::cluster::client::connect(args.kubeconfig.as_ref()).await?;
    let state = guard_state(&args, client.clone(), client_auth.as_ref())?;
    if args.eviction_responder {
        let config = ResponderConfig {
            heartbeat: args.eviction_responder_heartbeat,
            deadline: args.deflect_deadline,
            trusted_requesters: args
                .eviction_responder_requesters
                .iter()
                .map(|n| n.trim().to_owned())
                .collect(),
            ..ResponderConfig::default()
        };
        let responder = Responder::new(state.clone(), client.clone(), config, &args.instance_name);
        tokio::spawn(responder.run());
    }
    let probe = match probe_tls {
        Some((probe_tls, reloader)) => {
            let addr = SocketAddr::new(args.bind_address, args.probe_port);
            let server = serve_https_with(probe_router(state.clone()), addr, probe_tls, &limits)
                .await
                .with_context(|| format!("listening on {addr} (--probe-port)"))?;
            Some((server, reloader))
        }
        None => None,
    };
    let addr = SocketAddr::new(args.bind_address, args.port);
    let mutation = PodMutation::new(client, args.eviction_responder_priority);
    let app = router_with_body_limit(state.clone(), limits.max_body_bytes)
        .merge(mutate_router(Arc::new(mutation), limits.max_body_bytes));
    let server = serve_https_with(app, addr, tls.0, &limits)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let probe_addr = probe.as_ref().map(|(s, _)| s.addr.to_string());
    let config = state.config;
    tracing::info!(addr = %server.addr, probe_addr = probe_addr.as_deref().unwrap_or(""), client_auth = client_auth.is_some(), ?limits, rates = ?rate_limits(&args), deadline = ?config.deflect_deadline, health_guard = config.health_guard, pdb_surge = config.pdb_surge, eviction_responder = args.eviction_responder, "eviction guard serving");
    shutdown_signal().await;
    tracing::info!("shutting down");
    if let Some((probe, _)) = probe {
        // Probes keep answering until the review port has drained.
        let review = server.shutdown(Duration::from_secs(10));
        let (review, _) = tokio::join!(review, probe.shutdown(Duration::from_secs(10)));
        review.context("serving")?;
        return Ok(());
    }
    server
        .shutdown(Duration::from_secs(10))
        .await
        .context("serving")?;
    Ok(())
}

/// The review port's TLS (asking for client certificates when `client_auth` is set) and, with
/// client authentication, the probe port's (the same certificate, no client certificate).
async fn load_tls(
    args: &WebhookArgs,
    client_auth: &Option<ClientAuth>,
) -> anyhow::Result<(Reloading, Option<Reloading>)> {
    let review_files = TlsFiles {
        cert: args.tls_cert_file.clone(),
        key: args.tls_private_key_file.clone(),
        client_auth: client_auth.clone(),
    };
    let review = load_files_with_reload(review_files, args.cert_reload_interval)
        .await
        .map_err(|e| ConfigError::new(e.to_string()))?;
    let probe = match client_auth {
        Some(_) => {
            let files = TlsFiles {
                cert: args.tls_cert_file.clone(),
                key: args.tls_private_key_file.clone(),
                client_auth: None,
            };
            let probe = load_files_with_reload(files, args.cert_reload_interval)
                .await
                .map_err(|e| ConfigError::new(e.to_string()))?;
            Some(probe)
        }
        None => None,
    };
    Ok((review, probe))
}

/// The guard's state: metrics, watch caches, the restart actor and its surge reconciler.
fn guard_state(
    args: &WebhookArgs,
    client: kube::Client,
    client_auth: Option<&ClientAuth>,
) -> anyhow::Result<Arc<GuardState>> {
    let mut registry = Registry::default();
    let metrics = GuardMetrics::register(&mut registry);
    metrics.set_client_auth(client_auth.is_some());
    match client_auth {
        Some(auth) => tracing::info!(
            client_ca = %auth.ca_file.display(),
            allowed_names = ?auth.allowed_names,
            "reviews require a client certificate"
        ),
        None => tracing::warn!(
            "reviews are NOT authenticated: anyone who can reach the webhook port can send one and make the guard restart or surge Deployments (within --restart-burst); set --client-ca-file (docs/guard-authentication.md)"
        ),
    }
    let source = KubeSource::start(client.clone());
    tokio::spawn(report_caches(source.clone(), metrics.clone()));
    let restarter = Arc::new(RestartActor::new(
        client,
        args.instance_name.clone(),
        metrics.clone(),
    ));
    let config = GuardConfig {
        deflect_deadline: args.deflect_deadline,
        health_guard: !args.disable_health_guard,
        pdb_surge: args.pdb_surge,
    };
    if args.surge_reconcile_interval.is_zero() {
        return Err(ConfigError::new("--surge-reconcile-interval must be greater than 0").into());
    }
    // Restores run whether or not this replica surges: surges made before a restart, or by a
    // replica with other flags, are still undone.
    tokio::spawn(kube_descheduler_guard::surge_reconciler::run(
        source.clone(),
        restarter.clone(),
        args.deflect_deadline,
        args.surge_reconcile_interval,
    ));
    Ok(Arc::new(
        GuardState::with_registry(source, restarter, config, metrics, registry)
            .with_rate_limits(rate_limits(args)),
    ))
}

/// Publishes the watch caches' sizes and sync state as metrics, every 2 s.
async fn report_caches(source: Arc<KubeSource>, metrics: Arc<GuardMetrics>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        for (resource, objects, synced) in source.cache_status() {
            metrics.set_cache(resource, objects, synced);
        }
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: WebhookArgs,
    }

    fn args(extra: &[&str]) -> WebhookArgs {
        let mut all = vec!["webhook", "--tls-cert-file=c", "--tls-private-key-file=k"];
        all.extend(extra);
        Cli::try_parse_from(all).expect("flags parse").args
    }

    #[test]
    fn responder_flags_are_checked_against_the_apis_bounds() {
        assert!(validate_responder(&args(&["--eviction-responder"])).is_ok());
        let too_often = validate_responder(&args(&["--eviction-responder-heartbeat=10s"]));
        assert!(too_often.is_err_and(|e| e.to_string().contains("at least 20s")));
        let past_deadline = validate_responder(&args(&["--eviction-responder-heartbeat=20m"]));
        assert!(past_deadline.is_err());
        let reserved = validate_responder(&args(&["--eviction-responder-priority=999"]));
        assert!(reserved.is_err_and(|e| e.to_string().contains("reserved")));
        let empty = validate_responder(&args(&["--eviction-responder-requesters=a.io/x,"]));
        assert!(empty.is_err_and(|e| e.to_string().contains("empty name")));
        let a = args(&["--eviction-responder-requesters=a.io/x,b.io/y"]);
        assert_eq!(a.eviction_responder_requesters, vec!["a.io/x", "b.io/y"]);
        assert_eq!(a.eviction_responder_priority, 9000);
    }
}
