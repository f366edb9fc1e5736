//! The secure port of `kube-descheduler run` against the API stand-in: the trigger API's
//! 200/401/403/429/504 with callers authenticated by TokenReview and authorized by
//! SubjectAccessReview (both answered by kube-sim), and certificate files rotated without a
//! restart.

mod run_sim_common;

use std::path::Path;
use std::time::Duration;

use kube_sim::{FaultRule, Permission, SimHandle, UserInfo};
use run_sim_common::*;
use serde_json::Value;

const TRIGGER: &str = "/api/v1/descheduler/run";

fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// A fresh self-signed certificate for 127.0.0.1 / localhost: (cert PEM, key PEM, cert DER).
fn certificate() -> (String, String, Vec<u8>) {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("certificate");
    (
        ck.cert.pem(),
        ck.signing_key.serialize_pem(),
        ck.cert.der().to_vec(),
    )
}

/// The leaf certificate a new connection to `url` is served.
async fn served_certificate(url: &str) -> Option<Vec<u8>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .tls_info(true)
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(0)
        .build()
        .ok()?;
    let resp = http.get(url).send().await.ok()?;
    resp.extensions()
        .get::<reqwest::tls::TlsInfo>()?
        .peer_certificate()
        .map(<[u8]>::to_vec)
}

async fn trigger(d: &Descheduler, token: Option<&str>, query: &str) -> (u16, Value) {
    let mut req = insecure_client().post(d.url(&format!("{TRIGGER}{query}")));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    match req.send().await {
        Ok(r) => {
            let code = r.status().as_u16();
            (code, r.json().await.unwrap_or(Value::Null))
        }
        Err(e) => panic!("trigger request failed: {e}"),
    }
}

async fn authed_metrics(d: &Descheduler, token: &str) -> String {
    match insecure_client()
        .get(d.url("/metrics"))
        .bearer_auth(token)
        .send()
        .await
    {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// ReplicaSet `rs` with one Ready pod `<rs>-1` on the tainted node.
async fn add_pod_on_tainted_node(sim: &SimHandle, rs: &str) {
    let name = format!("{rs}-1");
    // The pod first: a ReplicaSet created before its pod would create one of its own.
    sim.apply(rs_pod(rs, &name, TAINTED)).expect("pod");
    sim.apply(replica_set(rs, 1)).expect("rs");
    let s = sim.clone();
    wait_for("new pod Ready", move || {
        s.get("v1", "Pod", NS, &name).is_some_and(|p| pod_ready(&p))
    })
    .await;
}

fn slow_evictions(sim: &SimHandle) -> u64 {
    sim.add_fault(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods/eviction".into()),
        latency: Some(Duration::from_secs(3)),
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_api_authenticates_authorizes_and_refuses_overlap() {
    let sim = start_sim(cluster(replica_set_with_pods("web", 1, TAINTED))).await;
    sim.add_token("alice-token", UserInfo::new("alice", &["ops"]));
    sim.add_token("bob-token", UserInfo::new("bob", &["devs"]));
    sim.allow(Permission::new("group:ops", &["create"], &[TRIGGER]));
    // bob may read metrics but not run the descheduler.
    sim.allow(Permission::new("bob", &["get"], &["/metrics"]));

    let mut d = start(
        &sim,
        "trigger",
        &policy(""),
        &["--descheduling-interval=0", "--enable-trigger-api"],
    );
    d.wait_ready().await;
    // The first cycle runs at start; the process stays up for the trigger.
    let s = sim.clone();
    wait_for("initial cycle evicts web-1", || evicted(&s, "web-1")).await;
    let once = |t: &str| metric(t, "kube_descheduler_cycles_total", &[("source", "once")]);
    let start_wait = std::time::Instant::now();
    while once(&authed_metrics(&d, "bob-token").await) < 1.0 {
        assert!(start_wait.elapsed() < WAIT, "log:\n{}", d.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(d.running(), "one-shot with the trigger on must stay up");

    // 401 without or with an unknown token, 403 for a user without the permission.
    let (code, body) = trigger(&d, None, "").await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = trigger(&d, Some("no-such-token"), "").await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = trigger(&d, Some("bob-token"), "").await;
    assert_eq!(code, 403, "{body}");
    let r = insecure_client().get(d.url("/metrics")).send().await;
    assert_eq!(r.map(|r| r.status().as_u16()).ok(), Some(401));
    let r = insecure_client()
        .get(d.url("/metrics"))
        .bearer_auth("alice-token")
        .send()
        .await;
    assert_eq!(r.map(|r| r.status().as_u16()).ok(), Some(403));

    // 200 with the cycle's summary.
    add_pod_on_tainted_node(&sim, "more").await;
    // The watch cache must have seen the pod before the triggered cycle snapshots it.
    let mut evictions = 0;
    let start_wait = std::time::Instant::now();
    while evictions == 0 {
        let (code, body) = trigger(&d, Some("alice-token"), "").await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["status"], "completed", "{body}");
        assert!(body["durationSeconds"].is_number(), "{body}");
        evictions = body["evicted"].as_u64().unwrap_or(0);
        assert!(
            start_wait.elapsed() < WAIT,
            "more-1 never evicted by a trigger"
        );
    }
    assert_eq!(evictions, 1);
    assert!(evicted(&sim, "more-1"));

    // 429 while a triggered cycle runs (evictions slowed down to 3 s each). The first trigger's
    // cycle is slow only once the pod watch has delivered the new pod, so retry with a fresh pod
    // until one overlap is observed.
    let fault = slow_evictions(&sim);
    let mut busy = None;
    for attempt in 1..=5 {
        let rs = format!("slow{attempt}");
        add_pod_on_tainted_node(&sim, &rs).await;
        let first = {
            let url = d.url(TRIGGER);
            tokio::spawn(async move {
                let r = insecure_client()
                    .post(url)
                    .bearer_auth("alice-token")
                    .send()
                    .await
                    .expect("trigger");
                (
                    r.status().as_u16(),
                    r.json::<Value>().await.unwrap_or(Value::Null),
                )
            })
        };
        let mut codes = Vec::new();
        tokio::time::sleep(Duration::from_millis(300)).await;
        if !first.is_finished() {
            // Either refused (overlap seen) or it ran a cycle itself (the first one is then refused).
            let (code, body) = trigger(&d, Some("alice-token"), "").await;
            codes.push(code);
            if code == 429 {
                busy = Some(body);
            }
        }
        let (code, body) = first.await.expect("join");
        codes.push(code);
        if code == 429 {
            busy = Some(body);
        }
        assert!(codes.iter().all(|c| *c == 200 || *c == 429), "{codes:?}");
        if busy.is_some() {
            assert!(codes.contains(&200), "{codes:?}");
            break;
        }
    }
    let busy = busy.expect("no overlapping trigger was refused with 429");
    assert_eq!(busy["status"], "busy", "{busy}");

    // 504 when the cycle outlasts ?timeoutSeconds; the cycle still completes and is accounted.
    add_pod_on_tainted_node(&sim, "late").await;
    let triggered = |t: &str| metric(t, "kube_descheduler_cycles_total", &[("source", "trigger")]);
    let start_wait = std::time::Instant::now();
    let before = loop {
        let before = triggered(&authed_metrics(&d, "bob-token").await);
        let (code, body) = trigger(&d, Some("alice-token"), "?timeoutSeconds=1").await;
        if code == 504 {
            assert_eq!(body["status"], "timeout", "{body}");
            break before;
        }
        // The cycle ran before the watch delivered late-1: nothing to evict, so it was quick.
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["evicted"], 0, "{body}");
        assert!(start_wait.elapsed() < WAIT, "never timed out");
    };
    let start_wait = std::time::Instant::now();
    while triggered(&authed_metrics(&d, "bob-token").await) < before + 1.0 {
        assert!(
            start_wait.elapsed() < WAIT,
            "timed-out cycle never accounted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = sim.clone();
    wait_for("late-1 evicted by the timed-out cycle", || {
        evicted(&s, "late-1")
    })
    .await;
    sim.remove_fault(fault);
    assert!(d.running());
    d.terminate();
    assert_eq!(d.wait_exit().await, 0, "log:\n{}", d.log_text());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificate_files_are_served_without_restart() {
    let sim = start_sim(cluster(vec![
        replica_set("web", 1),
        rs_pod("web", "web-1", "n2"),
    ]))
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    let (c1, k1, der1) = certificate();
    write_atomically(&cert, &c1);
    write_atomically(&key, &k1);
    let cert_flag = format!("--tls-cert-file={}", cert.display());
    let key_flag = format!("--tls-private-key-file={}", key.display());
    let mut d = start(
        &sim,
        "tls",
        &policy(""),
        &[
            "--descheduling-interval=1h",
            &cert_flag,
            &key_flag,
            "--cert-reload-interval=200ms",
        ],
    );
    d.wait_ready().await;
    let url = d.url("/healthz");
    assert_eq!(served_certificate(&url).await, Some(der1.clone()));

    // A half-written pair is ignored: the old certificate stays in use.
    std::fs::write(&key, "not a key").expect("write");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(served_certificate(&url).await, Some(der1.clone()));

    let (c2, k2, der2) = certificate();
    write_atomically(&cert, &c2);
    write_atomically(&key, &k2);
    let start_wait = std::time::Instant::now();
    loop {
        let served = served_certificate(&url).await;
        if served.as_deref() == Some(der2.as_slice()) {
            break;
        }
        assert!(
            start_wait.elapsed() < WAIT,
            "the rotated certificate was never served; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(d.running(), "must not restart");
    assert!(d.log_text().contains("serving certificate reloaded"));
    sim.shutdown().await;
}
