//! Container hardening checks.

use super::*;

pub(crate) fn check_hardening(r: &Rendered) {
    let specs = r.pod_specs();
    assert!(!specs.is_empty(), "no pod templates rendered");
    for (workload, spec) in specs {
        let pod_sc = &spec["securityContext"];
        for c in spec["containers"].as_array().unwrap() {
            let sc = &c["securityContext"];
            let what = format!("{workload} container {}", c["name"]);
            assert!(
                sc["runAsNonRoot"] == json!(true) || pod_sc["runAsNonRoot"] == json!(true),
                "{what}: runAsNonRoot"
            );
            assert_eq!(
                sc["readOnlyRootFilesystem"],
                json!(true),
                "{what}: readOnlyRootFilesystem"
            );
            assert_eq!(
                sc["allowPrivilegeEscalation"],
                json!(false),
                "{what}: allowPrivilegeEscalation"
            );
            assert_ne!(sc["privileged"], json!(true), "{what}: privileged");
            assert!(
                sc["capabilities"]["drop"]
                    .as_array()
                    .is_some_and(|d| d.contains(&json!("ALL"))),
                "{what}: capabilities.drop ALL"
            );
            assert!(
                sc["capabilities"]["add"].is_null(),
                "{what}: adds capabilities"
            );
            assert!(
                sc["seccompProfile"]["type"] == "RuntimeDefault"
                    || pod_sc["seccompProfile"]["type"] == "RuntimeDefault",
                "{what}: seccompProfile RuntimeDefault"
            );
            assert_eq!(
                c["command"],
                json!(["/kube-descheduler"]),
                "{what}: the one binary"
            );
        }
        assert!(
            spec["hostNetwork"].is_null() && spec["hostPID"].is_null(),
            "{workload}: host namespaces"
        );
    }
}
