//! `kube-sim --snapshot FILE --kubeconfig-out FILE [--port 0] [--time-scale X]`.
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "kube-sim", about = "In-process Kubernetes API stand-in")]
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kube_sim::tls::install_crypto_provider();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let objects = match &args.snapshot {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))?;
            kube_sim::snapshot::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => Vec::new(),
    };
    let mut opts = kube_sim::SimOptions {
        port: args.port,
        time_scale: args.time_scale,
        objects,
        kubeconfig_path: Some(args.kubeconfig_out.clone()),
        ..Default::default()
    };
    opts.config.pod_start_delay_seconds = args.pod_start_delay;
    let sim = kube_sim::Sim::start(opts).await?;
    println!("ready {}", sim.url());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    sim.shutdown().await;
    Ok(())
}
