//! Renders and lints `charts/kube-descheduler` with the real Helm v4 engine (PyPI
//! `helm-python-sdk`, through `tests/chart/render.py`) and checks what comes out:
//! every object parses as its typed k8s-openapi struct with no unknown field, containers are
//! hardened, the ValidatingWebhookConfiguration follows the guard's registration rules, the policy
//! ConfigMap holds a v1alpha2 policy, and each component's RBAC covers exactly the calls listed in
//! `kube_descheduler::apicalls::API_CALLS`.
//!
//! Needs `python3` with `helm-python-sdk==0.2.2` (`pip install helm-python-sdk==0.2.2`); the test
//! fails with that instruction when either is missing.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube_descheduler::apicalls::{API_CALLS, ApiCall, Component, Names, Needed, Scope};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const PIN: &str = "helm-python-sdk==0.2.2";
const NS: &str = "kube-descheduler";

// ------------------------------------------------------------------------------------------
// Running Helm

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `render.py batch` on the cases; one result per case.
fn helm_batch(cases: &[Value]) -> Vec<Value> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = root().join("tests/chart/render.py");
    let chart = root().join("charts/kube-descheduler");
    let mut child = Command::new(&python)
        .arg(&script)
        .arg("batch")
        .arg(&chart)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{python}` ({e}): the chart tests need Python 3 with the Helm engine: \
                 pip install {PIN}"
            )
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(serde_json::to_string(cases).expect("cases").as_bytes())
        .expect("writing the cases to render.py");
    let out = child.wait_with_output().expect("waiting for render.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "render.py failed ({}): {stderr}\n(the chart tests need `pip install {PIN}`)",
        out.status
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("render.py printed no JSON ({e}); stderr: {stderr}"));
    assert_eq!(results.len(), cases.len(), "one result per case");
    results
}

fn render_case(values: Value, name: &str, namespace: &str) -> Value {
    json!({"op": "render", "values": values, "name": name, "namespace": namespace})
}

/// A successful render, parsed.
struct Rendered {
    objects: Vec<Value>,
    notes: String,
    release_namespace: String,
}

fn render_ok(values: Value) -> Rendered {
    render_named(values, "kube-descheduler", NS)
}

fn render_named(values: Value, name: &str, namespace: &str) -> Rendered {
    let result = helm_batch(&[render_case(values.clone(), name, namespace)]).remove(0);
    into_rendered(result, &values, namespace)
}

fn into_rendered(result: Value, values: &Value, namespace: &str) -> Rendered {
    assert_eq!(
        result["ok"],
        json!(true),
        "rendering with {values} failed: {}: {}",
        result["error_type"],
        result["error"]
    );
    let mut objects = Vec::new();
    let manifests = result["manifests"].as_object().expect("manifests");
    for (path, text) in manifests {
        let text = text.as_str().expect("manifest text");
        let docs: Vec<Value> = serde_saphyr::from_multiple(text)
            .unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}\n{text}"));
        objects.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    Rendered {
        objects,
        notes: result["notes"].as_str().unwrap_or_default().to_owned(),
        release_namespace: namespace.to_owned(),
    }
}

fn render_err(values: Value) -> (String, String) {
    let result = helm_batch(&[render_case(values.clone(), "kube-descheduler", NS)]).remove(0);
    assert_eq!(
        result["ok"],
        json!(false),
        "rendering {values} should have failed"
    );
    (
        result["error_type"].as_str().unwrap_or_default().to_owned(),
        result["error"].as_str().unwrap_or_default().to_owned(),
    )
}

impl Rendered {
    fn kinds(&self) -> BTreeSet<String> {
        self.objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    fn get(&self, kind: &str, name: &str) -> &Value {
        self.objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} rendered; have {:?}", self.names()))
    }

    fn names(&self) -> Vec<String> {
        self.objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or("?"),
                    o["metadata"]["name"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }

    /// (workload, pod spec) of every pod template.
    fn pod_specs(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for o in &self.objects {
            let name = format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            );
            let spec = match o["kind"].as_str() {
                Some("Deployment") | Some("Job") => &o["spec"]["template"]["spec"],
                Some("CronJob") => &o["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                _ => continue,
            };
            out.push((name, spec.clone()));
        }
        out
    }

    /// The pod spec whose container has this name (descheduler, webhook, certs).
    fn pod_with_container(&self, container: &str) -> Option<Value> {
        self.pod_specs().into_iter().map(|(_, s)| s).find(|s| {
            s["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["name"] == container)
        })
    }

    fn container(&self, container: &str) -> Value {
        let pod = self.pod_with_container(container).unwrap_or_else(|| {
            panic!(
                "no pod with a `{container}` container; have {:?}",
                self.names()
            )
        });
        pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == container)
            .unwrap()
            .clone()
    }

    fn args(&self, container: &str) -> Vec<String> {
        self.container(container)["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string arg").to_owned())
            .collect()
    }
}

fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let prefix = format!("{flag}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
}

// ------------------------------------------------------------------------------------------
// Typed parsing with unknown fields as errors

/// Paths of `orig` that the typed round trip lost (unknown fields) or changed.
fn lost_fields(orig: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
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

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn strict<T: DeserializeOwned + serde::Serialize>(obj: &Value) -> T {
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
fn check_custom(obj: &Value, api_version: &str, spec_keys: &[&str], required: &[&str]) {
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
fn check_all_typed(r: &Rendered) -> Rbac {
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
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                drop(strict::<ValidatingWebhookConfiguration>(obj))
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
            ("monitoring.coreos.com/v1", "ServiceMonitor") => {
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
            _ => panic!("unexpected object {api} {kind} {}", obj["metadata"]["name"]),
        }
        // Namespaced objects land in the release namespace unless they must not.
        let ns = obj["metadata"]["namespace"].as_str();
        let cluster_scoped = matches!(
            kind,
            "ClusterRole" | "ClusterRoleBinding" | "ValidatingWebhookConfiguration"
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
    rbac
}

// ------------------------------------------------------------------------------------------
// Hardening

fn check_hardening(r: &Rendered) {
    let specs = r.pod_specs();
    assert!(!specs.is_empty(), "no pod templates rendered");
    for (workload, spec) in specs {
        let pod_sc = &spec["securityContext"];
        for c in spec["containers"].as_array().unwrap() {
            let sc = &c["securityContext"];
            let what = format!("{workload} container {}", c["name"]);
            assert!(
                sc["runAsNonRoot"] == json!(true) || pod_sc["runAsNonRoot"] == json!(true),
                "{what}: runAsNonRoot"
            );
            assert_eq!(
                sc["readOnlyRootFilesystem"],
                json!(true),
                "{what}: readOnlyRootFilesystem"
            );
            assert_eq!(
                sc["allowPrivilegeEscalation"],
                json!(false),
                "{what}: allowPrivilegeEscalation"
            );
            assert_ne!(sc["privileged"], json!(true), "{what}: privileged");
            assert!(
                sc["capabilities"]["drop"]
                    .as_array()
                    .is_some_and(|d| d.contains(&json!("ALL"))),
                "{what}: capabilities.drop ALL"
            );
            assert!(
                sc["capabilities"]["add"].is_null(),
                "{what}: adds capabilities"
            );
            assert!(
                sc["seccompProfile"]["type"] == "RuntimeDefault"
                    || pod_sc["seccompProfile"]["type"] == "RuntimeDefault",
                "{what}: seccompProfile RuntimeDefault"
            );
            assert_eq!(
                c["command"],
                json!(["/kube-descheduler"]),
                "{what}: the one binary"
            );
        }
        assert!(
            spec["hostNetwork"].is_null() && spec["hostPID"].is_null(),
            "{workload}: host namespaces"
        );
    }
}

// ------------------------------------------------------------------------------------------
// RBAC evaluation

#[derive(Default)]
struct Rbac {
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
}

/// A ServiceAccount.
#[derive(Clone, Debug, PartialEq)]
struct Sa {
    namespace: String,
    name: String,
}

/// A request as the authorizer sees it. `namespace: None` = every namespace (or cluster-scoped).
#[derive(Debug)]
struct Request<'a> {
    verb: &'a str,
    group: &'a str,
    resource: String,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

/// A rule bound to a ServiceAccount, with where it applies (`None` = cluster-wide).
struct Grant<'a> {
    rule: &'a PolicyRule,
    namespace: Option<String>,
    via: String,
}

fn binds(subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>, sa: &Sa) -> bool {
    subjects.iter().flatten().any(|s| {
        s.kind == "ServiceAccount"
            && s.name == sa.name
            && s.namespace.as_deref() == Some(&sa.namespace)
    })
}

impl Rbac {
    fn grants(&self, sa: &Sa) -> Vec<Grant<'_>> {
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

    fn allows(&self, sa: &Sa, req: &Request<'_>) -> bool {
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

fn rule_matches(rule: &PolicyRule, req: &Request<'_>) -> bool {
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
struct Install {
    engine_sa: Option<Sa>,
    guard_sa: Option<Sa>,
    certs_sa: Option<Sa>,
    leader_election: bool,
    authenticated_serving: bool,
    lease_namespace: Option<String>,
    lease_name: Option<String>,
    certs_secret: Option<String>,
    webhook_configuration: Option<String>,
    /// The rendered policy measures usage with metrics.k8s.io (the engine's own rule).
    kubernetes_metrics: bool,
    /// (namespace, name) of the Prometheus token Secret the rendered policy makes the engine read.
    prometheus_token: Option<(String, String)>,
}

/// What the engine measures with the chart's policy, by the engine's own loader (so the chart's
/// conditions are checked against the code, not against a copy of them).
fn policy_metrics(r: &Rendered) -> kube_descheduler::usage::MetricsNeeds {
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

fn install_facts(r: &Rendered) -> Install {
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
    }
}

fn needed(call: &ApiCall, i: &Install) -> bool {
    match call.needed {
        Needed::Always => true,
        Needed::LeaderElection => i.leader_election,
        Needed::AuthenticatedServing => i.authenticated_serving,
        Needed::KubernetesMetrics => i.kubernetes_metrics,
        Needed::PrometheusTokenSecret => i.prometheus_token.is_some(),
    }
}

/// Every needed call of every rendered component is allowed; nothing beyond the calls is granted.
fn check_rbac(r: &Rendered, rbac: &Rbac) {
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
        // 1. Coverage.
        for call in API_CALLS
            .iter()
            .filter(|c| c.component == *component && needed(c, &i))
        {
            let namespace = match call.scope {
                Scope::Cluster | Scope::AllNamespaces => None,
                Scope::OwnNamespace => Some(ns),
                Scope::LeaseNamespace => {
                    Some(i.lease_namespace.as_deref().expect("lease namespace"))
                }
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
            let req = Request {
                verb: call.verb,
                group: call.group,
                resource: call.rbac_resource(),
                namespace,
                name,
            };
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
                namespace.unwrap_or("all namespaces"),
                name,
                call.why
            );
        }
        // 2. Nothing more.
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
                    if *component != Component::CertsJob && resource == "secrets" {
                        // Only the engine, only `get`, only the policy's token Secret, by name.
                        let token = i.prometheus_token.as_ref();
                        assert!(
                            *component == Component::Engine
                                && rule.verbs == ["get"]
                                && token.is_some_and(|(ns, name)| {
                                    g.namespace.as_deref() == Some(ns.as_str())
                                        && names == Some(std::slice::from_ref(name))
                                }),
                            "{component:?} must not touch Secrets other than the policy's Prometheus token ({}: {rule:?})",
                            g.via
                        );
                    }
                    for verb in &rule.verbs {
                        let justified = API_CALLS.iter().any(|c| {
                            c.component == *component
                                && needed(c, &i)
                                && c.verb == verb
                                && c.group == group
                                && c.rbac_resource() == *resource
                                && scope_fits(c, &g, ns, &i)
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
    // Nobody else is bound to anything (no stray bindings to other accounts).
    let ours: Vec<Sa> = components.iter().filter_map(|(_, sa)| sa.clone()).collect();
    for b in &rbac.cluster_role_bindings {
        for s in b.subjects.iter().flatten() {
            assert!(
                ours.iter()
                    .any(|sa| sa.name == s.name && Some(&sa.namespace) == s.namespace.as_ref()),
                "ClusterRoleBinding {:?} binds {s:?}, not one of our pods' ServiceAccounts",
                b.metadata.name
            );
        }
    }
    for b in &rbac.role_bindings {
        for s in b.subjects.iter().flatten() {
            assert!(
                ours.iter()
                    .any(|sa| sa.name == s.name && Some(&sa.namespace) == s.namespace.as_ref()),
                "RoleBinding {:?} binds {s:?}",
                b.metadata.name
            );
        }
    }
}

/// A grant's reach fits the call's scope: cluster-wide only for cluster/all-namespace calls,
/// a namespace only for calls in that namespace.
fn scope_fits(call: &ApiCall, g: &Grant<'_>, release_ns: &str, i: &Install) -> bool {
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

// ------------------------------------------------------------------------------------------
// The guard's registration rules

fn check_webhook_configuration(r: &Rendered, timeout_max: i32, failure_policy: &str) -> Value {
    let vwcs = r.all("ValidatingWebhookConfiguration");
    assert_eq!(vwcs.len(), 1, "one ValidatingWebhookConfiguration");
    let obj = vwcs[0].clone();
    let vwc: ValidatingWebhookConfiguration = strict(&obj);
    let hooks = vwc.webhooks.expect("webhooks");
    assert_eq!(hooks.len(), 1, "one webhook");
    let h = &hooks[0];
    assert_eq!(
        h.admission_review_versions,
        vec!["v1".to_owned()],
        "v1 reviews only"
    );
    assert_eq!(h.side_effects, "NoneOnDryRun");
    assert!(
        h.timeout_seconds
            .is_some_and(|t| (1..=timeout_max).contains(&t)),
        "timeoutSeconds {:?} > {timeout_max}",
        h.timeout_seconds
    );
    assert_eq!(h.failure_policy.as_deref(), Some(failure_policy));
    assert_eq!(h.match_policy.as_deref(), Some("Equivalent"));
    assert!(
        h.object_selector.is_none(),
        "no objectSelector: it would be matched against the Eviction"
    );
    let rules = h.rules.as_ref().expect("rules");
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_owned()][..]),
        "CREATE only"
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["pods/eviction".to_owned()][..])
    );
    assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
    assert_eq!(rule.api_versions.as_deref(), Some(&["v1".to_owned()][..]));
    let sel = h.namespace_selector.as_ref().expect("namespaceSelector");
    let excluded: Vec<String> = sel
        .match_expressions
        .iter()
        .flatten()
        .filter(|e| e.key == "kubernetes.io/metadata.name" && e.operator == "NotIn")
        .flat_map(|e| e.values.clone().unwrap_or_default())
        .collect();
    for ns in ["kube-system", r.release_namespace.as_str()] {
        assert!(
            excluded.iter().any(|e| e == ns),
            "namespaceSelector must exclude {ns}; excludes {excluded:?}"
        );
    }
    let svc = h
        .client_config
        .service
        .as_ref()
        .expect("service clientConfig");
    assert_eq!(svc.namespace, r.release_namespace);
    assert_eq!(svc.path.as_deref(), Some("/validate/eviction"));
    assert!(h.client_config.url.is_none());
    // The Service exists, points at the guard's pods, and its port reaches the guard's port.
    let service = r.get("Service", &svc.name);
    let port = svc.port.unwrap_or(443);
    let sp = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == port)
        .expect("service port");
    assert_eq!(sp["targetPort"], "https");
    let guard = r.container("webhook");
    let cport = guard["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "https")
        .expect("https container port");
    let args = r.args("webhook");
    assert_eq!(
        flag_value(&args, "--port"),
        Some(cport["containerPort"].to_string())
    );
    let dep = r
        .all("Deployment")
        .into_iter()
        .find(|d| d["spec"]["template"]["spec"]["containers"][0]["name"] == "webhook")
        .expect("guard Deployment");
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            &dep["spec"]["template"]["metadata"]["labels"][k], v,
            "Service selector {k} matches the guard's pods"
        );
    }
    obj
}

/// The guard runs ≥ 2 replicas with a PDB, a spread and a preStop delay; its cert volume is the
/// Secret that the certificate machinery writes.
fn check_guard_deployment(r: &Rendered) -> String {
    let dep = r
        .all("Deployment")
        .into_iter()
        .find(|d| d["spec"]["template"]["spec"]["containers"][0]["name"] == "webhook")
        .expect("guard Deployment");
    assert!(
        dep["spec"]["replicas"].as_i64().unwrap() >= 2,
        "guard replicas >= 2"
    );
    let spec = &dep["spec"]["template"]["spec"];
    let c = &spec["containers"][0];
    assert!(
        c["lifecycle"]["preStop"]["sleep"]["seconds"]
            .as_i64()
            .unwrap()
            >= 1,
        "preStop sleep"
    );
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let keys: Vec<&str> = spec["topologySpreadConstraints"]
        .as_array()
        .expect("spread")
        .iter()
        .map(|t| t["topologyKey"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"kubernetes.io/hostname") && keys.contains(&"topology.kubernetes.io/zone"),
        "{keys:?}"
    );
    for t in spec["topologySpreadConstraints"].as_array().unwrap() {
        assert_eq!(
            t["labelSelector"]["matchLabels"]["app.kubernetes.io/component"],
            "eviction-guard"
        );
    }
    let pdb = r
        .all("PodDisruptionBudget")
        .into_iter()
        .find(|p| {
            p["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "eviction-guard"
        })
        .expect("guard PDB");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    let args = r.args("webhook");
    assert_eq!(args[0], "webhook");
    assert_eq!(
        flag_value(&args, "--tls-cert-file").as_deref(),
        Some("/certs/tls.crt")
    );
    assert_eq!(
        flag_value(&args, "--tls-private-key-file").as_deref(),
        Some("/certs/tls.key")
    );
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/certs")
        .expect("/certs mount");
    let vol = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("cert volume");
    vol["secret"]["secretName"]
        .as_str()
        .expect("secret volume")
        .to_owned()
}

// ------------------------------------------------------------------------------------------
// The policy

fn check_policy(r: &Rendered) -> Value {
    let cm = r.get("ConfigMap", "kube-descheduler");
    let text = cm["data"]["policy.yaml"].as_str().expect("policy.yaml");
    let policy: Value = serde_saphyr::from_str(text)
        .unwrap_or_else(|e| panic!("policy.yaml is not YAML: {e}\n{text}"));
    assert_eq!(policy["apiVersion"], "descheduler/v1alpha2");
    assert_eq!(policy["kind"], "DeschedulerPolicy");
    // The chart's policy must load with our strict loader (every plugin, arg and default).
    if let Err(e) = kube_descheduler::policy::load_str(text) {
        panic!("the chart's policy does not load: {e}\n{text}");
    }
    policy
}

/// All checks every successful render must pass.
fn check_everything(r: &Rendered) {
    let rbac = check_all_typed(r);
    check_hardening(r);
    check_rbac(r, &rbac);
    // The engine reads the policy from the ConfigMap it mounts.
    if let Some(pod) = r.pod_with_container("descheduler") {
        let args = r.args("descheduler");
        assert_eq!(args[0], "run");
        assert_eq!(
            flag_value(&args, "--policy-config-file").as_deref(),
            Some("/policy-dir/policy.yaml")
        );
        let vol = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "policy-volume")
            .expect("policy volume");
        let cm = vol["configMap"]["name"].as_str().unwrap();
        assert!(r.get("ConfigMap", cm)["data"]["policy.yaml"].is_string());
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    }
}

// ------------------------------------------------------------------------------------------
// Tests

#[test]
fn default_values_cronjob_with_guard_and_generated_certs() {
    let r = render_ok(json!({}));
    check_everything(&r);
    let kinds = r.kinds();
    for k in [
        "CronJob",
        "ConfigMap",
        "ClusterRole",
        "ClusterRoleBinding",
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
        "Job",
        "Role",
        "RoleBinding",
        "PodDisruptionBudget",
        "Service",
        "Deployment",
    ] {
        assert!(kinds.contains(k), "default render lacks a {k}: {kinds:?}");
    }
    let cron = r.get("CronJob", "kube-descheduler");
    assert_eq!(cron["spec"]["schedule"], "*/2 * * * *");
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
    let args = r.args("descheduler");
    assert!(
        flag_value(&args, "--descheduling-interval").is_none(),
        "a CronJob runs one cycle: {args:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("--leader-elect")),
        "{args:?}"
    );
    assert!(
        args.contains(&"--v=3".to_owned()),
        "cmdOptions v: 3 → --v=3: {args:?}"
    );
    // Only the guard runs as a Deployment.
    assert_eq!(r.all("Deployment").len(), 1);
    let policy = check_policy(&r);
    let profile = &policy["profiles"][0];
    assert_eq!(profile["name"], "default");
    let configured: BTreeSet<&str> = profile["pluginConfig"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for p in [
        "DefaultEvictor",
        "RemoveDuplicates",
        "RemovePodsHavingTooManyRestarts",
        "RemovePodsViolatingNodeTaints",
        "RemovePodsViolatingNodeAffinity",
        "RemovePodsViolatingInterPodAntiAffinity",
        "LowNodeUtilization",
    ] {
        assert!(configured.contains(p), "default policy lacks {p}");
    }
    let enabled = |ext: &str| -> Vec<String> {
        profile["plugins"][ext]["enabled"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        enabled("balance"),
        ["RemoveDuplicates", "LowNodeUtilization"]
    );
    assert_eq!(enabled("deschedule").len(), 4);

    check_webhook_configuration(&r, 5, "Ignore");
    let secret = check_guard_deployment(&r);
    assert!(r.notes.contains("Eviction guard"), "NOTES: {}", r.notes);
    // generate mode: the hook Job writes that Secret and patches the caBundle of that configuration.
    let job = r.get("Job", "kube-descheduler-certs");
    let hooks = job["metadata"]["annotations"]["helm.sh/hook"]
        .as_str()
        .unwrap();
    for h in ["pre-install", "pre-upgrade", "post-install", "post-upgrade"] {
        assert!(hooks.contains(h), "certs Job hooks {hooks}");
    }
    assert!(
        job["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
            .as_str()
            .unwrap()
            .contains("before-hook-creation")
    );
    let args = r.args("certs");
    assert_eq!(args[0], "certs");
    assert_eq!(flag_value(&args, "--secret-name"), Some(secret));
    assert_eq!(
        flag_value(&args, "--service").as_deref(),
        Some("kube-descheduler-webhook")
    );
    assert_eq!(flag_value(&args, "--namespace").as_deref(), Some(NS));
    assert_eq!(
        flag_value(&args, "--out-dir").as_deref(),
        Some("/tmp/certs")
    );
    let vwc_name = r.all("ValidatingWebhookConfiguration")[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(flag_value(&args, "--webhook-configuration"), Some(vwc_name));
    // The RBAC the Job needs exists before it runs (lower hook weight) for every hook phase.
    for kind in [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ] {
        let o = r.get(kind, "kube-descheduler-certs");
        assert_eq!(
            o["metadata"]["annotations"]["helm.sh/hook"].as_str(),
            Some(hooks),
            "{kind} hook phases"
        );
        assert_eq!(
            o["metadata"]["annotations"]["helm.sh/hook-weight"], "-10",
            "{kind} runs before the Job"
        );
    }
    // /tmp is writable for --out-dir on a read-only root filesystem.
    let certs = r.container("certs");
    assert!(
        certs["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["mountPath"] == "/tmp")
    );
}

#[test]
fn job_kind_runs_one_cycle() {
    let r = render_ok(json!({"kind": "Job"}));
    check_everything(&r);
    assert!(r.all("CronJob").is_empty());
    let job = r.get("Job", "kube-descheduler");
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert!(flag_value(&r.args("descheduler"), "--descheduling-interval").is_none());
}

#[test]
fn cronjob_schedule_and_suspend() {
    let r = render_ok(
        json!({"kind": "CronJob", "schedule": "0 * * * *", "suspend": true, "webhook": {"enabled": false}}),
    );
    check_everything(&r);
    let cron = r.get("CronJob", "kube-descheduler");
    assert_eq!(cron["spec"]["schedule"], "0 * * * *");
    assert_eq!(cron["spec"]["suspend"], true);
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
        "Never"
    );
}

#[test]
fn deployment_with_leader_election_and_two_replicas() {
    let r = render_ok(json!({
        "kind": "Deployment",
        "replicas": 2,
        "deschedulingInterval": "3m",
        "leaderElection": {"enabled": true},
        "podDisruptionBudget": {"enabled": true},
        "serviceMonitor": {"enabled": true, "interval": "30s"},
        "cmdOptions": {"v": 5, "client-connection-qps": 30, "dry-run": null},
    }));
    check_everything(&r);
    let dep = r.get("Deployment", "kube-descheduler");
    assert_eq!(dep["spec"]["replicas"], 2);
    let args = r.args("descheduler");
    assert_eq!(
        flag_value(&args, "--descheduling-interval").as_deref(),
        Some("3m")
    );
    assert!(args.contains(&"--leader-elect=true".to_owned()));
    assert_eq!(
        flag_value(&args, "--leader-elect-lease-duration").as_deref(),
        Some("137s")
    );
    assert_eq!(
        flag_value(&args, "--leader-elect-renew-deadline").as_deref(),
        Some("107s")
    );
    assert_eq!(
        flag_value(&args, "--leader-elect-retry-period").as_deref(),
        Some("26s")
    );
    assert_eq!(
        flag_value(&args, "--leader-elect-resource-name").as_deref(),
        Some("descheduler")
    );
    assert_eq!(
        flag_value(&args, "--leader-elect-resource-namespace").as_deref(),
        Some(NS)
    );
    let role = r.get("Role", "kube-descheduler-leader-election");
    assert_eq!(role["metadata"]["namespace"], NS);
    let liveness = &r.container("descheduler")["livenessProbe"]["httpGet"];
    assert_eq!(
        (
            liveness["path"].as_str(),
            liveness["port"].as_i64(),
            liveness["scheme"].as_str()
        ),
        (Some("/healthz"), Some(10258), Some("HTTPS"))
    );
    let svc = r.get("Service", "kube-descheduler");
    assert_eq!(svc["spec"]["ports"][0]["port"], 10258);
    let sm = r.get("ServiceMonitor", "kube-descheduler");
    assert_eq!(
        sm["spec"]["endpoints"][0]["port"],
        svc["spec"]["ports"][0]["name"]
    );
    assert_eq!(sm["spec"]["endpoints"][0]["scheme"], "https");
    assert_eq!(sm["spec"]["endpoints"][0]["interval"], "30s");
    assert!(
        r.all("PodDisruptionBudget")
            .iter()
            .any(|p| p["metadata"]["name"] == "kube-descheduler")
    );
}

#[test]
fn leader_election_lease_in_another_namespace() {
    let r = render_ok(json!({
        "kind": "Deployment",
        "leaderElection": {"enabled": true, "resourceNamespace": "kube-system", "resourceName": "my-lease"},
    }));
    check_everything(&r);
    let role = r.get("Role", "kube-descheduler-leader-election");
    assert_eq!(role["metadata"]["namespace"], "kube-system");
    assert_eq!(role["rules"][1]["resourceNames"], json!(["my-lease"]));
    assert_eq!(
        r.get("RoleBinding", "kube-descheduler-leader-election")["metadata"]["namespace"],
        "kube-system"
    );
}

#[test]
fn webhook_with_cert_manager() {
    let r = render_ok(json!({"webhook": {"certs": {"mode": "certManager"}}}));
    check_everything(&r);
    let vwc = check_webhook_configuration(&r, 5, "Ignore");
    let secret = check_guard_deployment(&r);
    let cert = r.get("Certificate", "kube-descheduler-webhook");
    assert_eq!(
        vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!("{NS}/kube-descheduler-webhook"),
        "inject-ca-from names the Certificate"
    );
    assert_eq!(
        cert["spec"]["secretName"], secret,
        "the Certificate writes the Secret the guard mounts"
    );
    let dns: Vec<&str> = cert["spec"]["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        dns.contains(&"kube-descheduler-webhook.kube-descheduler.svc"),
        "{dns:?}"
    );
    let issuer = r.get("Issuer", "kube-descheduler-selfsigned");
    assert_eq!(
        cert["spec"]["issuerRef"]["name"],
        issuer["metadata"]["name"]
    );
    assert!(
        r.pod_with_container("certs").is_none(),
        "no certs Job with cert-manager"
    );
    assert!(vwc["webhooks"][0]["clientConfig"]["caBundle"].is_null());

    // An existing issuer: no Issuer of ours.
    let r = render_ok(
        json!({"webhook": {"certs": {"mode": "certManager", "certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "corp-ca"}}}}}),
    );
    check_everything(&r);
    assert!(r.all("Issuer").is_empty());
    assert_eq!(
        r.get("Certificate", "kube-descheduler-webhook")["spec"]["issuerRef"],
        json!({"kind": "ClusterIssuer", "name": "corp-ca"})
    );
}

#[test]
fn webhook_with_generated_certs_in_a_custom_release() {
    let r = render_named(
        json!({"webhook": {"certs": {"mode": "generate", "secretName": "guard-tls"}, "timeoutSeconds": 3}}),
        "prod",
        "ops",
    );
    check_everything(&r);
    let vwc = check_webhook_configuration(&r, 3, "Ignore");
    assert_eq!(
        vwc["metadata"]["name"],
        "prod-kube-descheduler-eviction-guard"
    );
    assert_eq!(check_guard_deployment(&r), "guard-tls");
    let args = r.args("certs");
    assert_eq!(
        flag_value(&args, "--secret-name").as_deref(),
        Some("guard-tls")
    );
    assert_eq!(flag_value(&args, "--namespace").as_deref(), Some("ops"));
    assert_eq!(
        flag_value(&args, "--webhook-configuration").as_deref(),
        Some("prod-kube-descheduler-eviction-guard")
    );
    let role = r.get("Role", "prod-kube-descheduler-certs");
    assert!(
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|rule| rule["resourceNames"] == json!(["guard-tls"]))
    );
    assert!(r.all("Certificate").is_empty());
}

#[test]
fn webhook_disabled_renders_no_guard() {
    let r = render_ok(json!({"webhook": {"enabled": false}}));
    check_everything(&r);
    assert!(r.all("ValidatingWebhookConfiguration").is_empty());
    assert!(r.all("Deployment").is_empty());
    assert!(r.pod_with_container("certs").is_none());
    assert!(r.all("PodDisruptionBudget").is_empty());
    assert!(
        !r.names()
            .iter()
            .any(|n| n.contains("webhook") || n.contains("certs")),
        "{:?}",
        r.names()
    );
    assert!(r.notes.contains("disabled"));
}

#[test]
fn trigger_api_and_auth_delegation_rbac() {
    let r = render_ok(
        json!({"kind": "Deployment", "trigger": {"enabled": true}, "metrics": {"enabled": false}}),
    );
    check_everything(&r);
    let args = r.args("descheduler");
    assert!(
        args.contains(&"--enable-trigger-api".to_owned()),
        "{args:?}"
    );
    assert!(args.contains(&"--disable-metrics".to_owned()), "{args:?}");
    let rules = &r.get("ClusterRole", "kube-descheduler")["rules"];
    let text = rules.to_string();
    assert!(
        text.contains("tokenreviews") && text.contains("subjectaccessreviews"),
        "{text}"
    );
    let trigger = r.get("ClusterRole", "kube-descheduler-trigger");
    assert_eq!(
        trigger["rules"][0]["nonResourceURLs"],
        json!(["/api/v1/descheduler/run"])
    );
    assert!(
        r.all("Service")
            .iter()
            .any(|s| s["metadata"]["name"] == "kube-descheduler"),
        "the trigger API needs a Service"
    );
    assert!(r.notes.contains("/api/v1/descheduler/run"));

    // Neither the trigger nor metrics: no TokenReview / SubjectAccessReview rights.
    let r = render_ok(json!({"kind": "Deployment", "metrics": {"enabled": false}}));
    check_everything(&r);
    let text = r.get("ClusterRole", "kube-descheduler")["rules"].to_string();
    assert!(
        !text.contains("tokenreviews") && !text.contains("subjectaccessreviews"),
        "{text}"
    );
    assert!(
        r.all("ClusterRole")
            .iter()
            .all(|c| c["metadata"]["name"] != "kube-descheduler-metrics-reader")
    );
}

#[test]
fn rbac_create_false_and_existing_service_accounts() {
    let r = render_ok(
        json!({"rbac": {"create": false}, "serviceAccount": {"create": false, "name": "mine"}}),
    );
    assert!(
        r.all("ClusterRole").is_empty()
            && r.all("Role").is_empty()
            && r.all("RoleBinding").is_empty()
    );
    assert_eq!(
        r.pod_with_container("descheduler").unwrap()["serviceAccountName"],
        "mine"
    );
    check_hardening(&r);
}

#[test]
fn invalid_values_fail_with_clear_messages() {
    let cases: Vec<(Value, &str, &[&str])> = vec![
        (
            json!({"kind": "DaemonSet"}),
            "HelmValuesError",
            &["/kind", "CronJob", "Deployment"],
        ),
        (
            json!({"webhook": {"failurePolicy": "Never"}}),
            "HelmValuesError",
            &["/webhook/failurePolicy", "Ignore", "Fail"],
        ),
        (
            json!({"webhook": {"timeoutSeconds": 31}}),
            "HelmValuesError",
            &["/webhook/timeoutSeconds"],
        ),
        (
            json!({"webhook": {"certs": {"mode": "vault"}}}),
            "HelmValuesError",
            &["/webhook/certs/mode", "certManager", "generate"],
        ),
        (json!({"replicas": 0}), "HelmValuesError", &["/replicas"]),
        (
            json!({"leaderelection": {"enabled": true}}),
            "HelmValuesError",
            &["leaderelection"],
        ),
        (
            json!({"deschedulingInterval": "five minutes"}),
            "HelmValuesError",
            &["/deschedulingInterval"],
        ),
        (
            json!({"securityContext": {"runAsNonRoot": false}}),
            "HelmValuesError",
            &["/securityContext/runAsNonRoot"],
        ),
        (
            json!({"kind": "CronJob", "leaderElection": {"enabled": true}}),
            "HelmRenderError",
            &["leaderElection.enabled=true needs kind=Deployment"],
        ),
        (
            json!({"kind": "Job", "leaderElection": {"enabled": true}}),
            "HelmRenderError",
            &["needs kind=Deployment (got kind=Job)"],
        ),
        (
            json!({"kind": "Deployment", "replicas": 2}),
            "HelmRenderError",
            &["replicas=2 needs leaderElection.enabled=true"],
        ),
        (
            json!({"trigger": {"enabled": true}}),
            "HelmRenderError",
            &["trigger.enabled=true needs kind=Deployment"],
        ),
        (
            json!({"webhook": {"replicas": 1}}),
            "HelmRenderError",
            &["would block every node drain"],
        ),
    ];
    let batch: Vec<Value> = cases
        .iter()
        .map(|(v, _, _)| render_case(v.clone(), "kube-descheduler", NS))
        .collect();
    for ((values, error_type, needles), result) in cases.iter().zip(helm_batch(&batch)) {
        assert_eq!(result["ok"], json!(false), "{values} should fail to render");
        assert_eq!(
            result["error_type"], *error_type,
            "{values}: {}",
            result["error"]
        );
        let msg = result["error"].as_str().unwrap();
        for n in *needles {
            assert!(
                msg.contains(n),
                "{values}: message should mention `{n}`: {msg}"
            );
        }
    }
    let (ty, msg) = render_err(json!({"image": {"repository": ""}}));
    assert_eq!(ty, "HelmValuesError", "{msg}");
}

#[test]
fn lint_reports_no_errors() {
    let variants = [
        json!({}),
        json!({"kind": "Job"}),
        json!({"kind": "Deployment", "replicas": 2, "leaderElection": {"enabled": true}, "trigger": {"enabled": true}, "serviceMonitor": {"enabled": true}}),
        json!({"webhook": {"certs": {"mode": "certManager"}}}),
        json!({"webhook": {"enabled": false}}),
        json!({"deschedulerPolicy": {
            "metricsProviders": [{"source": "KubernetesMetrics"}, prometheus_provider(true)],
            "profiles": [
                lnu_profile("kube", Some(json!({"source": "KubernetesMetrics"}))),
                lnu_profile("prom", prometheus_lnu()),
            ],
        }}),
    ];
    let batch: Vec<Value> = variants
        .iter()
        .map(|v| json!({"op": "lint", "values": v, "namespace": NS}))
        .collect();
    for (values, result) in variants.iter().zip(helm_batch(&batch)) {
        assert_eq!(
            result["ok"],
            json!(true),
            "lint {values}: {}",
            result["error"]
        );
        let report = &result["lint"];
        assert_eq!(report["errors"], json!([]), "lint {values}: {report}");
        let severe: Vec<&Value> = report["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["severity"].as_i64() >= Some(2))
            .collect();
        assert!(severe.is_empty(), "lint {values} warns: {severe:?}");
    }
    // And lint does catch a bad value (the harness can fail).
    let bad =
        helm_batch(&[json!({"op": "lint", "values": {"kind": "Nope"}, "namespace": NS})]).remove(0);
    assert_ne!(bad["lint"]["errors"], json!([]), "lint of kind=Nope: {bad}");
}

#[test]
fn evaluator_catches_missing_and_excess_rights() {
    // The RBAC checks themselves must be able to fail: drop a rule and add one.
    let r = render_ok(json!({"webhook": {"enabled": false}}));
    let mut rbac = check_all_typed(&r);
    let sa = install_facts(&r).engine_sa.unwrap();
    let evict = Request {
        verb: "create",
        group: "",
        resource: "pods/eviction".into(),
        namespace: None,
        name: None,
    };
    assert!(rbac.allows(&sa, &evict));
    let role = rbac
        .cluster_roles
        .iter_mut()
        .find(|c| c.metadata.name.as_deref() == Some("kube-descheduler"))
        .unwrap();
    role.rules.as_mut().unwrap().retain(|rule| {
        !rule
            .resources
            .iter()
            .flatten()
            .any(|x| x == "pods/eviction")
    });
    assert!(!rbac.allows(&sa, &evict));
    let missing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_rbac(&r, &rbac)));
    assert!(
        missing.is_err(),
        "a missing eviction right must fail the RBAC check"
    );

    let mut rbac = check_all_typed(&r);
    let role = rbac
        .cluster_roles
        .iter_mut()
        .find(|c| c.metadata.name.as_deref() == Some("kube-descheduler"))
        .unwrap();
    role.rules.as_mut().unwrap().push(PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".into()]),
        verbs: vec!["get".into()],
        ..Default::default()
    });
    let excess = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_rbac(&r, &rbac)));
    assert!(
        excess.is_err(),
        "an unneeded secrets right must fail the RBAC check"
    );

    // resourceNames and subresource wildcards behave as in the API server.
    let rule = PolicyRule {
        api_groups: Some(vec!["coordination.k8s.io".into()]),
        resources: Some(vec!["leases".into()]),
        resource_names: Some(vec!["a".into()]),
        verbs: vec!["get".into()],
        ..Default::default()
    };
    let req = |name| Request {
        verb: "get",
        group: "coordination.k8s.io",
        resource: "leases".into(),
        namespace: Some("x"),
        name,
    };
    assert!(rule_matches(&rule, &req(Some("a"))));
    assert!(!rule_matches(&rule, &req(Some("b"))));
    assert!(!rule_matches(&rule, &req(None)));
    let sub = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["pods/*".into()]),
        verbs: vec!["create".into()],
        ..Default::default()
    };
    assert!(rule_matches(&sub, &evict));
    let pods_only = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["pods".into()]),
        verbs: vec!["create".into()],
        ..Default::default()
    };
    assert!(
        !rule_matches(&pods_only, &evict),
        "pods does not grant pods/eviction"
    );
}

#[test]
fn unknown_fields_are_detected() {
    let obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "y", "labelz": {"a": "b"}},
        "data": {"k": "v"}
    });
    let r = std::panic::catch_unwind(|| strict::<ConfigMap>(&obj));
    let msg = r
        .err()
        .and_then(|e| e.downcast_ref::<String>().cloned())
        .expect("must fail");
    assert!(msg.contains(".metadata.labelz"), "{msg}");
}

#[test]
fn pod_spec_type_is_exercised() {
    // Every pod template also parses on its own as a PodSpec (ensures the extraction paths are right).
    let r = render_ok(json!({"kind": "Deployment"}));
    let specs = r.pod_specs();
    assert_eq!(specs.len(), 3, "engine, guard, certs job: {:?}", r.names());
    for (workload, spec) in specs {
        let typed: PodSpec =
            serde_json::from_value(spec).unwrap_or_else(|e| panic!("{workload}: {e}"));
        assert!(!typed.containers.is_empty());
    }
}

#[test]
fn client_bounds_of_both_servers_are_settable_through_cmd_options() {
    use clap::Parser;
    let bounds = json!({
        "header-read-timeout": "5s",
        "tls-handshake-timeout": "3s",
        "max-connections": 1000,
        "max-request-body-bytes": 2097152,
    });
    let r = render_ok(json!({
        "kind": "Deployment",
        "deschedulingInterval": "5m",
        "cmdOptions": bounds,
        "webhook": {"cmdOptions": bounds},
    }));
    check_everything(&r);
    for container in ["descheduler", "webhook"] {
        let args = r.args(container);
        assert_eq!(
            flag_value(&args, "--header-read-timeout").as_deref(),
            Some("5s")
        );
        let argv = std::iter::once("kube-descheduler".to_owned()).chain(args.iter().cloned());
        let cli = kube_descheduler::cli::Cli::try_parse_from(argv)
            .unwrap_or_else(|e| panic!("{container}: the binary refuses {args:?}: {e}"));
        let limits = match cli.command {
            kube_descheduler::cli::Command::Run(a) => a.serve_limits.resolve(),
            kube_descheduler::cli::Command::Webhook(a) => a.limits.resolve(),
            other => panic!("{container}: unexpected subcommand {other:?}"),
        }
        .unwrap_or_else(|e| panic!("{container}: {e}"));
        assert_eq!(
            limits,
            kube_descheduler::serving::limits::ServeLimits {
                max_body_bytes: 2_097_152,
                header_read_timeout: std::time::Duration::from_secs(5),
                tls_handshake_timeout: std::time::Duration::from_secs(3),
                max_connections: 1000,
            }
        );
    }
}

// ------------------------------------------------------------------------------------------
// Measured usage (metricsUtilization): metrics.k8s.io and the Prometheus token Secret

/// A LowNodeUtilization profile measuring with `metrics_utilization` (None: requests).
fn lnu_profile(name: &str, metrics_utilization: Option<Value>) -> Value {
    let (low, high) = match &metrics_utilization {
        Some(m) if m["source"] == "Prometheus" => {
            (json!({"MetricResource": 20}), json!({"MetricResource": 60}))
        }
        _ => (json!({"cpu": 20}), json!({"cpu": 60})),
    };
    let mut args = json!({"thresholds": low, "targetThresholds": high});
    if let Some(m) = metrics_utilization {
        args["metricsUtilization"] = m;
    }
    json!({
        "name": name,
        "pluginConfig": [{"name": "LowNodeUtilization", "args": args}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
    })
}

fn prometheus_provider(token: bool) -> Value {
    let mut p = json!({"source": "Prometheus", "prometheus": {"url": "https://prometheus.monitoring.svc:9090"}});
    if token {
        p["prometheus"]["authToken"] =
            json!({"secretReference": {"namespace": "monitoring", "name": "prom-token"}});
    }
    p
}

fn prometheus_lnu() -> Option<Value> {
    Some(json!({"source": "Prometheus", "prometheus": {"query": "instance:node_cpu:ratio"}}))
}

/// The engine's ClusterRole grants `list` on metrics.k8s.io nodes and pods.
fn grants_metrics_api(r: &Rendered) -> bool {
    let rules = &r.get("ClusterRole", "kube-descheduler")["rules"];
    rules.as_array().unwrap().iter().any(|rule| {
        rule["apiGroups"] == json!(["metrics.k8s.io"])
            && rule["resources"] == json!(["nodes", "pods"])
            && rule["verbs"] == json!(["list"])
    })
}

/// Any rendered rule mentions metrics.k8s.io / secrets (outside the certs Job's Role).
fn mentions(r: &Rendered, needle: &str) -> bool {
    r.all("ClusterRole")
        .into_iter()
        .chain(r.all("Role"))
        .filter(|o| o["metadata"]["name"] != "kube-descheduler-certs")
        .any(|o| o["rules"].to_string().contains(needle))
}

fn render_batch_ok(values: &[Value]) -> Vec<Rendered> {
    let cases: Vec<Value> = values
        .iter()
        .map(|v| render_case(v.clone(), "kube-descheduler", NS))
        .collect();
    helm_batch(&cases)
        .into_iter()
        .zip(values)
        .map(|(res, v)| into_rendered(res, v, NS))
        .collect()
}

#[test]
fn metrics_api_rbac_only_when_the_policy_measures_with_it() {
    let with_policy =
        |policy: Value| json!({"webhook": {"enabled": false}, "deschedulerPolicy": policy});
    let values = [
        // 0: source KubernetesMetrics with its provider.
        with_policy(json!({
            "metricsProviders": [{"source": "KubernetesMetrics"}],
            "profiles": [lnu_profile("a", Some(json!({"source": "KubernetesMetrics"})))],
        })),
        // 1: the deprecated metricsServer: true with metricsCollector.enabled.
        with_policy(json!({
            "metricsCollector": {"enabled": true},
            "profiles": [lnu_profile("a", Some(json!({"metricsServer": true})))],
        })),
        // 2: the provider is configured, but no plugin measures with it: the engine lists nothing.
        with_policy(json!({
            "metricsProviders": [{"source": "KubernetesMetrics"}],
            "profiles": [lnu_profile("a", None)],
        })),
        // 3: the chart's default policy (requests).
        json!({"webhook": {"enabled": false}}),
        // 4: Prometheus only.
        with_policy(json!({
            "metricsProviders": [prometheus_provider(true)],
            "profiles": [lnu_profile("a", prometheus_lnu())],
        })),
    ];
    let r = render_batch_ok(&values);
    for (i, r) in r.iter().enumerate() {
        check_everything(r);
        check_policy(r);
        let expected = i < 2;
        assert_eq!(
            grants_metrics_api(r),
            expected,
            "case {i}: metrics.k8s.io list granted? {}",
            values[i]
        );
        assert_eq!(mentions(r, "metrics.k8s.io"), expected, "case {i}");
    }
    // The coverage check fails when the grant is missing for a policy that measures.
    let without = check_all_typed(&r[2]);
    let missing =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_rbac(&r[0], &without)));
    assert!(
        missing.is_err(),
        "a policy measuring with metrics.k8s.io needs the grant"
    );
    // And the excess check fails when it is granted to a policy that does not measure.
    let with = check_all_typed(&r[0]);
    let excess =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_rbac(&r[2], &with)));
    assert!(excess.is_err(), "an unused metrics.k8s.io grant must fail");
}

#[test]
fn prometheus_token_secret_rbac_only_when_named() {
    let with_policy =
        |policy: Value| json!({"webhook": {"enabled": false}, "deschedulerPolicy": policy});
    let values = [
        // 0: Prometheus with a token Secret, next to KubernetesMetrics in another profile.
        with_policy(json!({
            "metricsProviders": [{"source": "KubernetesMetrics"}, prometheus_provider(true)],
            "profiles": [
                lnu_profile("kube", Some(json!({"source": "KubernetesMetrics"}))),
                lnu_profile("prom", prometheus_lnu()),
            ],
        })),
        // 1: Prometheus without authToken (the service account's own token file): no Secret read.
        with_policy(json!({
            "metricsProviders": [prometheus_provider(false)],
            "profiles": [lnu_profile("a", prometheus_lnu())],
        })),
        // 2: a token Secret is configured but no plugin queries Prometheus: not read.
        with_policy(json!({
            "metricsProviders": [prometheus_provider(true)],
            "profiles": [lnu_profile("a", None)],
        })),
        // 3: Prometheus with a token Secret only.
        with_policy(json!({
            "metricsProviders": [prometheus_provider(true)],
            "profiles": [lnu_profile("a", prometheus_lnu())],
        })),
    ];
    let r = render_batch_ok(&values);
    for r in &r {
        check_everything(r);
        check_policy(r);
    }

    let role = r[0].get("Role", "kube-descheduler-prometheus-token");
    assert_eq!(role["metadata"]["namespace"], "monitoring");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["prom-token"], "verbs": ["get"]}])
    );
    let binding = r[0].get("RoleBinding", "kube-descheduler-prometheus-token");
    assert_eq!(binding["metadata"]["namespace"], "monitoring");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kube-descheduler-prometheus-token"})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "kube-descheduler", "namespace": NS}])
    );
    assert!(grants_metrics_api(&r[0]));

    assert!(!grants_metrics_api(&r[3]));
    assert_eq!(
        r[3].get("Role", "kube-descheduler-prometheus-token")["rules"],
        role["rules"]
    );
    for (i, r) in r.iter().enumerate().skip(1).take(2) {
        assert!(
            !r.names().iter().any(|n| n.contains("prometheus-token")),
            "case {i}: {:?}",
            r.names()
        );
        assert!(!mentions(r, "secrets"), "case {i}: no Secret access");
        assert!(!grants_metrics_api(r), "case {i}");
    }

    // The checks can fail: the Secret read is needed with the token, and excess without it.
    let with_r = &r[3];
    assert_eq!(
        install_facts(with_r).prometheus_token,
        Some(("monitoring".to_owned(), "prom-token".to_owned()))
    );
    let mut emptied = check_all_typed(with_r);
    for role in &mut emptied.roles {
        role.rules = Some(Vec::new());
    }
    let missing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_rbac(with_r, &emptied)
    }));
    assert!(missing.is_err(), "the token Secret read needs its Role");
    let with = check_all_typed(with_r);
    let excess =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_rbac(&r[2], &with)));
    assert!(
        excess.is_err(),
        "a Secret grant without a Prometheus query must fail"
    );
    // Another Secret name in the grant is not the one the engine reads.
    let mut renamed = check_all_typed(with_r);
    for role in &mut renamed.roles {
        for rule in role.rules.iter_mut().flatten() {
            rule.resource_names = Some(vec!["other".into()]);
        }
    }
    let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_rbac(with_r, &renamed)
    }));
    assert!(wrong.is_err(), "a grant on another Secret must fail");
}
