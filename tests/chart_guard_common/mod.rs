//! The Helm chart's guard container run as a local process: its arguments with the mounted
//! paths and ports adapted to this machine.

use std::path::Path;

use serde_json::Value;

/// The arguments of the chart's guard `container`: the serving certificate under `dir`
/// (mounted at `/certs/`), the client CA at `client_ca`, both ports `0` (chosen by the OS).
pub fn local_guard_args(container: &Value, dir: &Path, client_ca: &Path) -> Vec<String> {
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_owned())
        .map(|a| {
            let a = a
                .replace("/certs/", &format!("{}/", dir.display()))
                .replace("/client-ca/ca.crt", &client_ca.display().to_string());
            if a.starts_with("--port=") {
                "--port=0".to_owned()
            } else if a.starts_with("--probe-port=") {
                "--probe-port=0".to_owned()
            } else {
                a
            }
        })
        .collect()
}
