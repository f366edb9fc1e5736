//! The real control plane the end-to-end tests run on: `tests/control-plane/up` brings up a
//! cluster whose nodes are Ready and whose scheduler and controllers run a Deployment's pods.

mod real_common;

use std::time::Duration;

use real_common::shared;

#[test]
fn nodes_are_ready_and_a_deployment_runs_on_them() {
    let c = shared();
    let nodes = c.kubectl(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
    ]);
    assert!(nodes.ok, "{}", nodes.stderr);
    let ready: Vec<&str> = nodes
        .stdout
        .lines()
        .filter(|l| l.ends_with(" True"))
        .collect();
    assert_eq!(ready.len(), 3, "three Ready nodes: {}", nodes.stdout);

    c.apply(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: smoke, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: smoke}}
  template:
    metadata: {labels: {app: smoke}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.10}]
"#,
    );
    c.wait_for(
        "2 Running pods of Deployment smoke",
        Duration::from_secs(90),
        || {
            let out = c.kubectl(&[
                "get",
                "pods",
                "-l",
                "app=smoke",
                "-o",
                "jsonpath={range .items[*]}{.status.phase} {.spec.nodeName}{\"\\n\"}{end}",
            ]);
            out.stdout
                .lines()
                .filter(|l| l.starts_with("Running node-"))
                .count()
                == 2
        },
    );
    let v = c.kubectl(&["version", "-o", "json"]);
    assert!(
        v.stdout
            .contains(&format!("\"gitVersion\": \"v{}", c.version)),
        "server version {}: {}",
        c.version,
        v.stdout
    );
}
