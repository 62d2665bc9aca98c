//! A library that depends on `pipetel-core` alone measures its functions and marks its stages;
//! what it records reaches the meter provider the application installed (here an SDK provider
//! with the core's pull reader, as `pipetel::init` installs one).

use opentelemetry_sdk::metrics::SdkMeterProvider;
use pipetel_core::exposition::pull::{PrometheusRender, PullReader};

#[pipetel_core::measure]
fn tokenize(text: &str) -> usize {
    text.split_whitespace().count()
}

#[test]
fn measured_functions_record_through_the_core_alone() {
    let reader = PullReader::new();
    let render = PrometheusRender::new(reader.clone());
    let provider = SdkMeterProvider::builder().with_reader(reader).build();
    opentelemetry::global::set_meter_provider(provider);

    assert_eq!(tokenize("one two three"), 3);
    assert_eq!(tokenize("four"), 1);

    let page = render.render();
    let calls = page
        .lines()
        .find(|l| l.starts_with("function_calls_total{") && l.contains("function=\"tokenize\""))
        .unwrap_or_else(|| panic!("no call count of tokenize in:\n{page}"));
    assert!(calls.ends_with(" 2"), "{calls}");
}
