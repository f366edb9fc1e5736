//! `--enable-http2` on `run`'s metrics and health port, as upstream: off by default (HTTP/1.1
//! only, even for a client asking for h2 through ALPN; a client insisting on h2 is refused), on
//! with the flag (h2 through ALPN).

mod run_sim_common;

use std::time::Duration;

use run_sim_common::*;

fn client(h2_only: bool) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let b = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(30));
    let b = if h2_only {
        b.http2_prior_knowledge()
    } else {
        b
    };
    b.build().expect("client")
}

async fn versions(d: &Descheduler) -> (reqwest::Version, Result<reqwest::Version, String>) {
    // ALPN offers h2 and http/1.1: the server picks.
    let r = client(false)
        .get(d.url("/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(r.status(), 200);
    let negotiated = r.version();
    // h2 only (ALPN h2).
    let h2 = client(true)
        .get(d.url("/healthz"))
        .send()
        .await
        .map(|r| r.version())
        .map_err(|e| format!("{e:?}"));
    (negotiated, h2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_only_with_enable_http2() {
    // start_sim waits for workload pods to be Ready: give it one.
    let sim = start_sim(cluster(replica_set_with_pods("web", 1, "n2"))).await;
    let args = ["--descheduling-interval=1h", "--metrics-unauthenticated"];

    let mut off = start(&sim, "http1", &policy(""), &args);
    off.wait_ready().await;
    let (negotiated, h2) = versions(&off).await;
    assert_eq!(negotiated, reqwest::Version::HTTP_11, "default: HTTP/1.1");
    assert!(h2.is_err(), "default: h2 refused, got {h2:?}");
    drop(off);

    let mut on = start(
        &sim,
        "http2",
        &policy(""),
        &[args[0], args[1], "--enable-http2"],
    );
    on.wait_ready().await;
    let (negotiated, h2) = versions(&on).await;
    assert_eq!(negotiated, reqwest::Version::HTTP_2, "--enable-http2: h2");
    assert_eq!(h2, Ok(reqwest::Version::HTTP_2));
    let metrics = client(true)
        .get(on.url("/metrics"))
        .send()
        .await
        .expect("metrics over h2");
    assert_eq!(metrics.version(), reqwest::Version::HTTP_2);
    assert_eq!(metrics.status(), 200);
    sim.shutdown().await;
}
