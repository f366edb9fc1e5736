//! Lean decoding of HorizontalPodAutoscalers (autoscaling/v1 and v2): only the scale target is
//! read, and only an autoscaler of a Deployment is kept — the guard's rule B does not change the
//! replicas of a Deployment an autoscaler scales, and that is all the engine needs to know.

use serde::Deserialize;

use super::json::decode_json;
use super::model::HpaTarget;

#[derive(Deserialize)]
struct LeanHpa {
    metadata: Option<Meta>,
    spec: Option<Spec>,
}

#[derive(Deserialize)]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    scale_target_ref: Option<TargetRef>,
}

/// `spec.scaleTargetRef` (the same fields in autoscaling/v1 and v2).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TargetRef {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
}

/// The Deployment an autoscaler (its JSON text) scales: `Ok(None)` when it scales something else
/// (a StatefulSet, a custom resource, a Deployment of another API group). The namespace defaults
/// to `default`, as for every other namespaced object of a snapshot file. Errors name the field.
pub fn hpa_target(raw: &str) -> Result<Option<HpaTarget>, String> {
    let h: LeanHpa = decode_json(raw)?;
    let meta = h.metadata.unwrap_or(Meta {
        name: None,
        namespace: None,
    });
    let name = meta
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "metadata.name: missing".to_string())?;
    let Some(target) = h.spec.and_then(|s| s.scale_target_ref) else {
        return Ok(None);
    };
    // The same test the webhook applies to autoscalers it lists (an absent group is `apps`).
    let is_deployment = target.kind.as_deref() == Some("Deployment")
        && target
            .api_version
            .as_deref()
            .is_none_or(|v| v.is_empty() || v.starts_with("apps/"));
    let deployment = target.name.filter(|n| !n.is_empty());
    Ok(match deployment {
        Some(deployment) if is_deployment => Some(HpaTarget {
            namespace: meta
                .namespace
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".into()),
            name,
            deployment,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa(api_version: &str, target: &str) -> String {
        format!(
            r#"{{"apiVersion":"{api_version}","kind":"HorizontalPodAutoscaler",
                "metadata":{{"name":"web-hpa","namespace":"shop"}},
                "spec":{{"scaleTargetRef":{target},"minReplicas":2,"maxReplicas":9}}}}"#
        )
    }

    #[test]
    fn v2_and_v1_autoscalers_of_a_deployment_are_kept() {
        let want = HpaTarget {
            namespace: "shop".into(),
            name: "web-hpa".into(),
            deployment: "web".into(),
        };
        for v in ["autoscaling/v2", "autoscaling/v1"] {
            let raw = hpa(
                v,
                r#"{"apiVersion":"apps/v1","kind":"Deployment","name":"web"}"#,
            );
            assert_eq!(hpa_target(&raw), Ok(Some(want.clone())), "{v}");
        }
        // No apiVersion in the reference: the Deployment kind decides.
        let raw = hpa("autoscaling/v2", r#"{"kind":"Deployment","name":"web"}"#);
        assert_eq!(hpa_target(&raw), Ok(Some(want)));
    }

    #[test]
    fn autoscalers_of_other_targets_are_ignored() {
        for target in [
            r#"{"apiVersion":"apps/v1","kind":"StatefulSet","name":"web"}"#,
            r#"{"apiVersion":"example.com/v1","kind":"Deployment","name":"web"}"#,
            r#"{"apiVersion":"apps/v1","kind":"Deployment","name":""}"#,
        ] {
            assert_eq!(
                hpa_target(&hpa("autoscaling/v2", target)),
                Ok(None),
                "{target}"
            );
        }
        let no_spec = r#"{"kind":"HorizontalPodAutoscaler","metadata":{"name":"x"}}"#;
        assert_eq!(hpa_target(no_spec), Ok(None));
    }

    #[test]
    fn bad_autoscalers_are_errors_naming_the_field() {
        let e = hpa_target(&hpa("autoscaling/v2", r#"{"kind":"Deployment","name":7}"#))
            .expect_err("a number is not a name");
        assert!(e.contains("spec.scaleTargetRef.name"), "{e}");
        let e =
            hpa_target(r#"{"kind":"HorizontalPodAutoscaler","metadata":{}}"#).expect_err("no name");
        assert!(e.contains("metadata.name"), "{e}");
    }
}
