//! The console exporter: every signal, human-readable on stdout (`opentelemetry-stdout`).

use super::entry::{no_runtime, BuiltIn, Serves};
use crate::config::{LogExporter, MetricExporter, TraceExporter};

/// `console` in `OTEL_*_EXPORTER`.
pub(crate) static EXPORTER: BuiltIn = BuiltIn {
    name: "console",
    summary: "human-readable output on stdout",
    feature: "console",
    pushes: true,
    needs_runtime: no_runtime,
    metrics: Some(Serves { variant: MetricExporter::Console, build: built_with!("console", pipeline::metrics) }),
    traces: Some(Serves { variant: TraceExporter::Console, build: built_with!("console", pipeline::spans) }),
    logs: Some(Serves { variant: LogExporter::Console, build: built_with!("console", pipeline::logs) }),
};

#[cfg(feature = "console")]
mod pipeline {
    use opentelemetry_sdk::logs::LoggerProviderBuilder;
    use opentelemetry_sdk::metrics::{MeterProviderBuilder, PeriodicReader};
    use opentelemetry_sdk::trace::TracerProviderBuilder;

    use crate::error::InitError;
    use crate::export::batch;
    use crate::export::entry::{BatchInput, MetricsInput};

    /// Read every export interval.
    pub(super) fn metrics(
        mp: MeterProviderBuilder,
        input: &mut MetricsInput<'_>,
    ) -> Result<MeterProviderBuilder, InitError> {
        let exporter = opentelemetry_stdout::MetricExporter::default();
        Ok(mp.with_reader(PeriodicReader::builder(exporter).with_interval(input.settings.export_interval).build()))
    }

    pub(super) fn spans(
        tp: TracerProviderBuilder,
        input: &mut BatchInput<'_>,
    ) -> Result<TracerProviderBuilder, InitError> {
        Ok(tp.with_span_processor(batch::spans(opentelemetry_stdout::SpanExporter::default(), input.batch)))
    }

    pub(super) fn logs(
        lp: LoggerProviderBuilder,
        input: &mut BatchInput<'_>,
    ) -> Result<LoggerProviderBuilder, InitError> {
        Ok(lp.with_log_processor(batch::logs(opentelemetry_stdout::LogExporter::default(), input.batch)))
    }
}
