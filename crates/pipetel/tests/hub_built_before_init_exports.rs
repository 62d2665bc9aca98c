//! A snapshot hub, a registry and a measured function made before `init` start exporting once
//! it runs: they are bound again to the meter provider `init` installs.
//! Its own test binary: `init` is once per process.
#![cfg(feature = "prometheus")]

use pipetel::hub::{HubConfig, SnapshotHub};
use pipetel::recorders::{Counter, Envelope, Family};
use pipetel::Config;

#[pipetel::measure]
fn early() -> u32 {
    7
}

#[test]
fn a_hub_a_registry_and_a_measured_function_made_before_init_export_after_it() {
    let hub = SnapshotHub::new(HubConfig::default());
    let family = Family::counter("early.items", "Items from a worker", "{item}", &["stage"]).expect("family");
    let items = Counter::new(family).expect("counter");
    items.add(&["tokenize"], 128.0).expect("add");
    hub.ingest(Envelope::new("worker-1", 1, vec![items.snapshot()])).expect("ingest");
    let registry = pipetel::Registry::new("early").expect("registry");
    registry.counter("jobs", "Jobs").expect("counter").inc_by(4.0);
    assert_eq!(early(), 7);

    let telemetry = pipetel::init(Config::default().with_prometheus_port(0)).expect("init");
    assert_eq!(early(), 7);
    let text = telemetry.prometheus_render().expect("render").render();
    assert!(text.contains("early_items_total{stage=\"tokenize\",otel_scope_name=\"pipetel\"} 128"), "{text}");
    assert!(text.contains("early_jobs_total{otel_scope_name=\"pipetel\"} 4"), "{text}");
    assert!(text.contains("function_calls_total{function=\"early\""), "{text}");

    // Families the hub learns after `init` export too.
    let later = Counter::new(Family::counter("later.items", "Later", "{item}", &[]).expect("family")).expect("counter");
    later.add(&[], 2.0).expect("add");
    hub.ingest(Envelope::new("worker-1", 2, vec![items.snapshot(), later.snapshot()])).expect("ingest");
    let text = telemetry.prometheus_render().expect("render").render();
    assert!(text.contains("later_items_total{otel_scope_name=\"pipetel\"} 2"), "{text}");
}
