//! The shipped webhook configuration registers the guard narrowly (rule 8 of the eviction notes)
//! and its RBAC covers the calls the guard makes.

use serde_json::Value;

fn load(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

#[test]
fn webhook_registration_is_narrow() {
    let cfg = load("webhook-config/base/validatingwebhookconfiguration.yaml");
    assert_eq!(cfg["kind"], "ValidatingWebhookConfiguration");
    let hooks = cfg["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 1);
    let w = &hooks[0];
    assert_eq!(w["name"], "eviction-guard.kube-descheduler.io");
    assert_eq!(w["admissionReviewVersions"], serde_json::json!(["v1"]));
    assert_eq!(w["sideEffects"], "NoneOnDryRun");
    assert_eq!(w["failurePolicy"], "Ignore");
    let timeout = w["timeoutSeconds"].as_i64().unwrap();
    assert!((1..=5).contains(&timeout));
    assert!(
        w.get("objectSelector").is_none(),
        "objectSelector would match the Eviction, not the Pod"
    );
    let rules = w["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0]["operations"], serde_json::json!(["CREATE"]));
    assert_eq!(rules[0]["resources"], serde_json::json!(["pods/eviction"]));
    assert_eq!(rules[0]["apiGroups"], serde_json::json!([""]));
    let expr = &w["namespaceSelector"]["matchExpressions"][0];
    assert_eq!(expr["key"], "kubernetes.io/metadata.name");
    assert_eq!(expr["operator"], "NotIn");
    let excluded: Vec<&str> = expr["values"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        excluded.contains(&"kube-system") && excluded.contains(&"kube-descheduler"),
        "{excluded:?}"
    );
    assert_eq!(w["clientConfig"]["service"]["path"], "/validate/eviction");
    assert_eq!(
        w["clientConfig"]["service"]["namespace"],
        "kube-descheduler"
    );
}

#[test]
fn webhook_deployment_is_highly_available() {
    let d = load("webhook-config/base/deployment.yaml");
    assert!(d["spec"]["replicas"].as_i64().unwrap() >= 2);
    let pod = &d["spec"]["template"]["spec"];
    assert!(
        pod["topologySpreadConstraints"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    let c = &pod["containers"][0];
    assert!(c["lifecycle"]["preStop"].is_object(), "preStop delay");
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(args[0], "webhook");
    assert!(args.iter().any(|a| a.starts_with("--tls-cert-file=")));
    let pdb = load("webhook-config/base/pdb.yaml");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
}

#[test]
fn rbac_covers_the_guard_api_calls() {
    let text = std::fs::read_to_string(format!(
        "{}/webhook-config/base/rbac.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let allows = |group: &str, resource: &str, verb: &str| {
        role["rules"].as_array().unwrap().iter().any(|r| {
            let has = |k: &str, v: &str| r[k].as_array().is_some_and(|a| a.iter().any(|x| x == v));
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    // Every call src/apicalls.rs lists for the guard (the chart's RBAC test checks the same list),
    // but the EvictionRequest responder's, which its overlay adds (below).
    use kube_descheduler::apicalls::{Component, Needed, calls_of};
    let calls: Vec<_> = calls_of(Component::Guard)
        .filter(|c| c.needed != Needed::EvictionResponder)
        .collect();
    assert!(
        calls
            .iter()
            .any(|c| c.resource == "pods" && c.verb == "watch")
    );
    for c in calls {
        assert!(
            allows(c.group, &c.rbac_resource(), c.verb),
            "missing {} {}/{} ({})",
            c.verb,
            c.group,
            c.rbac_resource(),
            c.why
        );
    }
    assert!(
        !allows("", "pods", "delete"),
        "the guard never deletes pods"
    );
}

#[test]
fn the_eviction_responder_overlay_grants_the_responders_calls() {
    use kube_descheduler::apicalls::{Component, Needed, calls_of};
    let dir = format!(
        "{}/webhook-config/overlays/eviction-responder",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(format!("{dir}/rbac-patch.yaml")).unwrap();
    let ops: Vec<Value> = serde_saphyr::from_str(&text).unwrap();
    let rules: Vec<&Value> = ops.iter().map(|op| &op["value"]).collect();
    let responder: Vec<_> = calls_of(Component::Guard)
        .filter(|c| c.needed == Needed::EvictionResponder)
        .collect();
    assert!(!responder.is_empty());
    for c in &responder {
        let has =
            |r: &Value, k: &str, v: &str| r[k].as_array().is_some_and(|a| a.iter().any(|x| x == v));
        assert!(
            rules.iter().any(|r| has(r, "apiGroups", c.group)
                && has(r, "resources", &c.rbac_resource())
                && has(r, "verbs", c.verb)),
            "missing {} {}/{}",
            c.verb,
            c.group,
            c.rbac_resource()
        );
    }
    // Nothing more than those calls.
    let granted: usize = rules
        .iter()
        .map(|r| {
            r["verbs"].as_array().map_or(0, Vec::len)
                * r["resources"].as_array().map_or(0, Vec::len)
        })
        .sum();
    assert_eq!(granted, responder.len(), "{rules:?}");
    let kustomization = std::fs::read_to_string(format!("{dir}/kustomization.yaml")).unwrap();
    assert!(kustomization.contains("value: --eviction-responder"));
}
