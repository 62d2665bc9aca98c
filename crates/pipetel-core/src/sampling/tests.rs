use std::sync::atomic::Ordering;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

use super::gate::{ratio_bound, ratio_keeps};
use super::held::HeldSpans;
use super::*;

/// Runs `work` under registry + gate + bridge with `sampler`; returns the exported spans' names.
fn run(sampler: Sampler, follow_remote: bool, work: impl FnOnce()) -> Vec<String> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_sampler(sampler).with_simple_exporter(exporter.clone()).build();
    let gate = SamplingGate::new(tracing_opentelemetry::layer().with_tracer(provider.tracer("t")), follow_remote);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(gate), work);
    let _ = provider.force_flush();
    let mut names: Vec<String> =
        exporter.get_finished_spans().unwrap_or_default().into_iter().map(|s| s.name.to_string()).collect();
    names.sort();
    names
}

/// As `init` composes it for a ratio sampler: roots decided at creation. Returns the exported
/// spans.
fn run_deciding_roots(ratio: f64, parent_based: bool, work: impl FnOnce()) -> Vec<opentelemetry_sdk::trace::SpanData> {
    let exporter = InMemorySpanExporter::default();
    let sampler = match parent_based {
        true => Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))),
        false => Sampler::TraceIdRatioBased(ratio),
    };
    let provider = SdkTracerProvider::builder()
        .with_sampler(sampler)
        .with_id_generator(PinnedTraceIds::default())
        .with_simple_exporter(exporter.clone())
        .build();
    let bridge = tracing_opentelemetry::layer().with_tracer(GateTracer::new(&provider, "t"));
    let gate = SamplingGate::new(bridge, parent_based).deciding_roots(ratio);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(gate), work);
    let _ = provider.force_flush();
    exporter.get_finished_spans().unwrap_or_default()
}

fn remote(traceparent: &str) -> opentelemetry::Context {
    TraceContextPropagator::new()
        .extract(&std::collections::HashMap::from([("traceparent".to_string(), traceparent.to_string())]))
}

#[test]
fn roots_are_decided_at_creation_on_the_trace_id_the_sdk_then_uses() {
    const ROOTS: usize = 400;
    let bound = ratio_bound(0.5);
    let mut held = Vec::new();
    let spans = run_deciding_roots(0.5, true, || {
        for _ in 0..ROOTS {
            let root = tracing::info_span!("root");
            let _in_root = root.enter();
            let _child = tracing::info_span!("child").entered();
            if !root.context().span().span_context().is_valid() {
                // Held back at creation: a context of its own, not sampled, for propagation.
                let sc = span_context(&root).expect("a dropped root has a marker");
                assert!(sc.is_valid() && !sc.is_sampled() && !ratio_keeps(bound, sc.trace_id()));
                held.push(sc.trace_id());
            }
        }
    });
    let roots: Vec<_> = spans.iter().filter(|s| s.name == "root").collect();
    // Binomial(400, 0.5): outside 120..=280 with probability below 1e-9.
    assert!((120..=280).contains(&roots.len()), "{} of {ROOTS} roots kept", roots.len());
    assert_eq!(roots.len() + held.len(), ROOTS);
    for root in &roots {
        // The SDK started the root with the trace id the gate drew and judged.
        assert!(ratio_keeps(bound, root.span_context.trace_id()), "{:?}", root.span_context);
        let children: Vec<_> = spans.iter().filter(|s| s.parent_span_id == root.span_context.span_id()).collect();
        assert_eq!(children.len(), 1, "the kept root's child arrives with it");
        assert_eq!(children[0].span_context.trace_id(), root.span_context.trace_id());
    }
    assert_eq!(spans.len(), roots.len() * 2, "children of dropped roots are dropped too");
}

#[test]
fn a_plain_ratio_sampler_keeps_as_many_roots_as_the_sdk_alone() {
    // Without the pinned id the SDK would draw again: about ratio² of the roots.
    let spans = run_deciding_roots(0.5, false, || {
        for _ in 0..400 {
            let _root = tracing::info_span!("root").entered();
        }
    });
    assert!((120..=280).contains(&spans.len()), "{} of 400 roots kept", spans.len());
}

#[test]
fn set_parent_on_a_root_works_where_documented() {
    let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    // `with_remote_parent`: decided with the remote parent, under a ratio that drops every root.
    let spans = run_deciding_roots(0.0, true, || {
        let request = with_remote_parent(&remote(sampled), || tracing::info_span!("request"));
        let _in_request = request.enter();
        let _child = tracing::info_span!("child").entered();
        let ignored = with_remote_parent(&remote(unsampled), || tracing::info_span!("unsampled"));
        let sc = span_context(&ignored).expect("marker");
        assert_eq!(sc.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(!sc.is_sampled());
        // A root that exists before its parent is given was dropped at creation: ignored.
        let late = tracing::info_span!(parent: None, "late");
        assert!(late.set_parent(remote(sampled)).is_ok());
        late.in_scope(|| {});
    });
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["child", "request"]);
    let request = spans.iter().find(|s| s.name == "request").expect("request");
    assert_eq!(request.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(request.span_context.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
    // A remote context attached while the span is created decides as well.
    let spans = run_deciding_roots(0.0, true, || {
        let _attached = remote(sampled).attach();
        let _request = tracing::info_span!("attached").entered();
    });
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
    // A plain ratio sampler judges the remote trace id (low bits 0: kept by any ratio above 0).
    let spans = run_deciding_roots(0.5, false, || {
        let cx = remote("00-4bf92f3577b34da60000000000000000-00f067aa0ba902b7-00");
        with_remote_parent(&cx, || tracing::info_span!("request")).in_scope(|| {});
    });
    assert_eq!(spans.len(), 1);
    // Samplers that keep roots leave `set_parent` as it always was.
    let names = run(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), true, || {
        let span = tracing::info_span!("late");
        assert!(span.set_parent(remote(unsampled)).is_ok());
        span.in_scope(|| {});
    });
    assert!(names.is_empty(), "the unsampled remote parent decided: {names:?}");
}

#[test]
fn markers_past_the_table_or_with_a_trace_state_go_to_extensions_and_still_propagate() {
    let boxed =
        || tracing::dispatcher::get_default(|d| d.downcast_ref::<HeldSpans>().map(|h| h.boxed.load(Ordering::Relaxed)));
    let spans = run_deciding_roots(0.0, true, || {
        let root = tracing::info_span!("root");
        let trace_id = span_context(&root).expect("a dropped root has a marker").trace_id();
        let _in_root = root.enter();
        let open: Vec<_> = (0..crate::sync::SPAN_TABLE_SLOTS * 2).map(|_| tracing::info_span!("child")).collect();
        assert!(boxed().is_some_and(|n| n > 0), "more spans held back than the table has slots");
        for span in &open {
            assert_eq!(span_context(span).map(|sc| sc.trace_id()), Some(trace_id));
            span.in_scope(|| {
                let grandchild = tracing::info_span!("grandchild");
                assert_eq!(
                    span_context(&grandchild).map(|sc| (sc.trace_id(), sc.is_sampled())),
                    Some((trace_id, false))
                );
            });
        }
        drop(open);
        assert_eq!(boxed(), Some(0), "markers in extensions are released at close");
        let cx = TraceContextPropagator::new().extract(&std::collections::HashMap::from([
            ("traceparent".to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_string()),
            ("tracestate".to_string(), "vendor=v1".to_string()),
        ]));
        let stated = with_remote_parent(&cx, || tracing::info_span!("stated"));
        let sc = span_context(&stated).expect("marker");
        assert_eq!(
            (sc.trace_state().header(), sc.is_remote(), sc.is_sampled()),
            ("vendor=v1".to_string(), true, false)
        );
        assert_eq!(boxed(), Some(1));
        drop(stated);
        assert_eq!(boxed(), Some(0));
    });
    assert!(spans.is_empty(), "{spans:?}");
}

fn traceparent(span: &tracing::Span) -> Option<String> {
    let sc = span_context(span)?;
    let mut carrier = std::collections::HashMap::new();
    TraceContextPropagator::new()
        .inject_context(&opentelemetry::Context::new().with_remote_span_context(sc), &mut carrier);
    carrier.remove("traceparent")
}

#[test]
fn children_of_an_unsampled_span_skip_the_bridge_and_keep_its_trace() {
    let mut seen = None;
    let names = run(Sampler::TraceIdRatioBased(0.0), false, || {
        let root = tracing::info_span!("root");
        let _in_root = root.enter();
        let root_sc = root.context().span().span_context().clone();
        assert!(root_sc.is_valid() && !root_sc.is_sampled(), "the bridge decided the root");
        let child = tracing::info_span!("child");
        let explicit = tracing::info_span!(parent: &child, "explicit");
        {
            let _in_child = child.enter();
            let grandchild = tracing::info_span!("grandchild");
            // Held back: no context of their own, their unsampled parent's for propagation.
            assert!(!child.context().span().span_context().is_valid());
            for held in [&child, &explicit, &grandchild] {
                let sc = span_context(held).expect("marker");
                assert_eq!(sc.trace_id(), root_sc.trace_id());
                assert!(!sc.is_sampled());
            }
            seen = traceparent(&grandchild);
            tracing::error!("an event in a held-back span");
            grandchild.record("x", 1);
        }
        // A new root is decided afresh, not by the context around it.
        let fresh = tracing::info_span!(parent: None, "fresh");
        assert!(fresh.context().span().span_context().is_valid());
    });
    assert!(names.is_empty(), "{names:?}");
    let tp = seen.expect("a traceparent");
    assert!(tp.ends_with("-00"), "{tp}");
}

#[test]
fn sampled_traces_are_untouched() {
    let names = run(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), true, || {
        let root = tracing::info_span!("root");
        let _in_root = root.enter();
        let child = tracing::info_span!("child");
        let _in_child = child.enter();
        let _grandchild = tracing::info_span!(parent: &child, "grandchild").entered();
        assert!(span_context(&child).expect("tracked").is_sampled());
    });
    assert_eq!(names, ["child", "grandchild", "root"]);
}

#[test]
fn an_unsampled_remote_parent_decides_only_for_parent_based_samplers() {
    let remote = TraceContextPropagator::new().extract(&std::collections::HashMap::from([(
        "traceparent".to_string(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_string(),
    )]));
    let work = |remote: opentelemetry::Context| {
        move || {
            let _attached = remote.attach();
            let _request = tracing::info_span!("request").entered();
        }
    };
    assert!(run(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), true, work(remote.clone())).is_empty());
    // A ratio sampler decides on the trace id whatever the remote flag says: the bridge decides.
    assert_eq!(run(Sampler::TraceIdRatioBased(1.0), false, work(remote)), ["request"]);
}

#[test]
fn a_held_back_span_entered_elsewhere_keeps_its_children_out() {
    let names = run(Sampler::TraceIdRatioBased(0.0), false, || {
        let root = tracing::info_span!("root");
        let held = root.in_scope(|| tracing::info_span!("held"));
        drop(root);
        // Entered with no OTel context current: its children still inherit its decision.
        let _in_held = held.enter();
        let child = tracing::info_span!("child");
        assert!(span_context(&child).is_some_and(|sc| !sc.is_sampled()));
    });
    assert!(names.is_empty(), "{names:?}");
}
