//! The batch processors span and log exporters go behind, built-in and plugged alike, with the
//! configuration's batch settings (`OTEL_BSP_*` / `OTEL_BLRP_*`, or the file's `batch.*`).

use crate::config::BatchSettings;

/// `exporter` behind a batch span processor with `batch` (the configuration's values, defaults
/// included: the SDK's builder would read the process environment).
pub(crate) fn spans<E>(exporter: E, batch: &BatchSettings) -> opentelemetry_sdk::trace::BatchSpanProcessor
where
    E: opentelemetry_sdk::trace::SpanExporter + 'static,
{
    let config = opentelemetry_sdk::trace::BatchConfigBuilder::default()
        .with_scheduled_delay(batch.schedule_delay)
        .with_max_queue_size(batch.max_queue_size)
        .with_max_export_batch_size(batch.max_export_batch_size);
    opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter).with_batch_config(config.build()).build()
}

/// `exporter` behind a batch log processor with `batch`, as [`spans`].
pub(crate) fn logs<E>(exporter: E, batch: &BatchSettings) -> opentelemetry_sdk::logs::BatchLogProcessor
where
    E: opentelemetry_sdk::logs::LogExporter + 'static,
{
    let config = opentelemetry_sdk::logs::BatchConfigBuilder::default()
        .with_scheduled_delay(batch.schedule_delay)
        .with_max_queue_size(batch.max_queue_size)
        .with_max_export_batch_size(batch.max_export_batch_size);
    opentelemetry_sdk::logs::BatchLogProcessor::builder(exporter).with_batch_config(config.build()).build()
}
