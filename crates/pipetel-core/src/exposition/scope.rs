//! Instrumentation scopes and attributes as labels, by the OTel → Prometheus rules the pull
//! endpoint's encoder follows, and [`OwnFamily`]: a family written as the encoder writes an
//! instrument of pipetel's own scope, so that a family rendered from pipetel's own state (the
//! registry's, the hub's, measured functions', span metrics', the stage table's) reads exactly
//! as the same family collected through the SDK would.

use std::borrow::Cow;
use std::sync::OnceLock;

use opentelemetry::{InstrumentationScope, KeyValue, Value};

use super::names::{label_key, label_key_cow, translate, MetricType};
use super::text::{escape_label_value, LabelBlock, Number, Writer};

/// The label block naming an instrumentation scope (`otel_scope_name`, and
/// `otel_scope_version` when there is one), as the OTel → Prometheus rules add it to every
/// sample of an OTel instrument. `None` means pipetel's own scope
/// ([`crate::global::SCOPE_NAME`], no version), the one its meter uses, formatted once.
pub(crate) fn scope_labels(scope: Option<(&str, &str)>) -> Cow<'static, str> {
    fn format(name: &str, version: &str) -> String {
        let mut out = String::new();
        let mut block = LabelBlock::new(&mut out);
        block.pair("otel_scope_name", name);
        if !version.is_empty() {
            block.pair("otel_scope_version", version);
        }
        out
    }
    match scope {
        Some((name, version)) => format(name, version).into(),
        None => {
            static OWN: OnceLock<String> = OnceLock::new();
            OWN.get_or_init(|| format(crate::global::SCOPE_NAME, "")).as_str().into()
        }
    }
}

/// The scope labels of a scope's data points, as the collector's `prometheus` exporter writes
/// them: `otel_scope_name`, `otel_scope_version` and `otel_scope_schema_url` when not empty (an
/// empty label is no label to Prometheus), and each scope attribute as `otel_scope_<key>`.
pub(crate) fn scope_block(scope: &InstrumentationScope) -> String {
    let mut labels = scope_labels(Some((scope.name(), scope.version().unwrap_or("")))).into_owned();
    let mut extra = String::new();
    let mut block = LabelBlock::new(&mut extra);
    if let Some(url) = scope.schema_url().filter(|u| !u.is_empty()) {
        block.pair("otel_scope_schema_url", url);
    }
    for kv in scope.attributes().filter(|kv| !matches!(kv.key.as_str(), "name" | "version" | "schema_url")) {
        let key = label_key(&format!("otel_scope_{}", kv.key.as_str()));
        block.with(&key, |out| write_value(&kv.value, out));
    }
    if !extra.is_empty() {
        labels.push(',');
        labels.push_str(&extra);
    }
    labels
}

fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => escape_label_value(s.as_str(), out),
        Value::I64(i) => i.write(out),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        other => escape_label_value(&other.as_str(), out),
    }
}

/// A data point's attributes as labels: keys sanitised, collisions joined with `;`, sorted
/// (the scope labels follow them, written by the caller).
pub(crate) fn attribute_labels<'a>(attrs: impl Iterator<Item = &'a KeyValue>, block: &mut LabelBlock<'_>) {
    let mut pairs: Vec<(Cow<'a, str>, &'a Value)> =
        attrs.map(|kv| (label_key_cow(kv.key.as_str()), &kv.value)).collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut i = 0;
    while i < pairs.len() {
        let key = &pairs[i].0;
        // Keys that collide after sanitising share one label, their values joined with `;`.
        let j = i + pairs[i..].iter().take_while(|p| p.0 == *key).count();
        // An attribute the collector would drop (empty key) stays out here too.
        if !key.is_empty() && !key.starts_with("otel_scope_") {
            block.with(key, |out| {
                for (n, (_, v)) in pairs[i..j].iter().enumerate() {
                    if n > 0 {
                        out.push(';');
                    }
                    write_value(v, out);
                }
            });
        }
        i = j;
    }
}

/// A family written as the pull endpoint's encoder writes an OTel instrument of pipetel's own
/// scope: its exposition name, `# HELP` / `# TYPE` lines (no `# UNIT`) before its first series
/// (none at all without series), and each series' labels — its attributes, in the encoder's
/// order, which the caller writes — followed by the scope's labels (`otel_scope_name="pipetel"`).
pub(crate) struct OwnFamily<'w> {
    w: Writer<'w>,
    name: Cow<'w, str>,
    kind: &'static str,
    help: &'w str,
    /// The unit written as `# UNIT` in OpenMetrics (see [`Writer::header`]); empty: none.
    unit: &'w str,
    started: bool,
    labels: String,
}

/// A series of an [`OwnFamily`] being written: its label block is ready.
pub(crate) struct OwnSeries<'s, 'w> {
    /// The family's writer.
    pub(crate) writer: &'s mut Writer<'w>,
    /// The family's exposition name.
    pub(crate) name: &'s str,
    /// The series' label block: its attributes, then the scope's labels.
    pub(crate) labels: &'s str,
}

impl<'w> OwnFamily<'w> {
    /// The family of OTel instrument `otel_name`, of `kind` with `unit`, under its translated
    /// name (empty when nothing of the name survives translation: write nothing then).
    pub(crate) fn new(w: Writer<'w>, otel_name: &str, unit: &str, kind: MetricType, help: &'w str) -> Self {
        Self::named(w, translate(otel_name, unit, kind), kind.prometheus_type(), help)
    }

    /// The family under its exposition `name`, already translated, of Prometheus type `kind`.
    pub(crate) fn named(w: Writer<'w>, name: impl Into<Cow<'w, str>>, kind: &'static str, help: &'w str) -> Self {
        OwnFamily { w, name: name.into(), kind, help, unit: "", started: false, labels: String::new() }
    }

    /// With a `# UNIT` line for `unit` in OpenMetrics, where the name ends with it (the
    /// encoder writes none: the families that had one before they were rendered directly keep
    /// it).
    pub(crate) fn with_unit_line(mut self, unit: &'w str) -> Self {
        self.unit = unit;
        self
    }

    /// Series joining a family already begun (the encoder's, on the same writer's text): no
    /// header lines.
    pub(crate) fn joining(mut self) -> Self {
        self.started = true;
        self
    }

    /// The exposition name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Writes the `# HELP` / `# TYPE` lines now, unless they are written (a family shown even
    /// without series).
    pub(crate) fn header(&mut self) {
        if !self.started {
            self.w.header(&self.name, self.kind, self.help, self.unit);
            self.started = true;
        }
    }

    /// Starts a series: `attrs` writes its attributes into the label block, the scope's labels
    /// follow; the header goes first when this is the first series.
    pub(crate) fn series(&mut self, attrs: impl FnOnce(&mut LabelBlock<'_>)) -> OwnSeries<'_, 'w> {
        self.header();
        self.labels.clear();
        let mut block = LabelBlock::new(&mut self.labels);
        attrs(&mut block);
        block.raw(&scope_labels(None));
        OwnSeries { writer: &mut self.w, name: &self.name, labels: &self.labels }
    }

    /// Writes the sample line of a series of one number: `attrs` writes its attributes, the
    /// scope's labels follow; the header goes first when this is the first series.
    pub(crate) fn sample<N: Number>(&mut self, attrs: impl FnOnce(&mut LabelBlock<'_>), value: N) {
        self.header();
        let mut sample = self.w.sample(&self.name, "");
        attrs(&mut sample);
        sample.raw(&scope_labels(None));
        sample.value(value);
    }
}
