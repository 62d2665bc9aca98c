//! Exporters of the application's own, plugged into `init`: a span exporter, a log exporter and
//! a push metric exporter written here, each printing one line per item it is handed, in place of
//! the built-in exporters (the configured ones are switched off), and a small stage of shards
//! whose spans, rows and metrics they receive. Stops by itself.
//!
//! ```text
//! cargo run --example custom_exporter -- --shards 4 --items 1000
//! ```
//! `--help` lists the flags. `--beside` keeps the configured exporters too (by default the pull
//! endpoint on localhost:9464), so the plugged ones run beside them.

mod cli;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pipetel::opentelemetry_sdk::error::OTelSdkResult;
use pipetel::opentelemetry_sdk::logs::{LogBatch, LogExporter};
use pipetel::opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use pipetel::opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use pipetel::opentelemetry_sdk::metrics::Temporality;
use pipetel::opentelemetry_sdk::trace::{SpanData, SpanExporter};

fn main() -> std::process::ExitCode {
    cli::exit_code(run(parse_args()))
}

struct Args {
    shards: u32,
    items: u64,
    beside: bool,
}

fn parse_args() -> Args {
    use clap::{value_parser, Command};
    let m = Command::new("custom_exporter")
        .about("Exporters written in the program, plugged into pipetel::init_with; prints what each receives")
        .after_help(
            "Every pipetel variable applies; OTEL_METRIC_EXPORT_INTERVAL and OTEL_BSP_* reach the plugged exporters too",
        )
        .arg(cli::number("shards", "Shards of the stage", "4").value_parser(value_parser!(u32)))
        .arg(cli::number("items", "Items each shard records", "1000").value_parser(value_parser!(u64)))
        .arg(cli::flag("beside", "Keep the configured exporters and run the plugged ones beside them"))
        .get_matches();
    Args {
        shards: m.get_one("shards").copied().unwrap_or(4),
        items: m.get_one("items").copied().unwrap_or(1000),
        beside: m.get_flag("beside"),
    }
}

/// Prints each span it is handed: `span NAME DURATION`.
#[derive(Debug, Default)]
struct PrintSpans;

impl SpanExporter for PrintSpans {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        for span in batch {
            let took = span.end_time.duration_since(span.start_time).unwrap_or_default();
            println!("span {} {:.3} ms", span.name, took.as_secs_f64() * 1e3);
        }
        Ok(())
    }
}

/// Prints each log record it is handed: `log EVENT_NAME BODY`.
#[derive(Debug, Default)]
struct PrintLogs;

impl LogExporter for PrintLogs {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        for (record, _scope) in batch.iter() {
            let event = record.event_name().unwrap_or("-");
            let body = record.body().map(|b| format!("{b:?}")).unwrap_or_default();
            println!("log {event} {body}");
        }
        Ok(())
    }
}

/// Prints the sums of pipetel's stage metrics at each export (`metric NAME VALUE`), and counts
/// exports.
#[derive(Debug, Default)]
struct PrintMetrics {
    exports: Arc<AtomicU64>,
}

impl PushMetricExporter for PrintMetrics {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        self.exports.fetch_add(1, Ordering::Relaxed);
        for scope in metrics.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name().starts_with("pipeline.stage.")) {
                if let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() {
                    let total: u64 = sum.data_points().map(|p| p.value()).sum();
                    println!("metric {} {total}", metric.name());
                }
            }
        }
        Ok(())
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: std::time::Duration) -> OTelSdkResult {
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = pipetel::Config::from_env()?.with_service_name("custom_exporter");
    if !args.beside {
        config = config.with_traces_exporters([]).with_logs_exporters([]).with_metrics_exporters([]);
    }
    let exports = Arc::new(AtomicU64::new(0));
    let options = pipetel::InitOptions::new()
        .with_span_exporter(PrintSpans)
        .with_log_exporter(PrintLogs)
        .with_metric_exporter(PrintMetrics { exports: exports.clone() });
    let telemetry = pipetel::init_with(config, options)?;

    let stage = pipetel::stage("tokenize").shards(args.shards).start();
    std::thread::scope(|s| {
        for i in 0..args.shards {
            let stage = &stage;
            s.spawn(move || {
                let shard = stage.shard(i).start();
                for _ in 0..args.items {
                    shard.record(1, 64);
                }
                shard.finish();
            });
        }
    });
    let row = stage.finish();
    tracing::info!(items = row.items, "stage tokenize finished");
    // The guard's flush hands everything to the plugged exporters; dropping it shuts them down.
    telemetry.force_flush()?;
    println!("exports {}", exports.load(Ordering::Relaxed));
    Ok(())
}
