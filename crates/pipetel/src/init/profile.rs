//! The sampling profiler (`PIPETEL_PROFILE=cpu`): its exporter is built with the others (a TLS
//! file that cannot be read fails `init`); the sampling starts once the subscriber exists, so
//! its warnings are seen. It writes beside the rows store and sends OTLP profiles when an OTLP
//! endpoint applies to them.

use std::time::{Duration, Instant};

use pipetel_core::settings::ProfileMode;

use crate::config::Settings;
use crate::error::InitError;
use crate::export::profiles::ProfilesExporter;

/// The profiler of a running installation: its exporter until it starts, then the profiler.
#[derive(Debug)]
pub(super) struct Profiling {
    exporter: Option<ProfilesExporter>,
    running: Option<pipetel_profile::CpuProfiler>,
}

/// The profiler's exporter, when the profiler is on; `None` when it is off.
///
/// # Errors
/// The profiles exporter cannot be built (as the other OTLP exporters).
pub(super) fn prepare(settings: &Settings) -> Result<Option<Profiling>, InitError> {
    if settings.profile.0 != ProfileMode::Cpu {
        return Ok(None);
    }
    let exporter = ProfilesExporter::from_config(settings).transpose()?;
    Ok(Some(Profiling { exporter, running: None }))
}

/// Starts sampling; a profiler that cannot start is one warning, and the program runs on.
pub(super) fn start(profiling: &mut Profiling, settings: &Settings, resource: &opentelemetry_sdk::Resource) {
    let store = pipetel_core::pipeline::runtime::rows_store(&settings.pipeline, &settings.resource.service_name)
        .map(|rows| pipetel_rows::profile::beside(&rows));
    let export = profiling.exporter.take().map(|exporter| exporting(exporter, resource.clone()));
    if store.is_none() && export.is_none() {
        tracing::warn!(
            target: "pipetel",
            "PIPETEL_PROFILE=cpu, but the samples would go nowhere: no rows store (PIPETEL_ROWS_DIR or \
             PIPETEL_ROWS_FILE) and no OTLP endpoint for profiles; the profiler stays off"
        );
        return;
    }
    let profile_settings = pipetel_profile::Settings {
        hz: settings.profile.1,
        store,
        rotation: settings.pipeline.rows_rotation,
        host: pipetel_core::pipeline::answers::host_name().to_string(),
        ..Default::default()
    };
    match pipetel_profile::start(profile_settings, export) {
        Ok(profiler) => profiling.running = Some(profiler),
        Err(error) => tracing::warn!(target: "pipetel", %error, "the CPU profiler is off"),
    }
}

/// Hands each written batch to the exporter; a failure is logged at most once a minute.
fn exporting(exporter: ProfilesExporter, resource: opentelemetry_sdk::Resource) -> pipetel_profile::Export {
    let mut last_warning: Option<Instant> = None;
    let mut failed = 0u64;
    Box::new(move |lines| {
        if let Err(cause) = exporter.export(&resource, lines) {
            failed += 1;
            if last_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                last_warning = Some(Instant::now());
                tracing::warn!(target: "pipetel", failed_exports = failed, "{cause}");
            }
        }
    })
}
