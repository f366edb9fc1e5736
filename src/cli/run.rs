//! `kube-descheduler run` (filled in by the live-operation issue).

/// Flags of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

/// Runs the descheduler against a cluster.
pub fn run(_args: RunArgs) -> anyhow::Result<()> {
    anyhow::bail!("`run` is not available in this build yet")
}
