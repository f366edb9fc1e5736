//! The stock `kube-descheduler` command (`plan`, `run`, `webhook`, `certs`, `completions`, every
//! flag, metric and Event) with this crate's plugins registered as well.

use std::process::ExitCode;

fn main() -> ExitCode {
    match descheduler_node_retirement::registry() {
        Ok(registry) => kube_descheduler::cli::main_with(registry),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(kube_descheduler::cli::EXIT_CONFIG as u8)
        }
    }
}
