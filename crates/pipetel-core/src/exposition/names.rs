//! OTel → Prometheus name translation: exactly the rules of the OpenTelemetry Collector's
//! `prometheus` and `prometheusremotewrite` exporters (contrib v0.161.0, which call
//! `github.com/prometheus/otlptranslator` v1.0.0 with `UnderscoreEscapingWithSuffixes`, the
//! default), so a metric has one Prometheus name whether Prometheus scrapes pipetel's pull
//! endpoint or reads it through a collector. Prometheus's own OTLP receiver uses the same library.
//!
//! Metric names ([`prometheus_name`]):
//! 1. the name is split into words at every character outside `[a-zA-Z0-9:]` (`.`, `_`, `-`,
//!    ...); empty words vanish;
//! 2. the unit adds a word unless a word of the name already is it: `s` → `seconds`, `By` →
//!    `bytes`, ... (the table in [`unit_word`]), a unit outside the table adds itself
//!    (sanitised), `1` and annotations (`{item}`) add nothing; `X/Y` adds `X`'s word and then
//!    `per_<Y>` (`By/s` → `bytes_per_second`, `{request}/s` → `per_second`);
//! 3. monotonic sums (counters) lose every `total` word and end with `total`;
//! 4. gauges — OTLP gauges only, not non-monotonic sums (up-down counters) — with unit exactly
//!    `1` lose every `ratio` word and end with `ratio`;
//! 5. the words are joined with `_`; a leading digit gets a `_` before it.
//!
//! Label names ([`label_key`]): every character outside `[a-zA-Z0-9]` becomes `_`, runs of `_`
//! collapse; a leading digit gets `key_` before it and a single leading `_` gets `key`; a name
//! of the form `__x__` keeps its double underscores around the sanitised `x`.

use std::borrow::Cow;

/// The kind of an OTLP metric, as far as its Prometheus name depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricType {
    /// An OTLP gauge (OTel gauges and observable gauges): unit `1` adds `ratio`.
    Gauge,
    /// A non-monotonic sum (OTel up-down counters): no suffix beyond the unit's.
    UpDownSum,
    /// A monotonic sum (OTel counters): ends with `total`.
    Counter,
    /// A histogram (`_bucket`, `_sum`, `_count` are appended by the writer).
    Histogram,
}

impl MetricType {
    /// The Prometheus type of a family of this kind.
    pub(crate) fn prometheus_type(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge | MetricType::UpDownSum => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// The Prometheus name of an OTel metric `name` of `kind` with `unit`, by the collector's rules
/// (module docs). Empty when nothing of the name and unit survives (the collector drops such
/// a metric).
pub(crate) fn translate(name: &str, unit: &str, kind: MetricType) -> String {
    let mut words: Vec<Cow<'_, str>> =
        name.split(|c: char| !is_name_char(c)).filter(|w| !w.is_empty()).map(Cow::Borrowed).collect();
    let (main, per) = unit_words(unit);
    let main = main.filter(|m| !words.iter().any(|w| w == m));
    let per = per.filter(|p| !words.iter().any(|w| w == p));
    let main = match (&main, &per) {
        (Some(m), Some(_)) => Some(m.trim_end_matches('_').to_string()),
        _ => main,
    };
    words.extend(main.into_iter().chain(per).filter(|w| !w.is_empty()).map(Cow::Owned));
    if kind == MetricType::Counter {
        words.retain(|w| w != "total");
        words.push(Cow::Borrowed("total"));
    }
    if unit == "1" && kind == MetricType::Gauge {
        words.retain(|w| w != "ratio");
        words.push(Cow::Borrowed("ratio"));
    }
    let mut out = words.join("_");
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// [`translate`] for the encoder's two questions: is it an OTLP gauge, is it a monotonic sum
/// (neither: a histogram, or with `gauge` false a non-monotonic sum).
pub(crate) fn prometheus_name(name: &str, unit: &str, gauge: bool, counter: bool) -> String {
    let kind = match (gauge, counter) {
        (_, true) => MetricType::Counter,
        (true, false) => MetricType::Gauge,
        (false, false) => MetricType::Histogram,
    };
    translate(name, unit, kind)
}

/// A unit for an instrument whose OTel name is already the Prometheus name it must have on
/// every route (`name_bucket`, `name_sum`, ... of a family rendered directly on the pull
/// endpoint): `unit` itself when the collector's rules leave the name unchanged with it, else
/// no unit (the unit would add a word).
pub(crate) fn unit_keeping_name<'a>(name: &str, unit: &'a str, kind: MetricType) -> &'a str {
    if translate(name, unit, kind) == translate(name, "", kind) {
        unit
    } else {
        ""
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == ':'
}

/// The Prometheus word of a unit's main part (`s` → `seconds`), as the collector's table has it;
/// a unit outside the table is its own word.
fn unit_word(unit: &str) -> &str {
    match unit {
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
        "1" => "",
        "%" => "percent",
        other => other,
    }
}

/// The word of a unit's `per` part (`s` → `second`).
fn per_unit_word(unit: &str) -> &str {
    match unit {
        "s" => "second",
        "m" => "minute",
        "h" => "hour",
        "d" => "day",
        "w" => "week",
        "mo" => "month",
        "y" => "year",
        other => other,
    }
}

/// The words a unit adds: its main part's and `per_<per part>`, each sanitised (characters
/// outside `[a-zA-Z0-9:]` become `_`, runs of `_` collapse, a leading `_` goes); `None` for a
/// part that is empty or an annotation (`{...}`).
fn unit_words(unit: &str) -> (Option<String>, Option<String>) {
    let (main, per) = match unit.split_once('/') {
        Some((m, p)) => (m, Some(p)),
        None => (unit, None),
    };
    let plain = |u: &str| !u.is_empty() && !u.contains(['{', '}']);
    let main = main.trim();
    let main = plain(main).then(|| clean_unit(unit_word(main)));
    let per = per.filter(|p| !p.is_empty()).map(str::trim).filter(|p| plain(p)).and_then(|p| {
        let word = per_unit_word(p);
        (!word.is_empty()).then(|| clean_unit(&format!("per_{word}")).trim_end_matches('_').to_string())
    });
    (main.filter(|m| !m.is_empty()), per.filter(|p| !p.is_empty() && p != "per"))
}

/// Characters outside `[a-zA-Z0-9:]` become `_`, runs of `_` collapse, a leading `_` goes.
fn clean_unit(unit: &str) -> String {
    let mut out = String::with_capacity(unit.len());
    for c in unit.chars() {
        let c = if is_name_char(c) { c } else { '_' };
        if c == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(c);
    }
    out
}

/// An attribute key as a label name, by the collector's rules (module docs); empty when the
/// collector would drop the attribute (an empty key, or one of only underscores).
pub(crate) fn label_key(key: &str) -> String {
    let reserved = key.len() >= 4 && key.starts_with("__") && key.ends_with("__");
    let inner = if reserved { &key[2..key.len() - 2] } else { key };
    let mut out = String::with_capacity(key.len() + 4);
    for c in inner.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    if reserved {
        out = format!("__{out}__");
        // Only underscores is no label name: the collector drops the attribute.
        return if out.bytes().all(|b| b == b'_') { String::new() } else { out };
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "key_");
    } else if out.starts_with('_') && !out.starts_with("__") {
        out.insert_str(0, "key");
    }
    out
}

/// [`label_key`], borrowed when the key needs no change (the usual case), so a scrape does not
/// allocate per data point.
pub(crate) fn label_key_cow(key: &str) -> Cow<'_, str> {
    let valid = key.starts_with(|c: char| c.is_ascii_alphabetic())
        && !key.contains("__")
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if valid {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(label_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::MetricType::{Counter, Gauge, Histogram, UpDownSum};
    use super::*;

    /// Cases from otlptranslator v1.0.0's own tests (`metric_namer_test.go`, `normalizeName`
    /// with suffixes) and the collector's (`normalize_name_test.go`), plus pipetel's names.
    #[test]
    fn names_follow_the_collectors_rules() {
        let cases: &[(&str, &str, MetricType, &str)] = &[
            ("system.filesystem.usage", "By", Gauge, "system_filesystem_usage_bytes"),
            ("system.network.io", "By", Counter, "system_network_io_bytes_total"),
            ("system.processes.created", "{processes}", Counter, "system_processes_created_total"),
            (
                "active_directory.ds.replication.network.io",
                "By",
                Counter,
                "active_directory_ds_replication_network_io_bytes_total",
            ),
            ("hello_you_total", "", Counter, "hello_you_total"),
            ("hello_total_you", "", Counter, "hello_you_total"),
            ("hello_ratio_you", "1", Gauge, "hello_you_ratio"),
            ("hello_you", "1", UpDownSum, "hello_you"),
            ("hello_you", "1", Counter, "hello_you_total"),
            ("hello_you", "1", Histogram, "hello_you"),
            ("metric_with_foreign_characters_µ", "", Counter, "metric_with_foreign_characters_total"),
            ("2xx.requests", "", Gauge, "_2xx_requests"),
            ("request.rate", "{request}/s", Gauge, "request_rate_per_second"),
            ("throughput", "By/s", Gauge, "throughput_bytes_per_second"),
            ("speed", "m/h", Gauge, "speed_meters_per_hour"),
            ("ops", "1/s", Gauge, "ops_per_second"),
            ("weird", "foo.bar", Gauge, "weird_foo_bar"),
            ("sys.cpu.time", "s", Counter, "sys_cpu_time_seconds_total"),
            ("already_seconds_here", "s", Gauge, "already_seconds_here"),
            ("a__b..c", "", Gauge, "a_b_c"),
            ("_leading", "", Gauge, "leading"),
            ("colon:name", "", Gauge, "colon:name"),
            // pipetel's own.
            ("pipeline.stage.bytes", "By", Counter, "pipeline_stage_bytes_total"),
            ("pipeline.stage.cpu.utilization", "1", Gauge, "pipeline_stage_cpu_utilization_ratio"),
            ("pipeline.stage.active", "{stage}", UpDownSum, "pipeline_stage_active"),
            ("pipeline.worker.heartbeat", "s", Gauge, "pipeline_worker_heartbeat_seconds"),
            ("hw.status", "1", UpDownSum, "hw_status"),
            ("hw.energy", "J", Counter, "hw_energy_joules_total"),
            ("hw.gpu.pcie.throughput", "By/s", Gauge, "hw_gpu_pcie_throughput_bytes_per_second"),
            ("span.duration", "s", Histogram, "span_duration_seconds"),
            ("task.duration_seconds", "s", Histogram, "task_duration_seconds"),
            ("inference_requests_total", "", Counter, "inference_requests_total"),
        ];
        for (name, unit, kind, want) in cases {
            assert_eq!(translate(name, unit, *kind), *want, "{name} ({unit}, {kind:?})");
        }
        assert_eq!(translate("...", "", Gauge), "", "nothing survives: the collector drops it");
        assert_eq!(prometheus_name("load", "1", true, false), "load_ratio");
        assert_eq!(prometheus_name("queue", "1", false, false), "queue");
        assert_eq!(prometheus_name("jobs", "1", false, true), "jobs_total");
    }

    #[test]
    fn a_unit_is_kept_only_where_it_leaves_the_name_alone() {
        assert_eq!(unit_keeping_name("task_duration_seconds_sum", "s", UpDownSum), "s");
        assert_eq!(unit_keeping_name("task_duration_sum", "s", UpDownSum), "");
        assert_eq!(unit_keeping_name("x_bytes_per_second_sum", "By/s", UpDownSum), "");
        assert_eq!(unit_keeping_name("load", "1", Gauge), "");
        assert_eq!(unit_keeping_name("load", "1", UpDownSum), "1");
        assert_eq!(unit_keeping_name("x_bucket", "{observation}", UpDownSum), "{observation}");
    }

    #[test]
    fn labels_follow_the_collectors_rules() {
        for (key, want) in [
            ("stage.name", "stage_name"),
            ("ok_name", "ok_name"),
            ("a..b", "a_b"),
            ("a__b", "a_b"),
            ("name:with:colons", "name_with_colons"),
            ("9lives", "key_9lives"),
            ("_private", "key_private"),
            ("__reserved__", "__reserved__"),
            ("__a.b__", "__a_b__"),
            ("__x", "key_x"),
            ("ünïcode", "key_n_code"),
            ("", ""),
            ("____", ""),
        ] {
            assert_eq!(label_key(key), want, "{key}");
            assert_eq!(label_key_cow(key), want, "{key}");
        }
        assert!(matches!(label_key_cow("ok_name"), Cow::Borrowed(_)));
        assert!(matches!(label_key_cow("stage.name"), Cow::Owned(_)));
    }
}
