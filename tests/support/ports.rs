//! Loopback ports: free ones for peers, and one that refuses every connection.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// A loopback port that was free a moment ago, never one this process handed out before: two
/// peers of one test (or two tests running side by side) cannot be given the same port.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral loopback port");
        let port = listener.local_addr().expect("local address").port();
        if handed_out.insert(port) {
            return port;
        }
    }
}

/// A loopback port held bound but not listening: every connection to it is refused for as long
/// as this value lives, and nothing else (no peer, no [`free_port`] caller) can take it meanwhile.
/// The stand-in for a collector that is down.
pub struct RefusingPort {
    _socket: socket2::Socket,
    port: u16,
}

impl RefusingPort {
    /// Binds a fresh ephemeral loopback port without listening on it.
    pub fn new() -> Self {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("create a TCP socket");
        let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("loopback address");
        socket.bind(&any.into()).expect("bind an ephemeral loopback port");
        let port = socket.local_addr().ok().and_then(|a| a.as_socket()).expect("local address").port();
        Self { _socket: socket, port }
    }

    /// The refused port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Default for RefusingPort {
    fn default() -> Self {
        Self::new()
    }
}
