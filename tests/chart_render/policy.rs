//! The policy ConfigMap and the whole-install check.

use super::*;

pub(crate) fn check_policy(r: &Rendered) -> Value {
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
pub(crate) fn check_everything(r: &Rendered) {
    let rbac = check_all_typed(r);
    check_hardening(r);
    check_rbac(r, &rbac);
    // The engine reads the policy from the ConfigMap it mounts.
    if let Some(pod) = r.pod_with_container("descheduler") {
        let args = r.args("descheduler");
        assert_eq!(args[0], "run");
        assert_flag(&args, "--policy-config-file", "/policy-dir/policy.yaml");
        let vol = element(&pod["volumes"], "name", "policy-volume", "policy volume");
        let cm = vol["configMap"]["name"].as_str().unwrap();
        assert!(r.get("ConfigMap", cm)["data"]["policy.yaml"].is_string());
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    }
}
