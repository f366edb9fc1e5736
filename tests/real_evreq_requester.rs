//! `run --eviction-api EvictionRequest` against the real control plane (1.37 with the alpha
//! EvictionRequestAPI gate, `EVICTION_REQUEST=1`): the requests `run` creates are validated and
//! stored by the real API server, nothing is evicted directly (kube-controller-manager 1.37.2 has
//! no evictionrequest-controller, so nothing turns them into evictions), a later cycle withdraws
//! the request of a pod it no longer wants, outstanding requests count against the limits, and
//! dry-run writes nothing. Without the API (1.34, or 1.37 without the gate) `run` fails at start.
//! Tests that need the gate skip with a printed reason on a version without it.

mod real_common;
mod real_evreq_requester_common;

use std::time::Duration;

use real_common::{Cluster, run_bounded, run_command};
use real_evreq_requester_common::{Request, case, pods, policy, requests};

const REQUESTER: &str = "kube-descheduler.io/descheduler";

/// One `run` cycle (one-shot) with `extra` flags; panics when it fails. Returns its log.
fn run_once(c: &Cluster, policy: &std::path::Path, extra: &[&str]) -> String {
    let out = run_bounded(
        run_command(&c.kubeconfig, policy)
            .args(["--eviction-api", "EvictionRequest"])
            .args(extra),
        Duration::from_secs(180),
    );
    assert!(out.ok, "run failed:\n{}\n{}", out.stdout, out.stderr);
    format!("{}{}", out.stdout, out.stderr)
}

/// Our requests in `ns` with intent `intent`, by pod name.
fn with_intent(reqs: &[Request], intent: &str) -> Vec<String> {
    let mut names: Vec<String> = reqs
        .iter()
        .filter(|r| r.intent == intent)
        .map(|r| r.pod.clone())
        .collect();
    names.sort();
    names
}

#[test]
fn two_cycles_request_the_pods_evict_none_and_withdraw_the_one_no_longer_wanted() {
    let Some(case) = case("evreq-two", "web", 2, None) else {
        return;
    };
    let (c, ns, policy) = (case.c, case.ns, &case.policy);
    let before = pods(c, ns, "web");

    let log = run_once(c, policy, &[]);
    let reqs = requests(c, ns);
    assert_eq!(reqs.len(), 2, "one request per pod: {reqs:?}\n{log}");
    for r in &reqs {
        let uid = &before
            .iter()
            .find(|p| p.name == r.pod)
            .expect("a pod of ours")
            .uid;
        assert_eq!(&r.uid, uid, "the request names the pod's UID");
        assert_eq!(r.requester, REQUESTER);
        assert_eq!(r.intent, "Eviction");
        assert_eq!(r.name, format!("kube-descheduler-{uid}"));
        assert_eq!(r.managed_by, "kube-descheduler");
    }
    assert!(log.contains("Eviction requested"), "{log}");

    // Nothing evicted the pods: the same pods run, none is terminating.
    let after = pods(c, ns, "web");
    assert_eq!(after, before, "no pod was evicted directly");

    // The second cycle no longer wants web's first pod (relabelled out of the selector).
    let dropped = &before[0].name;
    let kept = &before[1].name;
    let out = c.kubectl(&["label", "pod", "-n", ns, dropped, "evict=no", "--overwrite"]);
    assert!(out.ok, "{}", out.stderr);
    let log = run_once(c, policy, &[]);
    let reqs = requests(c, ns);
    assert_eq!(reqs.len(), 2, "no request duplicated: {reqs:?}\n{log}");
    assert_eq!(
        with_intent(&reqs, "Withdrawn"),
        vec![dropped.clone()],
        "{log}"
    );
    assert_eq!(with_intent(&reqs, "Eviction"), vec![kept.clone()], "{log}");
    assert!(log.contains("Eviction request withdrawn"), "{log}");
    assert_eq!(pods(c, ns, "web"), before, "still no pod evicted");

    // Wanted again: the withdrawn request is renewed, not duplicated.
    let out = c.kubectl(&["label", "pod", "-n", ns, dropped, "evict-"]);
    assert!(out.ok, "{}", out.stderr);
    let log = run_once(c, policy, &[]);
    let reqs = requests(c, ns);
    assert_eq!(reqs.len(), 2, "{reqs:?}\n{log}");
    assert_eq!(with_intent(&reqs, "Eviction").len(), 2, "{reqs:?}\n{log}");
}

#[test]
fn outstanding_requests_count_against_the_limits_until_their_pod_is_gone() {
    let Some(case) = case("evreq-limits", "api", 4, Some(2)) else {
        return;
    };
    let (c, ns, policy) = (case.c, case.ns, &case.policy);

    run_once(c, policy, &[]);
    let first = with_intent(&requests(c, ns), "Eviction");
    assert_eq!(
        first.len(),
        2,
        "the total limit (2) bounds the requests: {first:?}"
    );

    // Both requests are still outstanding: the next cycle asks for no other pod.
    let log = run_once(c, policy, &[]);
    let reqs = requests(c, ns);
    assert_eq!(with_intent(&reqs, "Eviction"), first, "{log}");
    assert_eq!(
        reqs.len(),
        2,
        "no new request while two are outstanding: {reqs:?}\n{log}"
    );
    assert!(
        log.contains("Eviction refused by a limit"),
        "the other pods are refused by the limit:\n{log}"
    );

    // One requested pod goes (as a responder would evict it): one new request fits.
    let out = c.kubectl(&[
        "delete",
        "pod",
        "-n",
        ns,
        &first[0],
        "--wait=true",
        "--timeout=60s",
    ]);
    assert!(out.ok, "{}", out.stderr);
    c.wait_for(
        "the Deployment's replacement pod",
        Duration::from_secs(120),
        || {
            let p = pods(c, ns, "api");
            p.len() == 4 && p.iter().all(|p| p.phase == "Running")
        },
    );
    std::thread::sleep(Duration::from_secs(3));
    let log = run_once(c, policy, &[]);
    let live: Vec<String> = pods(c, ns, "api").into_iter().map(|p| p.name).collect();
    let outstanding: Vec<String> = with_intent(&requests(c, ns), "Eviction")
        .into_iter()
        .filter(|p| live.contains(p))
        .collect();
    assert_eq!(outstanding.len(), 2, "{outstanding:?}\n{log}");
    assert!(
        outstanding.contains(&first[1]),
        "the outstanding request stays: {log}"
    );
}

#[test]
fn a_request_someone_else_deleted_is_asked_for_again_by_the_running_process() {
    let Some(case) = case("evreq-resync", "re", 1, None) else {
        return;
    };
    let (c, ns, policy) = (case.c, case.ns, &case.policy);
    let log = case.dir.path().join("run.log");
    let mut run = real_common::spawn_run(
        &c.kubeconfig,
        policy,
        &log,
        &["--eviction-api", "EvictionRequest"],
    );
    let first = |c: &Cluster| requests(c, ns).into_iter().next();
    c.wait_for("the pod's request", Duration::from_secs(60), || {
        first(c).is_some()
    });
    let before = first(c).expect("a request");
    let out = c.kubectl(&[
        "delete",
        "evictionrequest",
        "-n",
        ns,
        &before.name,
        "--wait=true",
    ]);
    assert!(out.ok, "{}", out.stderr);
    c.wait_for(
        "the request asked for anew",
        Duration::from_secs(60),
        || first(c).is_some_and(|r| r.object_uid != before.object_uid && r.intent == "Eviction"),
    );
    let _ = run.kill();
    let _ = run.wait();
    let again = first(c).expect("a request");
    assert_eq!((again.name, again.uid), (before.name, before.uid));
}

#[test]
fn dry_run_writes_no_request() {
    let Some(case) = case("evreq-dry", "dry", 2, None) else {
        return;
    };
    let (c, ns, policy) = (case.c, case.ns, &case.policy);
    let log = run_once(c, policy, &["--dry-run"]);
    assert!(
        requests(c, ns).is_empty(),
        "dry run wrote a request:\n{log}"
    );
    let finished = log
        .lines()
        .find(|l| l.contains("descheduling cycle finished"))
        .unwrap_or_else(|| panic!("no cycle line:\n{log}"));
    let line: serde_json::Value = serde_json::from_str(finished).expect("a JSON log line");
    let field = |name: &str| {
        let f = &line["fields"][name];
        if f.is_null() {
            line[name].clone()
        } else {
            f.clone()
        }
    };
    assert_eq!(field("requested"), 2, "{finished}");
    assert_eq!(field("dry_run"), true, "{finished}");
}

#[test]
fn without_the_api_run_fails_at_start_naming_the_flag_and_the_gate() {
    // The shared cluster never has the gate (1.34 has no such API; 1.37 without EVICTION_REQUEST).
    let c = real_common::shared();
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = policy(dir.path(), "default", None);
    let out = run_bounded(
        run_command(&c.kubeconfig, &policy).args(["--eviction-api", "EvictionRequest"]),
        Duration::from_secs(120),
    );
    assert!(!out.ok, "run started without the API:\n{}", out.stderr);
    for word in [
        "--eviction-api",
        "EvictionRequestAPI",
        "lifecycle.k8s.io/v1alpha1",
    ] {
        assert!(
            out.stderr.contains(word),
            "{word} not named:\n{}",
            out.stderr
        );
    }
}

#[test]
fn a_wrong_eviction_api_is_a_usage_error_naming_the_flag() {
    let out = run_bounded(
        std::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler")).args([
            "run",
            "--eviction-api",
            "Delete",
        ]),
        Duration::from_secs(30),
    );
    assert!(!out.ok);
    assert!(out.stderr.contains("--eviction-api"), "{}", out.stderr);
    let code = std::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
        .args(["run", "--eviction-api", "Delete"])
        .output()
        .expect("runs")
        .status
        .code();
    assert_eq!(code, Some(2));
}

#[test]
fn plan_shows_the_eviction_path_only_when_asked() {
    let plan = |extra: &[&str]| {
        let out = run_bounded(
            std::process::Command::new(env!("CARGO_BIN_EXE_kube-descheduler"))
                .args(["plan", "--now", "2030-01-01T00:00:00Z"])
                .args(extra),
            Duration::from_secs(60),
        );
        assert!(out.ok, "plan {extra:?}: {}", out.stderr);
        out.stdout
    };
    let json: serde_json::Value =
        serde_json::from_str(&plan(&["-o", "json", "--eviction-api", "EvictionRequest"]))
            .expect("JSON");
    assert_eq!(json["evictionApi"], "EvictionRequest");
    let plain: serde_json::Value = serde_json::from_str(&plan(&["-o", "json"])).expect("JSON");
    assert!(plain.get("evictionApi").is_none(), "absent unless asked");
    assert_eq!(
        json["evictions"], plain["evictions"],
        "the same predictions"
    );
    let table = plan(&["--eviction-api", "EvictionRequest"]);
    assert!(
        table.starts_with("eviction path: EvictionRequest"),
        "{table}"
    );
    assert!(!plan(&[]).contains("eviction path:"));
}
