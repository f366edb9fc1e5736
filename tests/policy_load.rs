//! Loading policies: strict decoding, validation and v1alpha1 conversion (plugin-independent parts).

use kube_descheduler::evictor::LimitValue;
use kube_descheduler::framework::cycle::Profile;
use kube_descheduler::plugins::default_evictor::{DefaultEvictor, DefaultEvictorArgs};
use kube_descheduler::policy::load_str;

/// The args of a profile's DefaultEvictor.
fn evictor_args(profile: &Profile) -> &DefaultEvictorArgs {
    profile
        .evictor
        .as_any()
        .downcast_ref::<DefaultEvictor>()
        .expect("the profile's evictor is the DefaultEvictor")
        .args()
}

fn err(text: &str) -> String {
    match load_str(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const HEAD: &str = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n";

#[test]
fn top_level_fields_and_limits() {
    let p = load_str(&format!(
        "{HEAD}nodeSelector: 'pool in (a,b),!spot'\nmaxNoOfPodsToEvictPerNode: 0\nmaxNoOfPodsToEvictPerNamespace: 3\nmaxNoOfPodsToEvictTotal: 9\ngracePeriodSeconds: 30\nevictionFailureEventNotification: true\nprofiles: []\n"
    ))
    .unwrap();
    assert_eq!(
        p.cycle.max_per_node,
        Some(LimitValue::Count(0)),
        "0 is a real limit (evict nothing)"
    );
    assert_eq!(p.cycle.max_per_namespace, Some(LimitValue::Count(3)));
    assert_eq!(p.cycle.max_total, Some(9));
    assert_eq!(p.grace_period_seconds, Some(30));
    assert!(p.eviction_failure_event_notification);
    assert!(p.cycle.node_selector.is_some());
    assert!(p.warnings.iter().any(|w| w.contains("no profiles")));
}

#[test]
fn strict_decoding_names_the_field() {
    assert!(
        err(&format!("{HEAD}maxNoOfPodsToEvictPerNod: 1\n"))
            .contains("unknown field `maxNoOfPodsToEvictPerNod`")
    );
    assert!(
        err(&format!("{HEAD}maxNoOfPodsToEvictPerNode: -1\n"))
            .contains("maxNoOfPodsToEvictPerNode")
    );
    assert!(
        err(&format!(
            "{HEAD}profiles:\n- name: a\n  plugins:\n    deschedul: {{}}\n"
        ))
        .contains("deschedul")
    );
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  pluginConfig:\n  - name: DefaultEvictor\n    args: {{nodeFitt: true}}\n"
    ));
    assert!(
        e.contains("profile \"a\"") && e.contains("DefaultEvictor") && e.contains("args.nodeFitt"),
        "{e}"
    );
    assert!(err(&format!("{HEAD}nodeSelector: 'a in b'\n")).contains("nodeSelector"));
    assert!(err(&format!("{HEAD}gracePeriodSeconds: -5\n")).contains("gracePeriodSeconds"));
}

#[test]
fn header_and_syntax_errors() {
    assert!(err("").contains("empty"));
    assert!(
        err("apiVersion: descheduler/v1alpha3\nkind: DeschedulerPolicy\n").contains("apiVersion")
    );
    assert!(err("apiVersion: descheduler/v1alpha2\nkind: Policy\n").contains("kind"));
    let e = err("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: [\n");
    assert!(e.contains("invalid YAML") && e.contains("line"), "{e}");
}

#[test]
fn profile_rules() {
    let e = err(&format!("{HEAD}profiles:\n- name: a\n- name: a\n"));
    assert!(e.contains("duplicate profile name"), "{e}");
    let e = err(&format!("{HEAD}profiles:\n- name: ''\n"));
    assert!(e.contains("profiles[0].name"), "{e}");
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  plugins:\n    deschedule:\n      enabled: [NoSuchPlugin]\n"
    ));
    assert!(
        e.contains("NoSuchPlugin") && e.contains("known plugins") && e.contains("DefaultEvictor"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  plugins:\n    filter:\n      enabled: [Other]\n"
    ));
    assert!(e.contains("only DefaultEvictor"), "{e}");
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  pluginConfig:\n  - name: DefaultEvictor\n  - name: DefaultEvictor\n"
    ));
    assert!(e.contains("more than once"), "{e}");
}

#[test]
fn default_evictor_validation_matches_upstream() {
    let cfg = |args: &str| {
        format!(
            "{HEAD}profiles:\n- name: a\n  pluginConfig:\n  - name: DefaultEvictor\n    args: {args}\n"
        )
    };
    let e = err(&cfg("{priorityThreshold: {value: 10, name: high}}"));
    assert!(e.contains("only one of priorityThreshold"), "{e}");
    let e = err(&cfg("{noEvictionPolicy: Sometimes}"));
    assert!(e.contains("noEvictionPolicy"), "{e}");
    let e = err(&cfg(
        "{evictLocalStoragePods: true, podProtections: {defaultDisabled: [PodsWithLocalStorage]}}",
    ));
    assert!(e.contains("deprecated"), "{e}");
    let e = err(&cfg(
        "{podProtections: {extraEnabled: [PodsWithLocalStorage]}}",
    ));
    assert!(e.contains("extraEnabled"), "{e}");
    let e = err(&cfg("{podProtections: {defaultDisabled: [Everything]}}"));
    assert!(e.contains("defaultDisabled"), "{e}");
    let e = err(&cfg("{minPodAge: 5 minutes}"));
    assert!(e.contains("minPodAge"), "{e}");
    load_str(&cfg(
        "{minPodAge: 5m, minReplicas: 2, nodeFit: true, noEvictionPolicy: Mandatory}",
    ))
    .unwrap();
}

#[test]
fn metrics_providers_are_validated_as_upstream() {
    // (providers YAML, field named, message as upstream's)
    let table: &[(&str, &str, &str)] = &[
        (
            "- source: Graphite\n",
            "metricsProviders[0].source",
            "expected",
        ),
        (
            "- source: KubernetesMetrics\n- source: KubernetesMetrics\n",
            "metricsProviders[1].source",
            "each source can be configured only once",
        ),
        (
            "- source: Prometheus\n",
            "metricsProviders[0].prometheus",
            "prometheus configuration is required when prometheus source is enabled",
        ),
        (
            "- source: Prometheus\n  prometheus: {url: ''}\n",
            "metricsProviders[0].prometheus.url",
            "prometheus URL is required",
        ),
        (
            "- source: Prometheus\n  prometheus: {url: 'prom:9090'}\n",
            "metricsProviders[0].prometheus.url",
            "error parsing prometheus URL",
        ),
        (
            "- source: Prometheus\n  prometheus: {url: 'https://prom:9090', authToken: {}}\n",
            "metricsProviders[0].prometheus.authToken.secretReference",
            "prometheus authToken secret is expected to be set when authToken field is",
        ),
        (
            "- source: Prometheus\n  prometheus: {url: 'https://prom:9090', authToken: {secretReference: {name: t}}}\n",
            "metricsProviders[0].prometheus.authToken.secretReference",
            "does not set both namespace and name",
        ),
    ];
    for (providers, field, msg) in table {
        let e = err(&format!("{HEAD}metricsProviders:\n{providers}"));
        assert!(e.contains(field) && e.contains(msg), "{providers}: {e}");
    }
    let e = err(&format!(
        "{HEAD}metricsCollector: {{enabled: true}}\nmetricsProviders:\n- source: KubernetesMetrics\n"
    ));
    assert!(
        e.contains("metricsCollector") && e.contains("not allowed to combine"),
        "{e}"
    );
    let p = load_str(&format!("{HEAD}metricsProviders:\n- source: Prometheus\n  prometheus:\n    url: 'https://prom:9090'\n    authToken: {{secretReference: {{namespace: kube-system, name: prom-token}}}}\n")).unwrap();
    let prom = p.metrics.prometheus.unwrap();
    assert_eq!(prom.url, "https://prom:9090");
    assert_eq!(
        prom.token_secret,
        Some(("kube-system".to_string(), "prom-token".to_string()))
    );
    assert!(!p.metrics.kubernetes && p.metrics.prometheus_queries.is_empty());
}

fn lnu_policy(providers: &str, metrics_utilization: &str, thresholds: &str) -> String {
    format!(
        "{HEAD}{providers}profiles:\n- name: p\n  pluginConfig:\n  - name: LowNodeUtilization\n    args:\n      thresholds: {thresholds}\n      targetThresholds: {thresholds}\n      metricsUtilization: {metrics_utilization}\n  plugins:\n    balance: {{enabled: [LowNodeUtilization]}}\n"
    )
}

#[test]
fn metrics_utilization_is_validated_as_upstream_and_needs_its_provider() {
    const KM: &str = "metricsProviders:\n- source: KubernetesMetrics\n";
    const PROM: &str =
        "metricsProviders:\n- source: Prometheus\n  prometheus: {url: 'http://127.0.0.1:9090'}\n";
    const CPU: &str = "{cpu: 50}";
    const METRIC: &str = "{MetricResource: 50}";
    // (providers, metricsUtilization, thresholds, fields named, message)
    let table: &[(&str, &str, &str, &[&str], &str)] = &[
        (
            KM,
            "{source: KubernetesMetrics, metricsServer: true}",
            CPU,
            &["metricsUtilization"],
            "it is not allowed to set both \"KubernetesMetrics\" source and metricsServer",
        ),
        (
            KM,
            "{source: KubernetesMetrics, prometheus: {query: q}}",
            CPU,
            &["metricsUtilization.prometheus"],
            "prometheus configuration is not allowed to set when source is set to \"KubernetesMetrics\"",
        ),
        (
            PROM,
            "{source: Prometheus}",
            METRIC,
            &["metricsUtilization.prometheus.query"],
            "prometheus query is required when metrics source is set to \"Prometheus\"",
        ),
        (
            PROM,
            "{source: Prometheus, prometheus: {query: q}}",
            CPU,
            &["thresholds"],
            "single instance of \"MetricResource\"",
        ),
        (
            "",
            "{source: KubernetesMetrics}",
            CPU,
            &["metricsUtilization.source", "metricsProviders"],
            "needs a metricsProviders entry with source: KubernetesMetrics",
        ),
        (
            PROM,
            "{metricsServer: true}",
            CPU,
            &["metricsUtilization.source", "metricsProviders"],
            "metricsServer: true needs a metricsProviders entry",
        ),
        (
            KM,
            "{source: Prometheus, prometheus: {query: q}}",
            METRIC,
            &["metricsUtilization.source", "metricsProviders"],
            "needs a metricsProviders entry with source: Prometheus",
        ),
        (
            KM,
            "{}",
            CPU,
            &["metricsUtilization.source"],
            "metrics source is empty",
        ),
    ];
    for (providers, mu, t, fields, msg) in table {
        let e = err(&lnu_policy(providers, mu, t));
        assert!(
            fields.iter().all(|f| e.contains(f)) && e.contains(msg),
            "{mu} with {providers:?}: {e}"
        );
    }
    // Accepted: what upstream's README shows, and the deprecated forms.
    let p = load_str(&lnu_policy(KM, "{source: KubernetesMetrics}", CPU)).unwrap();
    assert!(p.metrics.kubernetes && p.metrics.prometheus_queries.is_empty());
    let p = load_str(&lnu_policy(
        "metricsCollector: {enabled: true}\n",
        "{metricsServer: true}",
        CPU,
    ))
    .unwrap();
    assert!(p.metrics.kubernetes);
    let p = load_str(&lnu_policy(
        PROM,
        "{source: Prometheus, prometheus: {query: 'instance:node_cpu:rate:sum'}}",
        METRIC,
    ))
    .unwrap();
    assert_eq!(p.metrics.prometheus_queries, ["instance:node_cpu:rate:sum"]);
    assert!(!p.metrics.kubernetes);
    // Without metricsUtilization nothing is measured, even with providers configured.
    let p = load_str(&format!(
        "{HEAD}{KM}profiles:\n- name: p\n  pluginConfig:\n  - name: LowNodeUtilization\n    args: {{thresholds: {CPU}, targetThresholds: {CPU}}}\n  plugins:\n    balance: {{enabled: [LowNodeUtilization]}}\n"
    ))
    .unwrap();
    assert!(p.metrics.is_empty());
}

#[test]
fn v1alpha1_header_and_unknown_strategy() {
    let e = err(
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n  Bogus: {enabled: true}\n",
    );
    assert!(
        e.contains("strategies.Bogus") && e.contains("known strategies"),
        "{e}"
    );
    let e = err("apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nevictPods: true\n");
    assert!(e.contains("evictPods"), "{e}");
    let e = err(
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n  RemoveDuplicates:\n    enabled: true\n    params: {thresholdPriority: 5, thresholdPriorityClassName: x}\n",
    );
    assert!(e.contains("priority threshold"), "{e}");
    // Disabled strategies are not converted.
    let p = load_str("apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nmaxNoOfPodsToEvictPerNode: 2\nstrategies:\n  RemoveDuplicates: {enabled: false}\n").unwrap();
    assert!(p.profiles.is_empty());
    assert_eq!(p.cycle.max_per_node, Some(LimitValue::Count(2)));
}

#[test]
fn v1alpha1_strategies_become_one_profile_each_with_upstream_evictor_args() {
    let p = load_str(
        r#"
apiVersion: "descheduler/v1alpha1"
kind: "DeschedulerPolicy"
nodeSelector: "pool=a"
evictLocalStoragePods: true
maxNoOfPodsToEvictPerNode: 3
strategies:
  "RemovePodsHavingTooManyRestarts":
    enabled: true
    params:
      podsHavingTooManyRestarts:
        podRestartThreshold: 100
        includingInitContainers: true
      nodeFit: true
      thresholdPriority: 1000
  "PodLifeTime":
    enabled: true
    params:
      podLifeTime:
        maxPodLifeTimeSeconds: 86400
        podStatusPhases: ["Pending"]
      nodeFit: true
      namespaces:
        include: ["batch"]
  "RemoveFailedPods":
    enabled: false
"#,
    )
    .unwrap();
    let names: Vec<&str> = p.profiles.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "strategy-PodLifeTime-profile",
            "strategy-RemovePodsHavingTooManyRestarts-profile"
        ]
    );
    let lifetime = &p.profiles[0];
    assert_eq!(lifetime.deschedule.len(), 1);
    assert_eq!(lifetime.deschedule[0].name(), "PodLifeTime");
    assert!(
        !evictor_args(lifetime).node_fit,
        "nodeFit is ignored for PodLifeTime, as upstream"
    );
    assert!(evictor_args(lifetime).evict_local_storage_pods);
    let restarts = &p.profiles[1];
    assert!(evictor_args(restarts).node_fit);
    assert_eq!(
        evictor_args(restarts)
            .priority_threshold
            .as_ref()
            .and_then(|t| t.value),
        Some(1000)
    );
    assert_eq!(p.cycle.max_per_node, Some(LimitValue::Count(3)));
    assert!(p.cycle.node_selector.is_some());
    assert!(p.warnings.iter().any(|w| w.contains("v1alpha1")));
    // The converted args are validated like v1alpha2 ones.
    let e = err(
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n  RemovePodsHavingTooManyRestarts: {enabled: true}\n",
    );
    assert!(
        e.contains("strategy-RemovePodsHavingTooManyRestarts-profile")
            && e.contains("podRestartThreshold"),
        "{e}"
    );
}

#[test]
fn plugin_rules_with_real_plugins() {
    // Enabled without a pluginConfig entry: an error, as upstream.
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  plugins:\n    deschedule:\n      enabled: [RemoveFailedPods]\n"
    ));
    assert!(
        e.contains("RemoveFailedPods") && e.contains("pluginConfig"),
        "{e}"
    );
    // A pluginConfig without args is fine and gets defaults.
    load_str(&format!("{HEAD}profiles:\n- name: a\n  pluginConfig:\n  - name: RemoveFailedPods\n  plugins:\n    deschedule:\n      enabled: [RemoveFailedPods]\n")).unwrap();
    // Wrong extension point.
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  pluginConfig:\n  - name: RemoveFailedPods\n  plugins:\n    balance:\n      enabled: [RemoveFailedPods]\n"
    ));
    assert!(e.contains("deschedule plugin"), "{e}");
    // Args of a configured but not enabled plugin are still validated.
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  pluginConfig:\n  - name: RemovePodsHavingTooManyRestarts\n    args: {{podRestartThreshold: 0}}\n"
    ));
    assert!(
        e.contains("profile \"a\"")
            && e.contains("RemovePodsHavingTooManyRestarts")
            && e.contains("podRestartThreshold"),
        "{e}"
    );
    // Unknown plugin names list the known ones.
    let e = err(&format!(
        "{HEAD}profiles:\n- name: a\n  pluginConfig:\n  - name: RemoveFailedPod\n"
    ));
    assert!(
        e.contains("known plugins") && e.contains("RemoveFailedPods") && e.contains("PodLifeTime"),
        "{e}"
    );
}
