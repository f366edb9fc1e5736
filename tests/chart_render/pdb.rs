//! The opt-in PodDisruptionBudget of the descheduler Deployment (as upstream's chart after
//! v0.36.0): off by default, `minAvailable` or `maxUnavailable` (which wins), annotations and
//! `unhealthyPodEvictionPolicy`, only for `kind: Deployment`; and its ClusterRole without
//! `pods: delete` (evictions need `pods/eviction: create` only).

use super::*;

fn descheduler_pdb(r: &Rendered) -> Option<Value> {
    r.all("PodDisruptionBudget")
        .into_iter()
        .find(|p| p["metadata"]["name"] == "kube-descheduler")
        .cloned()
}

#[test]
fn pdb_is_opt_in_and_deployment_only() {
    let r = render_ok(json!({"kind": "Deployment", "deschedulingInterval": "5m"}));
    assert!(descheduler_pdb(&r).is_none(), "off by default");
    let r = render_ok(json!({"kind": "CronJob", "podDisruptionBudget": {"enabled": true}}));
    assert!(descheduler_pdb(&r).is_none(), "no Deployment, no budget");
}

#[test]
fn pdb_settings_render() {
    let r = render_ok(json!({
        "kind": "Deployment",
        "replicas": 2,
        "deschedulingInterval": "5m",
        "leaderElection": {"enabled": true},
        "podDisruptionBudget": {
            "enabled": true,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "annotations": {"example.com/owner": "platform"},
        },
    }));
    check_everything(&r);
    let pdb = descheduler_pdb(&r).expect("budget rendered");
    drop(strict::<PodDisruptionBudget>(&pdb));
    assert_eq!(pdb["metadata"]["namespace"], NS);
    assert_eq!(
        pdb["metadata"]["annotations"]["example.com/owner"],
        "platform"
    );
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert!(pdb["spec"].get("maxUnavailable").is_none());
    assert_eq!(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    let dep = r.get("Deployment", "kube-descheduler");
    for (k, v) in pdb["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("selector")
    {
        assert_eq!(&dep["spec"]["template"]["metadata"]["labels"][k], v, "{k}");
    }

    let r = render_ok(json!({
        "kind": "Deployment",
        "deschedulingInterval": "5m",
        "podDisruptionBudget": {"enabled": true, "maxUnavailable": "50%"},
    }));
    let pdb = descheduler_pdb(&r).expect("budget rendered");
    assert_eq!(pdb["spec"]["maxUnavailable"], "50%");
    assert!(pdb["spec"].get("minAvailable").is_none());
}

#[test]
fn pdb_refuses_unknown_policies() {
    let (_, e) = render_err(json!({
        "kind": "Deployment",
        "deschedulingInterval": "5m",
        "podDisruptionBudget": {"enabled": true, "unhealthyPodEvictionPolicy": "Sometimes"},
    }));
    assert!(e.contains("unhealthyPodEvictionPolicy"), "{e}");
}

/// As upstream's chart after v0.36.0: the descheduler evicts through `pods/eviction` only, so its
/// ServiceAccount may not delete pods (in any install mode) but may create evictions.
#[test]
fn the_descheduler_may_evict_but_not_delete_pods() {
    let sa = Sa {
        namespace: NS.into(),
        name: "kube-descheduler".into(),
    };
    for values in [
        json!({"kind": "CronJob"}),
        json!({"kind": "Deployment", "deschedulingInterval": "5m", "leaderElection": {"enabled": true}}),
        json!({"kind": "Job"}),
    ] {
        let r = render_ok(values.clone());
        let rbac = check_all_typed(&r);
        let request = |verb, resource: &str| Request {
            verb,
            group: "",
            resource: resource.into(),
            namespace: Some("default"),
            name: Some("web-1"),
        };
        assert!(
            rbac.allows(&sa, &request("create", "pods/eviction")),
            "{values}: evictions allowed"
        );
        for verb in ["delete", "deletecollection"] {
            assert!(
                !rbac.allows(&sa, &request(verb, "pods")),
                "{values}: {verb} pods granted"
            );
        }
    }
}
