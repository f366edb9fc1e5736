//! RemoveDuplicates args: the type (upstream `RemoveDuplicatesArgs`), decoding and validation.

use super::RemoveDuplicates;
use crate::framework::args::{ArgsError, selecting_args};

selecting_args! {
    /// RemoveDuplicates args (upstream `RemoveDuplicatesArgs`).
    pub struct RemoveDuplicatesArgs {
        namespaces,
        /// Pods with an owner of one of these kinds are ignored.
        pub exclude_owner_kinds: Vec<String>,
    }
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
