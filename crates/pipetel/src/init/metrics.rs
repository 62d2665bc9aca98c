//! The meter provider: the cardinality view, a reader per configured exporter (each built by its
//! entry in [`crate::export::BUILT_IN`]) and the pull endpoint.

use opentelemetry_sdk::metrics::{Aggregation, Instrument, InstrumentKind, SdkMeterProvider, Stream};
use opentelemetry_sdk::Resource;

use crate::config::{HistogramAggregation, MetricsSettings, PrometheusSettings, DEFAULT_CARDINALITY_LIMIT};
use crate::error::InitError;
use crate::export::entry::{MetricsInput, Pull};
use crate::export::ledgers::Ledgers;
use crate::export::registry;

/// The meter provider and what its readers need next.
pub(super) struct Metrics {
    pub(super) provider: SdkMeterProvider,
    /// The pull reader's render handle, when the Prometheus exporter is on.
    pub(super) pull: Option<Pull>,
    /// A push exporter (OTLP, console) reads the provider.
    pub(super) pushes: bool,
}

/// The running pull endpoint and its render handle.
#[cfg(feature = "prometheus")]
pub(super) type Endpoint = (crate::export::prometheus::PrometheusServer, crate::export::PrometheusRender);
/// The running pull endpoint (never made without the `prometheus` feature).
#[cfg(not(feature = "prometheus"))]
pub(super) type Endpoint = std::convert::Infallible;

/// The meter provider with one reader per configured exporter.
///
/// # Errors
/// An exporter that cannot be built or is not compiled in.
pub(super) fn build(
    settings: &MetricsSettings,
    plugged: Vec<super::plugged::AddMetrics>,
    cardinality_limit: usize,
    resource: &Resource,
    ledgers: &mut Ledgers,
) -> Result<Metrics, InitError> {
    // Exemplars are pipetel's own (the SDK keeps none): every histogram reads the filter.
    crate::exposition::exemplar::set_filter(settings.exemplar_filter);
    let mut mp = SdkMeterProvider::builder().with_resource(resource.clone());
    if let Some(view) = view(cardinality_limit, settings.histogram_aggregation) {
        mp = mp.with_view(view);
    }
    let mut input = MetricsInput { settings, ledgers, pull: None };
    for exporter in &settings.exporters {
        mp = registry::builder(*exporter)?(mp, &mut input)?;
    }
    let pull = input.pull;
    // A reader of the application's reads what push exporters read: the instruments.
    let pushes = settings.exporters.iter().any(|e| registry::pushes(*e)) || !plugged.is_empty();
    for add in plugged {
        mp = add(mp, settings.export_interval);
    }
    Ok(Metrics { provider: mp.build(), pull, pushes })
}

/// The one view (the SDK makes a stream per matching view, so there is never a second): the
/// cardinality limit when it is not the SDK's default, and base-2 exponential buckets for
/// histograms when asked (`OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION`; the
/// configuration refuses it together with the pull endpoint, which cannot render them).
fn view(
    cardinality_limit: usize,
    histograms: HistogramAggregation,
) -> Option<impl Fn(&Instrument) -> Option<Stream> + Send + Sync + 'static> {
    let exponential = histograms == HistogramAggregation::Base2Exponential;
    if cardinality_limit == DEFAULT_CARDINALITY_LIMIT && !exponential {
        return None;
    }
    Some(move |instrument: &Instrument| {
        let mut stream = Stream::builder();
        if cardinality_limit != DEFAULT_CARDINALITY_LIMIT {
            stream = stream.with_cardinality_limit(cardinality_limit);
        }
        if exponential && instrument.kind() == InstrumentKind::Histogram {
            // The spec's defaults for this aggregation.
            stream = stream.with_aggregation(Aggregation::Base2ExponentialHistogram {
                max_size: 160,
                max_scale: 20,
                record_min_max: true,
            });
        }
        stream.build().ok()
    })
}

/// Starts the pull endpoint when there is a pull reader: bound before anything global is
/// installed, so a port in use fails `init` cleanly.
///
/// # Errors
/// [`InitError::Bind`] naming the address; a bad TLS certificate or key, or TLS not compiled in.
#[cfg(feature = "prometheus")]
pub(super) fn serve(settings: &PrometheusSettings, pull: Option<Pull>) -> Result<Option<Endpoint>, InitError> {
    let Some(render) = pull else { return Ok(None) };
    let mut options = crate::export::prometheus::EndpointOptions::new(&settings.path);
    if let Some(token) = &settings.bearer_token {
        options = options.with_bearer_token(token);
    }
    if let Some((user, password)) = &settings.basic_auth {
        options = options.with_basic_auth(user, password);
    }
    if let Some(tls) = &settings.tls {
        options = with_tls(options, tls)?;
    }
    let server =
        crate::export::prometheus::PrometheusServer::start(&settings.host, settings.port, options, render.clone())?;
    Ok(Some((server, render)))
}

#[cfg(not(feature = "prometheus"))]
pub(super) fn serve(_: &PrometheusSettings, pull: Option<Pull>) -> Result<Option<Endpoint>, InitError> {
    Ok(pull.map(|never| match never {}))
}

#[cfg(feature = "tls")]
fn with_tls(
    mut options: crate::export::prometheus::EndpointOptions,
    tls: &crate::config::Sourced<(std::path::PathBuf, std::path::PathBuf)>,
) -> Result<crate::export::prometheus::EndpointOptions, InitError> {
    let (cert, key) = &tls.value;
    let config = crate::export::prometheus::tls_config(cert, key)
        .map_err(|reason| tls.invalid(cert.display().to_string(), reason))?;
    options.tls = Some(config);
    Ok(options)
}

#[cfg(all(feature = "prometheus", not(feature = "tls")))]
fn with_tls(
    _: crate::export::prometheus::EndpointOptions,
    _: &crate::config::Sourced<(std::path::PathBuf, std::path::PathBuf)>,
) -> Result<crate::export::prometheus::EndpointOptions, InitError> {
    Err(InitError::FeatureDisabled { exporter: "TLS pull endpoint", feature: "tls" })
}

/// The address the endpoint listens on.
#[cfg(feature = "prometheus")]
pub(super) fn endpoint_addr(endpoint: &Endpoint) -> std::net::SocketAddr {
    endpoint.0.addr()
}

#[cfg(not(feature = "prometheus"))]
pub(super) fn endpoint_addr(endpoint: &Endpoint) -> std::net::SocketAddr {
    match *endpoint {}
}

/// Stops the endpoint: it no longer accepts scrapes.
#[cfg(feature = "prometheus")]
pub(super) fn stop(endpoint: Endpoint) {
    drop(endpoint);
}

#[cfg(not(feature = "prometheus"))]
pub(super) fn stop(endpoint: Endpoint) {
    match endpoint {}
}
