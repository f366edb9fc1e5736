//! The `DeschedulerPolicy` file: strict decoding of `descheduler/v1alpha2` (and conversion of
//! `descheduler/v1alpha1`), validation, and building runnable profiles.

mod profile;
#[cfg(test)]
mod profile_tests;
pub mod v1alpha1;
pub mod v1alpha2;
pub mod wire;

use crate::error::ConfigError;
use crate::framework::cycle::{CycleConfig, Profile};
use crate::framework::registry::Registry;

/// A loaded, validated policy, ready to run.
pub struct Policy {
    /// Profiles in file order.
    pub profiles: Vec<Profile>,
    /// Cycle-wide settings (node selector, limits).
    pub cycle: CycleConfig,
    /// `gracePeriodSeconds` for evictions.
    pub grace_period_seconds: Option<i64>,
    /// `evictionFailureEventNotification`: emit Events for failed evictions.
    pub eviction_failure_event_notification: bool,
    /// Notes produced while loading (e.g. deprecated fields, v1alpha1 conversion).
    pub warnings: Vec<String>,
    /// What the LowNodeUtilization `metricsUtilization` args need measured, and the
    /// `metricsProviders` to measure it with.
    pub metrics: crate::usage::MetricsNeeds,
}

/// Loads a policy file (YAML or JSON) with the built-in plugins. Errors name the profile, plugin
/// and field.
pub fn load_file(path: &std::path::Path) -> Result<Policy, ConfigError> {
    load_file_with(path, &Registry::builtin())
}

/// Loads a policy file whose plugins come from `registry`; relative paths in it (a WebAssembly
/// plugin's `module`) resolve against the file's directory.
pub fn load_file_with(path: &std::path::Path, registry: &Registry) -> Result<Policy, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(format!("cannot read policy {}: {e}", path.display())))?;
    load_text(&text, registry, path.parent())
        .map_err(|e| ConfigError::new(format!("policy {}: {}", path.display(), e.0)))
}

/// Loads a policy from text with the built-in plugins.
pub fn load_str(text: &str) -> Result<Policy, ConfigError> {
    load_str_with(text, &Registry::builtin())
}

/// Loads a policy from text whose plugins come from `registry` (relative paths resolve against
/// the current directory).
pub fn load_str_with(text: &str, registry: &Registry) -> Result<Policy, ConfigError> {
    load_text(text, registry, None)
}

/// Loads a policy from text with the built-in plugins; relative paths in it (a WebAssembly
/// plugin's `module`) resolve against `base` (the policy file's directory; `None`: the current
/// directory).
pub fn load_str_in(text: &str, base: Option<&std::path::Path>) -> Result<Policy, ConfigError> {
    load_text(text, &Registry::builtin(), base)
}

/// Loads a policy from text whose plugins come from `registry` and whose relative paths resolve
/// against `base`.
pub fn load_text(
    text: &str,
    registry: &Registry,
    base: Option<&std::path::Path>,
) -> Result<Policy, ConfigError> {
    let value: serde_json::Value = if text.trim().is_empty() {
        return Err(ConfigError::new(
            "the policy is empty (expected a DeschedulerPolicy)",
        ));
    } else {
        serde_saphyr::from_str(text).map_err(|e| ConfigError::new(format!("invalid YAML: {e}")))?
    };
    let api_version = value
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    if kind != "DeschedulerPolicy" {
        return Err(ConfigError::new(format!(
            "kind: expected \"DeschedulerPolicy\", got {kind:?}"
        )));
    }
    match api_version {
        "descheduler/v1alpha2" => v1alpha2::build(&value, Vec::new(), registry, base),
        "descheduler/v1alpha1" => {
            let (converted, warnings) = v1alpha1::convert(&value)?;
            v1alpha2::build(&converted, warnings, registry, base)
        }
        other => Err(ConfigError::new(format!(
            "apiVersion: expected \"descheduler/v1alpha2\" (or the older \"descheduler/v1alpha1\"), got {other:?}"
        ))),
    }
}
