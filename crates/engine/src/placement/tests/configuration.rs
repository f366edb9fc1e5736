//! The scheduler configuration's strict decoding, and the placement mode's names.

use super::*;

#[test]
fn scheduler_configuration_is_read_strictly() {
    let ok = config::load_str(
        r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
  - schedulerName: default-scheduler
    plugins:
      score:
        disabled: [{name: "*"}]
        enabled: [{name: NodeResourcesFit, weight: 5}]
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
  - schedulerName: ratio
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: RequestedToCapacityRatio
            requestedToCapacityRatio:
              shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]
"#,
    )
    .expect("valid");
    let d = ok.get("default-scheduler").expect("default profile");
    assert_eq!(d.strategy, ScoringStrategy::MostAllocated);
    assert_eq!(d.weights.node_resources_fit, 5);
    assert_eq!(d.weights.balanced_allocation, 0);
    assert_eq!(d.weights.taint_toleration, 0);
    assert_eq!(
        d.fit_resources,
        vec![("cpu".into(), 2), ("memory".into(), 1)]
    );
    assert!(
        d.filters.node_resources_fit,
        "score disables leave filters on"
    );
    let ratio = ok.get("ratio").expect("ratio profile");
    assert_eq!(
        ratio.strategy,
        ScoringStrategy::RequestedToCapacityRatio {
            shape: vec![(0, 10), (100, 0)]
        }
    );
    assert_eq!(ratio.weights, profile::Weights::default());
    assert!(ok.get("other").is_none());

    let head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let errors = [
        (
            "profiles: [{schedulerName: a, plugin: {}}]",
            "profiles[0].plugin: unknown field `plugin`",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: Most}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {typo: 1}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.typo: unknown field `typo`",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 50, score: 1}, {utilization: 40, score: 2}]}}}}]}]",
            "requestedToCapacityRatio.shape[1].utilization",
        ),
        (
            "profiles: [{plugins: {score: {enabled: [{name: X, weight: 101}]}}}]",
            "profiles[0].plugins.score.enabled[0].weight",
        ),
        ("profiles: [{}, {}]", "profiles[1].schedulerName: duplicate"),
        ("bogus: 1", "unknown field `bogus`"),
    ];
    for (body, want) in errors {
        let e = config::load_str(&format!("{head}{body}")).expect_err(body);
        assert!(e.0.contains(want), "{body}: {}", e.0);
    }
    let e = config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
    )
    .expect_err("old version");
    assert!(e.0.contains("apiVersion"), "{}", e.0);
}

#[test]
fn the_placement_mode_reads_names_and_a_bare_yaml_off() {
    let read = |v: serde_json::Value| serde_json::from_value::<PlacementMode>(v);
    assert_eq!(
        read(serde_json::json!("Off")).ok(),
        Some(PlacementMode::Off)
    );
    assert_eq!(
        read(serde_json::json!("Report")).ok(),
        Some(PlacementMode::Report)
    );
    assert_eq!(
        read(serde_json::json!("Enforce")).ok(),
        Some(PlacementMode::Enforce)
    );
    // `placement: Off` unquoted: YAML 1.1 reads the boolean false.
    assert_eq!(
        read(serde_json::json!(false)).ok(),
        Some(PlacementMode::Off)
    );
    let err = read(serde_json::json!(true)).err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("Off") && e.contains("true")));
    let err = read(serde_json::json!("Sometimes"))
        .err()
        .map(|e| e.to_string());
    assert!(
        err.is_some_and(|e| e.contains("Sometimes")),
        "unknown names are refused"
    );
}
