//! The eviction guard acts only for the API server. The real `kube-descheduler
//! webhook` binary against kube-sim: forged reviews posted straight to the webhook are refused at
//! the TLS handshake unless they come with a client certificate from the configured CA carrying
//! an allowed name; a rotated client CA takes effect for new connections; and, with
//! authentication off, a flood of forged reviews restarts no more Deployments than the token
//! buckets allow while a real `kubectl drain` still completes.

mod e2e_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use e2e_common::*;
use kube_sim::auth::UserInfo;
use serde_json::{Value, json};

/// A forged eviction review of `namespace/pod` as `system:admin`.
fn forged_review(namespace: &str, pod: &Value, n: usize) -> Value {
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("");
    kube_sim::admission::eviction_review(
        &format!("forged-{n}"),
        namespace,
        name,
        uid,
        &UserInfo::new("system:admin", &["system:masters", "system:authenticated"]),
    )
}

/// A client trusting the webhook's serving CA, presenting `identity` if given.
fn client(ca_pem: &str, identity: Option<reqwest::Identity>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA"))
        .timeout(Duration::from_secs(10));
    if let Some(id) = identity {
        b = b.identity(id);
    }
    b.build().expect("client")
}

/// Posts `review` to the webhook: the AdmissionReview answered, or the error's text.
async fn post(c: &reqwest::Client, wh: &Webhook, review: &Value) -> Result<Value, String> {
    let r = c
        .post(format!(
            "https://127.0.0.1:{}/validate/eviction",
            wh.addr.port()
        ))
        .json(review)
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    r.json::<Value>().await.map_err(|e| format!("{e:?}"))
}

fn api_objects() -> Vec<Value> {
    vec![
        node("node-a", true),
        node("node-b", true),
        deployment("api", 1, Strategy::Default),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_reviews_need_a_client_certificate_from_the_ca_with_an_allowed_name() {
    let cluster = Cluster::start(api_objects()).await;
    cluster.wait_settled("api", 1).await;
    let (wh, certs) = guarded(&cluster, &["--client-allowed-names", "kube-apiserver"]).await;
    let pod = cluster.pods("api").remove(0);
    let review = forged_review(NS, &pod, 1);

    // No client certificate: the handshake is refused, nothing is patched.
    let refused = post(&client(&certs.ca_cert_pem, None), &wh, &review).await;
    assert!(
        refused.is_err(),
        "answered without a certificate: {refused:?}"
    );
    // A certificate from another CA, with the allowed name: refused.
    let foreign = client_pki(
        cluster.dir.path(),
        "foreign",
        "foreign-ca",
        "kube-apiserver",
    );
    let refused = post(
        &client(&certs.ca_cert_pem, Some(foreign.identity())),
        &wh,
        &review,
    )
    .await;
    assert!(refused.is_err(), "answered a foreign CA: {refused:?}");
    // The right CA, a name not on the list: refused.
    let good = cluster
        .webhook_client
        .clone()
        .expect("authenticated cluster");
    let intruder = cluster
        .same_ca_other_client
        .clone()
        .expect("authenticated cluster");
    let refused = post(
        &client(&certs.ca_cert_pem, Some(intruder.identity())),
        &wh,
        &review,
    )
    .await;
    assert!(refused.is_err(), "answered an unlisted name: {refused:?}");
    assert_eq!(
        cluster.restarted_at("api"),
        None,
        "a refused review patched"
    );

    // The probe port answers without a certificate and serves no reviews.
    let probe = wh.probe_addr.expect("probe port reported");
    let plain = client(&certs.ca_cert_pem, None);
    let health = plain
        .get(format!("https://127.0.0.1:{}/healthz", probe.port()))
        .send()
        .await
        .expect("probe port reachable without a certificate");
    assert_eq!(health.status(), 200);
    let metrics = plain
        .get(format!("https://127.0.0.1:{}/metrics", probe.port()))
        .send()
        .await
        .expect("metrics on the probe port")
        .text()
        .await
        .expect("metrics text");
    assert_eq!(
        metric_value(&metrics, "kube_descheduler_guard_client_auth_enabled"),
        1.0
    );
    let on_probe = plain
        .post(format!(
            "https://127.0.0.1:{}/validate/eviction",
            probe.port()
        ))
        .json(&review)
        .send()
        .await
        .expect("probe port answers");
    assert!(
        on_probe.status().is_client_error(),
        "the probe port served a review: {}",
        on_probe.status()
    );
    assert_eq!(cluster.restarted_at("api"), None);

    // The right certificate: deflected as today, and recorded with who asked.
    let answer = post(
        &client(&certs.ca_cert_pem, Some(good.identity())),
        &wh,
        &review,
    )
    .await
    .expect("answered");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["status"]["code"], 429, "{answer}");
    let message = answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(message.contains(DEFLECTION), "{message}");
    assert!(cluster.restarted_at("api").is_some(), "no restart");
    wait_until("the restart's Event", Duration::from_secs(10), || {
        cluster.deflection_events("api") > 0
    })
    .await;
    let notes: Vec<String> = cluster
        .sim
        .list("events.k8s.io/v1", "Event", Some(NS))
        .iter()
        .filter(|e| e["regarding"]["kind"] == "Deployment" && e["regarding"]["name"] == "api")
        .filter_map(|e| e["note"].as_str().map(String::from))
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("user system:admin")
            && n.contains("system:masters")
            && n.contains("review forged-1")
            && n.contains("127.0.0.1:")
            && n.contains("CN=kube-apiserver")),
        "the Event does not say who asked: {notes:?}"
    );
    let logs = wh.logs();
    assert!(
        logs.lines().any(
            |l| l.contains("restarted Deployment to move an evicted pod")
                && l.contains("CN=kube-apiserver")
                && l.contains("forged-1")
        ),
        "the log line does not say who asked:\n{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replaced_client_ca_accepts_its_clients_and_refuses_the_old_ones() {
    let cluster = Cluster::start(api_objects()).await;
    cluster.wait_settled("api", 1).await;
    let (wh, certs) = guarded(&cluster, &["--cert-reload-interval", "200ms"]).await;
    let old = cluster
        .webhook_client
        .clone()
        .expect("authenticated cluster");
    let new = client_pki(
        cluster.dir.path(),
        "rotated",
        "rotated-ca",
        "kube-apiserver",
    );
    let healthz = |id: reqwest::Identity| {
        let c = client(&certs.ca_cert_pem, Some(id));
        let url = format!("https://127.0.0.1:{}/healthz", wh.addr.port());
        async move { c.get(url).send().await.is_ok_and(|r| r.status() == 200) }
    };
    assert!(healthz(old.identity()).await, "old CA's client refused");
    assert!(
        !healthz(new.identity()).await,
        "new CA's client accepted early"
    );

    std::fs::write(&old.ca_file, &new.ca_pem).expect("replace the client CA");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !healthz(new.identity()).await {
        assert!(
            Instant::now() < deadline,
            "the new CA was not loaded within 15 s; logs:\n{}",
            wh.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !healthz(old.identity()).await,
        "the old CA's client is still accepted after the reload"
    );
}

/// A Deployment `name` in namespace `ns` whose pods run only on nodes labelled `pool: <pool>`.
fn pinned(name: &str, ns: &str, pool: &str) -> Value {
    let mut d = deployment(name, 1, Strategy::Default);
    d["metadata"]["namespace"] = json!(ns);
    d["spec"]["template"]["spec"]["nodeSelector"] = json!({"pool": pool});
    d
}

fn pooled_node(name: &str, pool: &str) -> Value {
    let mut n = node(name, true);
    n["metadata"]["labels"]["pool"] = json!(pool);
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forged_flood_restarts_no_more_than_the_buckets_and_a_real_drain_completes() {
    const FLOOD: usize = 50;
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flood"}}),
        pooled_node("node-a", "app"),
        pooled_node("node-b", "app"),
        pooled_node("node-c", "flood"),
        pinned("api", NS, "app"),
    ];
    for i in 0..FLOOD {
        objects.push(pinned(&format!("victim-{i}"), "flood", "flood"));
    }
    let cluster = Cluster::start_unauthenticated(objects).await;
    cluster.wait_settled("api", 1).await;
    wait_until("every flood pod Ready", Duration::from_secs(90), || {
        cluster
            .sim
            .list("v1", "Pod", Some("flood"))
            .iter()
            .filter(|p| is_ready(p))
            .count()
            == FLOOD
    })
    .await;
    let (wh, certs) = guarded(
        &cluster,
        &[
            "--restart-rate",
            "10/1m",
            "--restart-burst",
            "20",
            "--namespace-restart-rate",
            "1/1m",
            "--namespace-restart-burst",
            "5",
        ],
    )
    .await;
    assert!(
        wh.logs().contains("reviews are NOT authenticated"),
        "no startup warning:\n{}",
        wh.logs()
    );
    assert_eq!(
        wh.metric("kube_descheduler_guard_client_auth_enabled")
            .await,
        0.0
    );

    // The flood: forged reviews for every flood pod, round after round, until the drain is done.
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let limited = Arc::new(AtomicUsize::new(0));
    let limited_message = Arc::new(std::sync::Mutex::new(String::new()));
    let pods = cluster.sim.list("v1", "Pod", Some("flood"));
    let flood = {
        let (stop, limited, limited_message) =
            (stop.clone(), limited.clone(), limited_message.clone());
        let c = client(&certs.ca_cert_pem, None);
        let port = wh.addr.port();
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Acquire) {
                for pod in &pods {
                    n += 1;
                    let review = forged_review("flood", pod, n);
                    let Ok(r) = c
                        .post(format!("https://127.0.0.1:{port}/validate/eviction"))
                        .json(&review)
                        .send()
                        .await
                    else {
                        continue;
                    };
                    let Ok(answer) = r.json::<Value>().await else {
                        continue;
                    };
                    let msg = answer["response"]["status"]["message"]
                        .as_str()
                        .unwrap_or("");
                    if answer["response"]["status"]["code"] == 429 && msg.contains("rate limited") {
                        limited.fetch_add(1, Ordering::Relaxed);
                        *limited_message.lock().unwrap_or_else(|e| e.into_inner()) = msg.to_owned();
                    }
                }
            }
            n
        })
    };

    // A real drain of api's node, through kube-sim (which calls the webhook as the API server).
    let api_node = node_of(&cluster.pods("api")[0]).to_owned();
    cluster.set_schedulable(&api_node, false);
    let out = drain(&kubectl(), &cluster, &api_node, "120s", &[]).await;
    assert!(out.ok, "drain failed during the flood:\n{}", out.all());
    stop.store(true, Ordering::Release);
    let sent = flood.await.expect("flood task");
    let elapsed = started.elapsed();
    cluster.wait_moved("api", 1, &api_node).await;
    assert!(
        cluster.restarted_at("api").is_some(),
        "api was not restarted"
    );

    let flood_restarts = wh
        .logs()
        .lines()
        .filter(|l| {
            l.contains("restarted Deployment to move an evicted pod") && l.contains("flood/victim-")
        })
        .count();
    // Namespace bucket: 5 at once, 1 a minute.
    let bound = 5 + (elapsed.as_secs() / 60) as usize;
    assert!(
        (5..=bound).contains(&flood_restarts),
        "{flood_restarts} flood restarts in {elapsed:?} (bound {bound}) from {sent} forged reviews"
    );
    assert!(limited.load(Ordering::Relaxed) > 0, "no rate-limited 429");
    let msg = limited_message
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert!(
        msg.contains("namespace flood") && msg.contains("nothing was changed"),
        "{msg}"
    );
    assert!(
        wh.metric("kube_descheduler_guard_denials_total{reason=\"restart_rate_limited\"}")
            .await
            > 0.0
    );
    let restarted_victims = (0..FLOOD)
        .filter(|i| {
            cluster
                .sim
                .get("apps/v1", "Deployment", "flood", &format!("victim-{i}"))
                .and_then(|d| {
                    d.pointer(
                        "/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt",
                    )
                    .cloned()
                })
                .is_some()
        })
        .count();
    assert!(
        restarted_victims <= bound,
        "{restarted_victims} flood Deployments patched (bound {bound})"
    );
}
