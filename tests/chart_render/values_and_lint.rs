//! Tests: invalid values, lint, the evaluators themselves, client bounds.

use super::*;

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
        assert_flag(&args, "--header-read-timeout", "5s");
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
