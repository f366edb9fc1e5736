//! Tests: the scheduler configuration (`placement.*`): the chart renders it into a ConfigMap (or
//! names an existing one), mounts it into the descheduler pod and passes `--scheduler-config`;
//! the rendered file loads with the engine's strict reader, and `run` reads it at start.

use super::*;

/// A KubeSchedulerConfiguration with two profiles, the second packing (MostAllocated).
fn two_profiles() -> Value {
    json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {"schedulerName": "default-scheduler"},
            {"schedulerName": "bin-packer", "pluginConfig": [{"name": "NodeResourcesFit",
                "args": {"scoringStrategy": {"type": "MostAllocated"}}}]},
        ],
    })
}

const FLAG: &str = "--scheduler-config";
const PATH: &str = "/scheduler-config-dir/scheduler-config.yaml";

/// The descheduler pod's `scheduler-config` volume and its container's mount of it.
fn volume_and_mount(r: &Rendered) -> Option<(Value, Value)> {
    let pod = r
        .pod_with_container("descheduler")
        .expect("descheduler pod");
    let volume = pod["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == "scheduler-config")?
        .clone();
    let mount = r.container("descheduler")["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == "scheduler-config")?
        .clone();
    Some((volume, mount))
}

#[test]
fn an_inline_scheduler_config_is_rendered_mounted_and_passed() {
    let values: Vec<Value> = ["CronJob", "Job", "Deployment"]
        .iter()
        .map(|kind| json!({"kind": kind, "placement": {"schedulerConfig": two_profiles()}}))
        .collect();
    for (r, v) in render_batch_ok(&values).iter().zip(&values) {
        check_everything(r);
        let cm = r.get("ConfigMap", "kube-descheduler-scheduler-config");
        let text = cm["data"]["scheduler-config.yaml"]
            .as_str()
            .expect("scheduler-config.yaml");
        let parsed: Value = serde_saphyr::from_str(text).expect("YAML");
        assert_eq!(parsed, two_profiles(), "{v}");
        // The engine's strict reader takes it, with both profiles.
        let profiles = kube_descheduler::placement::config::load_str(text)
            .unwrap_or_else(|e| panic!("the rendered configuration does not load: {e}\n{text}"));
        assert!(profiles.get("default-scheduler").is_some());
        assert_eq!(
            profiles.get("bin-packer").map(|p| p.strategy.name()),
            Some("MostAllocated")
        );
        assert_eq!(
            flag_value(&r.args("descheduler"), FLAG).as_deref(),
            Some(PATH),
            "{v}"
        );
        let (volume, mount) = volume_and_mount(r).expect("volume and mount");
        assert_eq!(
            volume["configMap"],
            json!({"name": "kube-descheduler-scheduler-config",
                   "items": [{"key": "scheduler-config.yaml", "path": "scheduler-config.yaml"}]})
        );
        assert_eq!(mount["mountPath"], "/scheduler-config-dir");
        assert_eq!(mount["readOnly"], true);
        // A change of the configuration rolls the pods (Deployment) like a policy change.
        let pod_annotations = r
            .objects
            .iter()
            .find_map(|o| match o["kind"].as_str() {
                Some("Deployment") | Some("Job") => Some(&o["spec"]["template"]["metadata"]),
                Some("CronJob") => Some(&o["spec"]["jobTemplate"]["spec"]["template"]["metadata"]),
                _ => None,
            })
            .expect("pod template")["annotations"]
            .clone();
        assert!(
            pod_annotations["checksum/scheduler-config"].is_string(),
            "{pod_annotations}"
        );
    }
}

#[test]
fn an_existing_configmap_is_mounted_by_name_and_key() {
    let r = render_ok(json!({"placement": {
        "existingConfigMap": "kube-scheduler-config", "existingConfigMapKey": "config.yaml"}}));
    check_everything(&r);
    assert!(
        r.all("ConfigMap")
            .iter()
            .all(|c| c["metadata"]["name"] != "kube-descheduler-scheduler-config"),
        "nothing rendered for an existing ConfigMap"
    );
    assert_eq!(
        flag_value(&r.args("descheduler"), FLAG).as_deref(),
        Some(PATH)
    );
    let (volume, _) = volume_and_mount(&r).expect("volume and mount");
    assert_eq!(
        volume["configMap"],
        json!({"name": "kube-scheduler-config",
               "items": [{"key": "config.yaml", "path": "scheduler-config.yaml"}]})
    );
}

#[test]
fn without_a_scheduler_config_nothing_changes() {
    let r = render_ok(json!({}));
    assert!(flag_value(&r.args("descheduler"), FLAG).is_none());
    assert!(volume_and_mount(&r).is_none());
    assert!(
        !r.args("descheduler")
            .iter()
            .any(|a| a.contains("scheduler-config")),
        "{:?}",
        r.args("descheduler")
    );
}

#[test]
fn bad_scheduler_config_values_are_refused() {
    // Both at once.
    let (_, msg) = render_err(json!({"placement": {
        "schedulerConfig": two_profiles(), "existingConfigMap": "mine"}}));
    assert!(msg.contains("exclusive"), "{msg}");
    // Not a KubeSchedulerConfiguration, or not an object: the schema says which field.
    for (bad, field) in [
        (
            json!({"schedulerConfig": {"apiVersion": "v1", "kind": "KubeSchedulerConfiguration"}}),
            "apiVersion",
        ),
        (json!({"schedulerConfig": {"profiles": []}}), "apiVersion"),
        (
            json!({"schedulerConfig": "profiles: []"}),
            "schedulerConfig",
        ),
        (json!({"schedulerConfigs": {}}), "schedulerConfigs"),
        (json!({"existingConfigMapKey": ""}), "existingConfigMapKey"),
    ] {
        let (ty, msg) = render_err(json!({"placement": bad}));
        assert_eq!(ty, "HelmValuesError", "{bad}: {msg}");
        assert!(msg.contains(field), "{bad}: {msg}");
    }
}

/// `run` reads the rendered file at start: it gets past the scheduler configuration (and then
/// fails on the unreachable kubeconfig), while the same file with a misspelt field stops it with
/// exit code 2 naming the field.
#[test]
fn run_loads_the_rendered_scheduler_config() {
    let r = render_ok(json!({"placement": {"schedulerConfig": two_profiles()}}));
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    let config = dir.path().join("scheduler-config.yaml");
    let text =
        r.get("ConfigMap", "kube-descheduler-scheduler-config")["data"]["scheduler-config.yaml"]
            .as_str()
            .expect("scheduler-config.yaml")
            .to_owned();
    std::fs::write(
        &policy,
        r.get("ConfigMap", "kube-descheduler")["data"]["policy.yaml"]
            .as_str()
            .expect("policy.yaml"),
    )
    .expect("written");
    let run = |config_text: &str| {
        std::fs::write(&config, config_text).expect("written");
        let out = Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
            .arg("run")
            .arg("--policy-config-file")
            .arg(&policy)
            .arg(FLAG)
            .arg(&config)
            .arg("--kubeconfig")
            .arg(dir.path().join("no-such-kubeconfig"))
            .arg("--secure-port=0")
            .output()
            .expect("kube-descheduler runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&text);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("no-such-kubeconfig"), "{stderr}");
    assert!(!stderr.contains("scheduler"), "{stderr}");
    let (code, stderr) = run(&text.replace("scoringStrategy", "scoringStrategie"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("profiles[1].pluginConfig[0].args.scoringStrategie"),
        "{stderr}"
    );
}
