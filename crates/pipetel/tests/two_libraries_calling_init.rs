//! Two libraries in one program both call `init`: the first installs pipetel, the second gets
//! `InitError::AlreadyInitialized` and changes nothing, and the second library's instruments
//! export through the first installation anyway.
//! Its own test binary: `init` is once per process.
#![cfg(feature = "prometheus")]

use pipetel::{Config, InitError, Telemetry};

/// What a library does: set up telemetry unless the program already did.
fn library_start(name: &str) -> Result<Option<Telemetry>, InitError> {
    match pipetel::init(Config::default().with_service_name(name).with_prometheus_port(0)) {
        Ok(telemetry) => Ok(Some(telemetry)),
        // Someone else installed pipetel: its guard lives elsewhere, go on with it.
        Err(InitError::AlreadyInitialized) => Ok(None),
        Err(other) => Err(other),
    }
}

#[test]
fn the_second_init_is_refused_and_its_instruments_export_through_the_first() {
    let first = library_start("library-a").expect("first init").expect("the first library installs pipetel");
    let second = library_start("library-b").expect("second init is not a failure");
    assert!(second.is_none(), "the second library gets AlreadyInitialized");
    let err = pipetel::init(Config::default()).expect_err("a plain second init");
    assert!(err.to_string().contains("already initialised"), "{err}");

    // library-b's instruments, made after the refused init, export through library-a's setup.
    let registry = pipetel::Registry::new("library_b").expect("registry");
    registry.counter("jobs", "Jobs").expect("counter").inc_by(3.0);
    pipetel::meter().u64_counter("library_b.calls").build().add(2, &[]);
    let text = first.prometheus_render().expect("render").render();
    assert!(text.contains("library_b_jobs_total{otel_scope_name=\"pipetel\"} 3"), "{text}");
    assert!(text.contains("library_b_calls_total{otel_scope_name=\"pipetel\"} 2"), "{text}");
    let resource = first.resource().expect("resource");
    let name = resource.get(&pipetel::opentelemetry::Key::new("service.name")).map(|v| v.to_string());
    assert_eq!(name.as_deref(), Some("library-a"), "the first installation's resource stays");
}
