//! `#[pipetel::measure]` histograms keep exemplars: a sync and an async call made inside a
//! sampled trace leave, on their buckets in the pull endpoint's OpenMetrics, the trace id of
//! that trace and the span id of the call's own span (not its parent's), and the recorded
//! value (the async call's output size).

use opentelemetry::trace::TraceContextExt as _;
use pipetel::config::TraceExporter;
use pipetel::Config;

#[pipetel::measure]
fn exemplar_step_sync() -> u32 {
    std::thread::sleep(std::time::Duration::from_millis(1));
    1
}

#[pipetel::measure(output_size = ret.len())]
async fn exemplar_step_async() -> Vec<u8> {
    tokio::task::yield_now().await;
    vec![0; 100]
}

/// The exemplar `(trace_id, span_id, value)` on the `metric` bucket line of `function`.
fn exemplar_of(om: &str, metric: &str, function: &str) -> (String, String, f64) {
    let line = om
        .lines()
        .find(|l| l.starts_with(metric) && l.contains(&format!("function=\"{function}\"")) && l.contains(" # {"))
        .unwrap_or_else(|| panic!("no exemplar on {metric} of {function}:\n{om}"));
    let ids = line.split(" # {").nth(1).expect("exemplar");
    let field =
        |key: &str| ids.split(&format!("{key}=\"")).nth(1).and_then(|r| r.split('"').next()).expect("id").to_string();
    let value = ids.split("} ").nth(1).and_then(|r| r.split(' ').next()).and_then(|v| v.parse().ok()).expect("value");
    (field("trace_id"), field("span_id"), value)
}

#[test]
fn measured_calls_in_a_sampled_trace_leave_their_ids_on_their_buckets() {
    let telemetry = pipetel::init(
        Config::default()
            .with_service_name("measure-exemplars")
            .with_prometheus_port(0)
            .with_traces_exporters([TraceExporter::Console])
            .with_console_log(false),
    )
    .expect("init");
    let root = tracing::info_span!("exemplar_root");
    let (trace_id, root_span_id) = root.in_scope(|| {
        let (trace, span) = opentelemetry::Context::map_current(|cx| {
            let sc = cx.span().span_context().clone();
            (sc.trace_id().to_string(), sc.span_id().to_string())
        });
        exemplar_step_sync();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        assert_eq!(rt.block_on(exemplar_step_async()).len(), 100);
        (trace, span)
    });
    assert_ne!(trace_id, "00000000000000000000000000000000", "the root span is sampled");
    let om = telemetry.prometheus_render().expect("pull endpoint").render_openmetrics();
    for function in ["exemplar_step_sync", "exemplar_step_async"] {
        let (trace, span, value) = exemplar_of(&om, "function_duration_seconds_bucket{", function);
        assert_eq!(trace, trace_id, "{function}");
        assert!(span != root_span_id && span.len() == 16, "{function}: the call's own span, not {root_span_id}");
        assert!(value > 0.0, "{function}: {value}");
    }
    let (trace, _, value) = exemplar_of(&om, "function_output_size_bytes_bucket{", "exemplar_step_async");
    assert_eq!((trace.as_str(), value), (trace_id.as_str(), 100.0));
    // Outside any span: counted, no exemplar added.
    exemplar_step_sync();
    let text = telemetry.prometheus_render().expect("pull endpoint").render();
    assert!(!text.contains(" # {"), "the text format carries no exemplars");
}
