//! The guard's NetworkPolicy and client-certificate settings.

use super::*;
use k8s_openapi::api::networking::v1::NetworkPolicy;

const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";

#[test]
fn network_policy_admits_the_api_server_sources_on_the_review_port_and_scrapers_on_the_probe_port()
{
    let api_servers = json!([
        {"ipBlock": {"cidr": "10.0.0.10/32"}},
        {"ipBlock": {"cidr": "10.0.0.11/32"}}
    ]);
    let scrapers = json!([
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]);
    let r = render_ok(json!({"webhook": {
        "containerPort": 9443,
        "probePort": 9444,
        "clientAuth": {"enabled": true, "caCert": CA_PEM, "allowedNames": ["kube-apiserver", "apiserver.example"]},
        "networkPolicy": {"enabled": true, "apiServerSources": api_servers, "metricsSources": scrapers}
    }}));
    check_everything(&r);
    let np = r.get("NetworkPolicy", "kube-descheduler-webhook");
    let _typed: NetworkPolicy = strict(np);
    // It selects exactly the guard's pods.
    let guard = r.get("Deployment", "kube-descheduler-webhook");
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"],
        guard["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    let ingress = np["spec"]["ingress"].as_array().expect("ingress rules");
    assert_eq!(ingress.len(), 2, "{ingress:?}");
    assert_eq!(ingress[0]["from"], api_servers);
    assert_eq!(
        ingress[0]["ports"],
        json!([{"protocol": "TCP", "port": 9443}])
    );
    assert_eq!(ingress[1]["from"], scrapers);
    assert_eq!(
        ingress[1]["ports"],
        json!([{"protocol": "TCP", "port": 9444}])
    );

    // Client authentication: the CA in a ConfigMap, mounted, and the flags.
    let args = r.args("webhook");
    assert_flags(
        &args,
        &[
            ("--client-ca-file", "/client-ca/ca.crt"),
            ("--probe-port", "9444"),
            ("--client-allowed-names", "kube-apiserver,apiserver.example"),
        ],
    );
    let cm = r.get("ConfigMap", "kube-descheduler-webhook-client-ca");
    assert_eq!(
        cm["data"]["ca.crt"].as_str().map(str::trim),
        Some(CA_PEM.trim())
    );
    let spec = &guard["spec"]["template"]["spec"];
    assert!(
        spec["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .any(|v| v["configMap"]["name"] == "kube-descheduler-webhook-client-ca"),
        "client CA not mounted: {spec}"
    );
    // Kubelet probes go to the probe port, which needs no client certificate.
    let c = r.container("webhook");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "probes", "{probe}");
        assert_eq!(c[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
    assert!(
        c["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .any(|p| p["name"] == "probes" && p["containerPort"] == 9444)
    );
    assert!(
        r.notes.contains("requires a client certificate"),
        "{}",
        r.notes
    );
    assert!(r.notes.contains("NetworkPolicy"), "{}", r.notes);
}

#[test]
fn without_client_auth_probes_and_metrics_stay_on_the_review_port_and_notes_warn() {
    let r = render_ok(json!({"webhook": {"networkPolicy": {
        "enabled": true,
        "apiServerSources": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}, "podSelector": {"matchLabels": {"component": "kube-apiserver"}}}],
        "metricsSources": [{"podSelector": {"matchLabels": {"app": "prometheus"}}}]
    }}}));
    check_everything(&r);
    let np = r.get("NetworkPolicy", "kube-descheduler-webhook");
    let ingress = np["spec"]["ingress"].as_array().expect("ingress rules");
    assert_eq!(
        ingress[1]["ports"],
        json!([{"protocol": "TCP", "port": 8443}])
    );
    let c = r.container("webhook");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "https");
    let args = r.args("webhook");
    assert!(flag_value(&args, "--client-ca-file").is_none());
    assert_flags(
        &args,
        &[
            ("--restart-burst", "100"),
            ("--namespace-restart-burst", "25"),
        ],
    );
    assert!(r.notes.contains("NOT authenticated"), "{}", r.notes);
    assert!(
        r.all("ConfigMap")
            .iter()
            .all(|c| c["metadata"]["name"] != "kube-descheduler-webhook-client-ca")
    );
}

#[test]
fn defaults_render_no_network_policy_and_say_the_port_is_open() {
    let r = render_ok(json!({}));
    assert!(r.all("NetworkPolicy").is_empty());
    assert!(r.notes.contains("No NetworkPolicy"), "{}", r.notes);
}

#[test]
fn unsafe_settings_are_refused_with_the_value_to_set() {
    let (_, err) = render_err(json!({"webhook": {"networkPolicy": {"enabled": true}}}));
    assert!(err.contains("apiServerSources"), "{err}");
    let (_, err) = render_err(json!({"webhook": {"clientAuth": {"enabled": true}}}));
    assert!(err.contains("caCert"), "{err}");
    let (_, err) = render_err(json!({"webhook": {"rateLimits": {"restartRate": "ten"}}}));
    assert!(err.contains("restartRate"), "{err}");
}
