//! Tests: measured usage (metrics.k8s.io and the Prometheus token Secret).

use super::*;

/// A LowNodeUtilization profile measuring with `metrics_utilization` (None: requests).
pub(crate) fn lnu_profile(name: &str, metrics_utilization: Option<Value>) -> Value {
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

pub(crate) fn prometheus_provider(token: bool) -> Value {
    let mut p = json!({"source": "Prometheus", "prometheus": {"url": "https://prometheus.monitoring.svc:9090"}});
    if token {
        p["prometheus"]["authToken"] =
            json!({"secretReference": {"namespace": "monitoring", "name": "prom-token"}});
    }
    p
}

pub(crate) fn prometheus_lnu() -> Option<Value> {
    Some(json!({"source": "Prometheus", "prometheus": {"query": "instance:node_cpu:ratio"}}))
}

/// The engine's ClusterRole grants `list` on metrics.k8s.io nodes and pods.
pub(crate) fn grants_metrics_api(r: &Rendered) -> bool {
    let rules = &r.get("ClusterRole", "kube-descheduler")["rules"];
    rules.as_array().unwrap().iter().any(|rule| {
        rule["apiGroups"] == json!(["metrics.k8s.io"])
            && rule["resources"] == json!(["nodes", "pods"])
            && rule["verbs"] == json!(["list"])
    })
}

/// Any rendered rule mentions metrics.k8s.io / secrets (outside the certs Job's Role).
pub(crate) fn mentions(r: &Rendered, needle: &str) -> bool {
    r.all("ClusterRole")
        .into_iter()
        .chain(r.all("Role"))
        .filter(|o| o["metadata"]["name"] != "kube-descheduler-certs")
        .any(|o| o["rules"].to_string().contains(needle))
}

pub(crate) fn render_batch_ok(values: &[Value]) -> Vec<Rendered> {
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
pub(crate) fn metrics_api_rbac_only_when_the_policy_measures_with_it() {
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
pub(crate) fn prometheus_token_secret_rbac_only_when_named() {
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
