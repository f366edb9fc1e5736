//! The `kube-descheduler` binary: subcommands `plan`, `run`, `webhook`, `certs`.

use clap::Parser;

use kube_descheduler::cli::Cli;

fn main() {
    // One TLS crypto provider for the whole process, before anything builds a rustls config.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                kube_descheduler::error::EXIT_CONFIG
            } else {
                0
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if let Err(err) = kube_descheduler::cli::run(cli) {
        eprintln!("error: {err:#}");
        std::process::exit(kube_descheduler::error::exit_code(&err));
    }
}
