//! Who is on the other end of a connection: its address and, when it authenticated with a client
//! certificate, the certificate's subject. The acceptor fills it in once per connection
//! ([`PeerService`]) and every request of the connection carries it as an extension.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use kube_descheduler_guard::peer::Peer;

/// The peer of a server-side TLS connection from `addr`: the subject of its verified client
/// certificate, when it sent one.
pub fn of_tls<IO>(tls: &tokio_rustls::server::TlsStream<IO>, addr: Option<SocketAddr>) -> Peer {
    let (_, conn) = tls.get_ref();
    let subject = conn
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|c| super::client_auth::subject_of(c.as_ref()));
    Peer { addr, subject }
}

/// A connection's service with its [`Peer`] added to every request's extensions.
#[derive(Debug, Clone)]
pub struct PeerService<S> {
    inner: S,
    peer: Arc<Peer>,
}

impl<S> PeerService<S> {
    /// Wraps `inner` for the connection of `peer`.
    pub fn new(inner: S, peer: Peer) -> Self {
        PeerService {
            inner,
            peer: Arc::new(peer),
        }
    }
}

impl<S, B> tower::Service<axum::http::Request<B>> for PeerService<S>
where
    S: tower::Service<axum::http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: axum::http::Request<B>) -> Self::Future {
        req.extensions_mut().insert(self.peer.clone());
        self.inner.call(req)
    }
}
