//! OTLP push exporters (gRPC and HTTP/protobuf) built from the resolved [`OtlpTarget`], over TLS
//! when the endpoint is `https://`: rustls with ring, the system roots or the configured CA, and
//! the client certificate for mTLS.
//!
//! gRPC goes through tonic's own TLS; HTTP through a reqwest blocking client built here over a
//! rustls configuration (so no second crypto provider is compiled in), wrapped so that the cause
//! of a failed request reaches the delivery report: the exporter itself says only "network
//! error".

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig, Identity};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::metrics::Temporality;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{
    MetricTemporality, OtlpCompression, OtlpProtocol, OtlpTarget, Signal, Sourced, OTEL_EXPORTER_OTLP_CERTIFICATE,
};
use crate::error::InitError;
use crate::export::delivery::{Cause, Explained};

pub(crate) fn error(signal: Signal, reason: impl ToString) -> InitError {
    InitError::Exporter { signal, exporter: "otlp", reason: reason.to_string() }
}

fn compression(c: OtlpCompression) -> Option<opentelemetry_otlp::Compression> {
    match c {
        OtlpCompression::None => None,
        OtlpCompression::Gzip => Some(opentelemetry_otlp::Compression::Gzip),
        OtlpCompression::Zstd => Some(opentelemetry_otlp::Compression::Zstd),
    }
}

pub(crate) fn metadata(
    signal: Signal,
    headers: &[(String, String)],
) -> Result<opentelemetry_otlp::tonic_types::metadata::MetadataMap, InitError> {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        let name = http::HeaderName::from_bytes(k.to_ascii_lowercase().as_bytes())
            .map_err(|e| error(signal, format!("header `{k}`: {e}")))?;
        let value = http::HeaderValue::from_str(v).map_err(|e| error(signal, format!("value of header `{k}`: {e}")))?;
        map.insert(name, value);
    }
    Ok(opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map))
}

pub(crate) fn is_https(target: &OtlpTarget) -> bool {
    target.endpoint.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

// ----- the configured PEM files: read and parsed, errors naming where each path was given -----

fn read(file: &Sourced<PathBuf>) -> Result<Vec<u8>, InitError> {
    std::fs::read(&file.value)
        .map_err(|e| file.invalid(file.value.display().to_string(), format!("cannot read the file: {e}")).into())
}

fn certificates(file: &Sourced<PathBuf>) -> Result<(Vec<u8>, Vec<CertificateDer<'static>>), InitError> {
    let pem = read(file)?;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    let shown = || file.value.display().to_string();
    match certs {
        Ok(certs) if !certs.is_empty() => Ok((pem, certs)),
        Ok(_) => Err(file.invalid(shown(), "the file holds no PEM certificate").into()),
        Err(e) => Err(file.invalid(shown(), format!("not a PEM certificate file: {e}")).into()),
    }
}

fn private_key(file: &Sourced<PathBuf>) -> Result<(Vec<u8>, PrivateKeyDer<'static>), InitError> {
    let pem = read(file)?;
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| file.invalid(file.value.display().to_string(), format!("no PEM private key in the file: {e}")))?;
    Ok((pem, key))
}

// ----- gRPC: tonic's TLS -----

/// The system's root certificates: none found (a minimal container without a CA bundle) is an
/// error saying what to do, rather than every handshake failing later.
fn system_roots(target: &OtlpTarget, signal: Signal) -> Result<Vec<CertificateDer<'static>>, InitError> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let why: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(error(
            signal,
            format!(
                "no system root certificates to verify {} ({}); install the system's CA bundle or name the CA \
                 with {OTEL_EXPORTER_OTLP_CERTIFICATE}",
                crate::redact::redact_url(&target.endpoint),
                why.join("; ")
            ),
        ));
    }
    Ok(found.certs)
}

/// The CA replaces the system roots (as the other OTel SDKs do); without one, the system's.
pub(crate) fn tonic_tls(target: &OtlpTarget, signal: Signal) -> Result<ClientTlsConfig, InitError> {
    let tls = &target.tls;
    let mut config = ClientTlsConfig::new();
    config = match &tls.certificate {
        Some(ca) => config.ca_certificate(Certificate::from_pem(certificates(ca)?.0)),
        None => {
            system_roots(target, signal)?;
            config.with_native_roots()
        }
    };
    if let Some((cert, key)) = &tls.client {
        config = config.identity(Identity::from_pem(certificates(cert)?.0, private_key(key)?.0));
    }
    Ok(config)
}

// ----- HTTP: reqwest over rustls, its transport errors kept -----

/// The rustls configuration of an OTLP/HTTP client: ring, the CA or the system roots, the client
/// certificate. A plain `http://` endpoint gets an empty root store (nothing is loaded).
fn rustls_config(target: &OtlpTarget, signal: Signal) -> Result<rustls::ClientConfig, InitError> {
    let mut roots = rustls::RootCertStore::empty();
    if is_https(target) {
        match &target.tls.certificate {
            Some(ca) => {
                for cert in certificates(ca)?.1 {
                    roots.add(cert).map_err(|e| ca.invalid(ca.value.display().to_string(), e.to_string()))?;
                }
            }
            None => {
                roots.add_parsable_certificates(system_roots(target, signal)?);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| error(signal, e))?
        .with_root_certificates(roots);
    let mut config = match &target.tls.client {
        Some((cert, key)) => builder
            .with_client_auth_cert(certificates(cert)?.1, private_key(key)?.1)
            .map_err(|e| cert.invalid(cert.value.display().to_string(), format!("unusable with its key: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// reqwest's blocking client, noting why each failed request failed.
#[derive(Debug)]
struct HttpClient {
    client: reqwest::blocking::Client,
    cause: Arc<Cause>,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for HttpClient {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<opentelemetry_http::Response<opentelemetry_http::Bytes>, opentelemetry_http::HttpError> {
        let result = self.client.send_bytes(request).await;
        self.cause.note(result.as_ref().err().map(|e| chain(e.as_ref())));
        result
    }
}

/// An error and its sources, each once: `error sending request for url (…): client error
/// (Connect): invalid peer certificate: UnknownIssuer`.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}

/// reqwest's blocking client over [`rustls_config`], its requests bounded by the target's timeout.
pub(crate) fn blocking_client(target: &OtlpTarget, signal: Signal) -> Result<reqwest::blocking::Client, InitError> {
    let tls = rustls_config(target, signal)?;
    let timeout = target.timeout;
    // A blocking client cannot be built on a thread that runs an async runtime (`init` may be
    // called inside one), so it is built on a thread of its own.
    std::thread::Builder::new()
        .name("pipetel-otlp-client".into())
        .spawn(move || reqwest::blocking::Client::builder().timeout(timeout).tls_backend_preconfigured(tls).build())
        .map_err(|e| error(signal, format!("cannot start the thread that builds the HTTP client: {e}")))?
        .join()
        .map_err(|_| error(signal, "building the HTTP client panicked"))?
        .map_err(|e| error(signal, chain(&e)))
}

fn http_client(target: &OtlpTarget, signal: Signal) -> Result<(HttpClient, Arc<Cause>), InitError> {
    let built = blocking_client(target, signal)?;
    let cause = Arc::new(Cause::default());
    Ok((HttpClient { client: built, cause: Arc::clone(&cause) }, cause))
}

/// Builds one exporter: the same steps for every signal, over either transport.
macro_rules! build_exporter {
    ($builder:expr, $signal:expr, $target:expr) => {{
        let target: &OtlpTarget = $target;
        let signal: Signal = $signal;
        match target.protocol {
            OtlpProtocol::Grpc => {
                let mut b = $builder
                    .with_tonic()
                    .with_endpoint(target.endpoint.clone())
                    .with_timeout(target.timeout)
                    .with_metadata(metadata(signal, &target.headers)?);
                if is_https(target) {
                    b = b.with_tls_config(tonic_tls(target, signal)?);
                }
                if let Some(c) = compression(target.compression) {
                    b = b.with_compression(c);
                }
                // tonic's errors carry their transport cause.
                Explained { exporter: b.build().map_err(|e| error(signal, e))?, cause: None }
            }
            OtlpProtocol::HttpProtobuf => {
                let headers: HashMap<String, String> = target.headers.iter().cloned().collect();
                let (client, cause) = http_client(target, signal)?;
                let mut b = $builder
                    .with_http()
                    .with_http_client(client)
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(target.endpoint.clone())
                    .with_timeout(target.timeout)
                    .with_headers(headers);
                if let Some(c) = compression(target.compression) {
                    b = b.with_compression(c);
                }
                Explained { exporter: b.build().map_err(|e| error(signal, e))?, cause: Some(cause) }
            }
        }
    }};
}

pub(crate) fn span_exporter(target: &OtlpTarget) -> Result<Explained<opentelemetry_otlp::SpanExporter>, InitError> {
    Ok(build_exporter!(opentelemetry_otlp::SpanExporter::builder(), Signal::Traces, target))
}

/// The OTLP metric exporter with the temporality preference
/// (`OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`; cumulative by default, so a lost or late
/// export never corrupts a counter downstream).
pub(crate) fn metric_exporter(
    target: &OtlpTarget,
    temporality: MetricTemporality,
) -> Result<Explained<opentelemetry_otlp::MetricExporter>, InitError> {
    let temporality = match temporality {
        MetricTemporality::Delta => Temporality::Delta,
        MetricTemporality::LowMemory => Temporality::LowMemory,
        // `MetricTemporality` is non-exhaustive for users, not for this crate.
        MetricTemporality::Cumulative => Temporality::Cumulative,
    };
    Ok(build_exporter!(
        opentelemetry_otlp::MetricExporter::builder().with_temporality(temporality),
        Signal::Metrics,
        target
    ))
}

pub(crate) fn log_exporter(target: &OtlpTarget) -> Result<Explained<opentelemetry_otlp::LogExporter>, InitError> {
    Ok(build_exporter!(opentelemetry_otlp::LogExporter::builder(), Signal::Logs, target))
}
