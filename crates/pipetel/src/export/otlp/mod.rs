//! The OTLP exporter: every signal, pushed over gRPC or HTTP/protobuf ([`client`] builds the
//! SDK's exporters over TLS), each wrapped in a delivery ledger for the flush and shutdown reports.

#[cfg(feature = "otlp")]
pub(super) mod client;

use super::entry::{BuiltIn, Serves};
use crate::config::{LogExporter, MetricExporter, OtlpProtocol, OtlpTarget, TraceExporter};

/// `otlp` in `OTEL_*_EXPORTER`.
pub(crate) static EXPORTER: BuiltIn = BuiltIn {
    name: "otlp",
    summary: "OTLP push over gRPC or HTTP/protobuf; the default for a signal whose exporter is unset once any OTLP \
              endpoint is set",
    feature: "otlp",
    pushes: true,
    needs_runtime: grpc,
    metrics: Some(Serves { variant: MetricExporter::Otlp, build: built_with!("otlp", pipeline::metrics) }),
    traces: Some(Serves { variant: TraceExporter::Otlp, build: built_with!("otlp", pipeline::spans) }),
    logs: Some(Serves { variant: LogExporter::Otlp, build: built_with!("otlp", pipeline::logs) }),
};

/// gRPC channels run on pipetel's Tokio runtime.
fn grpc(target: &OtlpTarget) -> bool {
    target.protocol == OtlpProtocol::Grpc
}

#[cfg(feature = "otlp")]
mod pipeline {
    use opentelemetry_sdk::logs::LoggerProviderBuilder;
    use opentelemetry_sdk::metrics::{MeterProviderBuilder, PeriodicReader};
    use opentelemetry_sdk::trace::TracerProviderBuilder;

    use super::client;
    use crate::error::InitError;
    use crate::export::batch;
    use crate::export::entry::{BatchInput, MetricsInput};

    /// Read every export interval, with the temporality preference.
    pub(super) fn metrics(
        mp: MeterProviderBuilder,
        input: &mut MetricsInput<'_>,
    ) -> Result<MeterProviderBuilder, InitError> {
        let settings = input.settings;
        let exporter = client::metric_exporter(&settings.otlp, settings.temporality)?;
        let exporter = input.ledgers.track(exporter, "metrics", "", &settings.otlp);
        Ok(mp.with_reader(PeriodicReader::builder(exporter).with_interval(settings.export_interval).build()))
    }

    pub(super) fn spans(
        tp: TracerProviderBuilder,
        input: &mut BatchInput<'_>,
    ) -> Result<TracerProviderBuilder, InitError> {
        let exporter = input.ledgers.track(client::span_exporter(input.otlp)?, "traces", "span", input.otlp);
        Ok(tp.with_span_processor(batch::spans(exporter, input.batch)))
    }

    pub(super) fn logs(
        lp: LoggerProviderBuilder,
        input: &mut BatchInput<'_>,
    ) -> Result<LoggerProviderBuilder, InitError> {
        let exporter = input.ledgers.track(client::log_exporter(input.otlp)?, "logs", "log record", input.otlp);
        Ok(lp.with_log_processor(batch::logs(exporter, input.batch)))
    }
}
