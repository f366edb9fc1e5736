//! Type checking of stored objects against the k8s-openapi types, so malformed objects are
//! rejected like kube-apiserver's decoder does (400 "… cannot be handled as a …").
use k8s_openapi::api::{
    admissionregistration::v1 as adm, apps::v1 as apps, batch::v1 as batch,
    coordination::v1 as coord, core::v1 as core, events::v1 as events, policy::v1 as policy,
    scheduling::v1 as sched,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceDef;

fn check<T: DeserializeOwned>(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    serde_json::from_value::<T>(obj.clone())
        .map(|_| ())
        .map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {e}",
                def.kind, def.version, def.kind
            ))
        })
}

/// Rewrites base64 byte fields the way kube-apiserver's decoder reads them: Go's `encoding/json`
/// decodes `[]byte` with `base64.StdEncoding`, which skips `\r` and `\n` (kustomize's
/// secretGenerator wraps at 70 characters), and the object is stored and served re-encoded without
/// them. Covers Secret `data`, ConfigMap `binaryData` and webhook `clientConfig.caBundle`.
pub fn canonicalize_bytes(def: &ResourceDef, obj: &mut Value) {
    fn strip(v: &mut Value) {
        if let Value::String(s) = v
            && s.contains(['\r', '\n'])
        {
            s.retain(|c| c != '\r' && c != '\n');
        }
    }
    let map_field = match (def.group, def.resource) {
        ("", "secrets") => Some("data"),
        ("", "configmaps") => Some("binaryData"),
        _ => None,
    };
    if let Some(field) = map_field {
        if let Some(Value::Object(m)) = obj.get_mut(field) {
            m.values_mut().for_each(strip);
        }
        return;
    }
    if def.group == "admissionregistration.k8s.io"
        && let Some(Value::Array(hooks)) = obj.get_mut("webhooks")
    {
        for hook in hooks {
            if let Some(ca) = hook
                .get_mut("clientConfig")
                .and_then(|c| c.get_mut("caBundle"))
            {
                strip(ca);
            }
        }
    }
}

/// Decodes `obj` as its kind's type; kinds without a modelled type pass.
pub fn validate(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    match (def.group, def.resource) {
        ("", "pods") => check::<core::Pod>(def, obj),
        ("", "nodes") => check::<core::Node>(def, obj),
        ("", "namespaces") => check::<core::Namespace>(def, obj),
        ("", "services") => check::<core::Service>(def, obj),
        ("", "configmaps") => check::<core::ConfigMap>(def, obj),
        ("", "secrets") => check::<core::Secret>(def, obj),
        ("", "serviceaccounts") => check::<core::ServiceAccount>(def, obj),
        ("", "persistentvolumeclaims") => check::<core::PersistentVolumeClaim>(def, obj),
        ("", "events") => check::<core::Event>(def, obj),
        ("events.k8s.io", "events") => check::<events::Event>(def, obj),
        ("apps", "deployments") => check::<apps::Deployment>(def, obj),
        ("apps", "replicasets") => check::<apps::ReplicaSet>(def, obj),
        ("apps", "statefulsets") => check::<apps::StatefulSet>(def, obj),
        ("apps", "daemonsets") => check::<apps::DaemonSet>(def, obj),
        ("batch", "jobs") => check::<batch::Job>(def, obj),
        ("policy", "poddisruptionbudgets") => check::<policy::PodDisruptionBudget>(def, obj),
        ("scheduling.k8s.io", "priorityclasses") => check::<sched::PriorityClass>(def, obj),
        ("coordination.k8s.io", "leases") => check::<coord::Lease>(def, obj),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            check::<adm::ValidatingWebhookConfiguration>(def, obj)
        }
        _ => Ok(()),
    }
}
