//! Taints and tolerations (Kubernetes `Toleration.ToleratesTaint`).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `toleration` tolerates `taint`: effects match (empty effect = all), keys match (empty
/// key with `Exists` = all keys), and the value matches for `Equal` (the empty operator is `Equal`).
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
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "" | "Equal" => {
            // An empty key is only valid with Exists.
            !key.is_empty()
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
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
}
