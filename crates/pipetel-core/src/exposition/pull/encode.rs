//! The Prometheus text exposition of the SDK's collected data: the OTel → Prometheus mapping
//! (which families, names, labels, the resource as `target_info`), written through
//! [`crate::exposition`].
//!
//! Why not the `prometheus` crate's encoder: converting every point into that crate's protobuf
//! objects costs most of a scrape, and its naming appends the unit even when the name already
//! ends with it (`pipeline.stage.bytes` → `pipeline_stage_bytes_bytes_total`). The mapping here
//! follows the rules of the OpenTelemetry Collector's Prometheus exporters, so both routes give
//! the same names:
//! - names as [`crate::exposition::translate`] translates them (the collector's rules: unit
//!   words, `_total` for monotonic sums, in the `# TYPE` line too, `_ratio` for gauges of unit
//!   `1` but not for up-down counters);
//! - labels: attribute keys as [`crate::exposition::label_key`] sanitises them (colliding keys
//!   join their values with `;`), plus the scope labels (`otel_scope_name`, `otel_scope_version`,
//!   `otel_scope_schema_url`, `otel_scope_<attribute>`); the resource becomes `target_info`;
//! - families with one name from several scopes share one `# HELP`/`# TYPE`; a name whose type
//!   conflicts with an earlier family is dropped with one warning.

use std::collections::BTreeMap;

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};

use crate::exposition::{
    attribute_labels, exemplar, join_sources, label_key, scope_block, translate, BoundsText, EncodedFamily, Format,
    LabelBlock, MetricType, Number, Page, Writer,
};

/// The exposition name of a metric and its Prometheus type; `None` for what the text format
/// cannot carry (exponential histograms) or a name of which nothing survives translation.
fn family_name(m: &Metric) -> Option<(String, &'static str)> {
    let kind = match m.data() {
        AggregatedMetrics::F64(d) => kind_of(d),
        AggregatedMetrics::U64(d) => kind_of(d),
        AggregatedMetrics::I64(d) => kind_of(d),
    }?;
    let name = translate(m.name(), m.unit(), kind);
    (!name.is_empty()).then_some((name, kind.prometheus_type()))
}

fn kind_of<T>(d: &MetricData<T>) -> Option<MetricType> {
    match d {
        MetricData::Gauge(_) => Some(MetricType::Gauge),
        MetricData::Sum(s) if s.is_monotonic() => Some(MetricType::Counter),
        MetricData::Sum(_) => Some(MetricType::UpDownSum),
        MetricData::Histogram(_) => Some(MetricType::Histogram),
        // Not representable in the classic text format.
        MetricData::ExponentialHistogram(_) => None,
    }
}

struct Family {
    kind: &'static str,
    help: String,
    body: String,
}

/// Writes the points of one instrument (`instrument`: its OTel name) into its family's body.
/// In OpenMetrics, a histogram's buckets carry the exemplars pipetel kept for that series
/// ([`exemplar::lookup`]: the SDK keeps none).
fn write_points<T: Number>(
    name: &str,
    instrument: &str,
    d: &MetricData<T>,
    scope_labels: &str,
    out: &mut String,
    format: Format,
) {
    let mut w = Writer::new(out, format);
    let mut point = |attrs: &mut dyn Iterator<Item = &KeyValue>, value: T| {
        let mut s = w.sample(name, "");
        attribute_labels(attrs, &mut s);
        s.raw(scope_labels);
        s.value(value);
    };
    match d {
        MetricData::Gauge(g) => g.data_points().for_each(|p| point(&mut p.attributes(), p.value())),
        MetricData::Sum(s) => s.data_points().for_each(|p| point(&mut p.attributes(), p.value())),
        MetricData::Histogram(h) => {
            let mut labels = String::new();
            // Bound strings are formatted once per instrument, not once per point.
            let mut bounds = BoundsText::default();
            let exemplars = format == Format::OpenMetrics && exemplar::has_instrument(instrument);
            let mut raw_bounds = Vec::new();
            for p in h.data_points() {
                labels.clear();
                let mut block = LabelBlock::new(&mut labels);
                attribute_labels(p.attributes(), &mut block);
                block.raw(scope_labels);
                let cumulative = p.bucket_counts().scan(0u64, |c, n| {
                    *c = c.saturating_add(n);
                    Some(*c)
                });
                let kept = if exemplars {
                    raw_bounds.clear();
                    raw_bounds.extend(p.bounds());
                    exemplar::lookup(instrument, p.attributes(), &raw_bounds)
                } else {
                    None
                };
                let text = bounds.update(|| p.bounds());
                w.histogram_with(name, &labels, text, cumulative, p.count(), p.sum(), |i| {
                    kept.as_ref().and_then(|k| k.get(i).copied().flatten())
                });
            }
        }
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// Writes collected metrics on `page` as the Prometheus exposition (without the closing `# EOF`
/// of OpenMetrics: the exposition sources follow). A family whose name an earlier one of
/// another type took is left out, noted on the page as a conflict.
pub(crate) fn encode(rm: &ResourceMetrics, page: &mut Page<'_>) {
    let format = page.format();
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for sm in rm.scope_metrics() {
        let scope = sm.scope().name();
        if scope == crate::global::PUSH_ONLY_SCOPE {
            continue;
        }
        let scope_labels = scope_block(sm.scope());
        for m in sm.metrics() {
            let Some((name, kind)) = family_name(m) else { continue };
            let fam = families.entry(name.clone()).or_insert_with(|| Family {
                kind,
                help: m.description().to_string(),
                body: String::new(),
            });
            if fam.kind != kind {
                page.conflict(format!(
                    "{} ({kind}) conflicts with an earlier {} of the same exposition name {name}",
                    m.name(),
                    fam.kind
                ));
                continue;
            }
            let body = &mut fam.body;
            match m.data() {
                AggregatedMetrics::F64(d) => write_points(&name, m.name(), d, &scope_labels, body, format),
                AggregatedMetrics::U64(d) => write_points(&name, m.name(), d, &scope_labels, body, format),
                AggregatedMetrics::I64(d) => write_points(&name, m.name(), d, &scope_labels, body, format),
            }
        }
    }
    // Sources join their series to a family of their name (the stage table's families do).
    let mut encoded: Vec<EncodedFamily<'_>> = families
        .iter_mut()
        .map(|(name, f)| EncodedFamily { name: name.as_str(), kind: f.kind, body: &mut f.body })
        .collect();
    join_sources(&mut encoded, page);
    drop(encoded);
    let mut w = page.writer();
    // The resource, as target_info.
    let info: BTreeMap<String, String> = rm
        .resource()
        .iter()
        .map(|(k, v)| (label_key(k.as_str()), v.as_str().into_owned()))
        .filter(|(k, _)| !k.is_empty())
        .collect();
    if !info.is_empty() {
        w.header("target_info", "gauge", "Target metadata", "");
        let mut s = w.sample("target_info", "");
        for (k, v) in &info {
            s.pair(k, v);
        }
        s.value(1u64);
    }
    for (name, fam) in &families {
        if fam.body.is_empty() {
            continue;
        }
        w.header(name, fam.kind, &fam.help, "");
        w.raw(&fam.body);
    }
}

/// The reference: the same instruments through `opentelemetry-prometheus` and the `prometheus`
/// crate's encoder must give the same samples (names, labels, values) as this encoder.
#[cfg(test)]
mod oracle {
    use std::collections::{BTreeMap, BTreeSet};

    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry::KeyValue;
    use opentelemetry_sdk::metrics::SdkMeterProvider;
    use prometheus::Encoder as _;

    use super::super::{PrometheusRender, PullReader};

    type Sample = (String, BTreeMap<String, String>, String);

    /// Parses sample lines (`name{k="v",...} value`), unescaping label values.
    fn samples(text: &str) -> BTreeSet<Sample> {
        let mut out = BTreeSet::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (head, value) = line.rsplit_once(' ').expect("value");
            let (name, labels) = match head.split_once('{') {
                Some((n, rest)) => (n.to_string(), rest.strip_suffix('}').expect("closing brace").to_string()),
                None => (head.to_string(), String::new()),
            };
            let mut map = BTreeMap::new();
            let mut chars = labels.chars().peekable();
            while chars.peek().is_some() {
                let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                assert_eq!(chars.next(), Some('"'));
                let mut v = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some('n') => v.push('\n'),
                            Some(other) => v.push(other),
                            None => {}
                        },
                        '"' => break,
                        c => v.push(c),
                    }
                }
                if chars.peek() == Some(&',') {
                    chars.next();
                }
                map.insert(key.trim().to_string(), v);
            }
            let value = value.parse::<f64>().map(|v| v.to_string()).unwrap_or_else(|_| value.to_string());
            out.insert((name, map, value));
        }
        out
    }

    #[test]
    fn same_samples_as_the_reference_encoder_for_every_instrument_kind() {
        let registry = prometheus::Registry::new();
        let reference =
            opentelemetry_prometheus::exporter().with_registry(registry.clone()).build().expect("reference exporter");
        let ours = PullReader::new();
        let provider = SdkMeterProvider::builder()
            .with_resource(
                opentelemetry_sdk::Resource::builder_empty()
                    .with_attribute(KeyValue::new("service.name", "oracle"))
                    .build(),
            )
            .with_reader(reference)
            .with_reader(ours.clone())
            .build();
        let meter = provider.meter("oracle-scope");
        let attrs =
            [KeyValue::new("stage.name", "to\"ken\\ize\nnow"), KeyValue::new("shard", 3), KeyValue::new("ok", true)];
        meter.u64_counter("jobs.done").with_unit("{job}").with_description("Jobs done").build().add(5, &attrs);
        meter.f64_counter("energy.used").with_unit("J").build().add(2.5, &attrs);
        meter.i64_up_down_counter("queue.depth").with_unit("{item}").build().add(-3, &attrs);
        meter.f64_up_down_counter("balance").build().add(1.25, &[]);
        meter.u64_gauge("temperature").with_unit("Cel").build().record(71, &attrs);
        meter.f64_gauge("load").with_unit("1").build().record(0.75, &attrs);
        meter.i64_gauge("offset").build().record(-7, &[]);
        let h = meter.f64_histogram("request.duration").with_unit("s").with_boundaries(vec![0.1, 1.0, 10.0]).build();
        for v in [0.05, 0.5, 0.5, 5.0, 50.0] {
            h.record(v, &attrs);
        }
        meter
            .u64_histogram("payload.size")
            .with_unit("By")
            .with_boundaries(vec![100.0, 1000.0])
            .build()
            .record(512, &[]);
        let _c = meter
            .u64_observable_counter("polls")
            .with_callback(|o| o.observe(9, &[KeyValue::new("source", "a")]))
            .build();
        let _g =
            meter.f64_observable_gauge("utilization").with_unit("1").with_callback(|o| o.observe(0.5, &[])).build();
        let _u = meter.i64_observable_up_down_counter("inflight").with_callback(|o| o.observe(4, &[])).build();

        let mut reference_text = Vec::new();
        prometheus::TextEncoder::new().encode(&registry.gather(), &mut reference_text).expect("reference encode");
        let reference_text = String::from_utf8(reference_text).expect("utf-8");
        // The encoder alone: exposition sources other tests install for a moment (the stage
        // table's families) are not the reference's.
        let ours_text = ours.encode_for_tests(crate::exposition::Format::Text);
        let (want, got) = (samples(&reference_text), samples(&ours_text));
        assert_eq!(got, want, "reference:\n{reference_text}\nours:\n{ours_text}");
        assert!(got.len() > 15, "{got:?}");
        // Same families and types.
        let types =
            |t: &str| t.lines().filter(|l| l.starts_with("# TYPE")).map(str::to_string).collect::<BTreeSet<_>>();
        assert_eq!(types(&ours_text), types(&reference_text));
    }

    struct Extra;
    impl crate::exposition::ExpositionSource for Extra {
        fn write_exposition(&self, page: &mut crate::exposition::Page<'_>) {
            page.text()
                .push_str("# TYPE extra_latency_seconds summary\nextra_latency_seconds{quantile=\"0.5\"} 0.25\n");
        }
    }

    #[test]
    fn push_only_metrics_stay_out_and_exposition_sources_come_in() {
        let ours = PullReader::new();
        let provider = SdkMeterProvider::builder().with_reader(ours.clone()).build();
        provider.meter(crate::global::PUSH_ONLY_SCOPE).u64_counter("hidden").build().add(1, &[]);
        provider.meter("shown").u64_counter("shown").build().add(1, &[]);
        let source: std::sync::Arc<dyn crate::exposition::ExpositionSource> = std::sync::Arc::new(Extra);
        crate::exposition::add_exposition_source(&source);
        let text = PrometheusRender::new(ours.clone()).render();
        assert!(text.contains("shown_total{") && !text.contains("hidden"), "{text}");
        assert!(text.contains("extra_latency_seconds{quantile=\"0.5\"} 0.25"), "{text}");
        drop(source);
        assert!(
            !PrometheusRender::new(ours).render().contains("extra_latency"),
            "a dropped source leaves the exposition"
        );
    }

    #[test]
    fn scope_labels_are_the_collectors() {
        let ours = PullReader::new();
        let provider = SdkMeterProvider::builder().with_reader(ours.clone()).build();
        let scope = opentelemetry::InstrumentationScope::builder("lib")
            .with_version("1.2")
            .with_schema_url("https://opentelemetry.io/schemas/1.34.0")
            .with_attributes([KeyValue::new("team.name", "infra")])
            .build();
        let meter = provider.meter_with_scope(scope);
        meter.i64_up_down_counter("hw.status").with_unit("1").build().add(1, &[KeyValue::new("hw.state", "ok")]);
        let text = PrometheusRender::new(ours).render();
        let line = text.lines().find(|l| l.starts_with("hw_status{")).unwrap_or_else(|| panic!("{text}"));
        for label in [
            "hw_state=\"ok\"",
            "otel_scope_name=\"lib\"",
            "otel_scope_version=\"1.2\"",
            "otel_scope_schema_url=\"https://opentelemetry.io/schemas/1.34.0\"",
            "otel_scope_team_name=\"infra\"",
        ] {
            assert!(line.contains(label), "{label} missing: {line}");
        }
        assert!(text.contains("# TYPE hw_status gauge\n"), "an up-down counter of unit 1 gets no _ratio: {text}");
    }

    #[test]
    fn a_name_ending_in_its_unit_gets_no_second_suffix() {
        let ours = PullReader::new();
        let provider = SdkMeterProvider::builder().with_reader(ours.clone()).build();
        let meter = provider.meter("s");
        meter.u64_counter("pipeline.stage.bytes").with_unit("By").build().add(1, &[]);
        meter.f64_histogram("task.duration_seconds").with_unit("s").build().record(1.0, &[]);
        let text = PrometheusRender::new(ours).render();
        assert!(text.contains("\npipeline_stage_bytes_total{otel_scope_name=\"s\"} 1\n"), "{text}");
        assert!(text.contains("task_duration_seconds_count{"), "{text}");
        assert!(!text.contains("bytes_bytes") && !text.contains("seconds_seconds"), "{text}");
    }
}
