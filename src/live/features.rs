//! Feature gates (`--feature-gates Name=true,Other=false`), as upstream's
//! `k8s.io/component-base/featuregate`: the known gates, their defaults, and `AllAlpha` /
//! `AllBeta` to switch every alpha / beta gate at once.

use std::collections::BTreeMap;

/// Upstream's only gate (alpha, off by default): an eviction the cluster answers with 429
/// "Eviction triggered evacuation" for a pod annotated [`EVICTION_REQUEST_ANNOTATION`] is an
/// eviction in progress (in background), not an error.
pub const EVICTIONS_IN_BACKGROUND: &str = "EvictionsInBackground";

/// The pod annotation asking for an eviction in background.
pub const EVICTION_REQUEST_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/request-evict-only";
/// The pod annotation an evacuating controller sets while the eviction in background runs.
pub const EVICTION_IN_PROGRESS_ANNOTATION: &str =
    "descheduler.alpha.kubernetes.io/eviction-in-progress";

/// Maturity of a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PreRelease {
    Alpha,
    #[allow(dead_code)]
    Beta,
}

/// (name, default, maturity) of every known gate.
const KNOWN: &[(&str, bool, PreRelease)] = &[(EVICTIONS_IN_BACKGROUND, false, PreRelease::Alpha)];

const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

/// The gates' values after `--feature-gates`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    set: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Parses the values of every `--feature-gates` occurrence (each `Name=bool[,Name=bool…]`;
    /// later ones win). An unknown gate or a value that is not a Go boolean is an error naming it.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self, String> {
        let mut wanted: BTreeMap<String, bool> = BTreeMap::new();
        for value in values {
            for item in value.as_ref().split(',') {
                let item = item.trim();
                if item.is_empty() {
                    continue;
                }
                let (key, val) = match item.split_once('=') {
                    Some((k, v)) => (k.trim(), v.trim()),
                    None => return Err(format!("missing bool value for {item}")),
                };
                let val = parse_go_bool(val)
                    .ok_or_else(|| format!("invalid value of {key}={val}: not a boolean"))?;
                wanted.insert(key.to_string(), val);
            }
        }
        let mut set = BTreeMap::new();
        let all = |maturity: PreRelease| {
            let name = if maturity == PreRelease::Alpha {
                ALL_ALPHA
            } else {
                ALL_BETA
            };
            wanted.get(name).copied()
        };
        for key in wanted.keys() {
            let known =
                key == ALL_ALPHA || key == ALL_BETA || KNOWN.iter().any(|(name, _, _)| name == key);
            if !known {
                return Err(format!("unrecognized feature gate: {key}"));
            }
        }
        for &(name, default, maturity) in KNOWN {
            let value = wanted
                .get(name)
                .copied()
                .or_else(|| all(maturity))
                .unwrap_or(default);
            set.insert(name, value);
        }
        Ok(FeatureGates { set })
    }

    /// Whether gate `name` is on (unknown names are off).
    pub fn enabled(&self, name: &str) -> bool {
        match self.set.get(name) {
            Some(v) => *v,
            None => KNOWN
                .iter()
                .find(|(n, _, _)| *n == name)
                .is_some_and(|(_, d, _)| *d),
        }
    }

    /// `EvictionsInBackground`.
    pub fn evictions_in_background(&self) -> bool {
        self.enabled(EVICTIONS_IN_BACKGROUND)
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_syntax() {
        let g = FeatureGates::parse(&["EvictionsInBackground=true"]).expect("known gate");
        assert!(g.evictions_in_background());
        let g = FeatureGates::parse::<&str>(&[]).expect("none");
        assert!(!g.evictions_in_background());
        let g = FeatureGates::parse(&["EvictionsInBackground=true", "EvictionsInBackground=false"])
            .expect("repeated");
        assert!(!g.evictions_in_background());
        let g = FeatureGates::parse(&["AllAlpha=true"]).expect("AllAlpha");
        assert!(g.evictions_in_background());
        let g = FeatureGates::parse(&["AllAlpha=true,EvictionsInBackground=false"]).expect("both");
        assert!(!g.evictions_in_background());
        let g = FeatureGates::parse(&[" EvictionsInBackground = T ,"]).expect("spaces");
        assert!(g.evictions_in_background());
    }

    #[test]
    fn refuses_unknown_gates_and_bad_values() {
        let e =
            FeatureGates::parse(&["EvictionsInBackground=true,Nope=true"]).expect_err("unknown");
        assert!(e.contains("unrecognized feature gate: Nope"), "{e}");
        let e = FeatureGates::parse(&["EvictionsInBackground"]).expect_err("no value");
        assert!(e.contains("EvictionsInBackground"), "{e}");
        let e = FeatureGates::parse(&["EvictionsInBackground=yes"]).expect_err("bad bool");
        assert!(e.contains("EvictionsInBackground=yes"), "{e}");
    }
}
