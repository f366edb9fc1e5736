//! Typed parsing of rendered objects, with unknown fields as errors.

use super::*;

/// Paths of `orig` that the typed round trip lost (unknown fields) or changed.
pub(crate) fn lost_fields(orig: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (orig, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (k, v) in o {
                let p = format!("{path}.{k}");
                if is_empty(v) {
                    continue;
                }
                match t.get(k) {
                    Some(tv) => lost_fields(v, tv, &p, out),
                    None => out.push(format!("{p} (unknown field)")),
                }
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            for (i, v) in o.iter().enumerate() {
                match t.get(i) {
                    Some(tv) => lost_fields(v, tv, &format!("{path}[{i}]"), out),
                    None => out.push(format!("{path}[{i}] (lost)")),
                }
            }
        }
        (o, t) if o == t => {}
        // Quantities and int-or-strings may change representation but not meaning.
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n))
            if n.to_string() == *s => {}
        (o, t) => out.push(format!("{path}: {o} became {t}")),
    }
}

pub(crate) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

pub(crate) fn strict<T: DeserializeOwned + serde::Serialize>(obj: &Value) -> T {
    let typed: T = serde_json::from_value(obj.clone()).unwrap_or_else(|e| {
        panic!(
            "{} {} does not parse: {e}\n{obj:#}",
            obj["kind"], obj["metadata"]["name"]
        )
    });
    let back = serde_json::to_value(&typed).expect("serialize");
    let mut lost = Vec::new();
    lost_fields(obj, &back, "", &mut lost);
    assert!(
        lost.is_empty(),
        "{} {} has fields its type does not know: {lost:?}",
        obj["kind"],
        obj["metadata"]["name"]
    );
    typed
}

/// Loose shape check of a custom resource: apiVersion, metadata and only the expected spec keys.
pub(crate) fn check_custom(obj: &Value, api_version: &str, spec_keys: &[&str], required: &[&str]) {
    let what = format!("{} {}", obj["kind"], obj["metadata"]["name"]);
    assert_eq!(obj["apiVersion"], api_version, "{what}: apiVersion");
    assert!(
        obj["metadata"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty()),
        "{what}: name"
    );
    let top: BTreeSet<&str> = obj
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert!(
        top.is_subset(&BTreeSet::from(["apiVersion", "kind", "metadata", "spec"])),
        "{what}: unexpected top-level fields {top:?}"
    );
    let spec = obj["spec"]
        .as_object()
        .unwrap_or_else(|| panic!("{what}: no spec"));
    for k in spec.keys() {
        assert!(
            spec_keys.contains(&k.as_str()),
            "{what}: unknown spec field `{k}`"
        );
    }
    for k in required {
        assert!(spec.contains_key(*k), "{what}: spec.{k} missing");
    }
}

/// Parses every object strictly; returns the typed RBAC objects for the evaluator.
pub(crate) fn check_all_typed(r: &Rendered) -> Rbac {
    let mut rbac = Rbac::default();
    for obj in &r.objects {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let api = obj["apiVersion"].as_str().unwrap_or_default();
        match (api, kind) {
            ("v1", "ConfigMap") => drop(strict::<ConfigMap>(obj)),
            ("v1", "ServiceAccount") => drop(strict::<ServiceAccount>(obj)),
            ("v1", "Service") => drop(strict::<Service>(obj)),
            ("apps/v1", "Deployment") => drop(strict::<Deployment>(obj)),
            ("batch/v1", "CronJob") => drop(strict::<CronJob>(obj)),
            ("batch/v1", "Job") => drop(strict::<Job>(obj)),
            ("policy/v1", "PodDisruptionBudget") => drop(strict::<PodDisruptionBudget>(obj)),
            ("networking.k8s.io/v1", "NetworkPolicy") => drop(strict::<
                k8s_openapi::api::networking::v1::NetworkPolicy,
            >(obj)),
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                drop(strict::<ValidatingWebhookConfiguration>(obj))
            }
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                drop(strict::<
                    k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
                >(obj))
            }
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => rbac.cluster_roles.push(strict(obj)),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                rbac.cluster_role_bindings.push(strict(obj))
            }
            ("rbac.authorization.k8s.io/v1", "Role") => rbac.roles.push(strict(obj)),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => rbac.role_bindings.push(strict(obj)),
            ("cert-manager.io/v1", "Certificate") => check_custom(
                obj,
                "cert-manager.io/v1",
                &[
                    "secretName",
                    "duration",
                    "renewBefore",
                    "commonName",
                    "dnsNames",
                    "usages",
                    "privateKey",
                    "issuerRef",
                ],
                &["secretName", "dnsNames", "issuerRef"],
            ),
            ("cert-manager.io/v1", "Issuer") => {
                check_custom(obj, "cert-manager.io/v1", &["selfSigned", "ca"], &[])
            }
            ("monitoring.coreos.com/v1", "ServiceMonitor") => check_service_monitor(obj),
            _ => panic!("unexpected object {api} {kind} {}", obj["metadata"]["name"]),
        }
        check_namespace(r, obj, kind);
    }
    rbac
}

/// A ServiceMonitor's spec and endpoints carry only the fields the chart is meant to render.
fn check_service_monitor(obj: &Value) {
    check_custom(
        obj,
        "monitoring.coreos.com/v1",
        &["namespaceSelector", "selector", "endpoints", "jobLabel"],
        &["selector", "endpoints"],
    );
    for ep in obj["spec"]["endpoints"].as_array().unwrap() {
        for k in ep.as_object().unwrap().keys() {
            assert!(
                [
                    "port",
                    "path",
                    "scheme",
                    "honorLabels",
                    "interval",
                    "scrapeTimeout",
                    "bearerTokenFile",
                    "tlsConfig",
                    "metricRelabelings",
                    "relabelings"
                ]
                .contains(&k.as_str()),
                "ServiceMonitor endpoint: unknown field `{k}`"
            );
        }
    }
}

/// Namespaced objects land in the release namespace unless they must not; cluster-scoped
/// ones have none.
fn check_namespace(r: &Rendered, obj: &Value, kind: &str) {
    let ns = obj["metadata"]["namespace"].as_str();
    let cluster_scoped = matches!(
        kind,
        "ClusterRole"
            | "ClusterRoleBinding"
            | "ValidatingWebhookConfiguration"
            | "MutatingWebhookConfiguration"
    );
    if cluster_scoped {
        assert!(ns.is_none(), "{kind} is cluster-scoped but has a namespace");
    } else if !matches!(kind, "Role" | "RoleBinding" | "ServiceMonitor") {
        assert_eq!(
            ns,
            Some(r.release_namespace.as_str()),
            "{kind} {} namespace",
            obj["metadata"]["name"]
        );
    }
}
