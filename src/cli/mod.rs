//! Command line: one binary, one subcommand per job.

pub mod certs;
pub mod kubeconfig;
pub mod logging;
pub mod plan;
pub mod run;
pub mod serve_limits;
pub mod webhook;

use clap::{Parser, Subcommand};

/// kube-descheduler: upstream-compatible descheduler with a zero-downtime eviction guard.
#[derive(Debug, Parser)]
#[command(name = "kube-descheduler", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan evictions offline from a cluster snapshot file (no cluster needed).
    Plan(plan::PlanArgs),
    /// Run the descheduler against a cluster (once, on an interval, or on demand).
    Run(Box<run::RunArgs>),
    /// Serve the eviction guard admission webhook.
    Webhook(webhook::WebhookArgs),
    /// Create a CA and serving certificate for the webhook or the secure port (files), or keep
    /// the webhook's Secret and caBundle valid in the cluster (`--secret-name`).
    Certs(certs::CertsCommand),
}

/// Runs the selected subcommand.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Plan(args) => plan::run(args),
        Command::Run(args) => run::run(*args),
        Command::Webhook(args) => webhook::run(args),
        Command::Certs(args) => certs::run(args),
    }
}
