//! A limit written as a count or as a percentage (`3` or `"25%"`), as policy fields such as
//! `maxNoOfPodsToEvictPerNamespace` accept it, and how a percentage turns into a count.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// `N` or `"N%"` (0 ≤ N ≤ 100 for a percentage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitValue {
    /// An absolute number of pods.
    Count(u32),
    /// A percentage (0–100) of a total known only when the cycle runs.
    Percent(u32),
}

impl LimitValue {
    /// The count this limit allows out of `total`. A percentage is rounded **up**, as the
    /// disruption controller rounds a PodDisruptionBudget's `maxUnavailable`: it calls
    /// `intstr.GetScaledValueFromIntOrPercent(maxUnavailable, expectedCount, true)`
    /// (k8s.io/apimachinery/pkg/util/intstr), i.e. `ceil(percent × total / 100)`. So `"10%"` of
    /// 1 pod is 1, of 10 pods 1, of 11 pods 2; `"0%"` is always 0 (evict nothing).
    pub fn resolve(self, total: u32) -> u32 {
        match self {
            LimitValue::Count(n) => n,
            LimitValue::Percent(p) => {
                let v = (u64::from(p) * u64::from(total)).div_ceil(100);
                u32::try_from(v).unwrap_or(u32::MAX)
            }
        }
    }

    /// [`Self::resolve`], asking for the total only when the limit is a percentage.
    pub fn resolve_with(self, total: impl FnOnce() -> u32) -> u32 {
        match self {
            LimitValue::Count(n) => n,
            LimitValue::Percent(_) => self.resolve(total()),
        }
    }

    /// Whether the limit is a percentage.
    pub fn is_percent(self) -> bool {
        matches!(self, LimitValue::Percent(_))
    }

    /// Parses the string form: only `"N%"` with an integer N in 0..=100 (as `intstr`, a string
    /// without `%` is not a count; `"10.5%"`, `"-1%"`, `"150%"` are errors).
    pub fn parse_percent(s: &str) -> Result<Self, String> {
        let Some(digits) = s.strip_suffix('%') else {
            return Err(format!(
                "expected a non-negative integer or a percentage such as \"25%\", got {s:?}"
            ));
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "invalid percentage {s:?} (expected a whole number from 0% to 100%, e.g. \"25%\")"
            ));
        }
        match digits.parse::<u32>() {
            Ok(p) if p <= 100 => Ok(LimitValue::Percent(p)),
            _ => Err(format!(
                "invalid percentage {s:?}: must be at most 100% (a percentage of the pods there are)"
            )),
        }
    }
}

impl fmt::Display for LimitValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitValue::Count(n) => write!(f, "{n}"),
            LimitValue::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Serialize for LimitValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            LimitValue::Count(n) => s.serialize_u32(*n),
            LimitValue::Percent(_) => s.serialize_str(&self.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for LimitValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LimitValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer or a percentage such as \"25%\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LimitValue, E> {
                u32::try_from(v)
                    .map(LimitValue::Count)
                    .map_err(|_| E::custom(format!("{v} is too large (at most {})", u32::MAX)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LimitValue, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("must be >= 0, got {v}"))),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LimitValue, E> {
                Err(E::custom(format!(
                    "expected a whole number or a percentage such as \"25%\", got {v}"
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LimitValue, E> {
                LimitValue::parse_percent(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<LimitValue, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn accepted_forms() {
        for (v, want) in [
            (serde_json::json!(0), LimitValue::Count(0)),
            (serde_json::json!(7), LimitValue::Count(7)),
            (serde_json::json!("0%"), LimitValue::Percent(0)),
            (serde_json::json!("25%"), LimitValue::Percent(25)),
            (serde_json::json!("100%"), LimitValue::Percent(100)),
        ] {
            assert_eq!(parse(v.clone()), Ok(want), "{v}");
        }
    }

    #[test]
    fn rejected_forms_say_why() {
        for (v, needle) in [
            (serde_json::json!("150%"), "at most 100%"),
            (serde_json::json!(-1), "must be >= 0"),
            (serde_json::json!("-1"), "got \"-1\""),
            (serde_json::json!("-1%"), "whole number"),
            (serde_json::json!("abc"), "got \"abc\""),
            (serde_json::json!("10.5%"), "whole number"),
            (serde_json::json!("%"), "whole number"),
            (serde_json::json!("5"), "got \"5\""),
            (serde_json::json!(2.5), "whole number"),
            (
                serde_json::json!(true),
                "non-negative integer or a percentage",
            ),
        ] {
            let e = parse(v.clone()).expect_err(&v.to_string());
            assert!(e.contains(needle), "{v}: {e}");
        }
    }

    /// `ceil(p × total / 100)`, as `GetScaledValueFromIntOrPercent(…, true)`.
    #[test]
    fn percentages_round_up_as_pdb_max_unavailable() {
        for (p, total, want) in [
            (10, 10, 1),
            (10, 1000, 100),
            (10, 1, 1),
            (10, 11, 2),
            (10, 0, 0),
            (25, 6, 2),
            (33, 6, 2),
            (34, 6, 3),
            (50, 9, 5),
            (0, 1000, 0),
            (100, 7, 7),
        ] {
            assert_eq!(
                LimitValue::Percent(p).resolve(total),
                want,
                "{p}% of {total}"
            );
        }
        assert_eq!(LimitValue::Count(3).resolve(1000), 3);
        assert_eq!(LimitValue::Count(3).resolve(0), 3);
    }

    #[test]
    fn round_trips_through_serialisation() {
        for v in [LimitValue::Count(4), LimitValue::Percent(25)] {
            let j = serde_json::to_value(v).expect("serialises");
            assert_eq!(parse(j), Ok(v));
        }
        assert_eq!(
            serde_json::to_string(&LimitValue::Count(4)).ok().as_deref(),
            Some("4")
        );
    }
}
