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

/// The command the scripts complete.
const BIN: &str = "kube-descheduler";

/// clap_complete 4.6's bash script names a subcommand's case `kube__subcmd__descheduler__…`
/// (the `-` of the binary's name turned into its subcommand separator) while its command loop
/// sets `kube__descheduler__…`, so no flag of a subcommand would ever complete; the loop's
/// spelling is put in the case labels.
fn fix_bash_names(script: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(script);
    text.replace("kube__subcmd__descheduler", "kube__descheduler")
        .into_bytes()
}

/// Writes the completion script for `args.shell` to stdout.
pub fn run(args: CompletionsArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let mut cmd = super::Cli::command();
    // Generated into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, BIN, &mut script);
    if args.shell == clap_complete::Shell::Bash {
        script = fix_bash_names(&script);
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .map_err(|e| anyhow::anyhow!("writing the completion script to stdout: {e}"))
}
