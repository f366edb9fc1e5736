//! Tests: install modes (CronJob, Job, Deployment, webhook certificates, RBAC switches).

use super::*;

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
    assert_flags(
        &args,
        &[
            ("--service", "kube-descheduler-webhook"),
            ("--namespace", NS),
            ("--out-dir", "/tmp/certs"),
        ],
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
    assert_flag(&args, "--descheduling-interval", "3m");
    assert!(args.contains(&"--leader-elect=true".to_owned()));
    assert_flags(
        &args,
        &[
            ("--leader-elect-lease-duration", "137s"),
            ("--leader-elect-renew-deadline", "107s"),
            ("--leader-elect-retry-period", "26s"),
            ("--leader-elect-resource-name", "descheduler"),
            ("--leader-elect-resource-namespace", NS),
        ],
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
    assert_flags(
        &args,
        &[
            ("--secret-name", "guard-tls"),
            ("--namespace", "ops"),
            (
                "--webhook-configuration",
                "prod-kube-descheduler-eviction-guard",
            ),
        ],
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
