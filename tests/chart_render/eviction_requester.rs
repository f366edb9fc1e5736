//! `run` as an EvictionRequest requester: `cmdOptions: {eviction-api: EvictionRequest}` grants
//! the engine its calls on lifecycle.k8s.io evictionrequests, and nothing on them otherwise.

use super::*;

fn engine_evictionrequest_verbs(r: &Rendered) -> Vec<Value> {
    r.get("ClusterRole", "kube-descheduler")["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|rule| rule["resources"] == json!(["evictionrequests"]))
        .flat_map(|rule| rule["verbs"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn the_default_eviction_api_grants_nothing_on_evictionrequests() {
    for values in [
        json!({}),
        json!({"cmdOptions": {"eviction-api": "Eviction"}}),
    ] {
        let r = render_ok(values);
        check_everything(&r);
        assert!(engine_evictionrequest_verbs(&r).is_empty());
    }
}

#[test]
fn eviction_request_passes_the_flag_and_exactly_the_requester_rbac() {
    let r = render_ok(json!({"cmdOptions": {"eviction-api": "EvictionRequest"}}));
    // check_rbac: every call the requester makes is granted, and nothing more.
    check_everything(&r);
    assert_flag(&r.args("descheduler"), "--eviction-api", "EvictionRequest");
    let mut verbs = engine_evictionrequest_verbs(&r);
    verbs.sort_by_key(|v| v.to_string());
    assert_eq!(
        verbs,
        json!(["create", "get", "list", "patch"])
            .as_array()
            .cloned()
            .unwrap_or_default()
    );
}
