//! The `kube-sim` command line: `kube-sim --snapshot FILE --kubeconfig-out FILE [--port 0]
//! [--controllers=false] …`. In the library so that a test binary can act as `kube-sim` too
//! (`tests/docs_commands.rs` runs the documented shell examples against it).
use clap::Parser;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::controllers::scheduler::config::{self, SchedulerConfig};

const LONG_ABOUT: &str = "\
In-process Kubernetes API stand-in: the real REST protocol over HTTPS (kubectl and kube clients \
work against it), loaded from a snapshot file, with simulated controllers.

Modes:
  --controllers=true (default)  a living cluster: a scheduler binds pending pods, kubelets start
                                them and make them Ready, ReplicaSet/Deployment controllers replace
                                evicted pods and roll out restarts, the disruption controller keeps
                                PodDisruptionBudget status current. Use it for end-to-end runs.
  --controllers=false           a frozen cluster: the API serves and stores exactly what clients
                                write, nothing reacts to it. Use it to inspect a snapshot, or to
                                measure a client against a large cluster without controller load.

Prints `ready <url>` on stdout once it serves; stops on SIGINT/SIGTERM.";

#[derive(Parser, Debug)]
#[command(
    name = "kube-sim",
    about = "In-process Kubernetes API stand-in",
    long_about = LONG_ABOUT
)]
struct Args {
    /// Initial cluster: a Kubernetes List (YAML or JSON, multi-document ok).
    #[arg(long)]
    snapshot: Option<PathBuf>,
    /// Where to write the kubeconfig.
    #[arg(long)]
    kubeconfig_out: PathBuf,
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Simulated seconds per real second.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Seconds a pod takes to become Ready.
    #[arg(long, default_value_t = 1.0)]
    pod_start_delay: f64,
    /// Run the simulated controllers (scheduler, kubelets, ReplicaSet, Deployment, PDB):
    /// `true` for a living cluster, `false` for a frozen one that only stores what clients write.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    controllers: bool,
    /// The scheduler's `KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1, YAML or
    /// JSON): profiles by schedulerName, NodeResourcesFit scoringStrategy (LeastAllocated,
    /// MostAllocated, RequestedToCapacityRatio), score plugin weights, disabled plugins. Without
    /// it kube-sim scores "least allocated" over cpu and memory and serves `default-scheduler`.
    #[arg(long, value_name = "FILE")]
    scheduler_config: Option<PathBuf>,
    /// kube-apiserver's AdmissionConfiguration: the `ValidatingAdmissionWebhook` plugin's
    /// `kubeConfigFile` gives the client certificates presented to webhooks.
    #[arg(long)]
    admission_control_config_file: Option<PathBuf>,
}

/// Runs `kube-sim` with these command-line arguments (the first is the program name), as the
/// binary does: serves until SIGINT/SIGTERM. Bad flags print clap's message and exit 2.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = Args::parse_from(args);
    // A configuration error exits 2 before anything starts.
    let scheduler = match &args.scheduler_config {
        Some(path) => match config::load_file(path) {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                eprintln!("kube-sim: --scheduler-config {}", e.replace('\n', " "));
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    match runtime.block_on(run(args, scheduler)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// Prints one line (`kube-sim: <error>`) and returns the failure exit code.
fn fail(msg: impl std::fmt::Display) -> ExitCode {
    let line = msg.to_string().replace('\n', " ");
    eprintln!("kube-sim: {line}");
    ExitCode::FAILURE
}

async fn run(args: Args, scheduler: Option<Arc<SchedulerConfig>>) -> Result<(), String> {
    crate::tls::install_crypto_provider();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let webhook_auth = match &args.admission_control_config_file {
        Some(p) => crate::webhook_auth::WebhookAuth::from_admission_config(p)?,
        None => Default::default(),
    };
    let mut opts = crate::SimOptions {
        webhook_auth,
        port: args.port,
        time_scale: args.time_scale,
        snapshot_file: args.snapshot.clone(),
        kubeconfig_path: Some(args.kubeconfig_out.clone()),
        controllers: args.controllers,
        ..Default::default()
    };
    opts.config.pod_start_delay_seconds = args.pod_start_delay;
    opts.config.scheduler = scheduler;
    let sim = crate::Sim::start(opts)
        .await
        .map_err(|e| match (&e, &args.snapshot) {
            (crate::SimError::Load(msg), Some(p)) if !msg.starts_with("reading ") => {
                format!("{}: {msg}", p.display())
            }
            _ => e.to_string(),
        })?;
    println!("ready {}", sim.url());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    sim.shutdown().await;
    Ok(())
}
