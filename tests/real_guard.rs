//! The eviction guard on the real control plane (`tests/control-plane/up`): installed from the
//! Helm chart (rendered with the real Helm engine, applied server-side with validation), its
//! ServiceAccount's RBAC decided by kube-apiserver's authorizer, reviews authenticated by
//! kube-apiserver's webhook client certificate; real `kubectl drain` (1.33 and the one on PATH)
//! through a deflection and through a budget deadlock (rule B); a forged review restarts nothing.
//!
//! kwok's pods run nothing, so the guard runs as a local process on 127.0.0.1 with the chart's
//! container arguments, registered by the chart's ValidatingWebhookConfiguration with its
//! `clientConfig` pointed at that address (`url` instead of the Service).
//!
//! Needs python3 with `helm-python-sdk==0.2.2` and PyYAML, kubectl on PATH (and `kubectl.1.33`
//! next to it), curl and openssl. Drains are serialized (one node at a time on the shared cluster).

mod chart_guard_common;
mod real_common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use real_common::{Cluster, Out, root, run_bounded, run_bounded_stdin, shared, wait_until};
use serde_json::{Value, json};

const GUARD_NS: &str = "kube-descheduler";
const GUARD_SA: &str = "kube-descheduler-webhook";
const DEFLECTION: &str = "Eviction triggered evacuation";

#[path = "real_guard/install.rs"]
mod install;
#[path = "real_guard/kubectl.rs"]
mod kubectl;
#[path = "real_guard/workloads.rs"]
mod workloads;

use install::*;
use kubectl::*;
use workloads::*;

// ---------------------------------------------------------------------------------------------
// Scenarios

/// Scenario 1: the chart's guard objects apply server-side with validation; kube-apiserver's
/// authorizer gives the chart's ServiceAccount exactly what the guard needs (and not more); the
/// guard, run with that ServiceAccount's token and the cluster's webhook client CA, is ready.
#[test]
fn the_guard_installs_from_the_chart_and_runs_as_its_service_account() {
    let c = shared();
    let g = guard();
    let sa = format!("--as=system:serviceaccount:{GUARD_NS}:{GUARD_SA}");
    for (verb, resource, want) in [
        ("patch", "deployments.apps", "yes"),
        ("watch", "pods", "yes"),
        ("list", "poddisruptionbudgets.policy", "yes"),
        ("create", "events.events.k8s.io", "yes"),
        ("delete", "pods", "no"),
        ("create", "pods", "no"),
        ("update", "deployments.apps", "no"),
        ("get", "secrets", "no"),
    ] {
        let out = c.kubectl(&["auth", "can-i", verb, resource, &sa, "-A"]);
        assert_eq!(
            out.stdout.trim(),
            want,
            "can-i {verb} {resource} as the guard: {}",
            out.stderr
        );
    }
    // The ServiceAccount's own kubeconfig cannot do what the chart does not grant.
    let denied = run_bounded(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&g.sa_kubeconfig)
            .args(["get", "secrets", "-A"]),
        Duration::from_secs(30),
    );
    assert!(
        !denied.ok && denied.stderr.contains("Forbidden"),
        "{denied:?}"
    );
    let vwc = kubectl_json(
        c,
        &[
            "get",
            "validatingwebhookconfiguration",
            "kube-descheduler-eviction-guard",
        ],
    );
    assert_eq!(
        vwc["webhooks"][0]["clientConfig"]["url"],
        format!("https://{}/validate/eviction", g.addr)
    );
    assert_eq!(vwc["webhooks"][0]["failurePolicy"], "Ignore");
    assert!(
        g.logs().contains("\"client_auth\":true"),
        "the guard requires client certificates:\n{}",
        g.logs()
    );
}

/// Scenario 2: kubectl drain (1.33 and the one on PATH) of a node running a single-replica
/// Deployment completes through one deflection; Ready replicas never drop to 0.
#[test]
fn kubectl_drain_of_a_single_replica_deployment_deflects_once_without_downtime() {
    let c = shared();
    let g = guard();
    let _serial = serial();
    let ns = "real-drain";
    for (label, bin) in kubectls() {
        let app = format!("single-{}", slug(&label));
        let node = nodes(c)[0].clone();
        place_on(c, &node, ns, &app, 1, &[deployment(ns, &app, 1, json!({}))]);
        let before = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
        assert_eq!(before["metadata"]["generation"], 1);
        let sampler = Sampler::start(c, ns, &app);
        let d = drain(c, &bin, &node, &format!("app={app}"), "120s");
        // Until the rollout has finished.
        wait_until(
            &format!("{app} rolled out"),
            Duration::from_secs(60),
            || {
                let p = pods(c, ns, &app);
                p.len() == 1 && is_ready(&p[0]) && node_of(&p[0]) != node
            },
        );
        let series = sampler.finish();
        kubectl_ok(c, &["uncordon", &node]);
        let ctx = format!("kubectl {label}: {:?}\nguard logs:\n{}", d.out, g.logs());
        eprintln!(
            "kubectl {label}: drain of {node} took {:.1} s, {:.1} s at zero Ready ({} samples, min Ready pods {}, min readyReplicas {})",
            d.elapsed.as_secs_f64(),
            series.longest_zero.as_secs_f64(),
            series.samples,
            series.min_ready_pods,
            series.min_ready_replicas
        );
        eprintln!("kubectl {label} drain output:\n{}", d.all());
        assert!(d.out.ok, "drain failed: {ctx}");
        assert!(d.all().contains(DEFLECTION), "not deflected: {ctx}");
        let after = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
        assert!(
            after["spec"]["template"]["metadata"]["annotations"]
                ["kubectl.kubernetes.io/restartedAt"]
                .is_string(),
            "no restart: {ctx}"
        );
        assert_eq!(
            after["metadata"]["generation"], 2,
            "exactly one restart (one template change): {ctx}"
        );
        let rs = kubectl_json(
            c,
            &["get", "replicasets", "-n", ns, "-l", &format!("app={app}")],
        );
        assert_eq!(
            rs["items"].as_array().map(Vec::len),
            Some(2),
            "two ReplicaSets: the original and the restart's: {ctx}"
        );
        assert!(series.samples > 0);
        assert_eq!(series.min_ready_pods, 1, "never 0 Ready pods: {series:?}");
        assert_eq!(
            series.longest_zero,
            Duration::ZERO,
            "never 0 Ready pods: {series:?}"
        );
        assert!(series.min_ready_replicas >= 1, "{series:?}");
        kubectl_ok(c, &["delete", "deployment", &app, "-n", ns, "--wait=false"]);
    }
}

/// Scenario 3: 2 replicas and a budget `minAvailable: 2` (the drain deadlocks without the guard),
/// rule B opted in by the Deployment's annotation, for each kubectl:
/// - one replica on the drained node, one on another (required anti-affinity): the guard surges
///   to 3, the drain completes, Ready replicas never drop below 2, `spec.replicas` is restored;
/// - both replicas on the drained node: rule A comes first (every Ready replica is leaving), a
///   rolling restart moves them, the drain completes, never below 2 Ready, nothing surged.
#[test]
fn kubectl_drain_through_a_min_available_budget_with_rule_b() {
    let c = shared();
    let g = guard();
    let _serial = serial();
    let ns = "real-pdb";
    for (label, bin) in kubectls() {
        for together in [false, true] {
            let app = format!(
                "pdb-{}-{}",
                if together { "one-node" } else { "spread" },
                slug(&label)
            );
            let all = nodes(c);
            let node = all[1].clone();
            let on: Vec<&str> = if together {
                vec![&all[1]]
            } else {
                vec![&all[1], &all[2]]
            };
            let pdb = json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": app, "namespace": ns},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}}
            });
            let mut dep = deployment(
                ns,
                &app,
                2,
                json!({"kube-descheduler.io/pdb-surge": "enabled"}),
            );
            if !together {
                dep["spec"]["template"]["spec"]["affinity"] = json!({"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": {"app": app}},
                        "topologyKey": "kubernetes.io/hostname"}]}});
            }
            place_on_nodes(c, &on, ns, &app, 2, &[dep, pdb]);
            if !together {
                let p = pods(c, ns, &app);
                assert!(
                    p.iter().any(|p| node_of(p) == node),
                    "a replica on {node}: {p:?}"
                );
            }
            wait_until("the budget's status", Duration::from_secs(60), || {
                let p = kubectl_json(c, &["get", "pdb", &app, "-n", ns]);
                p["status"]["currentHealthy"] == 2 && p["status"]["disruptionsAllowed"] == 0
            });
            let sampler = Sampler::start(c, ns, &app);
            let d = drain(c, &bin, &node, &format!("app={app}"), "120s");
            let ctx = format!(
                "kubectl {label} {app}: {:?}\nguard logs:\n{}",
                d.out,
                g.logs()
            );
            assert!(d.out.ok, "drain failed: {ctx}");
            wait_until(
                &format!("{app} at 2 replicas, both Ready off {node}"),
                Duration::from_secs(60),
                || {
                    let dep = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
                    let p = pods(c, ns, &app);
                    dep["spec"]["replicas"] == 2
                        && dep["metadata"]["annotations"]
                            ["kube-descheduler.io/surge-original-replicas"]
                            .is_null()
                        && p.len() == 2
                        && p.iter().all(|p| is_ready(p) && node_of(p) != node)
                },
            );
            let series = sampler.finish();
            kubectl_ok(c, &["uncordon", &node]);
            eprintln!(
                "kubectl {label} {app}: drain of {node} through the budget took {:.1} s (min Ready pods {}, min readyReplicas {}, {} samples)",
                d.elapsed.as_secs_f64(),
                series.min_ready_pods,
                series.min_ready_replicas,
                series.samples
            );
            eprintln!("kubectl {label} {app} drain output:\n{}", d.all());
            let dep = kubectl_json(c, &["get", "deployment", &app, "-n", ns]);
            let restarted = dep["spec"]["template"]["metadata"]["annotations"]
                ["kubectl.kubernetes.io/restartedAt"]
                .is_string();
            if together {
                assert!(d.all().contains(DEFLECTION), "rule A: {ctx}");
                assert!(restarted, "rule A restarts: {ctx}");
                assert_eq!(dep["metadata"]["generation"], 2, "one restart: {ctx}");
            } else {
                assert!(
                    d.all().contains(&format!("PodDisruptionBudget {ns}/{app}")),
                    "the refusal names the budget: {ctx}"
                );
                assert!(!restarted, "surged, not restarted: {ctx}");
            }
            assert!(series.min_ready_pods >= 2, "{series:?}");
            kubectl_ok(
                c,
                &["delete", "deployment,pdb", &app, "-n", ns, "--wait=false"],
            );
        }
    }
}

/// Scenario 4: a review sent straight to the guard by a client without kube-apiserver's webhook
/// client certificate (none, or one from another CA with the same name) is refused in the TLS
/// handshake and restarts nothing; the same review with kube-apiserver's certificate is answered
/// (dry run, so nothing is written either).
#[test]
fn a_forged_review_restarts_nothing() {
    let c = shared();
    let g = guard();
    let ns = "real-forged";
    let app = "target";
    let _ = c.kubectl(&["create", "namespace", ns]);
    c.apply(&deployment(ns, app, 1, json!({})).to_string());
    wait_until("target Ready", Duration::from_secs(90), || {
        let p = pods(c, ns, app);
        p.len() == 1 && is_ready(&p[0])
    });
    let pod = pods(c, ns, app).remove(0);
    let pod_name = pod["metadata"]["name"].as_str().expect("name").to_owned();
    let review = |dry_run: bool| {
        kube_descheduler_guard::testing::eviction_review(
            "00000000-0000-0000-0000-00000000f0f0",
            (ns, &pod_name),
            json!({"username": "system:admin", "groups": ["system:masters"]}),
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": pod_name, "namespace": ns}}),
            dry_run,
        )
        .to_string()
    };
    let url = format!("https://{}/validate/eviction", g.addr);
    let ca = g.ca_file.display().to_string();
    let post = |cert: Option<(&Path, &Path)>, body: &str| {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-sS",
            "--max-time",
            "10",
            "--cacert",
            &ca,
            "-H",
            "Content-Type: application/json",
            "-w",
            "\n%{http_code}",
            "--data-binary",
            "@-",
            &url,
        ]);
        if let Some((crt, key)) = cert {
            cmd.arg("--cert").arg(crt).arg("--key").arg(key);
        }
        run_bounded_stdin(&mut cmd, body, Duration::from_secs(20))
    };

    // No client certificate.
    let none = post(None, &review(false));
    eprintln!("forged review without a certificate: {none:?}");
    assert!(!none.ok, "answered without a client certificate: {none:?}");

    // A certificate named kube-apiserver from a CA of the forger's own.
    let forged = g.dir.join("forged");
    std::fs::create_dir_all(&forged).expect("dir");
    let sh = format!(
        "cd {d} && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=forged-ca \
         -keyout ca.key -out ca.crt 2>/dev/null && \
         openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout c.key -out c.csr 2>/dev/null && \
         printf 'extendedKeyUsage=clientAuth\\n' > ext && \
         openssl x509 -req -in c.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext -out c.crt 2>/dev/null",
        d = forged.display()
    );
    let made = run_bounded(
        Command::new("sh").args(["-c", &sh]),
        Duration::from_secs(60),
    );
    assert!(made.ok, "openssl: {}", made.stderr);
    let bad = post(
        Some((&forged.join("c.crt"), &forged.join("c.key"))),
        &review(false),
    );
    eprintln!("forged review with a foreign certificate: {bad:?}");
    assert!(!bad.ok, "answered a certificate from another CA: {bad:?}");

    // The review port is not reachable through the probe port either.
    let probe = run_bounded(
        Command::new("curl").args([
            "-sS",
            "--max-time",
            "10",
            "--cacert",
            &ca,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &review(false),
            &format!("https://{}/validate/eviction", g.probe_addr),
        ]),
        Duration::from_secs(20),
    );
    eprintln!("review on the probe port: {probe:?}");
    assert_ne!(probe.stdout.trim(), "200", "{probe:?}");

    // Control: kube-apiserver's own client certificate is answered (a dry run writes nothing).
    let pki = c.dir.join("pki");
    let real = post(
        Some((
            &pki.join("webhook-client.crt"),
            &pki.join("webhook-client.key"),
        )),
        &review(true),
    );
    eprintln!("dry-run review with kube-apiserver's certificate: {real:?}");
    assert!(
        real.ok && real.stdout.trim_end().ends_with("200"),
        "{real:?}"
    );
    assert!(real.stdout.contains("\"allowed\""), "{real:?}");

    std::thread::sleep(Duration::from_secs(2));
    let dep = kubectl_json(c, &["get", "deployment", app, "-n", ns]);
    assert_eq!(dep["metadata"]["generation"], 1, "nothing was restarted");
    assert!(
        dep["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_null()
    );
    let p = pods(c, ns, app);
    assert!(p.len() == 1 && p[0]["metadata"]["name"] == pod_name.as_str());
}
