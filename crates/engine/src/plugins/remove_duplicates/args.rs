//! RemoveDuplicates args: the type (upstream `RemoveDuplicatesArgs`), decoding and validation.

use serde::Deserialize;

use super::RemoveDuplicates;
use crate::framework::Plugin;
use crate::framework::args::{ArgsError, Namespaces, decode};

/// RemoveDuplicates args (upstream `RemoveDuplicatesArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoveDuplicatesArgs {
    /// Namespaces to include or exclude.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Pods with an owner of one of these kinds are ignored.
    #[serde(default)]
    pub exclude_owner_kinds: Vec<String>,
}

impl RemoveDuplicates {
    /// A plugin with validated `args`.
    pub fn new(args: RemoveDuplicatesArgs) -> Result<Self, ArgsError> {
        if let Some(ns) = &args.namespaces {
            ns.validate("namespaces")?;
        }
        Ok(RemoveDuplicates { args })
    }
}

pub(super) fn build(args: &serde_json::Value) -> Result<Plugin, ArgsError> {
    let args: RemoveDuplicatesArgs = decode(args)?;
    Ok(Plugin::Balance(Box::new(RemoveDuplicates::new(args)?)))
}
