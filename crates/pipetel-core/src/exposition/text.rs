//! The writer: family headers, label blocks, samples, histograms and summaries, with the
//! format's escaping and number rules.

// Plumbing between this crate and `pipetel` (hidden from the docs): its docs name the private
// items they are written for.
#![allow(rustdoc::private_intra_doc_links)]

use std::fmt::Write as _;

use super::exemplar::Exemplar;

/// The exposition a [`Writer`] produces. Every difference between the two is a `match` on
/// this inside [`Writer`] and [`Sample`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Format {
    /// The text exposition format 0.0.4.
    #[default]
    Text,
    /// OpenMetrics 1.0: counters typed under their name less `_total` (a counter whose samples
    /// lack `_total` is typed `unknown`), `unknown` for `untyped`, `"` escaped in `# HELP`, a
    /// `# UNIT` line where the name ends with the unit, exemplars after `_bucket` samples, and
    /// `# EOF` at the end ([`Writer::eof`]).
    OpenMetrics,
}

/// The text a streamed page ([`Page::streamed`](super::Page::streamed)) hands on at a time,
/// about.
pub const CHUNK: usize = 64 * 1024;

/// Where a streamed page's text goes, a piece at a time.
pub(crate) type Sink<'a> = &'a mut dyn FnMut(&str);

/// Where a writer may hand a streamed page's text on: after each sample line. Only a writer of
/// the page itself has a sink; one writing into a string of its own (the OTel encoder's family
/// bodies, a label block) never hands anything on.
#[inline]
fn flush_point(out: &mut String, sink: &mut Option<Sink<'_>>) {
    if out.len() >= CHUNK {
        if let Some(sink) = sink {
            sink(out);
            out.clear();
        }
    }
}

/// Writes exposition text into a `String`.
pub(crate) struct Writer<'a> {
    out: &'a mut String,
    format: Format,
    /// A streamed page's sink, when `out` is that page's text.
    sink: Option<Sink<'a>>,
}

impl<'a> Writer<'a> {
    /// A writer of the text format 0.0.4 appending to `out`.
    pub(crate) fn text(out: &'a mut String) -> Self {
        Writer { out, format: Format::Text, sink: None }
    }

    /// A writer of `format` appending to `out`.
    pub(crate) fn new(out: &'a mut String, format: Format) -> Self {
        Writer { out, format, sink: None }
    }

    /// A writer of `format` appending to `out` and handing it to `sink` (then emptying it)
    /// whenever it holds [`CHUNK`] bytes or more after a sample line: a streamed page's writer.
    pub(super) fn streaming(out: &'a mut String, format: Format, sink: Option<Sink<'a>>) -> Self {
        Writer { out, format, sink }
    }

    /// `# HELP` (unless `help` is empty) and `# TYPE` lines of a family (`name` is the name its
    /// samples carry; a counter's ends with `_total`). `unit` is the family's unit word, written
    /// as `# UNIT` in OpenMetrics when the family's name ends with it.
    pub(crate) fn header(&mut self, name: &str, kind: &str, help: &str, unit: &str) {
        let (name, kind) = match self.format {
            Format::Text => (name, kind),
            Format::OpenMetrics => match kind {
                "counter" => match name.strip_suffix("_total") {
                    Some(base) if !base.is_empty() => (base, kind),
                    _ => (name, "unknown"),
                },
                "untyped" => (name, "unknown"),
                _ => (name, kind),
            },
        };
        if !help.is_empty() {
            let _ = write!(self.out, "# HELP {name} ");
            escape_help(help, self.format, self.out);
            self.out.push('\n');
        }
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        match self.format {
            Format::Text => {}
            Format::OpenMetrics => {
                if !unit.is_empty()
                    && unit.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    && name.strip_suffix(unit).is_some_and(|n| n.ends_with('_'))
                {
                    let _ = writeln!(self.out, "# UNIT {name} {unit}");
                }
            }
        }
    }

    /// Appends text already written by a writer of the same format.
    pub(crate) fn raw(&mut self, text: &str) {
        self.out.push_str(text);
        flush_point(self.out, &mut self.sink);
    }

    /// Ends the exposition: `# EOF` in OpenMetrics, nothing in the text format.
    pub(crate) fn eof(&mut self) {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
    }

    /// Starts the sample line `name` + `suffix`: add labels to it, then write its value.
    pub(crate) fn sample(&mut self, name: &str, suffix: &str) -> Sample<'_> {
        self.out.push_str(name);
        self.out.push_str(suffix);
        let sink = self.sink.as_mut().map(|s| &mut **s as Sink<'_>);
        Sample { block: LabelBlock { out: self.out, braces: true, any: false }, format: self.format, sink }
    }

    /// The samples of one histogram series: a `_bucket` per finite bound (`bounds`, formatted,
    /// with their cumulative counts `cumulative`), the `+Inf` bucket holding `count`, then
    /// `_sum` and `_count`. `labels` is a label block (see [`LabelBlock`]), the same on each.
    /// The exemplar of each bucket (`exemplar(i)`, `i` from 0, the `+Inf` bucket last; `|_|
    /// None` for none) is written after the bucket's sample in OpenMetrics and asked for only
    /// there.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn histogram_with<N: Number>(
        &mut self,
        name: &str,
        labels: &str,
        bounds: &[String],
        cumulative: impl IntoIterator<Item = u64>,
        count: u64,
        sum: N,
        mut exemplar: impl FnMut(usize) -> Option<Exemplar>,
    ) {
        let om = self.format == Format::OpenMetrics;
        for (i, (bound, c)) in bounds.iter().zip(cumulative).enumerate() {
            let mut s = self.sample(name, "_bucket");
            s.raw(labels).text("le", bound);
            s.value_with(c, if om { exemplar(i) } else { None });
        }
        let mut s = self.sample(name, "_bucket");
        s.raw(labels).text("le", "+Inf");
        s.value_with(count, if om { exemplar(bounds.len()) } else { None });
        self.sample(name, "_sum").with_raw(labels).value(sum);
        self.sample(name, "_count").with_raw(labels).value(count);
    }

    /// The samples of one summary series: one per `(quantile, value)` with a `quantile` label,
    /// then `_sum` and `_count`.
    pub(crate) fn summary(
        &mut self,
        name: &str,
        labels: &str,
        quantiles: impl IntoIterator<Item = (f64, f64)>,
        sum: f64,
        count: u64,
    ) {
        for (q, v) in quantiles {
            let mut s = self.sample(name, "");
            s.raw(labels).with("quantile", |out| write_f64(q, out));
            s.value(v);
        }
        self.sample(name, "_sum").with_raw(labels).value(sum);
        self.sample(name, "_count").with_raw(labels).value(count);
    }
}

/// Labels separated by `,`, each `key="value"` with the value escaped: inside a sample line
/// (braces added around them when there are any), or alone in a `String` to be reused by the
/// samples of one series ([`LabelBlock::new`]; then passed to [`LabelBlock::raw`]).
pub(crate) struct LabelBlock<'a> {
    out: &'a mut String,
    braces: bool,
    any: bool,
}

impl<'a> LabelBlock<'a> {
    /// A block written at the end of `out`, without braces.
    pub(crate) fn new(out: &'a mut String) -> Self {
        LabelBlock { out, braces: false, any: false }
    }

    fn sep(&mut self) {
        if self.any {
            self.out.push(',');
        } else if self.braces {
            self.out.push('{');
        }
        self.any = true;
    }

    /// Adds `key="value"`, escaping the value.
    pub(crate) fn pair(&mut self, key: &str, value: &str) -> &mut Self {
        self.with(key, |out| escape_label_value(value, out))
    }

    /// Adds `key="…"` with the value written by `value`, which must write valid (escaped) text.
    pub(crate) fn with(&mut self, key: &str, value: impl FnOnce(&mut String)) -> &mut Self {
        self.sep();
        self.out.push_str(key);
        self.out.push_str("=\"");
        value(self.out);
        self.out.push('"');
        self
    }

    /// Adds `key="text"` where `text` needs no escaping (a formatted number).
    pub(crate) fn text(&mut self, key: &str, text: &str) -> &mut Self {
        self.with(key, |out| out.push_str(text))
    }

    /// Adds an already written block (nothing when it is empty).
    pub(crate) fn raw(&mut self, block: &str) -> &mut Self {
        if !block.is_empty() {
            self.sep();
            self.out.push_str(block);
        }
        self
    }
}

/// A sample line being written (see [`Writer::sample`]): labels, then [`Sample::value`].
pub(crate) struct Sample<'a> {
    block: LabelBlock<'a>,
    format: Format,
    sink: Option<Sink<'a>>,
}

impl<'a> Sample<'a> {
    /// Adds an already written label block.
    pub(crate) fn with_raw(mut self, block: &str) -> Self {
        self.block.raw(block);
        self
    }

    /// Writes the value and ends the line.
    pub(crate) fn value<N: Number>(self, value: N) {
        self.value_with(value, None);
    }

    /// Writes the value, then (OpenMetrics only) the exemplar, and ends the line:
    /// `# {trace_id="…",span_id="…"} value timestamp`, the ids left out when there are none.
    pub(crate) fn value_with<N: Number>(mut self, value: N, exemplar: Option<Exemplar>) {
        let out = self.block.out;
        if self.block.any {
            out.push('}');
        }
        out.push(' ');
        value.write(out);
        if let (Format::OpenMetrics, Some(e)) = (self.format, exemplar) {
            out.push_str(" # {");
            if e.ids.trace_id != 0 {
                let _ = write!(out, "trace_id=\"{:032x}\",span_id=\"{:016x}\"", e.ids.trace_id, e.ids.span_id);
            }
            out.push_str("} ");
            write_f64(e.value, out);
            let _ = write!(out, " {}.{:09}", e.time_ns / 1_000_000_000, e.time_ns % 1_000_000_000);
        }
        out.push('\n');
        flush_point(out, &mut self.sink);
    }
}

impl<'a> std::ops::Deref for Sample<'a> {
    type Target = LabelBlock<'a>;
    fn deref(&self) -> &LabelBlock<'a> {
        &self.block
    }
}

impl std::ops::DerefMut for Sample<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.block
    }
}

/// A sample value.
pub(crate) trait Number: Copy {
    /// Appends the value as the format writes it.
    fn write(self, out: &mut String);
}

impl Number for f64 {
    fn write(self, out: &mut String) {
        write_f64(self, out);
    }
}

impl Number for u64 {
    fn write(self, out: &mut String) {
        push_u64(self, out);
    }
}

impl Number for i64 {
    fn write(self, out: &mut String) {
        if self < 0 {
            out.push('-');
        }
        push_u64(self.unsigned_abs(), out);
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

/// Writes a sample value the way Prometheus parses it.
pub(crate) fn write_f64(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 && !(v == 0.0 && v.is_sign_negative()) {
        // A whole number below 2^53 (counters, mostly): its digits, as `{v}` writes them, without
        // going through `fmt`.
        if v < 0.0 {
            out.push('-');
        }
        push_u64(v.abs() as u64, out);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Escapes a label value (`\`, `"`, newline), as the text format requires.
pub(crate) fn escape_label_value(v: &str, out: &mut String) {
    if !v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Escapes `# HELP` text (`\` and newline; `"` too in OpenMetrics).
pub(crate) fn escape_help(v: &str, format: Format, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if format == Format::OpenMetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// Histogram bucket bounds as written in `le` labels (without `+Inf`), formatted once and
/// reused while the bounds stay the same.
#[derive(Default)]
pub(crate) struct BoundsText {
    bounds: Vec<f64>,
    text: Vec<String>,
}

impl BoundsText {
    /// The bounds `bounds`, formatted.
    pub(crate) fn of(bounds: &[f64]) -> Self {
        let mut b = BoundsText::default();
        b.set(bounds.iter().copied());
        b
    }

    /// The formatted bounds.
    pub(crate) fn get(&self) -> &[String] {
        &self.text
    }

    /// The formatted text of the bounds `bounds()` yields, formatting them only when they
    /// differ from the last ones.
    pub(crate) fn update<I: Iterator<Item = f64>>(&mut self, bounds: impl Fn() -> I) -> &[String] {
        if !self.bounds.iter().copied().eq(bounds()) {
            self.set(bounds());
        }
        &self.text
    }

    fn set(&mut self, bounds: impl Iterator<Item = f64>) {
        self.bounds.clear();
        self.text.clear();
        for b in bounds {
            let mut t = String::new();
            write_f64(b, &mut t);
            self.bounds.push(b);
            self.text.push(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scope::scope_labels;
    use super::*;

    #[test]
    fn label_values_and_numbers_are_written_as_the_format_wants() {
        let mut s = String::new();
        escape_label_value("a\\b\"c\nd é", &mut s);
        assert_eq!(s, "a\\\\b\\\"c\\nd é");
        let mut v = String::new();
        for (i, x) in [f64::INFINITY, 0.1, 1e-7, f64::NEG_INFINITY, f64::NAN].into_iter().enumerate() {
            if i > 0 {
                v.push(' ');
            }
            write_f64(x, &mut v);
        }
        assert_eq!(v, "+Inf 0.1 0.0000001 -Inf NaN");
        let mut n = String::new();
        u64::MAX.write(&mut n);
        n.push(' ');
        i64::MIN.write(&mut n);
        n.push(' ');
        0u64.write(&mut n);
        assert_eq!(n, "18446744073709551615 -9223372036854775808 0");
    }

    #[test]
    fn whole_numbers_are_written_as_fmt_writes_them() {
        let values =
            [0.0, -0.0, 1.0, -1.0, 42.0, 1e15, -3e15, 9_007_199_254_740_991.0, 9_007_199_254_740_992.0, 1e21, 2.5];
        for v in values {
            let mut out = String::new();
            write_f64(v, &mut out);
            assert_eq!(out, format!("{v}"), "{v:e}");
        }
    }

    #[test]
    fn samples_headers_and_series_are_written() {
        let mut out = String::new();
        let mut w = Writer::text(&mut out);
        w.header("m", "gauge", "Help \\ with\nnewline", "bytes");
        w.header("quiet", "counter", "", "");
        let mut s = w.sample("m", "");
        s.pair("a", "x\"y\\z\nü").text("le", "0.5");
        s.value(f64::INFINITY);
        w.sample("m", "").value(2.0);
        let mut labels = String::new();
        LabelBlock::new(&mut labels).pair("k", "v").raw(&scope_labels(Some(("s", "1.0"))));
        w.histogram_with("h", &labels, BoundsText::of(&[0.5, 1.0]).get(), [1, 2], 3, 4.5, |_| None);
        w.summary("q", "", [(0.5, 1.0)], 2.0, 1);
        assert_eq!(
            out,
            "# HELP m Help \\\\ with\\nnewline\n# TYPE m gauge\n# TYPE quiet counter\n\
             m{a=\"x\\\"y\\\\z\\nü\",le=\"0.5\"} +Inf\nm 2\n\
             h_bucket{k=\"v\",otel_scope_name=\"s\",otel_scope_version=\"1.0\",le=\"0.5\"} 1\n\
             h_bucket{k=\"v\",otel_scope_name=\"s\",otel_scope_version=\"1.0\",le=\"1\"} 2\n\
             h_bucket{k=\"v\",otel_scope_name=\"s\",otel_scope_version=\"1.0\",le=\"+Inf\"} 3\n\
             h_sum{k=\"v\",otel_scope_name=\"s\",otel_scope_version=\"1.0\"} 4.5\n\
             h_count{k=\"v\",otel_scope_name=\"s\",otel_scope_version=\"1.0\"} 3\n\
             q{quantile=\"0.5\"} 1\nq_sum 2\nq_count 1\n"
        );
        assert_eq!(scope_labels(None), "otel_scope_name=\"pipetel\"");
    }

    #[test]
    fn bounds_are_formatted_once_while_they_stay_the_same() {
        let mut b = BoundsText::default();
        assert_eq!(b.update(|| [0.25, 1.0].into_iter()), ["0.25", "1"]);
        assert_eq!(b.update(|| [0.25, 1.0].into_iter()), ["0.25", "1"]);
        assert_eq!(b.update(|| [2.0].into_iter()), ["2"]);
    }
}
