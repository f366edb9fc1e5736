//! Abuse cases against the webhook's HTTPS server (the same server `run`'s secure port uses):
//! each test starts the real server with small bounds, attacks it, and asserts both the bound
//! (the abusive connection is closed or refused in time) and that a normal review sent at the
//! same moment is still answered within its budget.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kube_descheduler::cli::certs::GeneratedCerts;
use kube_descheduler::guard::decision::GuardConfig;
use kube_descheduler::guard::server::{GuardState, router_with_body_limit};
use kube_descheduler::guard::source::MemorySource;
use kube_descheduler::restart::{RestartOutcome, RestartRequest, Restarter};
use kube_descheduler::serving::limits::ServeLimits;
use kube_descheduler::serving::tls::{HttpsServer, serve_https_with};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

#[path = "guard_common/mod.rs"]
mod guard_common;
mod review_common;

use guard_common::{HOST, TestTls, client_for, test_tls};

/// What a normal review must be answered within while the server is under attack (well inside
/// kube-apiserver's default webhook timeout of 10 s and our chart's 5 s).
const BUDGET: Duration = Duration::from_secs(3);

struct NeverRestarts;

impl Restarter for NeverRestarts {
    fn restart(&self, _req: RestartRequest) -> BoxFuture<'_, RestartOutcome> {
        Box::pin(std::future::ready(RestartOutcome::Failed {
            error: "not in this test".into(),
        }))
    }
}

struct Server {
    server: HttpsServer,
    certs: GeneratedCerts,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

fn limits() -> ServeLimits {
    ServeLimits {
        max_body_bytes: 64 * 1024,
        header_read_timeout: Duration::from_secs(2),
        tls_handshake_timeout: Duration::from_secs(2),
        max_connections: 4096,
    }
}

async fn start(limits: ServeLimits) -> Server {
    let TestTls {
        certs,
        config: tls,
        dir,
    } = test_tls().await;
    let state = Arc::new(GuardState::new(
        Arc::new(MemorySource::new()),
        Arc::new(NeverRestarts),
        GuardConfig::default(),
    ));
    let app = router_with_body_limit(state, limits.max_body_bytes);
    let server = serve_https_with(app, "127.0.0.1:0".parse().unwrap(), tls, &limits)
        .await
        .unwrap();
    let client = client(&certs, server.addr, Duration::from_secs(10));
    Server {
        server,
        certs,
        client,
        _dir: dir,
    }
}

fn client(certs: &GeneratedCerts, addr: SocketAddr, timeout: Duration) -> reqwest::Client {
    client_for(&certs.ca_cert_pem, addr, timeout)
}

/// An eviction review of a pod the guard does not know (answered "allowed").
fn review() -> Value {
    review_common::eviction_review(&json!("shop"), &json!("web-1"), None)
}

impl Server {
    fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    async fn post(&self, body: Vec<u8>) -> reqwest::Result<(u16, String)> {
        let resp = self
            .client
            .post(format!(
                "https://{HOST}:{}/validate/eviction",
                self.addr().port()
            ))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await?;
        Ok((resp.status().as_u16(), resp.text().await?))
    }

    /// Sends a normal review on a fresh client (its own connection) and asserts it is answered
    /// "allowed" within [`BUDGET`].
    async fn assert_normal_review_answered(&self) {
        let fresh = client(&self.certs, self.addr(), BUDGET);
        let started = Instant::now();
        let resp = fresh
            .post(format!(
                "https://{HOST}:{}/validate/eviction",
                self.addr().port()
            ))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&review()).unwrap())
            .send()
            .await
            .expect("normal review answered");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("normal review body");
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["response"]["allowed"], true, "{v}");
        assert!(
            started.elapsed() < BUDGET,
            "normal review took {:?}",
            started.elapsed()
        );
    }

    fn tls_connector(&self, alpn: &[u8]) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.certs.ca_cert_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        TlsConnector::from(Arc::new(config))
    }

    async fn tls_connect(&self, alpn: &[u8]) -> tokio_rustls::client::TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.addr()).await.unwrap();
        self.tls_connector(alpn)
            .connect(ServerName::try_from(HOST).unwrap(), tcp)
            .await
            .unwrap()
    }
}

/// Reads until the peer closes (EOF or error); returns how long that took from `since`, or
/// `None` when still open after `give_up`.
async fn closed_after<R: AsyncReadExt + Unpin>(
    stream: &mut R,
    since: Instant,
    give_up: Duration,
) -> Option<Duration> {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::from_std(since) + give_up;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(since.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn slowloris_headers_are_cut_off_at_the_header_read_timeout() {
    let s = start(limits()).await;
    let mut conn = s.tls_connect(b"http/1.1").await;
    let opened = Instant::now();
    let head = format!(
        "POST /validate/eviction HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\nX-Padding: {}\r\n",
        "a".repeat(200)
    );
    let writer = tokio::spawn(async move {
        // One byte every half second, never finishing the headers.
        for b in head.bytes() {
            if conn.write_all(&[b]).await.is_err() || conn.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        conn
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    s.assert_normal_review_answered().await;
    let mut conn = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the slow writer is stopped by the server closing the connection")
        .unwrap();
    let closed = closed_after(&mut conn, opened, Duration::from_secs(10))
        .await
        .expect("slowloris connection closed");
    assert!(
        closed >= Duration::from_millis(1500) && closed < Duration::from_secs(5),
        "closed after {closed:?} with a 2 s header read timeout"
    );
    s.assert_normal_review_answered().await;
}

#[tokio::test]
async fn silent_tcp_is_closed_at_the_tls_handshake_timeout() {
    let s = start(limits()).await;
    let opened = Instant::now();
    let mut silent = TcpStream::connect(s.addr()).await.unwrap();
    s.assert_normal_review_answered().await;
    let closed = closed_after(&mut silent, opened, Duration::from_secs(10))
        .await
        .expect("silent connection closed");
    assert!(
        closed >= Duration::from_millis(1500) && closed < Duration::from_secs(5),
        "closed after {closed:?} with a 2 s handshake timeout"
    );
}

#[tokio::test]
async fn silent_client_after_tls_is_closed_for_http1_and_http2() {
    let s = start(limits()).await;
    for alpn in [&b"http/1.1"[..], &b"h2"[..]] {
        let mut conn = s.tls_connect(alpn).await;
        let opened = Instant::now();
        s.assert_normal_review_answered().await;
        let closed = closed_after(&mut conn, opened, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "silent {} connection still open",
                    String::from_utf8_lossy(alpn)
                )
            });
        assert!(
            closed < Duration::from_secs(5),
            "{} closed after {closed:?} with a 2 s header read timeout",
            String::from_utf8_lossy(alpn)
        );
    }
}

/// The HTTP/2 connection preface (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Writes `bytes` one at a time, half a second apart, until the server closes the connection;
/// gives the connection back.
fn dribble(
    mut conn: tokio_rustls::client::TlsStream<TcpStream>,
    bytes: Vec<u8>,
) -> tokio::task::JoinHandle<tokio_rustls::client::TlsStream<TcpStream>> {
    tokio::spawn(async move {
        for b in bytes {
            if conn.write_all(&[b]).await.is_err() || conn.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        conn
    })
}

#[tokio::test]
async fn http2_client_sending_part_of_the_preface_is_closed_at_the_header_read_timeout() {
    let s = start(limits()).await;
    let mut conn = s.tls_connect(b"h2").await;
    let opened = Instant::now();
    // The first 16 of the preface's 24 bytes at once, then nothing.
    conn.write_all(&H2_PREFACE[..16]).await.unwrap();
    conn.flush().await.unwrap();
    s.assert_normal_review_answered().await;
    let closed = closed_after(&mut conn, opened, Duration::from_secs(10))
        .await
        .expect("a half-sent preface is not waited for without bound");
    assert!(
        closed >= Duration::from_millis(1500) && closed < Duration::from_secs(5),
        "closed after {closed:?} with a 2 s header read timeout"
    );
}

#[tokio::test]
async fn http2_client_stalling_inside_a_frame_is_closed_within_twice_the_header_read_timeout() {
    let s = start(limits()).await;
    let mut conn = s.tls_connect(b"h2").await;
    let opened = Instant::now();
    // A complete preface and an empty SETTINGS frame, then a HEADERS frame of 64 bytes on
    // stream 1 whose bytes come one every half second and never all.
    let mut hello = H2_PREFACE.to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    conn.write_all(&hello).await.unwrap();
    conn.flush().await.unwrap();
    let mut frame = vec![0, 0, 64, 1, 4, 0, 0, 0, 1];
    frame.extend(std::iter::repeat_n(0x82, 64));
    let writer = dribble(conn, frame);
    tokio::time::sleep(Duration::from_millis(700)).await;
    s.assert_normal_review_answered().await;
    let mut conn = tokio::time::timeout(Duration::from_secs(15), writer)
        .await
        .expect("the slow writer is stopped by the server closing the connection")
        .unwrap();
    let closed = closed_after(&mut conn, opened, Duration::from_secs(10))
        .await
        .expect("a stalled HTTP/2 frame is not waited for without bound");
    assert!(
        closed < Duration::from_secs(7),
        "closed after {closed:?}; a 2 s header read timeout bounds it at about 4 s"
    );
    s.assert_normal_review_answered().await;
}

#[tokio::test]
async fn two_thousand_idle_connections_neither_block_reviews_nor_stay_open() {
    let s = start(limits()).await;
    let opened = Instant::now();
    let mut idle = Vec::with_capacity(2000);
    for _ in 0..2000 {
        idle.push(TcpStream::connect(s.addr()).await.unwrap());
    }
    s.assert_normal_review_answered().await;
    let mut still_open = 0;
    for conn in &mut idle {
        if closed_after(conn, opened, Duration::from_secs(15))
            .await
            .is_none()
        {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "idle connections outlived the bounds");
    assert!(
        opened.elapsed() < Duration::from_secs(15),
        "took {:?}",
        opened.elapsed()
    );
    s.assert_normal_review_answered().await;
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_at_once_and_service_resumes() {
    let cap = 20;
    let s = start(ServeLimits {
        max_connections: cap,
        ..limits()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..cap {
        held.push(TcpStream::connect(s.addr()).await.unwrap());
    }
    // Let the server accept them all before the extra one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let extra_opened = Instant::now();
    let mut extra = TcpStream::connect(s.addr()).await.unwrap();
    let closed = closed_after(&mut extra, extra_opened, Duration::from_secs(5))
        .await
        .expect("connection beyond the cap closed");
    assert!(
        closed < Duration::from_millis(1000),
        "closed after {closed:?}: should be at once, not at the handshake timeout"
    );
    // The held connections end at the handshake timeout; then the server serves again.
    for conn in &mut held {
        assert!(
            closed_after(conn, extra_opened, Duration::from_secs(6))
                .await
                .is_some()
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.assert_normal_review_answered().await;
}

#[tokio::test]
async fn oversize_bodies_get_413_with_or_without_content_length() {
    let s = start(limits()).await;
    let big = vec![b' '; 5 * 1024 * 1024];
    let (status, text) = s.post(big.clone()).await.unwrap();
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("65536"), "{text}");

    // Chunked, no Content-Length: answered 413 once the limit is passed.
    let mut conn = s.tls_connect(b"http/1.1").await;
    let head = format!(
        "POST /validate/eviction HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let chunk = format!("4000\r\n{}\r\n", " ".repeat(0x4000));
    for _ in 0..8 {
        if conn.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
    }
    let mut answer = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut answer))
        .await
        .expect("answered in time")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    s.assert_normal_review_answered().await;
}

#[tokio::test]
async fn malformed_bodies_get_400_and_do_not_disturb_others() {
    let s = start(limits()).await;
    for body in [
        &b""[..],
        b"garbage",
        b"{\"kind\":\"AdmissionReview\"}",
        b"\xff\xfe\x00",
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    ] {
        let (status, text) = s.post(body.to_vec()).await.unwrap();
        assert_eq!(status, 400, "{:?}: {text}", String::from_utf8_lossy(body));
    }
    let deep = "[".repeat(60_000);
    let (status, _) = s.post(deep.into_bytes()).await.unwrap();
    assert_eq!(status, 400);
    s.assert_normal_review_answered().await;
}

#[tokio::test]
async fn slow_body_gets_408_at_the_header_read_timeout() {
    let s = start(limits()).await;
    let mut conn = s.tls_connect(b"http/1.1").await;
    let head = format!(
        "POST /validate/eviction HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let opened = Instant::now();
    let (mut read, mut write) = tokio::io::split(conn);
    let writer = tokio::spawn(async move {
        for _ in 0..40 {
            if write.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    s.assert_normal_review_answered().await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(8), async {
        let mut buf = [0u8; 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    let elapsed = opened.elapsed();
    writer.abort();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        elapsed < Duration::from_secs(5),
        "answered after {elapsed:?}"
    );
}
