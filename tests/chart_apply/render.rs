//! The chart variants under test and their rendering with the real Helm engine.

use super::*;

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) struct Variant {
    pub(crate) label: &'static str,
    pub(crate) values: Value,
    pub(crate) release: &'static str,
    pub(crate) namespace: &'static str,
}

pub(crate) fn variant(label: &'static str, values: Value) -> Variant {
    Variant {
        label,
        values,
        release: "kube-descheduler",
        namespace: "kube-descheduler",
    }
}

/// The default values and every variant `tests/chart_render.rs` renders.
pub(crate) fn variants() -> Vec<Variant> {
    vec![
        variant("default", json!({})),
        variant("job", json!({"kind": "Job"})),
        variant(
            "cronjob-suspended-no-guard",
            json!({"kind": "CronJob", "schedule": "0 * * * *", "suspend": true, "webhook": {"enabled": false}}),
        ),
        variant(
            "deployment-leader-election-servicemonitor",
            json!({
                "kind": "Deployment", "replicas": 2, "deschedulingInterval": "3m",
                "leaderElection": {"enabled": true}, "podDisruptionBudget": {"enabled": true},
                "serviceMonitor": {"enabled": true, "interval": "30s"},
                "cmdOptions": {"v": 5, "client-connection-qps": 30, "dry-run": null},
            }),
        ),
        variant(
            "lease-in-kube-system",
            json!({"kind": "Deployment", "leaderElection": {"enabled": true, "resourceNamespace": "kube-system", "resourceName": "my-lease"}}),
        ),
        variant(
            "cert-manager",
            json!({"webhook": {"certs": {"mode": "certManager"}}}),
        ),
        variant(
            "cert-manager-cluster-issuer",
            json!({"webhook": {"certs": {"mode": "certManager", "certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "corp-ca"}}}}}),
        ),
        Variant {
            label: "custom-release-generate",
            values: json!({"webhook": {"certs": {"mode": "generate", "secretName": "guard-tls"}, "timeoutSeconds": 3}}),
            release: "prod",
            namespace: "ops",
        },
        variant("webhook-disabled", json!({"webhook": {"enabled": false}})),
        variant(
            "guard-client-auth-network-policy",
            json!({"webhook": {
                "clientAuth": {"enabled": true, "caCert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "allowedNames": ["kube-apiserver"]},
                "networkPolicy": {"enabled": true, "apiServerSources": [{"ipBlock": {"cidr": "10.0.0.10/32"}}]}
            }}),
        ),
        variant(
            "trigger-api",
            json!({"kind": "Deployment", "trigger": {"enabled": true}, "metrics": {"enabled": false}}),
        ),
        variant(
            "deployment-no-metrics",
            json!({"kind": "Deployment", "metrics": {"enabled": false}}),
        ),
        variant(
            "deployment-scheduler-config",
            json!({"kind": "Deployment", "placement": {"schedulerConfig": {
                "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{"name": "NodeResourcesFit",
                    "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}]}}}),
        ),
        variant(
            "no-rbac-existing-service-account",
            json!({"rbac": {"create": false}, "serviceAccount": {"create": false, "name": "mine"}}),
        ),
    ]
}

/// Renders every variant in one `render.py batch` run; the objects of each, in template order.
pub(crate) fn render_all(variants: &[Variant]) -> Vec<Vec<Value>> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let cases: Vec<Value> = variants
        .iter()
        .map(|v| json!({"op": "render", "values": v.values, "name": v.release, "namespace": v.namespace}))
        .collect();
    let mut child = Command::new(&python)
        .arg(root().join("tests/chart/render.py"))
        .arg("batch")
        .arg(root().join("charts/kube-descheduler"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{python}` ({e}): pip install {PIN}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(json!(cases).to_string().as_bytes())
        .expect("writing the cases");
    let out = child.wait_with_output().expect("render.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "render.py failed: {stderr}\n(the chart tests need `pip install {PIN}`)"
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("render.py printed no JSON ({e}): {stderr}"));
    results
        .into_iter()
        .zip(variants)
        .map(|(r, v)| {
            assert_eq!(r["ok"], true, "{}: {}", v.label, r["error"]);
            let manifests = r["manifests"].as_object().expect("manifests");
            let mut paths: Vec<&String> = manifests.keys().collect();
            paths.sort();
            let mut objects = Vec::new();
            for p in paths {
                let text = manifests[p].as_str().expect("text");
                let docs: Vec<Value> = serde_saphyr::from_multiple(text)
                    .unwrap_or_else(|e| panic!("{}: {p}: {e}", v.label));
                objects.extend(docs.into_iter().filter(|d| !d.is_null()));
            }
            objects
        })
        .collect()
}
