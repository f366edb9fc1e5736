//! The one place `--kubeconfig` (else in-cluster / `$KUBECONFIG`) becomes a client configuration.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::ConfigError;

/// Reads `--kubeconfig` when given (a [`ConfigError`] naming the flag and file when it is
/// unreadable or invalid: exit code 2), else infers the in-cluster or `$KUBECONFIG` configuration.
pub async fn load(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| ConfigError::new(format!("--kubeconfig {}: {e}", path.display())))?;
            Ok(
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| {
                        ConfigError::new(format!("--kubeconfig {}: {e}", path.display()))
                    })?,
            )
        }
        None => kube::Config::infer().await.map_err(|e| {
            anyhow::anyhow!(
                "cannot find a cluster configuration (no --kubeconfig, not in a cluster, no usable $KUBECONFIG): {e}"
            )
        }),
    }
}
