//! `kube-descheduler webhook` (filled in by the eviction-guard issue).

/// Flags of `webhook`.
#[derive(Debug, clap::Args)]
pub struct WebhookArgs {}

/// Serves the eviction guard.
pub fn run(_args: WebhookArgs) -> anyhow::Result<()> {
    anyhow::bail!("`webhook` is not available in this build yet")
}
