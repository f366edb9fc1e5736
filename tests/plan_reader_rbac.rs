//! `webhook-config/plan-reader/clusterrole.yaml` grants exactly the calls `plan --kubeconfig`
//! makes (`apicalls::API_CALLS`, component PlanReader): every one is allowed, nothing else is.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube_descheduler::apicalls::{Component, calls_of};

fn role() -> ClusterRole {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/webhook-config/plan-reader/clusterrole.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the ClusterRole is shipped");
    serde_saphyr::from_str(&text).expect("a ClusterRole")
}

fn allows(rule: &PolicyRule, verb: &str, group: &str, resource: &str) -> bool {
    rule.verbs.iter().any(|v| v == verb)
        && rule
            .api_groups
            .as_ref()
            .is_some_and(|g| g.iter().any(|g| g == group))
        && rule
            .resources
            .as_ref()
            .is_some_and(|r| r.iter().any(|r| r == resource))
        && rule.resource_names.is_none()
}

#[test]
fn the_plan_reader_role_grants_exactly_the_calls_plan_makes() {
    let role = role();
    assert_eq!(
        role.metadata.name.as_deref(),
        Some("kube-descheduler-plan-reader")
    );
    let rules = role.rules.expect("rules");
    let calls: Vec<_> = calls_of(Component::PlanReader).collect();
    assert!(calls.len() >= 22, "11 kinds, list and watch each");
    for c in &calls {
        assert!(
            rules
                .iter()
                .any(|r| allows(r, c.verb, c.group, &c.rbac_resource())),
            "not granted: {} {}/{}",
            c.verb,
            c.group,
            c.rbac_resource()
        );
    }
    // Nothing more: every (verb, group, resource) a rule grants is a call of `plan`.
    for r in &rules {
        assert!(r.non_resource_urls.is_none() && r.resource_names.is_none());
        for verb in &r.verbs {
            for group in r.api_groups.iter().flatten() {
                for resource in r.resources.iter().flatten() {
                    assert!(
                        calls.iter().any(|c| c.verb == verb
                            && c.group == group
                            && c.rbac_resource() == *resource),
                        "granted but never called: {verb} {group}/{resource}"
                    );
                }
            }
        }
    }
}
