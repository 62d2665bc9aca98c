//! The pull endpoint's HTTP server: a small hyper server on its own thread, with connection
//! limits, optional credentials and TLS, serving what [`PrometheusRender`] renders.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    HeaderValue, ACCEPT, ACCEPT_ENCODING, ALLOW, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, VARY, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode};

use super::PrometheusRender;
use crate::error::InitError;

/// Most connections served at once; more wait in the kernel's accept queue.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// Time a client has to send its request headers (and a TLS client its handshake).
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

fn base64(input: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Compares without an early exit, so response time does not leak how much of a secret matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Loads a PEM certificate chain and private key for the endpoint.
#[cfg(feature = "tls")]
pub(crate) fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, String> {
    use tokio_rustls::rustls;
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
    let cert_pem = read(cert)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{} is not a PEM certificate chain: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", cert.display()));
    }
    let key_pem = read(key)?;
    let key_der = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| format!("{} is not a PEM private key: {e}", key.display()))?
        .ok_or_else(|| format!("{} holds no PEM private key", key.display()))?;
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
    loop {
        // A connection is accepted only when a permit is free: a flood of idle connections
        // waits in the kernel's queue instead of exhausting this process.
        let permit = tokio::select! {
            _ = &mut stop => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(error) => {
                tracing::debug!(target: "pipetel", %error, "accept failed");
                continue;
            }
        };
        let (options, render) = (options.clone(), render.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection(stream, options, render)).await;
        });
    }
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

fn respond(req: &Request<Incoming>, options: &EndpointOptions, render: &PrometheusRender) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    if req.uri().path() != options.path {
        *response.status_mut() = StatusCode::NOT_FOUND;
        *response.body_mut() = Full::new(Bytes::from_static(b"not found\n"));
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
    let (body, content_type) = render.render_for(accept);
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
    let bytes = if gzip {
        use std::io::Write as _;
        let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4), flate2::Compression::fast());
        match enc.write_all(body.as_bytes()).and_then(|()| enc.finish()) {
            Ok(compressed) => {
                response.headers_mut().insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                Bytes::from(compressed)
            }
            Err(_) => Bytes::from(body),
        }
    } else {
        Bytes::from(body)
    };
    if req.method() == Method::GET {
        *response.body_mut() = Full::new(bytes);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

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
