//! The pull endpoint's HTTP server: a small hyper server on its own thread, with connection
//! limits, optional credentials and TLS, serving what [`PrometheusRender`] renders.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{
    HeaderValue, ACCEPT, ACCEPT_ENCODING, ALLOW, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, VARY, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode};

use crate::error::InitError;
use pipetel_core::exposition::pull::{
    wants_openmetrics, PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE,
};

/// Most connections served at once (from their first byte on); a connection past it waits up
/// to [`HEADER_READ_TIMEOUT`] for a turn.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// Most connections that have sent nothing yet. Past it, the oldest of them is closed to make
/// room: idle clients can never keep a scraper's connection from being accepted.
pub(crate) const MAX_SILENT_CONNECTIONS: usize = 256;
/// Most connections open at once, silent or not: past it a new connection is closed at once.
pub(crate) const MAX_OPEN_CONNECTIONS: usize = 1024;
/// Time a client has to send its first byte, then its request headers (and a TLS client its
/// handshake).
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a connection may stay open, keep-alive included.
pub(crate) const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// Most request headers accepted.
pub(crate) const MAX_HEADERS: usize = 32;
/// Most bytes of request line and headers buffered.
pub(crate) const MAX_HEADER_BYTES: usize = 16 * 1024;

/// How the endpoint serves: path, optional credentials and TLS.
#[derive(Clone, Default)]
pub(crate) struct EndpointOptions {
    pub(crate) path: String,
    /// `Authorization` header values that are accepted (`Bearer <token>`, `Basic <base64>`).
    pub(crate) accepted_authorizations: Vec<String>,
    /// The `WWW-Authenticate` challenge sent with a 401.
    pub(crate) challenge: Option<&'static str>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
}

impl EndpointOptions {
    pub(crate) fn new(path: &str) -> Self {
        Self { path: path.to_string(), ..Self::default() }
    }

    /// Requires `Authorization: Bearer <token>`.
    pub(crate) fn with_bearer_token(mut self, token: &str) -> Self {
        self.accepted_authorizations.push(format!("Bearer {token}"));
        self.challenge.get_or_insert("Bearer realm=\"pipetel\"");
        self
    }

    /// Requires HTTP basic auth with this user and password.
    pub(crate) fn with_basic_auth(mut self, user: &str, password: &str) -> Self {
        self.accepted_authorizations.push(format!("Basic {}", base64(format!("{user}:{password}").as_bytes())));
        self.challenge = Some("Basic realm=\"pipetel\"");
        self
    }
}

/// Standard base64 with padding, as HTTP basic auth writes `user:password`.
fn base64(input: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(input)
}

/// Compares without an early exit, so response time does not leak how much of a secret matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    a.ct_eq(b).into()
}

/// Loads a PEM certificate chain and private key for the endpoint.
#[cfg(feature = "tls")]
pub(crate) fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, String> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::{self, PemObject as _};
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
    let cert_pem = read(cert)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{} is not a PEM certificate chain: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", cert.display()));
    }
    let key_pem = read(key)?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        pem::Error::NoItemsFound => format!("{} holds no PEM private key", key.display()),
        e => format!("{} is not a PEM private key: {e}", key.display()),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| format!("{} and {} do not make a usable certificate: {e}", cert.display(), key.display()))?;
    Ok(Arc::new(config))
}

/// The running pull endpoint. Stops (and joins its thread) on drop.
pub(crate) struct PrometheusServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl PrometheusServer {
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Binds synchronously (so a busy port is an error from `init`), then serves on a thread.
    pub(crate) fn start(
        host: &str,
        port: u16,
        options: EndpointOptions,
        render: PrometheusRender,
    ) -> Result<Self, InitError> {
        let wanted = format!("{host}:{port}");
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|source| InitError::Bind { addr: wanted.clone(), source })?
            .collect();
        // Prefer IPv4 for `localhost`: it is what scrapers configured with 127.0.0.1 reach.
        let mut ordered: Vec<SocketAddr> = addrs.iter().copied().filter(SocketAddr::is_ipv4).collect();
        ordered.extend(addrs.iter().copied().filter(SocketAddr::is_ipv6));
        let mut last_err = None;
        let mut listener = None;
        for addr in ordered {
            match TcpListener::bind(addr) {
                Ok(l) => {
                    listener = Some(l);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        let listener = match listener {
            Some(l) => l,
            None => {
                let source = last_err.unwrap_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::AddrNotAvailable, "the host resolved to no address")
                });
                return Err(InitError::Bind { addr: wanted, source });
            }
        };
        let addr = listener.local_addr().map_err(|source| InitError::Bind { addr: wanted.clone(), source })?;
        listener.set_nonblocking(true).map_err(|source| InitError::Bind { addr: wanted.clone(), source })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| InitError::Bind { addr: wanted.clone(), source })?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("pipetel-prometheus".into())
            .spawn(move || runtime.block_on(serve(listener, Arc::new(options), render, stop_rx)))
            .map_err(|source| InitError::Bind { addr: wanted, source })?;
        Ok(Self { addr, stop: Some(stop_tx), thread: Some(thread) })
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: TcpListener,
    options: Arc<EndpointOptions>,
    render: PrometheusRender,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(error) => {
            tracing::error!(target: "pipetel", %error, "the Prometheus endpoint cannot serve");
            return;
        }
    };
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_OPEN_CONNECTIONS));
    // The connections that have sent nothing yet, oldest first.
    let mut silent: VecDeque<Silent> = VecDeque::new();
    loop {
        // Accepting never waits for a connection to end: a flood of idle connections cannot
        // queue a scraper behind it in the kernel's accept queue (see `Silent`).
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(error) => {
                // Out of file descriptors (or another transient failure): back off, go on.
                tracing::debug!(target: "pipetel", %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        silent.retain(|s| s.silent.load(Ordering::Acquire) && !s.evict.is_closed());
        while silent.len() >= MAX_SILENT_CONNECTIONS {
            if let Some(oldest) = silent.pop_front() {
                let _ = oldest.evict.send(());
            }
        }
        let Ok(open_permit) = open.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let (evict, evicted) = tokio::sync::oneshot::channel();
        let still_silent = Arc::new(AtomicBool::new(true));
        silent.push_back(Silent { evict, silent: still_silent.clone() });
        let (options, render, permits) = (options.clone(), render.clone(), permits.clone());
        tokio::spawn(async move {
            let _open = open_permit;
            // Until its first byte the connection may be closed to make room for a newer one. A
            // peek, not `readable()`: readiness may be reported before any byte has arrived.
            let mut first_byte = [0u8; 1];
            let first = tokio::select! {
                _ = evicted => return,
                first = tokio::time::timeout(HEADER_READ_TIMEOUT, stream.peek(&mut first_byte)) => first,
            };
            still_silent.store(false, Ordering::Release);
            if !matches!(first, Ok(Ok(n)) if n > 0) {
                return;
            }
            let Ok(Ok(_permit)) = tokio::time::timeout(HEADER_READ_TIMEOUT, permits.acquire_owned()).await else {
                return;
            };
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection(stream, options, render)).await;
        });
        // Let the new connection's task look at its socket before the next accept.
        tokio::task::yield_now().await;
    }
}

/// A connection that has not sent a byte yet, as the accept loop keeps it: closing it (by
/// `evict`) is how the loop makes room when more than [`MAX_SILENT_CONNECTIONS`] are silent.
/// A scraper sends its request as soon as it connects, so it leaves this state at once; an
/// idle client stays in it until it is evicted or its [`HEADER_READ_TIMEOUT`] passes.
struct Silent {
    evict: tokio::sync::oneshot::Sender<()>,
    silent: Arc<AtomicBool>,
}

async fn connection(stream: tokio::net::TcpStream, options: Arc<EndpointOptions>, render: PrometheusRender) {
    let opts = options.clone();
    let service = hyper::service::service_fn(move |req| {
        let (options, render) = (opts.clone(), render.clone());
        async move { Ok::<_, Infallible>(respond(&req, &options, &render)) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_HEADER_BYTES);
    #[cfg(feature = "tls")]
    if let Some(tls) = &options.tls {
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
        let Ok(Ok(tls_stream)) = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream)).await else {
            return;
        };
        let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(tls_stream), service).await;
        return;
    }
    let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
}

/// A response body: a fixed one (errors, `HEAD`), or a scrape's page as the render thread
/// writes it, chunk by chunk (chunked transfer encoding: its length is not known up front).
pub(crate) enum Page {
    Full(Full<Bytes>),
    Streamed(tokio::sync::mpsc::Receiver<Bytes>),
}

impl Page {
    fn empty() -> Self {
        Page::Full(Full::new(Bytes::new()))
    }
}

impl Body for Page {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Page::Full(full) => Pin::new(full).poll_frame(cx),
            Page::Streamed(rx) => rx.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Page::Full(full) => full.is_end_stream(),
            Page::Streamed(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Page::Full(full) => full.size_hint(),
            Page::Streamed(_) => SizeHint::default(),
        }
    }
}

/// Chunks of a page in flight between the render thread and the connection.
const CHUNKS_IN_FLIGHT: usize = 4;

/// Hands a page's bytes to the connection in chunks of about [`crate::exposition::CHUNK`]; once
/// the connection is gone, the rest of the render goes nowhere.
///
/// The render holds a family's read lock while it writes that family, so it must never wait on
/// the network: a chunk the connection has no room for yet is kept in `backlog` and the render
/// goes on; the backlog is sent, waiting as long as the scraper needs, once the render is done
/// and every lock released (on drop). A scraper that reads as fast as the page is written keeps
/// the backlog empty; a slow one costs memory (at most the page), never a wait for the program.
struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    buf: Vec<u8>,
    backlog: std::collections::VecDeque<Bytes>,
    closed: bool,
}

impl ChunkSender {
    fn new(tx: tokio::sync::mpsc::Sender<Bytes>) -> Self {
        ChunkSender { tx, buf: Vec::new(), backlog: std::collections::VecDeque::new(), closed: false }
    }

    /// Queues `bytes` without waiting: straight into the channel when it has room and nothing
    /// is waiting before them, else behind the backlog.
    fn send(&mut self, bytes: Bytes) {
        use tokio::sync::mpsc::error::TrySendError;
        if self.closed {
            return;
        }
        self.backlog.push_back(bytes);
        while let Some(next) = self.backlog.pop_front() {
            match self.tx.try_send(next) {
                Ok(()) => {}
                Err(TrySendError::Full(next)) => {
                    self.backlog.push_front(next);
                    return;
                }
                Err(TrySendError::Closed(_)) => {
                    self.closed = true;
                    self.backlog.clear();
                    return;
                }
            }
        }
    }

    fn send_buffered(&mut self) {
        if !self.buf.is_empty() {
            let chunk = Bytes::from(std::mem::take(&mut self.buf));
            self.send(chunk);
        }
    }
}

impl Drop for ChunkSender {
    /// The render is done (no lock held): send what is left, at the scraper's pace.
    fn drop(&mut self) {
        self.send_buffered();
        while let Some(next) = self.backlog.pop_front() {
            if self.closed || self.tx.blocking_send(next).is_err() {
                break;
            }
        }
    }
}

impl std::io::Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.capacity() == 0 {
            self.buf.reserve(crate::exposition::CHUNK);
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() >= crate::exposition::CHUNK {
            self.send_buffered();
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send_buffered();
        Ok(())
    }
}

/// The gzip stream of a page; finished (trailer written, last chunk sent) when dropped, which
/// is when the render is done with its sink.
struct GzSink(Option<flate2::write::GzEncoder<ChunkSender>>);

impl Drop for GzSink {
    fn drop(&mut self) {
        if let Some(enc) = self.0.take() {
            if let Ok(mut chunks) = enc.finish() {
                chunks.send_buffered();
            }
        }
    }
}

/// Renders the page for `accept` on the calling (blocking) thread into `tx`, gzipped or not.
fn stream_page(render: &PrometheusRender, accept: Option<&str>, gzip: bool, tx: tokio::sync::mpsc::Sender<Bytes>) {
    if gzip {
        let mut gz = GzSink(Some(flate2::write::GzEncoder::new(ChunkSender::new(tx), flate2::Compression::fast())));
        render.render_to(accept, move |text| {
            use std::io::Write as _;
            if let Some(enc) = gz.0.as_mut() {
                if enc.write_all(text.as_bytes()).is_err() {
                    gz.0 = None;
                }
            }
        });
    } else {
        let mut chunks = ChunkSender::new(tx);
        render.render_to(accept, move |text| chunks.send(Bytes::copy_from_slice(text.as_bytes())));
    }
}

fn respond(req: &Request<Incoming>, options: &EndpointOptions, render: &PrometheusRender) -> Response<Page> {
    let mut response = Response::new(Page::empty());
    if req.uri().path() != options.path {
        *response.status_mut() = StatusCode::NOT_FOUND;
        *response.body_mut() = Page::Full(Full::new(Bytes::from_static(b"not found\n")));
        return response;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if !options.accepted_authorizations.is_empty() {
        let given = req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes).unwrap_or_default();
        let ok = options.accepted_authorizations.iter().fold(false, |ok, a| ok | constant_time_eq(a.as_bytes(), given));
        if !ok {
            *response.status_mut() = StatusCode::UNAUTHORIZED;
            if let Some(challenge) = options.challenge {
                response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
            }
            return response;
        }
    }
    let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    let content_type = if accept.is_some_and(wants_openmetrics) { OPENMETRICS_CONTENT_TYPE } else { TEXT_CONTENT_TYPE };
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    let gzip =
        req.headers().get_all(ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
            |enc| {
                let mut parts = enc.split(';');
                let name = parts.next().unwrap_or_default().trim();
                let refused =
                    parts.any(|p| matches!(p.trim().replace(' ', "").as_str(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
                (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
            },
        );
    response.headers_mut().insert(VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
    if gzip {
        response.headers_mut().insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    if req.method() == Method::GET {
        // Rendered on a blocking thread, streamed to the client as it is written.
        let (tx, rx) = tokio::sync::mpsc::channel(CHUNKS_IN_FLIGHT);
        let (render, accept) = (render.clone(), accept.map(str::to_owned));
        drop(tokio::task::spawn_blocking(move || stream_page(&render, accept.as_deref(), gzip, tx)));
        *response.body_mut() = Page::Streamed(rx);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files that hold no PEM item of the kind asked for are refused, naming the file.
    #[cfg(feature = "tls")]
    #[test]
    fn tls_files_without_pem_items_are_named() {
        let dir = std::env::temp_dir().join(format!("pipetel-tls-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let garbage = dir.join("garbage.pem");
        std::fs::write(&garbage, b"not pem at all\n").expect("write");
        let err = tls_config(&garbage, &garbage).expect_err("no certificate in it");
        assert!(err.contains("holds no PEM certificate") && err.contains("garbage.pem"), "{err}");
        let cert = dir.join("cert.pem");
        std::fs::write(&cert, b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").expect("write");
        let err = tls_config(&cert, &garbage).expect_err("no key");
        assert!(err.contains("holds no PEM private key") && err.contains("garbage.pem"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn base64_and_constant_time_compare() {
        assert_eq!(base64(b"scraper:s3cret"), "c2NyYXBlcjpzM2NyZXQ=");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert!(constant_time_eq(b"Bearer x", b"Bearer x"));
        assert!(!constant_time_eq(b"Bearer x", b"Bearer y"));
        assert!(!constant_time_eq(b"Bearer x", b"Bearer xx"));
    }
}
