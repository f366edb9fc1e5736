//! `kube-sim --snapshot FILE --kubeconfig-out FILE [--port 0] [--controllers=false] …`
//! (the command line lives in [`kube_sim::cli`]).
use std::process::ExitCode;

fn main() -> ExitCode {
    kube_sim::cli::main_with_args(std::env::args_os())
}
