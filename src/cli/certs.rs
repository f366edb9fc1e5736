//! `kube-descheduler certs` (filled in by the eviction-guard issue).

/// Flags of `certs`.
#[derive(Debug, clap::Args)]
pub struct CertsArgs {}

/// Writes certificates.
pub fn run(_args: CertsArgs) -> anyhow::Result<()> {
    anyhow::bail!("`certs` is not available in this build yet")
}
