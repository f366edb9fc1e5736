//! Why a plugin chose a pod: a short sentence for people, a machine-readable code and the numbers
//! that decided it, built by the plugin at the moment it decides (never re-derived afterwards).

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde::ser::SerializeMap;

/// One number (or name) that took part in a decision, e.g. `restarts = 17`.
#[derive(Debug, Clone, PartialEq)]
pub enum ReasonValue {
    /// A whole number (counts, seconds, millicores, bytes).
    Int(i64),
    /// A fraction or a percentage.
    Float(f64),
    /// A name or a flag (a node, a taint, a predicate).
    Text(Arc<str>),
    /// A yes/no fact.
    Bool(bool),
}

impl Eq for ReasonValue {}

impl Serialize for ReasonValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ReasonValue::Int(v) => s.serialize_i64(*v),
            // Two decimals are what people read; JSON consumers get the same rounding.
            ReasonValue::Float(v) if v.is_finite() => s.serialize_f64((v * 100.0).round() / 100.0),
            ReasonValue::Float(_) => s.serialize_none(),
            ReasonValue::Text(v) => s.serialize_str(v),
            ReasonValue::Bool(v) => s.serialize_bool(*v),
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for ReasonValue {
            fn from(v: $t) -> Self {
                ReasonValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
    )*};
}
from_int!(i32, i64, u32, u64, usize);

impl From<f64> for ReasonValue {
    fn from(v: f64) -> Self {
        ReasonValue::Float(v)
    }
}
impl From<bool> for ReasonValue {
    fn from(v: bool) -> Self {
        ReasonValue::Bool(v)
    }
}
impl From<&str> for ReasonValue {
    fn from(v: &str) -> Self {
        ReasonValue::Text(Arc::from(v))
    }
}
impl From<String> for ReasonValue {
    fn from(v: String) -> Self {
        ReasonValue::Text(Arc::from(v))
    }
}
impl From<Arc<str>> for ReasonValue {
    fn from(v: Arc<str>) -> Self {
        ReasonValue::Text(v)
    }
}

/// The numbers of a reason, in the order they were added, serialized as one JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReasonDetail(pub Vec<(&'static str, ReasonValue)>);

impl ReasonDetail {
    /// The value named `key`, if present.
    pub fn get(&self, key: &str) -> Option<&ReasonValue> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The whole number named `key`, if present.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            ReasonValue::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The text named `key`, if present.
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            ReasonValue::Text(v) => Some(v),
            _ => None,
        }
    }

    /// The number named `key` as a float (whole numbers too), if present.
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.get(key)? {
            ReasonValue::Int(v) => Some(*v as f64),
            ReasonValue::Float(v) => Some(*v),
            _ => None,
        }
    }
}

impl Serialize for ReasonDetail {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Why a pod was chosen for eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionReason {
    /// A stable machine-readable code in UpperCamelCase, e.g. `TooManyRestarts`.
    pub code: Cow<'static, str>,
    /// One short sentence with the numbers, e.g. `restarts 17 >= podRestartThreshold 10`.
    pub text: String,
    /// The numbers as fields.
    pub detail: ReasonDetail,
}

impl EvictionReason {
    /// A reason with `code` and `text` and no numbers yet.
    pub fn new(code: impl Into<Cow<'static, str>>, text: impl Into<String>) -> Self {
        EvictionReason {
            code: code.into(),
            text: text.into(),
            detail: ReasonDetail::default(),
        }
    }

    /// Adds the number (or name) `key` to the detail.
    pub fn with(mut self, key: &'static str, value: impl Into<ReasonValue>) -> Self {
        self.detail.0.push((key, value.into()));
        self
    }

    /// The reason of a plugin that gave none: the plugin's name as code and text (what upstream
    /// records).
    pub fn plugin(plugin: impl Into<Cow<'static, str>>) -> Self {
        let code = plugin.into();
        let text = code.to_string();
        EvictionReason::new(code, text)
    }
}

impl std::fmt::Display for EvictionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A percentage as people read it in a reason: no decimals from 10 % up, one below.
pub fn percent(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_string();
    }
    if v.abs() >= 10.0 || v.fract() == 0.0 {
        format!("{}%", v.round() as i64)
    } else {
        format!("{:.1}%", v)
    }
}

/// A duration in seconds as people read it: `45s`, `12m 5s`, `3h 20m`, `9d 3h`.
pub fn duration(secs: i64) -> String {
    use std::fmt::Write;
    let (sign, s) = if secs < 0 { ("-", -secs) } else { ("", secs) };
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3_600, s % 3_600 / 60, s % 60);
    let mut out = String::with_capacity(12);
    out.push_str(sign);
    // Writing to a String cannot fail.
    let _ = if d > 0 {
        if h > 0 {
            write!(out, "{d}d {h}h")
        } else {
            write!(out, "{d}d")
        }
    } else if h > 0 {
        if m > 0 {
            write!(out, "{h}h {m}m")
        } else {
            write!(out, "{h}h")
        }
    } else if m > 0 {
        if sec > 0 {
            write!(out, "{m}m {sec}s")
        } else {
            write!(out, "{m}m")
        }
    } else {
        write!(out, "{sec}s")
    };
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_naturally() {
        assert_eq!(super::duration(45), "45s");
        assert_eq!(super::duration(725), "12m 5s");
        assert_eq!(super::duration(3_600), "1h");
        assert_eq!(super::duration(12_000), "3h 20m");
        assert_eq!(super::duration(604_800 + 10_800), "7d 3h");
    }

    use super::*;

    #[test]
    fn detail_serializes_as_one_object_in_insertion_order_with_rounded_floats() {
        let r = EvictionReason::new("TooManyRestarts", "restarts 17 >= podRestartThreshold 10")
            .with("restarts", 17u32)
            .with("threshold", 10i32)
            .with("cpuPercent", 91.23456)
            .with("node", "node-4")
            .with("includingInitContainers", true);
        assert_eq!(
            serde_json::to_string(&r.detail).expect("json"),
            r#"{"restarts":17,"threshold":10,"cpuPercent":91.23,"node":"node-4","includingInitContainers":true}"#
        );
        assert_eq!(r.detail.int("restarts"), Some(17));
        assert_eq!(r.detail.text("node"), Some("node-4"));
        assert_eq!(r.detail.number("threshold"), Some(10.0));
        assert_eq!(r.to_string(), "restarts 17 >= podRestartThreshold 10");
    }

    #[test]
    fn a_non_finite_number_is_null_not_an_error() {
        let r = EvictionReason::new("X", "x").with("v", f64::NAN);
        assert_eq!(
            serde_json::to_string(&r.detail).expect("json"),
            r#"{"v":null}"#
        );
    }

    #[test]
    fn percentages_read_naturally() {
        assert_eq!(percent(91.4), "91%");
        assert_eq!(percent(80.0), "80%");
        assert_eq!(percent(2.34), "2.3%");
        assert_eq!(percent(5.0), "5%");
    }
}
