//! The guard as an EvictionRequest responder: its flags, its RBAC on lifecycle.k8s.io evictions,
//! and the opt-in MutatingWebhookConfiguration adding the responder to pods.

use super::*;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;

fn guard_rules(r: &Rendered) -> Vec<Value> {
    r.get("ClusterRole", "kube-descheduler-webhook")["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn grants_evictions(r: &Rendered) -> bool {
    guard_rules(r)
        .iter()
        .any(|rule| rule["apiGroups"] == json!(["lifecycle.k8s.io"]))
}

#[test]
fn off_by_default_without_flags_rules_or_mutation() {
    let r = render_ok(json!({}));
    check_everything(&r);
    let args = r.args("webhook");
    assert!(
        !args.iter().any(|a| a.starts_with("--eviction-responder")),
        "{args:?}"
    );
    assert!(!grants_evictions(&r));
    assert!(r.all("MutatingWebhookConfiguration").is_empty());
}

#[test]
fn enabled_adds_the_flags_and_exactly_the_eviction_rbac() {
    let r = render_ok(json!({"webhook": {"evictionResponder": {
        "enabled": true, "heartbeat": "45s", "requesters": ["descheduler.kube-descheduler.io/run", "acme.io/drainer"]
    }}}));
    // check_rbac: every call the responder makes is granted, and nothing more.
    check_everything(&r);
    let args = r.args("webhook");
    assert!(args.iter().any(|a| a == "--eviction-responder"), "{args:?}");
    assert_flag(&args, "--eviction-responder-heartbeat", "45s");
    assert_flag(
        &args,
        "--eviction-responder-requesters",
        "descheduler.kube-descheduler.io/run,acme.io/drainer",
    );
    assert!(grants_evictions(&r));
    assert!(r.all("MutatingWebhookConfiguration").is_empty());
}

#[test]
fn pod_mutation_registers_pod_creation_with_the_priority_below_the_managing_controller() {
    let r = render_ok(json!({"webhook": {
        "certs": {"mode": "certManager"},
        "evictionResponder": {"enabled": true, "podMutation": {"enabled": true,
            "namespaceSelector": {"matchLabels": {"team": "web"}}}}
    }}));
    check_everything(&r);
    assert_flag(&r.args("webhook"), "--eviction-responder-priority", "9000");
    let mwcs = r.all("MutatingWebhookConfiguration");
    assert_eq!(mwcs.len(), 1);
    let obj = mwcs[0].clone();
    assert_eq!(
        obj["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "kube-descheduler/kube-descheduler-webhook"
    );
    let mwc: MutatingWebhookConfiguration = strict(&obj);
    let hooks = mwc.webhooks.expect("webhooks");
    assert_eq!(hooks.len(), 1);
    let h = &hooks[0];
    assert_eq!(
        h.failure_policy.as_deref(),
        Some("Ignore"),
        "never blocks a pod"
    );
    assert_eq!(h.side_effects, "None");
    assert_eq!(h.reinvocation_policy.as_deref(), Some("Never"));
    let rule = &h.rules.as_ref().expect("rules")[0];
    assert_eq!(rule.operations.as_deref(), Some(&["CREATE".to_owned()][..]));
    assert_eq!(rule.resources.as_deref(), Some(&["pods".to_owned()][..]));
    let service = h.client_config.service.as_ref().expect("service");
    assert_eq!(service.path.as_deref(), Some("/mutate/pod"));
    assert_eq!(service.name, "kube-descheduler-webhook");
    let sel = h.namespace_selector.as_ref().expect("namespaceSelector");
    assert_eq!(
        sel.match_labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str),
        Some("web")
    );
    let excluded: Vec<String> = sel
        .match_expressions
        .iter()
        .flatten()
        .flat_map(|e| e.values.clone().unwrap_or_default())
        .collect();
    for ns in ["kube-system", "kube-descheduler"] {
        assert!(excluded.iter().any(|e| e == ns), "{excluded:?}");
    }
}

#[test]
fn pod_mutation_refuses_to_render_without_a_ca_bundle_source_or_with_a_reserved_priority() {
    let (_, err) =
        render_err(json!({"webhook": {"evictionResponder": {"podMutation": {"enabled": true}}}}));
    assert!(err.contains("certManager"), "{err}");
    let r = render_ok(
        json!({"webhook": {"evictionResponder": {"podMutation": {"enabled": true, "caBundle": "Y2E="}}}}),
    );
    let mwc = r.all("MutatingWebhookConfiguration");
    assert_eq!(mwc[0]["webhooks"][0]["clientConfig"]["caBundle"], "Y2E=");
    let (_, err) = render_err(
        json!({"webhook": {"evictionResponder": {"podMutation": {"enabled": true, "caBundle": "Y2E=", "priority": 500}}}}),
    );
    assert!(err.contains("priority"), "{err}");
}
