//! Who is on the other end of a connection (filled in by `serving`'s acceptor, recorded by the
//! guard with every write a request leads to). A plain record, below every layer that uses it.

use std::net::SocketAddr;

/// The TLS peer of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    /// Remote address of the connection.
    pub addr: Option<SocketAddr>,
    /// Subject of the verified client certificate (`CN=…`); `None` when the connection did not
    /// authenticate.
    pub subject: Option<String>,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.addr {
            Some(a) => write!(f, "{a}")?,
            None => f.write_str("unknown address")?,
        }
        match &self.subject {
            Some(s) => write!(f, " (client certificate {s})"),
            None => f.write_str(" (no client certificate)"),
        }
    }
}
