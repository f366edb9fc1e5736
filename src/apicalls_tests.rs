//! Unit tests of [`super::API_CALLS`] (kept apart: the list itself is long).

use super::*;
use std::collections::HashSet;

#[test]
fn no_duplicate_calls() {
    let mut seen = HashSet::new();
    for c in API_CALLS.iter() {
        let key = (c.component, c.verb, c.group, c.rbac_resource(), c.scope);
        assert!(
            seen.insert(key.clone()),
            "duplicate API call entry: {key:?}"
        );
    }
}

#[test]
fn verbs_are_rbac_verbs_and_fields_are_well_formed() {
    for c in API_CALLS.iter() {
        assert!(
            VALID_VERBS.contains(&c.verb),
            "{c:?}: `{}` is not an RBAC verb",
            c.verb
        );
        assert!(
            !c.resource.is_empty() && c.resource == c.resource.to_lowercase(),
            "{c:?}: resource must be lower-case plural"
        );
        assert!(
            !c.resource.contains('/'),
            "{c:?}: put the subresource in `subresource`"
        );
        assert!(c.group != "core", "{c:?}: the core group is \"\"");
        assert!(!c.why.trim().is_empty(), "{c:?}: say why");
        // RBAC cannot restrict collection calls or create by name.
        if matches!(c.verb, "list" | "watch" | "create" | "deletecollection") {
            assert_eq!(
                c.names,
                Names::Any,
                "{c:?}: RBAC resourceNames cannot restrict `{}`",
                c.verb
            );
        }
    }
}

#[test]
fn every_component_has_calls_and_watches_come_with_lists() {
    for component in [Component::Engine, Component::Guard, Component::CertsJob] {
        assert!(
            calls_of(component).next().is_some(),
            "{component:?} has no calls"
        );
    }
    for c in API_CALLS.iter().filter(|c| c.verb == "watch") {
        assert!(
            API_CALLS.iter().any(|l| l.verb == "list"
                && l.component == c.component
                && l.group == c.group
                && l.resource == c.resource),
            "{c:?}: a watch cache needs list too"
        );
    }
}

#[test]
fn engine_evicts_and_guard_does_not() {
    let evicts =
        |comp| calls_of(comp).any(|c| c.verb == "create" && c.rbac_resource() == "pods/eviction");
    assert!(evicts(Component::Engine));
    assert!(!evicts(Component::Guard));
    assert!(!calls_of(Component::Guard).any(|c| c.resource == "secrets"));
    // The engine reads one Secret, by name, and only when the policy names it.
    let engine_secrets: Vec<_> = calls_of(Component::Engine)
        .filter(|c| c.resource == "secrets")
        .collect();
    assert_eq!(engine_secrets.len(), 1, "{engine_secrets:?}");
    let s = engine_secrets[0];
    assert_eq!(
        (s.verb, s.names, s.needed, s.scope),
        (
            "get",
            Names::PrometheusTokenSecret,
            Needed::PrometheusTokenSecret,
            Scope::PrometheusTokenNamespace
        )
    );
}

#[test]
fn plan_reader_only_reads_and_lists_every_kind_run_lists() {
    use crate::cluster::kinds::Kind;
    assert!(
        calls_of(Component::PlanReader).all(|c| matches!(c.verb, "list" | "watch")),
        "plan never writes"
    );
    // Every kind `plan --kubeconfig` reads (the kinds `run` watches) is listed by it, and
    // allowed the watch its streaming list is; and `run` lists the same resources.
    for kind in Kind::ALL {
        let resource = kind.resource();
        for verb in ["list", "watch"] {
            for component in [Component::PlanReader, Component::Engine] {
                assert!(
                    calls_of(component).any(|c| c.verb == verb
                        && c.resource == resource
                        && c.group != "metrics.k8s.io"),
                    "{component:?} {verb} {resource}"
                );
            }
        }
    }
}
