//! Small helpers shared by the controllers (selectors, owners, conditions, time).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::Action;

/// `true` when `labels` satisfy a label selector. An empty selector matches everything; callers
/// decide what an absent (`None`) selector means.
pub fn selector_matches(sel: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    if let Some(ml) = &sel.match_labels {
        for (k, v) in ml {
            if labels.get(k) != Some(v) {
                return false;
            }
        }
    }
    for req in sel.match_expressions.iter().flatten() {
        let values = req.values.as_deref().unwrap_or(&[]);
        let have = labels.get(&req.key);
        let ok = match req.operator.as_str() {
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => have.is_none_or(|v| !values.contains(v)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// `true` when the selector selects nothing by construction (no requirements at all is "everything",
/// so this is only used for display decisions).
pub fn selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|m| m.is_empty())
}

/// The controlling owner reference of an object, if any.
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// `true` when `meta` is controlled by the object `(kind, owner)`. Matches by uid when both sides
/// have one, otherwise by name (snapshots written by hand often lack uids).
pub fn is_controlled_by(meta: &ObjectMeta, kind: &str, owner: &ObjectMeta) -> bool {
    let Some(r) = controller_ref(meta) else {
        return false;
    };
    if r.kind != kind {
        return false;
    }
    match (r.uid.as_str(), owner.uid.as_deref()) {
        (ref_uid, Some(uid)) if !ref_uid.is_empty() && !uid.is_empty() => ref_uid == uid,
        _ => Some(&r.name) == owner.name.as_ref(),
    }
}

/// Builds the controller owner reference pointing to `owner`.
pub fn owner_ref(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Namespace of an object (`default` when absent).
pub fn ns(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

/// Name of an object (empty when absent).
pub fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// Pod phase (`Pending` when absent).
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Succeeded or Failed.
pub fn pod_is_terminal(pod: &Pod) -> bool {
    matches!(pod_phase(pod), "Succeeded" | "Failed")
}

/// Has a deletion timestamp.
pub fn pod_is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Neither terminal nor terminating (upstream `controller.IsPodActive`).
pub fn pod_is_active(pod: &Pod) -> bool {
    !pod_is_terminal(pod) && !pod_is_terminating(pod)
}

/// The pod's Ready condition when it is True, with its transition time.
pub fn pod_ready_since(pod: &Pod) -> Option<Option<jiff::Timestamp>> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// Ready condition is True (upstream `podutil.IsPodReady`).
pub fn pod_is_ready(pod: &Pod) -> bool {
    pod_ready_since(pod).is_some()
}

/// Ready for longer than `min_ready_seconds` (upstream `podutil.IsPodAvailable`: with 0 it is
/// just Ready; otherwise `lastTransitionTime + minReadySeconds` must be strictly before `now`).
pub fn pod_is_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    match pod_ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(since)) => add_secs(since, f64::from(min_ready_seconds)) < now,
    }
}

/// `ts + secs`, saturating on overflow.
pub fn add_secs(ts: jiff::Timestamp, secs: f64) -> jiff::Timestamp {
    let Ok(d) = jiff::SignedDuration::try_from_secs_f64(secs) else {
        return if secs > 0.0 {
            jiff::Timestamp::MAX
        } else {
            jiff::Timestamp::MIN
        };
    };
    ts.checked_add(d).unwrap_or(if secs > 0.0 {
        jiff::Timestamp::MAX
    } else {
        jiff::Timestamp::MIN
    })
}

/// Seconds from `a` to `b` (negative when `b` is earlier).
pub fn secs_between(a: jiff::Timestamp, b: jiff::Timestamp) -> f64 {
    b.duration_since(a).as_secs_f64()
}

/// Resolves an int-or-percent against `total` (upstream `intstr.GetScaledValueFromIntOrPercent`).
/// Plain numeric strings are accepted as integers; anything else yields `None`.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Option<i32> {
    match v {
        IntOrString::Int(i) => Some(*i),
        IntOrString::String(s) => {
            let s = s.trim();
            if let Some(p) = s.strip_suffix('%') {
                let p: i64 = p.trim().parse().ok()?;
                let prod = p.checked_mul(i64::from(total))?;
                let v = if round_up {
                    prod.checked_add(99)?.div_euclid(100)
                } else {
                    prod.div_euclid(100)
                };
                i32::try_from(v).ok()
            } else {
                s.parse().ok()
            }
        }
    }
}

/// Serialises a typed object into an `Update` action (skipped if it cannot be serialised).
pub fn update_action<T: Serialize>(obj: &T) -> Option<Action> {
    serde_json::to_value(obj).ok().map(Action::Update)
}

/// Serialises a typed object into a `Create` action.
pub fn create_action<T: Serialize>(obj: &T) -> Option<Action> {
    serde_json::to_value(obj).ok().map(Action::Create)
}

/// `Delete` action for an object with the given type identity.
pub fn delete_action(api_version: &str, kind: &str, meta: &ObjectMeta, namespaced: bool) -> Action {
    Action::Delete {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: namespaced.then(|| ns(meta).to_string()),
        name: name(meta).to_string(),
        uid: meta.uid.clone().unwrap_or_default(),
    }
}

/// `true` when two serialisable values have the same JSON form.
pub fn same_json<T: Serialize>(a: &T, b: &T) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// 32-bit FNV-1a.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Maps arbitrary bytes onto the "safe" alphabet Kubernetes uses for generated name suffixes
/// (no vowels, no confusable characters; see apimachinery `util/rand`).
pub fn safe_encode(s: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn scaled_values() {
        let cases = [
            (IntOrString::Int(3), 10, true, Some(3)),
            (IntOrString::String("25%".into()), 1, true, Some(1)),
            (IntOrString::String("25%".into()), 1, false, Some(0)),
            (IntOrString::String("50%".into()), 5, true, Some(3)),
            (IntOrString::String("50%".into()), 5, false, Some(2)),
            (IntOrString::String("2".into()), 5, false, Some(2)),
            (IntOrString::String("x%".into()), 5, false, None),
            (
                IntOrString::String("9223372036854775807%".into()),
                5,
                true,
                None,
            ),
        ];
        for (v, total, up, want) in cases {
            assert_eq!(
                scaled_value(&v, total, up),
                want,
                "{v:?} of {total} up={up}"
            );
        }
    }

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let req = |op: &str, vals: &[&str]| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: op.into(),
                values: Some(vals.iter().map(|s| s.to_string()).collect()),
            }]),
            ..Default::default()
        };
        assert!(selector_matches(&LabelSelector::default(), Some(&labels)));
        assert!(selector_matches(&req("In", &["web"]), Some(&labels)));
        assert!(!selector_matches(&req("NotIn", &["web"]), Some(&labels)));
        assert!(selector_matches(&req("NotIn", &["web"]), None));
        assert!(selector_matches(&req("Exists", &[]), Some(&labels)));
        assert!(!selector_matches(&req("DoesNotExist", &[]), Some(&labels)));
        assert!(!selector_matches(&req("Bogus", &[]), Some(&labels)));
    }
}
