//! The one place `--kubeconfig` (else in-cluster / `$KUBECONFIG`) becomes a client configuration
//! and a client.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

use kube_descheduler_engine::error::ConfigError;

/// Reads `--kubeconfig` when given (a [`ConfigError`] naming the flag and file when it is
/// unreadable or invalid: exit code 2), else infers the in-cluster or `$KUBECONFIG` configuration.
pub async fn load(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
    load_source(&Source {
        file: kubeconfig.cloned(),
        context: None,
    })
    .await
}

/// The client every component uses. kube's default client silently retries 429/503/504 up to
/// 15 times (with Retry-After), which would retry refused evictions (upstream never retries a 429
/// within a cycle), could delay Lease renewals past the renew deadline, and would hold an
/// admission review past kube-apiserver's webhook timeout; it is turned off here.
pub fn client(mut config: kube::Config) -> anyhow::Result<kube::Client> {
    config.default_retry = false;
    Ok(kube::Client::try_from(config)?)
}

/// [`load`] then [`client`].
pub async fn connect(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    client(load(kubeconfig).await?)
}

/// Where `plan` reads a live cluster from (`--kubeconfig [FILE]`, `--context NAME`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    /// The kubeconfig file; None: the usual loading (`$KUBECONFIG`, `~/.kube/config`, else the
    /// in-cluster configuration), as kubectl does.
    pub file: Option<PathBuf>,
    /// The context to use instead of the file's current context.
    pub context: Option<String>,
}

/// Loads the client configuration `source` names. An unreadable or invalid file, or a context
/// it does not have, is a [`ConfigError`] naming the flag (exit code 2).
pub async fn load_source(source: &Source) -> anyhow::Result<kube::Config> {
    let opts = KubeConfigOptions {
        context: source.context.clone(),
        ..KubeConfigOptions::default()
    };
    let ctx = source
        .context
        .as_ref()
        .map(|c| format!(" (--context {c})"))
        .unwrap_or_default();
    match (&source.file, &source.context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| ConfigError::new(format!("--kubeconfig {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| {
                    ConfigError::new(format!("--kubeconfig {}{ctx}: {e}", path.display())).into()
                })
        }
        // A context names an entry of a kubeconfig file, so the in-cluster configuration is no
        // fallback then (kubectl behaves the same).
        (None, Some(c)) => kube::Config::from_kubeconfig(&opts).await.map_err(|e| {
            ConfigError::new(format!(
                "--context {c}: cannot load it from $KUBECONFIG or ~/.kube/config: {e}"
            ))
            .into()
        }),
        (None, None) => kube::Config::infer().await.map_err(|e| {
            anyhow::anyhow!(
                "cannot find a cluster configuration (no --kubeconfig, not in a cluster, no usable $KUBECONFIG): {e}"
            )
        }),
    }
}
