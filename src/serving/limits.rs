//! Bounds every HTTPS server of the binary puts on its clients, so that a slow, silent or greedy
//! client can hold neither connections nor memory without limit:
//!
//! - **TLS handshake timeout**: a connection that has not finished the TLS handshake within
//!   `tls_handshake_timeout` (e.g. one that never sends a ClientHello) is closed.
//! - **Header read timeout**: an HTTP/1.1 request whose headers have not fully arrived within
//!   `header_read_timeout` of the server starting to read it (slowloris: one byte every half
//!   second) is closed; an idle keep-alive connection is closed after the same time. On every
//!   connection the first request bytes must arrive within the same time after the handshake —
//!   for HTTP/2 the whole 24-byte connection preface — so a client that completes TLS and then
//!   says nothing, or only part of the preface, is closed too.
//! - **Body**: the webhook reads a request body of at most `max_body_bytes` (larger: 413) within
//!   `header_read_timeout` (slower: 408).
//! - **Connection cap**: at most `max_connections` connections are open at once (counted from
//!   TCP accept to close, handshakes included); a connection beyond the cap is closed at once
//!   without reading from it, and a warning is logged (at most every 10 s).
//! - HTTP/2: at most [`MAX_CONCURRENT_STREAMS`] streams per connection, header lists of at most
//!   [`MAX_HEADER_BYTES`], and a keep-alive ping every `header_read_timeout` (at most 30 s) that
//!   closes a peer not answering within `header_read_timeout` (at most 10 s): a peer that stalls
//!   in the middle of a frame cannot answer the ping, so it is closed within twice the header
//!   read timeout.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::{Accept, DefaultAcceptor};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_rustls::server::TlsStream;

use super::peer::{self, PeerService};

/// Default largest request body: the guard's, whose AdmissionReview holds a pod and its old version.
pub const DEFAULT_MAX_BODY_BYTES: usize = kube_descheduler_guard::server::MAX_BODY_BYTES;
/// Default time a client has to send its complete request headers.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a client has to complete the TLS handshake.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Streams one HTTP/2 connection may have open at once.
pub const MAX_CONCURRENT_STREAMS: u32 = 250;
/// Largest request head (HTTP/1.1 read buffer, HTTP/2 header list).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The bounds a server puts on its clients (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// Largest request body read (413 beyond).
    pub max_body_bytes: usize,
    /// Time to send complete request headers (and the first request bytes after TLS).
    pub header_read_timeout: Duration,
    /// Time to complete the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ServeLimits {
    /// Checks that every bound is usable (non-zero); the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_body_bytes == 0 {
            return Err("--max-request-body-bytes must be greater than 0".into());
        }
        if self.header_read_timeout.is_zero() {
            return Err("--header-read-timeout must be greater than 0".into());
        }
        if self.tls_handshake_timeout.is_zero() {
            return Err("--tls-handshake-timeout must be greater than 0".into());
        }
        if self.max_connections == 0 {
            return Err("--max-connections must be greater than 0".into());
        }
        Ok(())
    }
}

/// Accepts a TCP connection when under the cap, completes TLS within the handshake timeout, and
/// hands out a stream that holds its slot until closed.
#[derive(Clone)]
pub struct BoundedAcceptor {
    tls: RustlsAcceptor<DefaultAcceptor>,
    slots: Arc<Semaphore>,
    max: usize,
    first_bytes_within: Duration,
    refused: Arc<AtomicU64>,
    last_warning: Arc<AtomicU64>,
}

impl BoundedAcceptor {
    /// An acceptor for `tls` with `limits`.
    pub fn new(tls: RustlsConfig, limits: &ServeLimits) -> Self {
        BoundedAcceptor {
            tls: RustlsAcceptor::new(tls).handshake_timeout(limits.tls_handshake_timeout),
            slots: Arc::new(Semaphore::new(
                limits.max_connections.min(Semaphore::MAX_PERMITS),
            )),
            max: limits.max_connections,
            first_bytes_within: limits.header_read_timeout,
            refused: Arc::new(AtomicU64::new(0)),
            last_warning: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Connections refused so far because the cap was reached.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn note_refusal(&self) {
        let total = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.last_warning.load(Ordering::Relaxed);
        if now >= last + 10
            && self
                .last_warning
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                max_connections = self.max,
                refused_total = total,
                "connection limit reached; closing new connections until some end"
            );
        }
    }
}

type AcceptFuture<S> = Pin<
    Box<
        dyn Future<Output = io::Result<(BoundedStream<TlsStream<TcpStream>>, PeerService<S>)>>
            + Send,
    >,
>;

impl<S: Send + 'static> Accept<TcpStream, S> for BoundedAcceptor {
    type Stream = BoundedStream<TlsStream<TcpStream>>;
    type Service = PeerService<S>;
    type Future = AcceptFuture<S>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            self.note_refusal();
            drop(stream);
            return Box::pin(std::future::ready(Err(io::Error::other(
                "connection limit reached",
            ))));
        };
        let _ = stream.set_nodelay(true);
        let addr = stream.peer_addr().ok();
        let handshake = self.tls.accept(stream, service);
        let first_bytes_within = self.first_bytes_within;
        Box::pin(async move {
            let (tls, service) = handshake.await?;
            // Who connected (address, verified certificate subject), for every request's records.
            let service = PeerService::new(service, peer::of_tls(&tls, addr));
            Ok((BoundedStream::new(tls, slot, first_bytes_within), service))
        })
    }
}

/// The HTTP/2 connection preface a client sends first (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A connection's stream: holds a slot of the connection cap until dropped, and fails a read
/// when the request's first bytes have not arrived within the deadline after the handshake:
/// one byte of an HTTP/1.1 request, or the whole HTTP/2 preface when the bytes begin like it.
pub struct BoundedStream<T> {
    inner: T,
    _slot: OwnedSemaphorePermit,
    first_bytes: Option<Pin<Box<Sleep>>>,
    /// How many bytes read so far match the HTTP/2 preface.
    preface_matched: usize,
}

impl<T> BoundedStream<T> {
    fn new(inner: T, slot: OwnedSemaphorePermit, first_bytes_within: Duration) -> Self {
        BoundedStream {
            inner,
            _slot: slot,
            first_bytes: Some(Box::pin(tokio::time::sleep(first_bytes_within))),
            preface_matched: 0,
        }
    }

    /// Notes bytes that arrived; ends the deadline once they are not the HTTP/2 preface (HTTP/1.1:
    /// hyper's header read timeout takes over) or the whole preface has arrived.
    fn arrived(&mut self, read: &[u8]) {
        if self.first_bytes.is_none() {
            return;
        }
        for &b in read {
            if H2_PREFACE.get(self.preface_matched) != Some(&b) {
                self.first_bytes = None;
                return;
            }
            self.preface_matched += 1;
            if self.preface_matched == H2_PREFACE.len() {
                self.first_bytes = None;
                return;
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for BoundedStream<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                let filled = buf.filled();
                this.arrived(&filled[before..]);
                Poll::Ready(r)
            }
            Poll::Pending => {
                let expired = this
                    .first_bytes
                    .as_mut()
                    .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                if expired {
                    this.first_bytes = None;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request within the header read timeout",
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for BoundedStream<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Applies the HTTP-level bounds (header read timeout, header size, HTTP/2 streams and
/// keep-alive) to a server's connection builder.
pub fn configure_http(
    builder: &mut hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    limits: &ServeLimits,
) {
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEADER_BYTES.max(8192));
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .keep_alive_interval(limits.header_read_timeout.min(Duration::from_secs(30)))
        .keep_alive_timeout(limits.header_read_timeout.min(Duration::from_secs(10)));
}

/// Middleware reading each request's body before the handler: at most `limits.max_body_bytes`
/// (413 beyond, refused from `Content-Length` before reading when it says so) within
/// `limits.header_read_timeout` (408 when slower). The handler gets the buffered body.
pub async fn bounded_body(
    limits: ServeLimits,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;

    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return too_large(limits.max_body_bytes);
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(
        limits.header_read_timeout,
        read_limited(body, limits.max_body_bytes),
    )
    .await;
    let bytes = match read {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return too_large(limits.max_body_bytes),
        Ok(Err(e)) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("cannot read the request body: {e}"),
            )
                .into_response();
        }
        Err(_) => {
            return (
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not received within {:?}",
                    limits.header_read_timeout
                ),
            )
                .into_response();
        }
    };
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

fn too_large(max: usize) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body larger than {max} bytes"),
    )
        .into_response()
}

/// The body, or `None` when it is longer than `max`.
async fn read_limited(
    body: axum::body::Body,
    max: usize,
) -> Result<Option<axum::body::Bytes>, axum::Error> {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if out.len() + chunk.len() > max {
            return Ok(None);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Some(out.into()))
}
