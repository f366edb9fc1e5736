//! The guard's registration rules (webhook configuration and Deployment).

use super::*;

pub(crate) fn check_webhook_configuration(
    r: &Rendered,
    timeout_max: i32,
    failure_policy: &str,
) -> Value {
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
    let cport = element(&guard["ports"], "name", "https", "https container port");
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
pub(crate) fn check_guard_deployment(r: &Rendered) -> String {
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
    assert_flags(
        &args,
        &[
            ("--tls-cert-file", "/certs/tls.crt"),
            ("--tls-private-key-file", "/certs/tls.key"),
        ],
    );
    let mount = element(&c["volumeMounts"], "mountPath", "/certs", "/certs mount");
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
