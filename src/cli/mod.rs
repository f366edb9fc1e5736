//! Command line: one binary, one subcommand per job.

#[doc(hidden)]
pub mod certs;
mod completions;
mod logging;
#[doc(hidden)]
pub mod plan;
mod plan_live;
#[doc(hidden)]
pub mod run;
pub(crate) mod run_upstream;
mod scheduler_version;
mod serve_limits;
mod webhook;

/// The process exit codes: a configuration error (bad policy, snapshot, flags or registry) and
/// a runtime failure.
pub use kube_descheduler_engine::error::{EXIT_CONFIG, EXIT_RUNTIME};

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
    /// Plan evictions from a cluster snapshot file (no cluster needed), or from a live cluster
    /// read once (`--kubeconfig`, read-only).
    Plan(plan::PlanArgs),
    /// Run the descheduler against a cluster (once, on an interval, or on demand).
    Run(Box<run::RunArgs>),
    /// Serve the eviction guard admission webhook.
    Webhook(webhook::WebhookArgs),
    /// Create a CA and serving certificate for the webhook or the secure port (files), or keep
    /// the webhook's Secret and caBundle valid in the cluster (`--secret-name`).
    Certs(certs::CertsCommand),
    /// Print the shell completion script for bash, zsh or fish (e.g. `source <(kube-descheduler
    /// completions bash)`).
    Completions(completions::CompletionsArgs),
}

/// Runs the selected subcommand with the built-in plugins.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    run_with(
        cli,
        &kube_descheduler_engine::framework::Registry::builtin(),
    )
}

/// Runs the selected subcommand; policies may name the plugins of `registry`.
pub fn run_with(
    cli: Cli,
    registry: &kube_descheduler_engine::framework::Registry,
) -> anyhow::Result<()> {
    match cli.command {
        Command::Plan(args) => plan::run_with(args, registry),
        Command::Run(args) => run::run_with(*args, registry),
        Command::Webhook(args) => webhook::run(args),
        Command::Certs(args) => certs::run(args),
        Command::Completions(args) => completions::run(args),
    }
}

/// The whole command line of the process (`std::env::args_os`) with the plugins of `registry`:
/// every subcommand, flag, metric and Event of the stock binary, whose `main` is this call with
/// [`kube_descheduler_engine::framework::Registry::builtin`]. Installs the process's TLS crypto provider (ring),
/// prints clap's help and errors, and returns the exit code: 0, 1 for runtime failures, 2 for
/// configuration errors (a policy naming an unknown plugin, bad args, bad flags).
///
/// A program that adds plugins calls it from its own `main`; it may also set the global
/// allocator the stock binary uses (jemalloc on Linux, see the stock `src/main.rs`):
///
/// ```no_run
/// use kube_descheduler::plugin::Registry;
///
/// fn main() -> std::process::ExitCode {
///     // Registry::builtin().with(my_plugin::factory()) ...
///     kube_descheduler::cli::main_with(Registry::builtin())
/// }
/// ```
pub fn main_with(registry: kube_descheduler_engine::framework::Registry) -> std::process::ExitCode {
    // One TLS crypto provider for the whole process, before anything builds a rustls config.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exit = |code: i32| std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    let cli = match parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                kube_descheduler_engine::error::EXIT_CONFIG
            } else {
                0
            };
            let _ = e.print();
            return exit(code);
        }
    };
    match run_with(cli, &registry) {
        Ok(()) => exit(0),
        Err(err) => {
            eprintln!("error: {err:#}");
            exit(kube_descheduler_engine::error::exit_code(&err))
        }
    }
}

/// The file name (without extension) this binary answers to as a kubectl plugin: on `PATH` under
/// this name, `kubectl descheduler …` runs it.
pub const KUBECTL_PLUGIN_NAME: &str = "kubectl-descheduler";

/// Whether the program was started as the kubectl plugin (`argv[0]`'s file name, without
/// extension, is [`KUBECTL_PLUGIN_NAME`]).
pub fn invoked_as_kubectl_plugin(argv0: &std::ffi::OsStr) -> bool {
    std::path::Path::new(argv0)
        .file_stem()
        .is_some_and(|n| n == KUBECTL_PLUGIN_NAME)
}

/// Parses the command line. As the kubectl plugin, help and errors name `kubectl descheduler`,
/// and `plan` without `--snapshot` reads the live cluster of kubectl's configuration (its
/// current context unless `--context` says otherwise); the stock binary's `plan` keeps planning
/// the bundled example.
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let plugin = args.first().is_some_and(|a| invoked_as_kubectl_plugin(a));
    if !plugin {
        return Cli::try_parse_from(args);
    }
    let matches = Cli::command()
        .bin_name("kubectl descheduler")
        .try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let Command::Plan(args) = &mut cli.command {
        args.default_to_live();
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(argv: &[&str]) -> plan::PlanArgs {
        match parse(argv.iter().copied()) {
            Ok(Cli {
                command: Command::Plan(a),
            }) => a,
            other => panic!("not a plan command: {other:?}"),
        }
    }

    #[test]
    fn only_the_plugin_name_makes_plan_read_the_live_cluster() {
        for argv0 in [
            "kubectl-descheduler",
            "/usr/local/bin/kubectl-descheduler",
            "kubectl-descheduler.exe",
        ] {
            assert!(invoked_as_kubectl_plugin(argv0.as_ref()), "{argv0}");
            let a = plan_of(&[argv0, "plan"]);
            assert_eq!(
                a.live_source(),
                Some(crate::cluster::client::Source::default()),
                "{argv0}: kubectl's usual loading"
            );
            let a = plan_of(&[argv0, "plan", "--context", "prod"]);
            assert_eq!(
                a.live_source().and_then(|s| s.context).as_deref(),
                Some("prod")
            );
            // A file keeps being a file.
            let a = plan_of(&[argv0, "plan", "--snapshot", "c.yaml"]);
            assert_eq!(a.live_source(), None);
        }
        for argv0 in [
            "kube-descheduler",
            "/bin/kubectl",
            "kubectl-descheduler-old",
        ] {
            assert!(!invoked_as_kubectl_plugin(argv0.as_ref()), "{argv0}");
            assert_eq!(plan_of(&[argv0, "plan"]).live_source(), None, "{argv0}");
        }
        let a = plan_of(&["kube-descheduler", "plan", "--kubeconfig"]);
        assert_eq!(
            a.live_source(),
            Some(crate::cluster::client::Source::default())
        );
        let a = plan_of(&["kube-descheduler", "plan", "--kubeconfig=k.yaml"]);
        assert_eq!(
            a.live_source().and_then(|s| s.file),
            Some(std::path::PathBuf::from("k.yaml"))
        );
    }

    #[test]
    fn the_plugin_names_itself_as_kubectl_does_in_errors() {
        let e = parse(["kubectl-descheduler", "nonsense"]).expect_err("unknown subcommand");
        assert!(e.to_string().contains("kubectl descheduler"), "{e}");
    }
}
