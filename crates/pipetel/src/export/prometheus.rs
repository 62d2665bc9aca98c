//! The Prometheus pull endpoint: a manual reader collected at scrape time and rendered by
//! pipetel's own text encoder ([`super::encode`]), served by a small hyper server on its own
//! thread.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};

use crate::error::InitError;

/// The content type of the text exposition format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The reader registered with the meter provider; the render handle shares its manual reader.
#[derive(Debug, Clone)]
pub(crate) struct PullReader(Arc<ManualReader>);

impl PullReader {
    pub(crate) fn new() -> Self {
        Self(Arc::new(ManualReader::builder().with_temporality(Temporality::Cumulative).build()))
    }
}

impl MetricReader for PullReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, _kind: InstrumentKind) -> Temporality {
        // Cumulative always: Prometheus computes rates from running totals.
        Temporality::Cumulative
    }
}

/// Renders the current metrics in the Prometheus text exposition format, for programs that serve
/// them from their own HTTP server. Cheap to clone.
#[derive(Clone)]
pub struct PrometheusRender {
    reader: PullReader,
    warned: Arc<AtomicBool>,
}

impl std::fmt::Debug for PrometheusRender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusRender").finish_non_exhaustive()
    }
}

impl PrometheusRender {
    pub(crate) fn new(reader: PullReader) -> Self {
        Self { reader, warned: Arc::new(AtomicBool::new(false)) }
    }

    /// Collects every instrument and returns the exposition text. Never panics: a collection
    /// error or a name conflict is logged once and what could be collected is returned.
    pub fn render(&self) -> String {
        let mut rm = ResourceMetrics::default();
        let mut out = String::with_capacity(16 * 1024);
        let mut conflicts = Vec::new();
        if let Err(error) = self.reader.collect(&mut rm) {
            self.warn_once(&format!("collecting metrics failed: {error}"));
            return out;
        }
        super::encode::encode(&rm, &mut out, &mut conflicts);
        super::write_sources(&mut out);
        if let Some(c) = conflicts.first() {
            self.warn_once(&format!("metric dropped from the exposition: {c}"));
        }
        out
    }

    fn warn_once(&self, message: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "pipetel", "{message}");
        }
    }
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
    pub(crate) fn start(host: &str, port: u16, path: &str, render: PrometheusRender) -> Result<Self, InitError> {
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
        let path: Arc<str> = Arc::from(path);
        let thread = std::thread::Builder::new()
            .name("pipetel-prometheus".into())
            .spawn(move || runtime.block_on(serve(listener, path, render, stop_rx)))
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
    path: Arc<str>,
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
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(s) => s,
                    Err(error) => {
                        tracing::debug!(target: "pipetel", %error, "accept failed");
                        continue;
                    }
                };
                let path = path.clone();
                let render = render.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let path = path.clone();
                        let render = render.clone();
                        async move { Ok::<_, Infallible>(respond(&req, &path, &render)) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        }
    }
}

fn respond(req: &Request<Incoming>, path: &str, render: &PrometheusRender) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    if req.uri().path() != path {
        *response.status_mut() = StatusCode::NOT_FOUND;
        *response.body_mut() = Full::new(Bytes::from_static(b"not found\n"));
        return response;
    }
    match *req.method() {
        Method::GET | Method::HEAD => {
            let body = render.render();
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_CONTENT_TYPE));
            if req.method() == Method::GET {
                *response.body_mut() = Full::new(Bytes::from(body));
            }
        }
        _ => {
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
    }
    response
}
