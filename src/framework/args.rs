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
#[serde(deny_unknown_fields)]
pub struct Namespaces {
    /// Only these namespaces.
    #[serde(default)]
    pub include: Vec<String>,
    /// All but these namespaces.
    #[serde(default)]
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

/// Parses a Go `time.Duration` string (`300ms`, `1.5h`, `2h45m`, `-1m`, `0`) as `metav1.Duration`
/// accepts it.
pub fn parse_go_duration(input: &str) -> Result<std::time::Duration, String> {
    let s = input.trim();
    let err = || format!("invalid duration {input:?} (expected e.g. \"30s\", \"5m\", \"1h30m\")");
    if s == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(format!("invalid duration {input:?}: must not be negative"));
    }
    if s.is_empty() {
        return Err(err());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * unit;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(err());
    }
    Ok(std::time::Duration::from_secs_f64(total))
}

/// Deserializes an optional Go duration string field.
pub fn de_opt_duration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    s.map(|s| parse_go_duration(&s).map_err(serde::de::Error::custom))
        .transpose()
}

#[cfg(test)]
mod duration_tests {
    use super::parse_go_duration;
    use std::time::Duration;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_go_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("1.5h").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("300ms").unwrap(),
            Duration::from_millis(300)
        );
        for bad in ["", "5", "1d", "m", "-1s", "1h-1m"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }
}
