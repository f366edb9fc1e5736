//! Every flag of upstream descheduler v0.36's command (`cmd/descheduler/app`: its own options,
//! component-base's leader election, apiserver's secure serving and component-base's logging
//! flags) is accepted by `kube-descheduler run`, listed in its `--help`, and resolves; an unknown
//! feature gate is a configuration error (exit code 2) naming it.

use std::process::Command;

use clap::Parser;
use kube_descheduler::cli::{Cli, Command as Sub, run::resolve};

/// Upstream v0.36's `run` flags, each with a value it accepts (`None`: a boolean flag).
const UPSTREAM_FLAGS: &[(&str, Option<&str>)] = &[
    // cmd/descheduler/app/options: DeschedulerServer.AddFlags
    ("descheduling-interval", Some("5m")),
    ("kubeconfig", Some("/kubeconfig")),
    (
        "client-connection-kubeconfig",
        Some("/client-connection.kubeconfig"),
    ),
    ("client-connection-qps", Some("5")),
    ("client-connection-burst", Some("10")),
    ("policy-config-file", Some("/policy.yaml")),
    ("dry-run", None),
    ("disable-metrics", None),
    ("otel-collector-endpoint", Some("otel-collector:4317")),
    ("otel-transport-ca-cert", Some("/ca.pem")),
    ("otel-service-name", Some("descheduler")),
    ("otel-trace-namespace", Some("kube-system")),
    ("otel-sample-rate", Some("0.5")),
    ("otel-fallback-no-op-on-error", None),
    ("enable-http2", None),
    ("feature-gates", Some("EvictionsInBackground=true")),
    // component-base/config/options: BindLeaderElectionFlags
    ("leader-elect", None),
    ("leader-elect-lease-duration", Some("137s")),
    ("leader-elect-renew-deadline", Some("107s")),
    ("leader-elect-retry-period", Some("26s")),
    ("leader-elect-resource-lock", Some("leases")),
    ("leader-elect-resource-name", Some("descheduler")),
    ("leader-elect-resource-namespace", Some("kube-system")),
    // apiserver/pkg/server/options: SecureServingOptions.AddFlags
    ("bind-address", Some("0.0.0.0")),
    ("secure-port", Some("10258")),
    ("disable-http2-serving", None),
    ("cert-dir", Some("/tmp/certs")),
    ("tls-cert-file", Some("/tls.crt")),
    ("tls-private-key-file", Some("/tls.key")),
    (
        "tls-cipher-suites",
        Some("TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384"),
    ),
    ("tls-curve-preferences", Some("23,29")),
    ("tls-min-version", Some("VersionTLS12")),
    ("tls-sni-cert-key", Some("/a.crt,/a.key:*.example.com")),
    ("http2-max-streams-per-connection", Some("100")),
    ("permit-port-sharing", None),
    ("permit-address-sharing", None),
    // component-base/logs/api/v1: AddFlags (text and json formats registered)
    ("logging-format", Some("json")),
    ("log-flush-frequency", Some("5s")),
    ("v", Some("2")),
    ("vmodule", Some("cycle=4")),
    ("log-text-split-stream", None),
    ("log-text-info-buffer-size", Some("0")),
    ("log-json-split-stream", None),
    ("log-json-info-buffer-size", Some("0")),
];

/// Flags whose value needs a partner flag to parse (clap `requires`).
fn partners(flag: &str) -> Vec<String> {
    match flag {
        "tls-cert-file" => vec!["--tls-private-key-file=/tls.key".into()],
        "tls-private-key-file" => vec!["--tls-cert-file=/tls.crt".into()],
        _ => vec![],
    }
}

fn parse(args: &[String]) -> Result<Box<kube_descheduler::cli::run::RunArgs>, clap::Error> {
    let argv = ["kube-descheduler", "run"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    match Cli::try_parse_from(argv)?.command {
        Sub::Run(a) => Ok(a),
        other => panic!("not run: {other:?}"),
    }
}

fn forms(flag: &str, value: Option<&str>) -> Vec<String> {
    match value {
        Some(v) => vec![format!("--{flag}={v}")],
        None => vec![
            format!("--{flag}"),
            format!("--{flag}=true"),
            format!("--{flag}=false"),
        ],
    }
}

#[test]
fn every_upstream_flag_parses_alone_in_every_form() {
    for (flag, value) in UPSTREAM_FLAGS {
        for form in forms(flag, *value) {
            let mut args = vec![form.clone()];
            args.extend(partners(flag));
            if let Err(e) = parse(&args) {
                panic!("upstream flag {form} refused: {e}");
            }
        }
    }
}

#[test]
fn all_upstream_flags_together_parse_and_resolve() {
    let args: Vec<String> = UPSTREAM_FLAGS
        .iter()
        .map(|(flag, value)| match value {
            Some(v) => format!("--{flag}={v}"),
            None => format!("--{flag}=true"),
        })
        .collect();
    let a = parse(&args).unwrap_or_else(|e| panic!("refused: {e}"));
    assert_eq!(a.tracing.otel_collector_endpoint, "otel-collector:4317");
    assert_eq!(
        a.kubeconfig.as_deref(),
        Some(std::path::Path::new("/client-connection.kubeconfig")),
        "the last of upstream's two kubeconfig flags wins"
    );
    assert_eq!(a.tracing.otel_sample_rate, 0.5);
    assert!(a.upstream.enable_http2);
    let r = resolve(&a).unwrap_or_else(|e| panic!("does not resolve: {e}"));
    assert!(r.upstream.feature_gates.evictions_in_background());
    assert_eq!(r.upstream.http2, Some(100));
}

#[test]
fn upstream_defaults() {
    let a = parse(&["--policy-config-file=/p".to_string()]).expect("parses");
    assert_eq!(a.tracing.otel_collector_endpoint, "");
    assert_eq!(a.tracing.otel_transport_ca_cert, "");
    assert_eq!(a.tracing.otel_service_name, "descheduler");
    assert_eq!(a.tracing.otel_trace_namespace, "");
    assert_eq!(a.tracing.otel_sample_rate, 1.0);
    assert!(!a.tracing.otel_fallback_no_op_on_error);
    assert!(!a.upstream.enable_http2);
    let r = resolve(&a).expect("resolves");
    assert_eq!(r.upstream.http2, None, "HTTP/1.1 only by default");
    assert!(!r.upstream.feature_gates.evictions_in_background());
}

#[test]
fn help_lists_every_upstream_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["run", "--help"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for (flag, _) in UPSTREAM_FLAGS {
        assert!(
            help.contains(&format!("--{flag}")),
            "--{flag} missing from run --help"
        );
    }
    assert!(help.contains("EvictionsInBackground"), "{help}");
}

#[test]
fn feature_gate_errors_are_configuration_errors_naming_the_gate() {
    for (gates, named) in [
        ("NoSuchGate=true", "NoSuchGate"),
        ("EvictionsInBackground=true,Other=false", "Other"),
        ("EvictionsInBackground=maybe", "EvictionsInBackground=maybe"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
            .args([
                "run",
                "--policy-config-file=/nonexistent/policy.yaml",
                &format!("--feature-gates={gates}"),
            ])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{gates}: {stderr}");
        assert!(stderr.contains("--feature-gates"), "{gates}: {stderr}");
        assert!(stderr.contains(named), "{gates}: {stderr}");
    }
}
