//! Taints and tolerations (Kubernetes `Toleration.ToleratesTaint`).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `toleration` tolerates `taint` (`Toleration.ToleratesTaint` with comparison operators
/// enabled, as upstream calls it): effects match (empty effect = all), keys match (empty key = all
/// keys), then `Equal` (also the empty operator) compares values, `Exists` matches any value, and
/// `Lt` / `Gt` compare canonical decimal integers (taint value < / > toleration value).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_ok = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    if !effect_ok {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    let tol_value = toleration.value.as_deref().unwrap_or("");
    let taint_value = taint.value.as_deref().unwrap_or("");
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => tol_value == taint_value,
        "Exists" => true,
        op @ ("Lt" | "Gt") => match (decimal_integer(tol_value), decimal_integer(taint_value)) {
            (Some(t), Some(v)) => {
                if op == "Lt" {
                    v < t
                } else {
                    v > t
                }
            }
            _ => false,
        },
        _ => false,
    }
}

/// Parses a decimal integer in canonical form (`0`, `-12`, `340`; no `+`, no leading zeros).
fn decimal_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    if canonical { s.parse().ok() } else { None }
}

/// Whether some toleration tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// Whether every taint of `taints` accepted by `filter` is tolerated.
pub fn tolerates_all(
    tolerations: &[Toleration],
    taints: &[Taint],
    filter: impl Fn(&Taint) -> bool,
) -> bool {
    taints
        .iter()
        .filter(|t| filter(t))
        .all(|t| tolerated(tolerations, t))
}

/// The taint filter scheduling uses: `NoSchedule` and `NoExecute`.
pub fn is_scheduling_taint(t: &Taint) -> bool {
    t.effect == "NoSchedule" || t.effect == "NoExecute"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            ..Default::default()
        }
    }
    fn tol(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn toleration_table() {
        let t = taint("k", Some("v"), "NoSchedule");
        let cases = [
            (tol(Some("k"), None, Some("v"), None), true),
            (
                tol(Some("k"), Some("Equal"), Some("v"), Some("NoSchedule")),
                true,
            ),
            (tol(Some("k"), Some("Equal"), Some("w"), None), false),
            (tol(Some("k"), Some("Exists"), None, None), true),
            (tol(None, Some("Exists"), None, None), true),
            (tol(None, Some("Exists"), None, Some("NoExecute")), false),
            (tol(Some("other"), Some("Exists"), None, None), false),
            (tol(None, None, None, None), false),
            (tol(Some("k"), Some("Bogus"), Some("v"), None), false),
        ];
        for (i, (tl, want)) in cases.iter().enumerate() {
            assert_eq!(tolerates(tl, &t), *want, "case {i}");
        }
        let taints = [t.clone(), taint("soft", None, "PreferNoSchedule")];
        assert!(tolerates_all(
            &[tol(Some("k"), None, Some("v"), None)],
            &taints,
            is_scheduling_taint
        ));
        assert!(!tolerates_all(&[], &taints, is_scheduling_taint));
    }

    #[test]
    fn comparison_operators() {
        let t = taint("gpu-gen", Some("5"), "NoSchedule");
        let cases = [
            (tol(Some("gpu-gen"), Some("Gt"), Some("4"), None), true),
            (tol(Some("gpu-gen"), Some("Gt"), Some("5"), None), false),
            (tol(Some("gpu-gen"), Some("Lt"), Some("6"), None), true),
            (tol(Some("gpu-gen"), Some("Lt"), Some("5"), None), false),
            (tol(Some("gpu-gen"), Some("Lt"), Some("06"), None), false),
            (tol(Some("gpu-gen"), Some("Lt"), Some("x"), None), false),
            (tol(Some("gpu-gen"), Some("Gt"), Some("-1"), None), true),
        ];
        for (i, (tl, want)) in cases.iter().enumerate() {
            assert_eq!(tolerates(tl, &t), *want, "case {i}");
        }
        let bad = taint("gpu-gen", Some("five"), "NoSchedule");
        assert!(!tolerates(
            &tol(Some("gpu-gen"), Some("Gt"), Some("1"), None),
            &bad
        ));
    }
}
