//! Process-level error classification (exit codes).

/// An error in user-supplied configuration (policy, snapshot, flags). The binary exits with code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl ConfigError {
    /// Builds a configuration error from anything printable.
    pub fn new(msg: impl Into<String>) -> Self {
        ConfigError(msg.into())
    }
}

/// Exit code for configuration errors (bad policy, snapshot or flags).
pub const EXIT_CONFIG: i32 = 2;
/// Exit code for runtime failures.
pub const EXIT_RUNTIME: i32 = 1;

/// Maps an error chain to the process exit code.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err
        .chain()
        .any(|e| e.downcast_ref::<ConfigError>().is_some())
    {
        EXIT_CONFIG
    } else {
        EXIT_RUNTIME
    }
}
