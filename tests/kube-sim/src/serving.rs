//! The HTTPS server's lifecycle: serving the router on a listener, a graceful stop, and the abrupt
//! stop of a restart, which resets every open TCP connection the way a killed kube-apiserver does
//! (clients see `connection reset`, not a clean end of a response or watch).
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum_server::accept::Accept;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// An accepted connection that, once its server is told to reset, closes with `SO_LINGER` 0:
/// the kernel discards unsent data and sends RST instead of FIN.
pub struct ResettableStream {
    inner: TcpStream,
    reset: Arc<AtomicBool>,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.load(Ordering::Acquire) {
            // Best effort: if it fails the peer sees FIN, which still ends the connection.
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Wraps each accepted TCP stream in a [`ResettableStream`] sharing the server's reset flag.
#[derive(Clone)]
struct ResettableAcceptor {
    reset: Arc<AtomicBool>,
}

impl<S> Accept<TcpStream, S> for ResettableAcceptor {
    type Stream = ResettableStream;
    type Service = S;
    type Future = std::future::Ready<io::Result<(ResettableStream, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        std::future::ready(Ok((
            ResettableStream {
                inner: stream,
                reset: self.reset.clone(),
            },
            service,
        )))
    }
}

/// One running server: the router served over TLS on one listener.
pub struct Serving {
    handle: axum_server::Handle<SocketAddr>,
    reset: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Serving {
    /// Serves `app` over TLS (`tls`) on `listener` (already non-blocking) in a spawned task.
    pub fn start(
        listener: std::net::TcpListener,
        tls: RustlsConfig,
        app: axum::Router,
    ) -> io::Result<Serving> {
        let handle = axum_server::Handle::new();
        let reset = Arc::new(AtomicBool::new(false));
        let acceptor = RustlsAcceptor::new(tls).acceptor(ResettableAcceptor {
            reset: reset.clone(),
        });
        let srv = axum_server::from_tcp(listener)?
            .acceptor(acceptor)
            .handle(handle.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = srv.serve(app.into_make_service()).await {
                tracing::error!("kube-sim server stopped: {e}");
            }
        });
        Ok(Serving {
            handle,
            reset,
            task,
        })
    }

    /// Stops accepting and lets open requests finish for up to 1 s; waits (at most 2 s) until
    /// every connection is closed.
    pub async fn graceful_stop(&self) {
        self.handle.graceful_shutdown(Some(Duration::from_secs(1)));
        wait_connections_closed(&self.handle, Duration::from_secs(2)).await;
    }

    /// Stops at once: the listener is closed and every open connection (requests in flight and
    /// watches alike) is reset. Returns once the listening socket is released (so its address
    /// can be bound again) and the connections are gone, or after `bound`.
    pub async fn reset(self, bound: Duration) {
        let deadline = Instant::now() + bound;
        self.reset.store(true, Ordering::Release);
        self.handle.shutdown();
        let _ = tokio::time::timeout(bound, self.task).await;
        let left = deadline.saturating_duration_since(Instant::now());
        wait_connections_closed(&self.handle, left).await;
    }
}

/// Waits (at most `bound`) until the server has no open connection.
async fn wait_connections_closed(handle: &axum_server::Handle<SocketAddr>, bound: Duration) {
    let _ = tokio::time::timeout(bound, async {
        while handle.connection_count() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Binds `addr` again after a restart, retrying for up to `bound` while the old socket is
/// still being released.
pub async fn rebind(addr: SocketAddr, bound: Duration) -> io::Result<std::net::TcpListener> {
    let deadline = Instant::now() + bound;
    loop {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => {
                l.set_nonblocking(true)?;
                return Ok(l);
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
