//! RBAC evaluation: the rendered roles against `API_CALLS`.

use super::*;

#[derive(Default)]
pub(crate) struct Rbac {
    pub(crate) cluster_roles: Vec<ClusterRole>,
    pub(crate) cluster_role_bindings: Vec<ClusterRoleBinding>,
    pub(crate) roles: Vec<Role>,
    pub(crate) role_bindings: Vec<RoleBinding>,
}

/// A ServiceAccount.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sa {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// A request as the authorizer sees it. `namespace: None` = every namespace (or cluster-scoped).
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) verb: &'a str,
    pub(crate) group: &'a str,
    pub(crate) resource: String,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
}

/// A rule bound to a ServiceAccount, with where it applies (`None` = cluster-wide).
pub(crate) struct Grant<'a> {
    pub(crate) rule: &'a PolicyRule,
    pub(crate) namespace: Option<String>,
    pub(crate) via: String,
}

pub(crate) fn binds(subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>, sa: &Sa) -> bool {
    subjects.iter().flatten().any(|s| {
        s.kind == "ServiceAccount"
            && s.name == sa.name
            && s.namespace.as_deref() == Some(&sa.namespace)
    })
}

impl Rbac {
    pub(crate) fn grants(&self, sa: &Sa) -> Vec<Grant<'_>> {
        let mut out = Vec::new();
        for b in &self.cluster_role_bindings {
            if !binds(&b.subjects, sa) {
                continue;
            }
            assert_eq!(
                b.role_ref.kind, "ClusterRole",
                "ClusterRoleBinding refers to a {}",
                b.role_ref.kind
            );
            let role = self
                .cluster_roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(&b.role_ref.name))
                .unwrap_or_else(|| {
                    panic!(
                        "ClusterRoleBinding {:?} refers to missing ClusterRole {}",
                        b.metadata.name, b.role_ref.name
                    )
                });
            for rule in role.rules.iter().flatten() {
                out.push(Grant {
                    rule,
                    namespace: None,
                    via: format!("ClusterRole {}", b.role_ref.name),
                });
            }
        }
        for b in &self.role_bindings {
            if !binds(&b.subjects, sa) {
                continue;
            }
            let ns = b.metadata.namespace.clone().expect("RoleBinding namespace");
            let rules: Vec<&PolicyRule> = match b.role_ref.kind.as_str() {
                "Role" => self
                    .roles
                    .iter()
                    .find(|r| {
                        r.metadata.name.as_deref() == Some(&b.role_ref.name)
                            && r.metadata.namespace.as_deref() == Some(&ns)
                    })
                    .unwrap_or_else(|| {
                        panic!(
                            "RoleBinding {ns}/{:?} refers to missing Role {}",
                            b.metadata.name, b.role_ref.name
                        )
                    })
                    .rules
                    .iter()
                    .flatten()
                    .collect(),
                "ClusterRole" => self
                    .cluster_roles
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(&b.role_ref.name))
                    .expect("bound ClusterRole")
                    .rules
                    .iter()
                    .flatten()
                    .collect(),
                other => panic!("RoleBinding to a {other}"),
            };
            for rule in rules {
                out.push(Grant {
                    rule,
                    namespace: Some(ns.clone()),
                    via: format!("Role {ns}/{}", b.role_ref.name),
                });
            }
        }
        out
    }

    pub(crate) fn allows(&self, sa: &Sa, req: &Request<'_>) -> bool {
        self.grants(sa).iter().any(|g| {
            let ns_ok = match (&g.namespace, req.namespace) {
                (None, _) => true,
                (Some(gns), Some(rns)) => gns == rns,
                (Some(_), None) => false,
            };
            ns_ok && rule_matches(g.rule, req)
        })
    }
}

pub(crate) fn rule_matches(rule: &PolicyRule, req: &Request<'_>) -> bool {
    let has =
        |list: &Option<Vec<String>>, v: &str| list.iter().flatten().any(|x| x == "*" || x == v);
    if !has(&Some(rule.verbs.clone()), req.verb) || !has(&rule.api_groups, req.group) {
        return false;
    }
    let resource_ok = rule.resources.iter().flatten().any(|r| {
        if r == "*" || *r == req.resource {
            return true;
        }
        match (r.split_once('/'), req.resource.split_once('/')) {
            (Some((rr, "*")), Some((qr, _))) => rr == qr,
            (Some(("*", rs)), Some((_, qs))) => rs == qs,
            _ => false,
        }
    });
    if !resource_ok {
        return false;
    }
    match rule.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => req.name.is_some_and(|n| names.iter().any(|x| x == n)),
    }
}

/// What the rendered chart says about one install: who runs as whom, with which names.
pub(crate) struct Install {
    pub(crate) engine_sa: Option<Sa>,
    pub(crate) guard_sa: Option<Sa>,
    pub(crate) certs_sa: Option<Sa>,
    pub(crate) leader_election: bool,
    pub(crate) authenticated_serving: bool,
    pub(crate) lease_namespace: Option<String>,
    pub(crate) lease_name: Option<String>,
    pub(crate) certs_secret: Option<String>,
    pub(crate) webhook_configuration: Option<String>,
    /// The rendered policy measures usage with metrics.k8s.io (the engine's own rule).
    pub(crate) kubernetes_metrics: bool,
    /// (namespace, name) of the Prometheus token Secret the rendered policy makes the engine read.
    pub(crate) prometheus_token: Option<(String, String)>,
    /// The guard runs with `--eviction-responder`.
    pub(crate) eviction_responder: bool,
    /// `run` asks for evictions with `--eviction-api=EvictionRequest`.
    pub(crate) eviction_requester: bool,
}

/// What the engine measures with the chart's policy, by the engine's own loader (so the chart's
/// conditions are checked against the code, not against a copy of them).
pub(crate) fn policy_metrics(r: &Rendered) -> kube_descheduler::usage::MetricsNeeds {
    let Some(cm) = r
        .objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["data"]["policy.yaml"].is_string())
    else {
        return Default::default();
    };
    let text = cm["data"]["policy.yaml"].as_str().unwrap_or_default();
    kube_descheduler::policy::load_str(text)
        .unwrap_or_else(|e| panic!("the chart's policy does not load: {e}\n{text}"))
        .metrics
}

pub(crate) fn install_facts(r: &Rendered) -> Install {
    let sa_of = |container: &str| {
        r.pod_with_container(container).map(|pod| Sa {
            namespace: r.release_namespace.clone(),
            name: pod["serviceAccountName"]
                .as_str()
                .expect("serviceAccountName set")
                .to_owned(),
        })
    };
    let engine_args = r
        .pod_with_container("descheduler")
        .map(|_| r.args("descheduler"))
        .unwrap_or_default();
    let guard_args = r
        .pod_with_container("webhook")
        .map(|_| r.args("webhook"))
        .unwrap_or_default();
    let certs_args = r
        .pod_with_container("certs")
        .map(|_| r.args("certs"))
        .unwrap_or_default();
    let leader_election = engine_args
        .iter()
        .any(|a| a == "--leader-elect=true" || a == "--leader-elect");
    let metrics = policy_metrics(r);
    let prometheus_token = if metrics.prometheus_queries.is_empty() {
        None
    } else {
        metrics
            .prometheus
            .as_ref()
            .and_then(|p| p.token_secret.clone())
    };
    Install {
        kubernetes_metrics: metrics.kubernetes,
        prometheus_token,
        engine_sa: sa_of("descheduler"),
        guard_sa: sa_of("webhook"),
        certs_sa: sa_of("certs"),
        leader_election,
        authenticated_serving: engine_args.iter().any(|a| a == "--enable-trigger-api")
            || !engine_args
                .iter()
                .any(|a| a.starts_with("--disable-metrics")),
        lease_namespace: flag_value(&engine_args, "--leader-elect-resource-namespace"),
        lease_name: flag_value(&engine_args, "--leader-elect-resource-name"),
        certs_secret: flag_value(&certs_args, "--secret-name"),
        webhook_configuration: flag_value(&certs_args, "--webhook-configuration"),
        eviction_responder: guard_args
            .iter()
            .any(|a| a == "--eviction-responder" || a == "--eviction-responder=true"),
        eviction_requester: flag_value(&engine_args, "--eviction-api").as_deref()
            == Some("EvictionRequest"),
    }
}

pub(crate) fn needed(call: &ApiCall, i: &Install) -> bool {
    match call.needed {
        Needed::Always => true,
        Needed::LeaderElection => i.leader_election,
        Needed::AuthenticatedServing => i.authenticated_serving,
        Needed::KubernetesMetrics => i.kubernetes_metrics,
        Needed::PrometheusTokenSecret => i.prometheus_token.is_some(),
        Needed::EvictionResponder => i.eviction_responder,
        Needed::EvictionRequester => i.eviction_requester,
    }
}

/// Every needed call of every rendered component is allowed; nothing beyond the calls is granted.
pub(crate) fn check_rbac(r: &Rendered, rbac: &Rbac) {
    let i = install_facts(r);
    if i.leader_election {
        assert!(
            i.lease_namespace.is_some() && i.lease_name.is_some(),
            "leader election without explicit lease namespace/name flags"
        );
    }
    let components = [
        (Component::Engine, i.engine_sa.clone()),
        (Component::Guard, i.guard_sa.clone()),
        (Component::CertsJob, i.certs_sa.clone()),
    ];
    let ns = r.release_namespace.as_str();
    for (component, sa) in &components {
        let Some(sa) = sa else { continue };
        assert_needed_calls_allowed(rbac, *component, sa, &i, ns);
        assert_no_grant_beyond_the_calls(rbac, *component, sa, &i, ns);
    }
    let ours: Vec<Sa> = components.iter().filter_map(|(_, sa)| sa.clone()).collect();
    assert_only_our_accounts_bound(rbac, &ours);
}

/// The request `call` makes in this install: its namespace (`ns` is the release's) and the
/// object name it is limited to.
fn call_request<'a>(call: &'a ApiCall, i: &'a Install, ns: &'a str) -> Request<'a> {
    let namespace = match call.scope {
        Scope::Cluster | Scope::AllNamespaces => None,
        Scope::OwnNamespace => Some(ns),
        Scope::LeaseNamespace => Some(i.lease_namespace.as_deref().expect("lease namespace")),
        Scope::PrometheusTokenNamespace => Some(
            i.prometheus_token
                .as_ref()
                .map(|(ns, _)| ns.as_str())
                .expect("token Secret namespace"),
        ),
    };
    let name = match call.names {
        Names::Any => None,
        Names::LeaderElectionLease => Some(i.lease_name.as_deref().expect("lease name")),
        Names::CertsSecret => Some(i.certs_secret.as_deref().expect("--secret-name")),
        Names::WebhookConfiguration => Some(
            i.webhook_configuration
                .as_deref()
                .expect("--webhook-configuration"),
        ),
        Names::PrometheusTokenSecret => Some(
            i.prometheus_token
                .as_ref()
                .map(|(_, name)| name.as_str())
                .expect("token Secret name"),
        ),
    };
    Request {
        verb: call.verb,
        group: call.group,
        resource: call.rbac_resource(),
        namespace,
        name,
    }
}

/// Coverage: `sa` may make every call `component` needs in this install.
fn assert_needed_calls_allowed(rbac: &Rbac, component: Component, sa: &Sa, i: &Install, ns: &str) {
    for call in API_CALLS
        .iter()
        .filter(|c| c.component == component && needed(c, i))
    {
        let req = call_request(call, i, ns);
        assert!(
            rbac.allows(sa, &req),
            "{component:?} (ServiceAccount {}/{}) may not {} {}{} in {:?} (name {:?}), which it does to {}",
            sa.namespace,
            sa.name,
            call.verb,
            if call.group.is_empty() {
                String::new()
            } else {
                format!("{}/", call.group)
            },
            call.rbac_resource(),
            req.namespace.unwrap_or("all namespaces"),
            req.name,
            call.why
        );
    }
}

/// Nothing more: every rule bound to `sa` is free of wildcards and non-resource URLs, and each
/// verb on each resource it grants is one a needed call of `component` makes in that reach.
fn assert_no_grant_beyond_the_calls(
    rbac: &Rbac,
    component: Component,
    sa: &Sa,
    i: &Install,
    ns: &str,
) {
    for g in rbac.grants(sa) {
        let rule = g.rule;
        assert!(
            rule.non_resource_urls.is_none(),
            "{component:?} is granted non-resource URLs via {}",
            g.via
        );
        for list in [
            Some(&rule.verbs),
            rule.api_groups.as_ref(),
            rule.resources.as_ref(),
        ] {
            assert!(
                !list.into_iter().flatten().any(|x| x.contains('*')),
                "{component:?}: wildcard in {} {rule:?}",
                g.via
            );
        }
        let names = rule.resource_names.as_deref().filter(|n| !n.is_empty());
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                if component != Component::CertsJob && resource == "secrets" {
                    assert_secret_grant_is_the_token(component, &g, names, i);
                }
                for verb in &rule.verbs {
                    let justified = API_CALLS.iter().any(|c| {
                        c.component == component
                            && needed(c, i)
                            && c.verb == verb
                            && c.group == group
                            && c.rbac_resource() == *resource
                            && scope_fits(c, &g, ns, i)
                            && (names.is_some() || c.names == Names::Any)
                    });
                    assert!(
                        justified,
                        "{component:?} is granted `{verb}` on {group}/{resource}{} via {}{}, which no call in src/apicalls.rs needs",
                        names.map(|n| format!(" {n:?}")).unwrap_or_default(),
                        g.via,
                        g.namespace
                            .as_deref()
                            .map(|n| format!(" in {n}"))
                            .unwrap_or_default()
                    );
                }
            }
        }
    }
}

/// A grant on Secrets outside the certs Job: only the engine, only `get`, only the policy's
/// Prometheus token Secret, by name (`names` are the rule's resource names).
fn assert_secret_grant_is_the_token(
    component: Component,
    g: &Grant<'_>,
    names: Option<&[String]>,
    i: &Install,
) {
    let rule = g.rule;
    let token = i.prometheus_token.as_ref();
    assert!(
        component == Component::Engine
            && rule.verbs == ["get"]
            && token.is_some_and(|(ns, name)| {
                g.namespace.as_deref() == Some(ns.as_str())
                    && names == Some(std::slice::from_ref(name))
            }),
        "{component:?} must not touch Secrets other than the policy's Prometheus token ({}: {rule:?})",
        g.via
    );
}

/// Nobody else is bound to anything (no stray bindings to other accounts than `ours`).
fn assert_only_our_accounts_bound(rbac: &Rbac, ours: &[Sa]) {
    let is_ours = |s: &k8s_openapi::api::rbac::v1::Subject| {
        ours.iter()
            .any(|sa| sa.name == s.name && Some(&sa.namespace) == s.namespace.as_ref())
    };
    for b in &rbac.cluster_role_bindings {
        for s in b.subjects.iter().flatten() {
            assert!(
                is_ours(s),
                "ClusterRoleBinding {:?} binds {s:?}, not one of our pods' ServiceAccounts",
                b.metadata.name
            );
        }
    }
    for b in &rbac.role_bindings {
        for s in b.subjects.iter().flatten() {
            assert!(is_ours(s), "RoleBinding {:?} binds {s:?}", b.metadata.name);
        }
    }
}

/// A grant's reach fits the call's scope: cluster-wide only for cluster/all-namespace calls,
/// a namespace only for calls in that namespace.
pub(crate) fn scope_fits(call: &ApiCall, g: &Grant<'_>, release_ns: &str, i: &Install) -> bool {
    match (&g.namespace, call.scope) {
        (None, Scope::Cluster | Scope::AllNamespaces) => true,
        (Some(n), Scope::OwnNamespace) => n == release_ns,
        (Some(n), Scope::LeaseNamespace) => Some(n.as_str()) == i.lease_namespace.as_deref(),
        (Some(n), Scope::PrometheusTokenNamespace) => {
            i.prometheus_token.as_ref().map(|(ns, _)| ns) == Some(n)
        }
        _ => false,
    }
}
