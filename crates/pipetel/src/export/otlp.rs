//! OTLP push exporters (gRPC and HTTP/protobuf) built from the resolved [`OtlpTarget`].

use std::collections::HashMap;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::metrics::Temporality;

use crate::config::{OtlpCompression, OtlpProtocol, OtlpTarget, Signal};
use crate::error::InitError;

fn error(signal: Signal, reason: impl ToString) -> InitError {
    InitError::Exporter { signal, exporter: "otlp", reason: reason.to_string() }
}

fn compression(c: OtlpCompression) -> Option<opentelemetry_otlp::Compression> {
    match c {
        OtlpCompression::None => None,
        OtlpCompression::Gzip => Some(opentelemetry_otlp::Compression::Gzip),
        OtlpCompression::Zstd => Some(opentelemetry_otlp::Compression::Zstd),
    }
}

fn metadata(
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
                if let Some(c) = compression(target.compression) {
                    b = b.with_compression(c);
                }
                b.build().map_err(|e| error(signal, e))?
            }
            OtlpProtocol::HttpProtobuf => {
                let headers: HashMap<String, String> = target.headers.iter().cloned().collect();
                let mut b = $builder
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(target.endpoint.clone())
                    .with_timeout(target.timeout)
                    .with_headers(headers);
                if let Some(c) = compression(target.compression) {
                    b = b.with_compression(c);
                }
                b.build().map_err(|e| error(signal, e))?
            }
        }
    }};
}

pub(crate) fn span_exporter(target: &OtlpTarget) -> Result<opentelemetry_otlp::SpanExporter, InitError> {
    Ok(build_exporter!(opentelemetry_otlp::SpanExporter::builder(), Signal::Traces, target))
}

pub(crate) fn metric_exporter(target: &OtlpTarget) -> Result<opentelemetry_otlp::MetricExporter, InitError> {
    // Cumulative temporality: a lost or late export never corrupts a counter downstream.
    Ok(build_exporter!(
        opentelemetry_otlp::MetricExporter::builder().with_temporality(Temporality::Cumulative),
        Signal::Metrics,
        target
    ))
}

pub(crate) fn log_exporter(target: &OtlpTarget) -> Result<opentelemetry_otlp::LogExporter, InitError> {
    Ok(build_exporter!(opentelemetry_otlp::LogExporter::builder(), Signal::Logs, target))
}
