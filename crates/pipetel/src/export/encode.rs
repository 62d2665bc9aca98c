//! The Prometheus text exposition, written straight from the SDK's collected data.
//!
//! Why not the `prometheus` crate's encoder: converting every point into that crate's protobuf
//! objects costs most of a scrape, and its naming appends the unit even when the name already
//! ends with it (`pipeline.stage.bytes` → `pipeline_stage_bytes_bytes_total`). The translation
//! here follows the OTel ↔ Prometheus compatibility rules:
//! - names: characters outside `[a-zA-Z0-9_:]` become `_`, runs of `_` collapse, a leading digit
//!   gets a `_` prefix; the unit's Prometheus word (`s` → `seconds`, `By` → `bytes`, gauge `1` →
//!   `ratio`, ...) is appended unless the name already ends with it; `{annotations}` add
//!   nothing; monotonic sums get `_total` (in the `# TYPE` line too, as the 0.0.4 format's
//!   clients write it);
//! - labels: attribute keys sanitised the same way (colliding keys join their values with `;`),
//!   plus `otel_scope_name`; the resource becomes `target_info`;
//! - families with one name from several scopes share one `# HELP`/`# TYPE`; a name whose type
//!   conflicts with an earlier family is dropped with one warning.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use opentelemetry::{KeyValue, Value};

pub(crate) use super::format::{escape_help, escape_label_value, write_f64};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};

/// The Prometheus word a unit adds to a name, per the compatibility specification.
fn unit_word(unit: &str, gauge_like: bool) -> Option<String> {
    let unit = unit.trim();
    if unit.is_empty() || (unit.starts_with('{') && unit.ends_with('}')) {
        return None;
    }
    if unit == "1" {
        return gauge_like.then(|| "ratio".to_string());
    }
    let word = |u: &str| -> String {
        match u {
            "d" => "days",
            "h" => "hours",
            "min" => "minutes",
            "s" => "seconds",
            "ms" => "milliseconds",
            "us" => "microseconds",
            "ns" => "nanoseconds",
            "By" => "bytes",
            "KiBy" => "kibibytes",
            "MiBy" => "mebibytes",
            "GiBy" => "gibibytes",
            "TiBy" => "tibibytes",
            "KBy" => "kilobytes",
            "MBy" => "megabytes",
            "GBy" => "gigabytes",
            "TBy" => "terabytes",
            "m" => "meters",
            "V" => "volts",
            "A" => "amperes",
            "J" => "joules",
            "W" => "watts",
            "g" => "grams",
            "Cel" => "celsius",
            "Hz" => "hertz",
            "%" => "percent",
            other => return sanitize(other.trim_matches(|c| c == '{' || c == '}')),
        }
        .to_string()
    };
    let out = match unit.split_once('/') {
        Some((a, b)) => {
            let per = match b {
                "s" => "second".to_string(),
                "m" => "minute".to_string(),
                "h" => "hour".to_string(),
                "d" => "day".to_string(),
                other => word(other),
            };
            if a.starts_with('{') {
                format!("per_{per}")
            } else {
                format!("{}_per_{per}", word(a))
            }
        }
        None => word(unit),
    };
    (!out.is_empty()).then_some(out)
}

/// Replaces characters outside `[a-zA-Z0-9_:]` with `_`, collapses runs of `_`, and prefixes a
/// leading digit.
pub(crate) fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn label_key(key: &str) -> String {
    let k = sanitize(key);
    // Keys starting with `__` are reserved by Prometheus.
    if k.starts_with("__") {
        format!("key{k}")
    } else {
        k
    }
}

/// The exposition name of a histogram family named `name` with `unit` (for renderers of
/// histograms that do not come from OTel instruments).
pub(crate) fn histogram_name(name: &str, unit: &str) -> String {
    let mut out = sanitize(name);
    if let Some(word) = unit_word(unit, false) {
        if !out.ends_with(&format!("_{word}")) && out != word {
            out.push('_');
            out.push_str(&word);
        }
    }
    out
}

/// The exposition name of a metric and its Prometheus type.
fn family_name(m: &Metric) -> Option<(String, &'static str)> {
    let (kind, gauge_like, counter) = match m.data() {
        AggregatedMetrics::F64(d) => kind_of(d),
        AggregatedMetrics::U64(d) => kind_of(d),
        AggregatedMetrics::I64(d) => kind_of(d),
    }?;
    let mut name = sanitize(m.name());
    if let Some(word) = unit_word(m.unit(), gauge_like) {
        if !name.ends_with(&format!("_{word}")) && name != word {
            name.push('_');
            name.push_str(&word);
        }
    }
    if counter && !name.ends_with("_total") {
        name.push_str("_total");
    }
    Some((name, kind))
}

fn kind_of<T>(d: &MetricData<T>) -> Option<(&'static str, bool, bool)> {
    match d {
        MetricData::Gauge(_) => Some(("gauge", true, false)),
        MetricData::Sum(s) if s.is_monotonic() => Some(("counter", false, true)),
        MetricData::Sum(_) => Some(("gauge", true, false)),
        MetricData::Histogram(_) => Some(("histogram", false, false)),
        // Not representable in the classic text format.
        MetricData::ExponentialHistogram(_) => None,
    }
}

/// Appends an unsigned integer without going through `fmt` (this runs once per sample).
fn push_u64(mut v: u64, out: &mut String) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

fn push_i64(v: i64, out: &mut String) {
    if v < 0 {
        out.push('-');
    }
    push_u64(v.unsigned_abs(), out);
}

trait Num: Copy {
    fn write(self, out: &mut String);
}
impl Num for f64 {
    fn write(self, out: &mut String) {
        write_f64(self, out);
    }
}
impl Num for u64 {
    fn write(self, out: &mut String) {
        push_u64(self, out);
    }
}
impl Num for i64 {
    fn write(self, out: &mut String) {
        push_i64(self, out);
    }
}

fn value_str(v: &Value) -> String {
    v.as_str().into_owned()
}

/// A label key as it appears in the exposition; borrowed when it needs no change (the usual
/// case), so a scrape does not allocate per data point.
fn label_key_cow(key: &str) -> Cow<'_, str> {
    let valid = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && !key.starts_with("__")
        && !key.contains("__")
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':');
    if valid {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(label_key(key))
    }
}

fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => escape_label_value(s.as_str(), out),
        Value::I64(i) => push_i64(*i, out),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        other => escape_label_value(&other.as_str(), out),
    }
}

/// The label block, without braces: the point's attributes (sanitised, collisions joined with
/// `;`, sorted) followed by the scope labels (`scope_labels`, already formatted).
fn write_labels<'a>(attrs: impl Iterator<Item = &'a KeyValue>, scope_labels: &str, out: &mut String) {
    let mut pairs: Vec<(Cow<'a, str>, &'a Value)> =
        attrs.map(|kv| (label_key_cow(kv.key.as_str()), &kv.value)).collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut i = 0;
    while i < pairs.len() {
        let key = &pairs[i].0;
        if key == "otel_scope_name" || key == "otel_scope_version" {
            i += 1;
            continue;
        }
        out.push_str(key);
        out.push_str("=\"");
        write_value(pairs[i].1, out);
        // Keys that collide after sanitising share one label, their values joined with `;`.
        let mut j = i + 1;
        while j < pairs.len() && pairs[j].0 == *key {
            out.push(';');
            write_value(pairs[j].1, out);
            j += 1;
        }
        out.push_str("\",");
        i = j;
    }
    out.push_str(scope_labels);
}

fn scope_labels(scope: &str, scope_version: &str) -> String {
    let mut out = String::from("otel_scope_name=\"");
    escape_label_value(scope, &mut out);
    out.push('"');
    if !scope_version.is_empty() {
        out.push_str(",otel_scope_version=\"");
        escape_label_value(scope_version, &mut out);
        out.push('"');
    }
    out
}

struct Family {
    kind: &'static str,
    help: String,
    body: String,
}

fn write_points<T: Num>(name: &str, d: &MetricData<T>, scope_labels: &str, out: &mut String) {
    match d {
        MetricData::Gauge(g) => {
            for p in g.data_points() {
                out.push_str(name);
                out.push('{');
                write_labels(p.attributes(), scope_labels, out);
                out.push_str("} ");
                p.value().write(out);
                out.push('\n');
            }
        }
        MetricData::Sum(s) => {
            for p in s.data_points() {
                out.push_str(name);
                out.push('{');
                write_labels(p.attributes(), scope_labels, out);
                out.push_str("} ");
                p.value().write(out);
                out.push('\n');
            }
        }
        MetricData::Histogram(h) => {
            let mut l = String::new();
            let mut bounds: Vec<(f64, String)> = Vec::new();
            for p in h.data_points() {
                l.clear();
                write_labels(p.attributes(), scope_labels, &mut l);
                let mut cumulative = 0u64;
                for (bound, count) in p.bounds().zip(p.bucket_counts()) {
                    cumulative = cumulative.saturating_add(count);
                    // Bound strings are formatted once per instrument, not once per point.
                    let pos = match bounds.iter().position(|(b, _)| *b == bound || (b.is_nan() && bound.is_nan())) {
                        Some(pos) => pos,
                        None => {
                            let mut text = String::new();
                            write_f64(bound, &mut text);
                            bounds.push((bound, text));
                            bounds.len() - 1
                        }
                    };
                    out.push_str(name);
                    out.push_str("_bucket{");
                    out.push_str(&l);
                    out.push_str(",le=\"");
                    out.push_str(&bounds[pos].1);
                    out.push_str("\"} ");
                    push_u64(cumulative, out);
                    out.push('\n');
                }
                out.push_str(name);
                out.push_str("_bucket{");
                out.push_str(&l);
                out.push_str(",le=\"+Inf\"} ");
                push_u64(p.count(), out);
                out.push('\n');
                out.push_str(name);
                out.push_str("_sum{");
                out.push_str(&l);
                out.push_str("} ");
                p.sum().write(out);
                out.push('\n');
                out.push_str(name);
                out.push_str("_count{");
                out.push_str(&l);
                out.push_str("} ");
                push_u64(p.count(), out);
                out.push('\n');
            }
        }
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// Renders collected metrics as the Prometheus text exposition (format 0.0.4).
pub(crate) fn encode(rm: &ResourceMetrics, out: &mut String, conflicts: &mut Vec<String>) {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for sm in rm.scope_metrics() {
        let scope = sm.scope().name();
        if scope == super::PUSH_ONLY_SCOPE {
            continue;
        }
        let version = sm.scope().version().unwrap_or("");
        let scope_labels = scope_labels(scope, version);
        for m in sm.metrics() {
            let Some((name, kind)) = family_name(m) else { continue };
            let fam = families.entry(name.clone()).or_insert_with(|| Family {
                kind,
                help: m.description().to_string(),
                body: String::new(),
            });
            if fam.kind != kind {
                conflicts.push(format!(
                    "{} ({kind}) conflicts with an earlier {} of the same exposition name {name}",
                    m.name(),
                    fam.kind
                ));
                continue;
            }
            match m.data() {
                AggregatedMetrics::F64(d) => write_points(&name, d, &scope_labels, &mut fam.body),
                AggregatedMetrics::U64(d) => write_points(&name, d, &scope_labels, &mut fam.body),
                AggregatedMetrics::I64(d) => write_points(&name, d, &scope_labels, &mut fam.body),
            }
        }
    }
    // The resource, as target_info.
    let mut info = BTreeMap::new();
    for (k, v) in rm.resource().iter() {
        info.insert(label_key(k.as_str()), value_str(v));
    }
    if !info.is_empty() {
        out.push_str("# HELP target_info Target metadata\n# TYPE target_info gauge\ntarget_info{");
        let mut first = true;
        for (k, v) in &info {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(k);
            out.push_str("=\"");
            escape_label_value(v, out);
            out.push('"');
        }
        out.push_str("} 1\n");
    }
    for (name, fam) in &families {
        if fam.body.is_empty() {
            continue;
        }
        if !fam.help.is_empty() {
            let _ = write!(out, "# HELP {name} ");
            escape_help(&fam.help, out);
            out.push('\n');
        }
        let _ = writeln!(out, "# TYPE {name} {}", fam.kind);
        out.push_str(&fam.body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_compatibility_rules() {
        assert_eq!(sanitize("pipeline.stage.items"), "pipeline_stage_items");
        assert_eq!(sanitize("http.server..duration"), "http_server_duration");
        assert_eq!(sanitize("9lives"), "_9lives");
        assert_eq!(unit_word("By", false).as_deref(), Some("bytes"));
        assert_eq!(unit_word("s", false).as_deref(), Some("seconds"));
        assert_eq!(unit_word("1", true).as_deref(), Some("ratio"));
        assert_eq!(unit_word("1", false), None);
        assert_eq!(unit_word("{item}", false), None);
        assert_eq!(unit_word("By/s", true).as_deref(), Some("bytes_per_second"));
        assert_eq!(unit_word("{request}/s", true).as_deref(), Some("per_second"));
        assert_eq!(unit_word("Cel", true).as_deref(), Some("celsius"));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut s = String::new();
        escape_label_value("a\\b\"c\nd é", &mut s);
        assert_eq!(s, "a\\\\b\\\"c\\nd é");
        let mut v = String::new();
        write_f64(f64::INFINITY, &mut v);
        v.push(' ');
        write_f64(0.1, &mut v);
        v.push(' ');
        write_f64(1e-7, &mut v);
        assert_eq!(v, "+Inf 0.1 0.0000001");
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

    use crate::export::prometheus::{PrometheusRender, PullReader};

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
        let ours_text = PrometheusRender::new(ours).render();
        let (want, got) = (samples(&reference_text), samples(&ours_text));
        assert_eq!(got, want, "reference:\n{reference_text}\nours:\n{ours_text}");
        assert!(got.len() > 15, "{got:?}");
        // Same families and types.
        let types =
            |t: &str| t.lines().filter(|l| l.starts_with("# TYPE")).map(str::to_string).collect::<BTreeSet<_>>();
        assert_eq!(types(&ours_text), types(&reference_text));
    }

    struct Extra;
    impl crate::export::ExpositionSource for Extra {
        fn write_exposition(&self, out: &mut String) {
            out.push_str("# TYPE extra_latency_seconds summary\nextra_latency_seconds{quantile=\"0.5\"} 0.25\n");
        }
    }

    #[test]
    fn push_only_metrics_stay_out_and_exposition_sources_come_in() {
        let ours = PullReader::new();
        let provider = SdkMeterProvider::builder().with_reader(ours.clone()).build();
        provider.meter(crate::export::PUSH_ONLY_SCOPE).u64_counter("hidden").build().add(1, &[]);
        provider.meter("shown").u64_counter("shown").build().add(1, &[]);
        let source: std::sync::Arc<dyn crate::export::ExpositionSource> = std::sync::Arc::new(Extra);
        crate::export::add_exposition_source(&source);
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
