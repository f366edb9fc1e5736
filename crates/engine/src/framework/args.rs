//! Strict decoding of plugin args and the argument types several plugins share.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A plugin's args failed to decode or validate. `field` is a JSON path inside `args`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if field.is_empty() { String::new() } else { format!("args.{field}: ") })]
pub struct ArgsError {
    /// Path inside the args, e.g. `thresholds.cpu` (empty for the args as a whole).
    pub field: String,
    /// What was expected.
    pub message: String,
}

impl ArgsError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ArgsError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Decodes `args` strictly into `T` (unknown fields are errors when `T` denies them). Absent or
/// null args decode as `{}` so defaults apply.
pub fn decode<T: DeserializeOwned>(args: &serde_json::Value) -> Result<T, ArgsError> {
    let empty = serde_json::Value::Object(Default::default());
    let v = if args.is_null() { &empty } else { args };
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        ArgsError {
            field,
            message: e.into_inner().to_string(),
        }
    })
}

/// `namespaces: {include: [...], exclude: [...]}` — mutually exclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Namespaces {
    /// Only these namespaces.
    pub include: Vec<String>,
    /// All but these namespaces.
    pub exclude: Vec<String>,
}

impl Namespaces {
    /// Rejects setting both `include` and `exclude`.
    pub fn validate(&self, field: &str) -> Result<(), ArgsError> {
        if !self.include.is_empty() && !self.exclude.is_empty() {
            return Err(ArgsError::new(
                field,
                "only one of include or exclude namespaces can be set",
            ));
        }
        Ok(())
    }

    /// Whether `namespace` passes.
    pub fn allows(&self, namespace: &str) -> bool {
        if !self.include.is_empty() {
            return self.include.iter().any(|n| n == namespace);
        }
        !self.exclude.iter().any(|n| n == namespace)
    }
}

/// Checks an optional `Namespaces` value.
pub fn allows_namespace(ns: &Option<Namespaces>, namespace: &str) -> bool {
    ns.as_ref().is_none_or(|n| n.allows(namespace))
}

/// Declares a plugin's args struct: strict (unknown fields are errors), camelCase, every field
/// defaulted when absent. The args several plugins share are written by name alone, where they
/// stand in the struct (the order decoding errors list the fields in):
/// - `namespaces`: `Option<Namespaces>`, namespaces to include or exclude;
/// - `evictable_namespaces`: `Option<Namespaces>`, namespaces excluded from eviction (the node
///   utilization plugins; only `exclude` passes their validation);
/// - `label_selector`: `Option<LabelSelector>`, only pods matching this selector.
///
/// The plugin's own fields are written out, with their docs and serde attributes.
macro_rules! selecting_args {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($fields:tt)*
        }
    ) => {
        $crate::framework::args::selecting_args!(@fields [$(#[$meta])* $name] [] $($fields)*);
    };
    (@fields $head:tt [$($done:tt)*] namespaces, $($rest:tt)*) => {
        $crate::framework::args::selecting_args!(@fields $head [$($done)*
            /// Namespaces to include or exclude.
            pub namespaces: Option<$crate::framework::args::Namespaces>,
        ] $($rest)*);
    };
    (@fields $head:tt [$($done:tt)*] evictable_namespaces, $($rest:tt)*) => {
        $crate::framework::args::selecting_args!(@fields $head [$($done)*
            /// Namespaces excluded from eviction.
            pub evictable_namespaces: Option<$crate::framework::args::Namespaces>,
        ] $($rest)*);
    };
    (@fields $head:tt [$($done:tt)*] label_selector, $($rest:tt)*) => {
        $crate::framework::args::selecting_args!(@fields $head [$($done)*
            /// Only pods matching this selector.
            pub label_selector:
                Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
        ] $($rest)*);
    };
    (
        @fields $head:tt [$($done:tt)*]
        $(#[$field_meta:meta])* pub $field:ident: $ty:ty, $($rest:tt)*
    ) => {
        $crate::framework::args::selecting_args!(@fields $head [$($done)*
            $(#[$field_meta])* pub $field: $ty,
        ] $($rest)*);
    };
    (@fields [$(#[$meta:meta])* $name:ident] [$($done:tt)*]) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, serde::Deserialize)]
        #[serde(default, deny_unknown_fields, rename_all = "camelCase")]
        pub struct $name {
            $($done)*
        }
    };
}
pub(crate) use selecting_args;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize, Default)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct A {
        #[serde(default)]
        #[allow(dead_code)] // decoded only, to test error paths
        namespaces: Option<Namespaces>,
        #[serde(default)]
        pod_restart_threshold: i32,
    }

    #[test]
    fn decode_names_the_field() {
        let e = decode::<A>(&json!({"podRestartThreshold": "x"})).unwrap_err();
        assert_eq!(e.field, "podRestartThreshold");
        let e = decode::<A>(&json!({"namespaces": {"includ": ["a"]}})).unwrap_err();
        assert_eq!(e.field, "namespaces.includ");
        assert!(e.message.contains("includ"), "{}", e.message);
        let e = decode::<A>(&json!({"bogus": 1})).unwrap_err();
        assert!(e.message.contains("bogus"));
        assert_eq!(
            decode::<A>(&serde_json::Value::Null)
                .unwrap()
                .pod_restart_threshold,
            0
        );
    }

    #[test]
    fn namespaces_are_exclusive() {
        let n = Namespaces {
            include: vec!["a".into()],
            exclude: vec!["b".into()],
        };
        assert!(n.validate("namespaces").is_err());
        let n = Namespaces {
            include: vec![],
            exclude: vec!["b".into()],
        };
        assert!(n.allows("a") && !n.allows("b"));
        let n = Namespaces {
            include: vec!["a".into()],
            exclude: vec![],
        };
        assert!(n.allows("a") && !n.allows("b"));
    }
}
