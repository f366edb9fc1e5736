//! `kube-descheduler completions SHELL`: the shell completion script, from clap's own generator
//! (`clap_complete`), so it always matches the flags of this binary.

use clap::CommandFactory;

/// Flags of `completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Writes the completion script for `args.shell` to stdout.
pub fn run(args: CompletionsArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let mut cmd = super::Cli::command();
    // Generated into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "kube-descheduler", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .map_err(|e| anyhow::anyhow!("writing the completion script to stdout: {e}"))
}
