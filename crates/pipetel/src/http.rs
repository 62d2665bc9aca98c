//! HTTP server request metrics for services built on tower (axum, hyper, tonic), named as the
//! OTel HTTP semantic conventions name them. Cargo feature `http` (off by default).
//!
//! ```no_run
//! # async fn infer() -> &'static str { "ok" }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = pipetel::Config::from_env()?.with_service_name("inference");
//! let _telemetry = pipetel::init(config.clone())?;
//! // Built after `init`: the middleware takes its meter from the provider `init` installed.
//! // Added with `Router::layer` after the routes, so `http.route` is the matched template.
//! let app: axum::Router = axum::Router::new()
//!     .route("/v1/infer", axum::routing::post(infer))
//!     .layer(pipetel::http::layer_for(&config));
//! # let _ = app; Ok(()) }
//! ```
//!
//! | OTel name | unit | kind | Prometheus name |
//! |---|---|---|---|
//! | `http.server.request.duration` | `s` | histogram | `http_server_request_duration_seconds` |
//! | `http.server.active_requests` | `{request}` | up-down counter | `http_server_active_requests` |
//! | `http.server.request.body.size` | `By` | histogram | `http_server_request_body_size_bytes` |
//! | `http.server.response.body.size` | `By` | histogram | `http_server_response_body_size_bytes` |
//!
//! Finished requests carry `http.request.method`, `http.response.status_code`, `http.route` (the
//! matched axum route template; absent for unmatched paths, so a scan of random URLs cannot
//! grow the series), `url.scheme`, `network.protocol.name` and `network.protocol.version`;
//! `http.server.active_requests` carries `http.request.method` and `url.scheme` only, as the
//! conventions say. The request body size is the `Content-Length` the client sent; the response
//! body size is recorded when the body's length is known up front. The duration buckets are
//! the conventions' advice (5 ms to 10 s), fixed by the middleware, so
//! [`PIPETEL_HISTOGRAM_BUCKETS`](crate::config::PIPETEL_HISTOGRAM_BUCKETS) does not apply.
//!
//! The measuring itself is the kept `opentelemetry-instrumentation-tower` middleware (built
//! against the same OTel crates as pipetel); it also opens a server span per request on the
//! global tracer, exported when a trace exporter is configured, and continues the caller's
//! trace from W3C `traceparent` headers. pipetel adds two things around it: the switch
//! ([`PIPETEL_HTTP_METRICS`](crate::config::PIPETEL_HTTP_METRICS), `service.http_metrics` in
//! the file; when off the layer is the identity and costs nothing per request), and
//! `url.scheme`: an HTTP/1.1 server receives targets in origin form (`/v1/infer`, no scheme),
//! which would leave the attribute empty, so the layer shows the middleware the request with
//! the scheme the server serves ([`HttpMetricsLayer::with_scheme`], default `http`) and hands
//! the application the request target exactly as it arrived.
//!
//! Servers that are not tower services record through [`ServerInstruments`]: the middleware's
//! four instruments (same names, units, bounds and scope), which the Python package's ASGI and
//! WSGI middleware use.

use std::task::{Context, Poll};

use http::uri::{Authority, Scheme, Uri};
use opentelemetry::global;
use opentelemetry::metrics::{Histogram, UpDownCounter};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_instrumentation_tower::http::server as otel;
use tower::util::Either;
use tower::{Layer, Service};

use crate::config::{Config, ConfigError};

/// `http.server.request.duration`: duration of finished requests, seconds (histogram).
pub const REQUEST_DURATION: &str = crate::families::http::REQUEST_DURATION.name;
/// `http.server.active_requests`: requests being served now.
pub const ACTIVE_REQUESTS: &str = crate::families::http::ACTIVE_REQUESTS.name;
/// `http.server.request.body.size`: request body sizes, bytes (histogram).
pub const REQUEST_BODY_SIZE: &str = crate::families::http::REQUEST_BODY_SIZE.name;
/// `http.server.response.body.size`: response body sizes, bytes (histogram).
pub const RESPONSE_BODY_SIZE: &str = crate::families::http::RESPONSE_BODY_SIZE.name;

/// `http.server.request.duration`'s bucket bounds, seconds: the conventions' advice, as the
/// middleware sets them. The body-size histograms take the SDK's default bounds.
pub const DURATION_BUCKETS: [f64; 14] =
    [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

/// The instrumentation scope of the middleware's instruments (`otel_scope_name` on the page):
/// the kept middleware's crate name, version and semantic-conventions schema.
const SCOPE_NAME: &str = "opentelemetry-instrumentation-tower";
const SCOPE_VERSION: &str = "0.19.0";
const SCOPE_SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.42.0";

/// The four instruments of [`HttpMetricsLayer`] (same names, units, descriptions, bounds and
/// scope, so the SDK hands out the same instruments), for HTTP servers that are not tower
/// services: the Python package's ASGI and WSGI middleware record through it. Build it after
/// [`crate::init`]: it takes the global meter provider as it is then.
#[derive(Clone, Debug)]
pub struct ServerInstruments {
    duration: Histogram<f64>,
    active: UpDownCounter<i64>,
    request_body: Histogram<u64>,
    response_body: Histogram<u64>,
}

impl Default for ServerInstruments {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerInstruments {
    /// The instruments, from the global meter provider.
    pub fn new() -> Self {
        let scope = InstrumentationScope::builder(SCOPE_NAME)
            .with_version(SCOPE_VERSION)
            .with_schema_url(SCOPE_SCHEMA_URL)
            .build();
        let meter = global::meter_with_scope(scope);
        ServerInstruments {
            duration: meter
                .f64_histogram(REQUEST_DURATION)
                .with_description("Duration of HTTP server requests.")
                .with_unit("s")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            active: meter
                .i64_up_down_counter(ACTIVE_REQUESTS)
                .with_description("Number of active HTTP server requests.")
                .with_unit("{request}")
                .build(),
            request_body: meter
                .u64_histogram(REQUEST_BODY_SIZE)
                .with_description("Size of HTTP server request bodies.")
                .with_unit("By")
                .build(),
            response_body: meter
                .u64_histogram(RESPONSE_BODY_SIZE)
                .with_description("Size of HTTP server response bodies.")
                .with_unit("By")
                .build(),
        }
    }

    /// A request arrived: `http.server.active_requests` up by one under `active` (the
    /// conventions' `http.request.method` and `url.scheme`).
    pub fn started(&self, active: &[KeyValue]) {
        self.active.add(1, active);
    }

    /// The request that [`ServerInstruments::started`] counted under `active` finished after
    /// `seconds`: its duration and known body sizes recorded under `attributes` (method, scheme,
    /// status code, route, protocol), the active count down by one.
    pub fn finished(
        &self,
        active: &[KeyValue],
        attributes: &[KeyValue],
        seconds: f64,
        request_body: Option<u64>,
        response_body: Option<u64>,
    ) {
        self.duration.record(seconds, attributes);
        if let Some(size) = request_body {
            self.request_body.record(size, attributes);
        }
        if let Some(size) = response_body {
            self.response_body.record(size, attributes);
        }
        self.active.add(-1, active);
    }
}

/// The HTTP metrics layer for the switch in the configuration `init` reads: the file named by
/// `PIPETEL_CONFIG`, then the environment. Build it after [`crate::init`].
///
/// # Errors
/// As [`Config::from_env`]: a bad value of a variable or file key, named in the error.
pub fn layer() -> Result<HttpMetricsLayer, ConfigError> {
    Ok(layer_for(&Config::from_env()?))
}

/// The HTTP metrics layer for `config`'s switch ([`Config::service_metrics`]`.http_metrics`,
/// so a value set in code counts too). Build it after [`crate::init`].
pub fn layer_for(config: &Config) -> HttpMetricsLayer {
    if config.service_metrics().http_metrics {
        HttpMetricsLayer::enabled()
    } else {
        HttpMetricsLayer::disabled()
    }
}

/// A tower [`Layer`] measuring every request of the service it wraps (see the [module
/// docs](self)), or the identity when HTTP metrics are off.
#[derive(Clone)]
pub struct HttpMetricsLayer {
    middleware: Option<otel::Layer>,
    scheme: Scheme,
}

impl HttpMetricsLayer {
    /// A measuring layer. Its instruments come from the global meter provider as it is now, so
    /// build it after [`crate::init`]; one built before records into a no-op meter.
    pub fn enabled() -> Self {
        HttpMetricsLayer { middleware: Some(otel::Layer::new()), scheme: Scheme::HTTP }
    }

    /// The identity layer: requests pass through unmeasured.
    pub fn disabled() -> Self {
        HttpMetricsLayer { middleware: None, scheme: Scheme::HTTP }
    }

    /// The `url.scheme` of requests that arrive without one (HTTP/1.1 origin-form targets):
    /// `Scheme::HTTPS` for a server that terminates TLS itself. Default `http`.
    pub fn with_scheme(mut self, scheme: Scheme) -> Self {
        self.scheme = scheme;
        self
    }

    /// Whether this layer measures requests.
    pub fn is_enabled(&self) -> bool {
        self.middleware.is_some()
    }
}

impl std::fmt::Debug for HttpMetricsLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpMetricsLayer").field("enabled", &self.is_enabled()).field("scheme", &self.scheme).finish()
    }
}

/// The service [`HttpMetricsLayer`] wraps around `S`: the measured stack, or `S` itself.
pub type HttpMetricsService<S> = Either<WithScheme<otel::Service<RestoreTarget<S>>>, S>;

impl<S> Layer<S> for HttpMetricsLayer {
    type Service = HttpMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        match &self.middleware {
            Some(middleware) => Either::Left(Retarget {
                inner: middleware.layer(Retarget { inner, rewrite: Restore }),
                rewrite: AddScheme(self.scheme.clone()),
            }),
            None => Either::Right(inner),
        }
    }
}

/// The request target as the client sent it, carried past the middleware in the request's
/// extensions so [`RestoreTarget`] can put it back.
#[derive(Clone)]
struct OriginalTarget(Uri);

/// A part of the measured stack: changes the request target as `R` says on the way in, then
/// hands the request to `S`. [`WithScheme`] and [`RestoreTarget`] are the two kinds.
#[derive(Clone, Debug)]
pub struct Retarget<S, R> {
    inner: S,
    rewrite: R,
}

/// How a [`Retarget`] changes the target of a request on its way in.
pub trait RewriteTarget {
    /// Changes `req`'s target, or leaves it.
    fn rewrite<B>(&self, req: &mut http::Request<B>);
}

impl<S, R, B> Service<http::Request<B>> for Retarget<S, R>
where
    S: Service<http::Request<B>>,
    R: RewriteTarget,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        self.rewrite.rewrite(&mut req);
        self.inner.call(req)
    }
}

/// Outermost part of the measured stack: gives an origin-form request target the server's
/// scheme (see [`AddScheme`]) so the middleware reads `url.scheme`.
pub type WithScheme<S> = Retarget<S, AddScheme>;

/// Gives an origin-form request target the server's scheme (and the `Host` header's authority,
/// which an absolute URI needs), keeping the target as it arrived for [`RestoreTarget`].
#[derive(Clone, Debug)]
pub struct AddScheme(Scheme);

impl RewriteTarget for AddScheme {
    fn rewrite<B>(&self, req: &mut http::Request<B>) {
        if req.uri().scheme().is_none() {
            if let Some(absolute) = absolute_target(req, &self.0) {
                let original = std::mem::replace(req.uri_mut(), absolute);
                req.extensions_mut().insert(OriginalTarget(original));
            }
        }
    }
}

/// `scheme://host/path?query` for an origin-form target; `None` when it cannot be formed (an
/// asterisk-form `OPTIONS *`, say), and the request then goes on unchanged.
fn absolute_target<B>(req: &http::Request<B>, scheme: &Scheme) -> Option<Uri> {
    let path_and_query = req.uri().path_and_query()?.clone();
    if !path_and_query.as_str().starts_with('/') {
        return None;
    }
    // The authority only makes the URI well-formed; the middleware does not report it.
    let authority = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<Authority>().ok())
        .unwrap_or_else(|| Authority::from_static("localhost"));
    Uri::builder().scheme(scheme.clone()).authority(authority).path_and_query(path_and_query).build().ok()
}

/// Innermost part of the measured stack: hands the application the request target exactly as
/// it arrived, undoing [`WithScheme`].
pub type RestoreTarget<S> = Retarget<S, Restore>;

/// Puts back the target [`AddScheme`] replaced.
#[derive(Clone, Copy, Debug)]
pub struct Restore;

impl RewriteTarget for Restore {
    fn rewrite<B>(&self, req: &mut http::Request<B>) {
        if let Some(OriginalTarget(original)) = req.extensions_mut().remove::<OriginalTarget>() {
            *req.uri_mut() = original;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};
    use tower::ServiceExt;

    /// A service that remembers the target each request reached it with.
    fn recorder(
        seen: Arc<Mutex<Vec<String>>>,
    ) -> impl Service<http::Request<()>, Response = http::Response<String>, Error = Infallible, Future: Send> + Clone
    {
        tower::service_fn(move |req: http::Request<()>| {
            let seen = seen.clone();
            async move {
                seen.lock().map(|mut s| s.push(req.uri().to_string())).ok();
                Ok::<_, Infallible>(http::Response::new(String::from("ok")))
            }
        })
    }

    fn request(target: &str, host: Option<&str>) -> http::Request<()> {
        let mut b = http::Request::builder().uri(target);
        if let Some(h) = host {
            b = b.header(http::header::HOST, h);
        }
        b.body(()).expect("a valid test request")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_middleware_sees_the_scheme_and_the_application_the_original_target() {
        let (before, after) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let (b, a) = (before.clone(), after.clone());
        // Stand-in for the middleware: records what it is shown, then calls the restorer.
        let svc = WithScheme {
            inner: tower::service_fn(move |req: http::Request<()>| {
                b.lock().map(|mut s| s.push(req.uri().to_string())).ok();
                RestoreTarget { inner: recorder(a.clone()), rewrite: Restore }.oneshot(req)
            }),
            rewrite: AddScheme(Scheme::HTTPS),
        };
        for (target, host) in [("/v1/infer?x=1", Some("api.example:8080")), ("/healthz", None), ("http://h/abs", None)]
        {
            svc.clone().oneshot(request(target, host)).await.expect("infallible");
        }
        assert_eq!(
            *before.lock().expect("lock"),
            ["https://api.example:8080/v1/infer?x=1", "https://localhost/healthz", "http://h/abs"]
        );
        assert_eq!(*after.lock().expect("lock"), ["/v1/infer?x=1", "/healthz", "http://h/abs"]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_unformable_target_passes_unchanged() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let inner = RestoreTarget { inner: recorder(seen.clone()), rewrite: Restore };
        let svc = WithScheme { inner, rewrite: AddScheme(Scheme::HTTP) };
        svc.oneshot(request("*", None)).await.expect("infallible");
        assert_eq!(*seen.lock().expect("lock"), ["*"]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_switch_picks_the_identity_or_the_measured_stack() {
        let on = layer_for(&Config::default());
        assert!(on.is_enabled());
        assert!(matches!(on.layer(recorder(Default::default())), Either::Left(_)));
        let mut service = crate::service::ServiceMetricsConfig::default();
        service.http_metrics = false;
        let off_config = Config::default().with_service_metrics(service);
        let off = layer_for(&off_config);
        assert!(!off.is_enabled());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let svc = off.layer(recorder(seen.clone()));
        assert!(matches!(svc, Either::Right(_)));
        let resp = svc.oneshot(request("/v1/infer", None)).await.expect("infallible");
        assert_eq!(resp.into_body(), "ok");
        assert_eq!(*seen.lock().expect("lock"), ["/v1/infer"]);
    }
}
