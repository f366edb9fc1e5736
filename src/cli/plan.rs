//! `kube-descheduler plan` (filled in by the foundation issue).

/// Flags of `plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {}

/// Plans evictions offline.
pub fn run(_args: PlanArgs) -> anyhow::Result<()> {
    anyhow::bail!("`plan` is not available in this build yet")
}
